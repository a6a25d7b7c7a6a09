/* msm_ss_split.c - see msm_ss_split.h. */
#include "sm/msm_ss_split.h"

static int split_tensor(uint32_t t, uint64_t bytes, uint32_t holders, const double *w, int nsrc, double *load,
                        wire_ss_range_t *out) {
    double total = 0;
    for (int s = 0; s < nsrc; s++)
        if (holders >> s & 1) total += w[s];
    int k = 0, last = -1;
    for (int s = 0; s < nsrc; s++)
        if (holders >> s & 1) last = s;
    double cum = 0;
    uint64_t at = 0;
    for (int s = 0; s < nsrc; s++) {
        if (!(holders >> s & 1)) continue;
        cum += w[s];
        uint64_t end = s == last ? bytes : (uint64_t)((double)bytes * (cum / total)) / MSM_SS_ALIGN * MSM_SS_ALIGN;
        if (end > bytes) end = bytes;
        if (end <= at) continue; /* a weight too small for one aligned block */
        out[k++] = (wire_ss_range_t){.tensor = t, .source = (uint8_t)s, .offset = at, .length = end - at};
        load[s] += (double)(end - at);
        at = end;
    }
    return k;
}

int msm_ss_split(const msm_ss_item_t *items, uint32_t n, const double *w, int nsrc, uint64_t split_min,
                 wire_ss_range_t *out) {
    if (nsrc < 1 || nsrc > WIRE_MAX_SS_SOURCES) return -PERR_INVALID;
    double load[WIRE_MAX_SS_SOURCES] = {0};
    uint32_t known = nsrc == 32 ? ~0u : (1u << nsrc) - 1;
    int k = 0;
    for (uint32_t t = 0; t < n; t++) {
        uint32_t holders = items[t].holders & known;
        if (!holders) return -PERR_INVALID;
        uint64_t bytes = items[t].bytes;
        if (!bytes) continue; /* nothing to send; the receiver checks the empty tensor's hash */
        if (bytes >= split_min && (holders & (holders - 1))) {
            k += split_tensor(t, bytes, holders, w, nsrc, load, out + k);
            continue;
        }
        int best = -1;
        double best_end = 0;
        for (int s = 0; s < nsrc; s++) {
            if (!(holders >> s & 1)) continue;
            double end = (load[s] + (double)bytes) / w[s];
            if (best < 0 || end < best_end) {
                best = s;
                best_end = end;
            }
        }
        out[k++] = (wire_ss_range_t){.tensor = t, .source = (uint8_t)best, .offset = 0, .length = bytes};
        load[best] += (double)bytes;
    }
    return k;
}
