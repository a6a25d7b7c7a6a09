/*
 * msm_algo.c - the cost model and choice of msm_algo.h (pure). The alpha-beta model is Hockney's; the ring's
 * cost is Patarasuk & Yuan's (JPDC 2009), recursive halving and doubling's Rabenseifner's (ICCS 2004) with the
 * fold of Thakur, Rabenseifner & Gropp (IJHPCA 2005), recursive doubling's theirs (section 4.4).
 */
#include "sm/msm_algo.h"

#include <stdlib.h>

#include "base/base.h"
#include "pccl_coll.h"
#include "sm/msm_internal.h"

double msm_algo_ring_s(const msm_algo_cost_t *c) {
    double n = c->world;
    if (c->bcast) return (n - 1.0) * c->alpha + c->bytes * c->beta_ring;
    return (c->half ? 1.0 : 2.0) * (n - 1.0) * (c->alpha + c->bytes * c->beta_ring / n);
}

double msm_algo_rhd_s(const msm_algo_cost_t *c) {
    uint32_t p = 1, steps = 0;
    while (p * 2 <= c->world) p *= 2, steps++;
    double byte = c->bytes * c->beta_rhd * MSM_ALGO_RHD_BYTE_FACTOR;
    double alpha = c->alpha_rhd > 0 ? c->alpha_rhd : c->alpha;
    if (c->bcast) return (steps + (c->world > p)) * (alpha + byte);
    if (c->half) /* the fold and the unfold: the whole vector one way, one member's block the other */
        return steps * alpha + (p - 1.0) / p * byte + (c->world > p) * (2.0 * alpha + (1.0 + 1.0 / c->world) * byte);
    double t = 2.0 * steps * alpha + 2.0 * (p - 1.0) / p * byte;
    if (c->world > p) t += 2.0 * (alpha + byte);
    return t;
}

double msm_algo_rd_s(const msm_algo_cost_t *c) {
    uint32_t p = 1, steps = 0;
    while (p * 2 <= c->world) p *= 2, steps++;
    double hop = (c->alpha_rhd > 0 ? c->alpha_rhd : c->alpha) + c->bytes * c->beta_rhd * MSM_ALGO_RD_BYTE_FACTOR;
    return (steps + 2.0 * (c->world > p)) * hop;
}

int msm_algo_has_rhd(unsigned kind, int quantized, int by_position, uint32_t holders, uint32_t world) {
    if (kind == pcclExtCollAllReduce) return 1;
    if (quantized) return 0;
    if (kind == pcclExtCollBroadcast) return holders == 1;
    if (kind != pcclExtCollReduceScatter && kind != pcclExtCollAllGather && kind != pcclExtCollAllGatherV) return 0;
    return by_position && world >= 2; /* a world that is not a power of two folds */
}

int msm_algo_has(unsigned kind, int quantized, int by_position, uint32_t holders, uint32_t world) {
    if (!msm_algo_has_rhd(kind, quantized, by_position, holders, world)) return 0;
    return MSM_ALGO_HAS_RHD | (kind == pcclExtCollAllReduce ? MSM_ALGO_HAS_RD : 0);
}

uint8_t msm_algo_choose(int has, uint8_t forced, const msm_algo_cost_t *c) {
    if (!(has & MSM_ALGO_HAS_RHD) || forced == WIRE_ALGO_RING) return WIRE_ALGO_RING;
    if (forced == WIRE_ALGO_RD) return has & MSM_ALGO_HAS_RD ? WIRE_ALGO_RD : WIRE_ALGO_RHD;
    if (forced == WIRE_ALGO_RHD) return WIRE_ALGO_RHD;
    if (!c) return WIRE_ALGO_RING;
    uint8_t algo = WIRE_ALGO_RING;
    double best = msm_algo_ring_s(c), t;
    if (c->world > 2 && (t = msm_algo_rhd_s(c)) < best) best = t, algo = WIRE_ALGO_RHD;
    if ((has & MSM_ALGO_HAS_RD) && msm_algo_rd_s(c) < best) algo = WIRE_ALGO_RD;
    return algo;
}

typedef struct conn_pos {
    uint64_t conn;
    uint32_t pos;
} conn_pos_t;

static int by_conn(const void *a, const void *b) {
    uint64_t x = ((const conn_pos_t *)a)->conn, y = ((const conn_pos_t *)b)->conn;
    return x < y ? -1 : x > y;
}

/* conn's ring position among the n sorted members, or -1. */
static int64_t pos_of(const conn_pos_t *s, uint32_t n, uint64_t conn) {
    conn_pos_t key = {.conn = conn};
    const conn_pos_t *hit = bsearch(&key, s, n, sizeof *s, by_conn);
    return hit ? (int64_t)hit->pos : -1;
}

/* One pass over the store with a search among the members per pair (no search of the store per pair: an
 * operation of hundreds of peers stays cheap). */
int msm_algo_links(const msm_t *m, const uint64_t *conns, uint32_t world, msm_algo_links_t *out) {
    *out = (msm_algo_links_t){0};
    if (m->nbw == 0 || world < 2) return 0;
    conn_pos_t *s = malloc((size_t)world * sizeof *s);
    if (!s) return -PERR_NOMEM;
    for (uint32_t i = 0; i < world; i++) s[i] = (conn_pos_t){conns[i], i};
    qsort(s, world, sizeof *s, by_conn);
    double ring_sum = 0;
    uint32_t ring_n = 0;
    for (int k = 0; k < m->nbw; k++) {
        const msm_bw_t *b = &m->bw[k];
        int64_t i = pos_of(s, world, b->from), j = i < 0 ? -1 : pos_of(s, world, b->to);
        if (j < 0 || b->mbps <= 0) continue;
        if (out->slowest_mbps == 0 || b->mbps < out->slowest_mbps) out->slowest_mbps = b->mbps;
        if (b->rtt_us <= 0) continue;
        if (b->rtt_us > out->max_rtt_us) out->max_rtt_us = b->rtt_us;
        if (j == (i + 1) % world) ring_sum += b->rtt_us, ring_n++;
    }
    out->ring_rtt_us = ring_n ? ring_sum / ring_n : 0;
    free(s);
    return 0;
}

msm_algo_cost_t msm_algo_cost_of(const msm_algo_links_t *l, uint64_t bytes, uint32_t world, int bcast) {
    double beta = 8.0 / ((l->slowest_mbps > 0 ? l->slowest_mbps : MSM_ALGO_DEFAULT_MBPS) * 1e6);
    double ring = l->ring_rtt_us > 0 ? l->ring_rtt_us : l->max_rtt_us;
    double rhd = l->max_rtt_us > 0 ? l->max_rtt_us : ring;
    /* one message's latency: half a round trip */
    return (msm_algo_cost_t){.bytes = (double)bytes, .alpha = ring > 0 ? ring / 2e6 : MSM_ALGO_ALPHA_S,
                             .alpha_rhd = rhd > 0 ? rhd / 2e6 : MSM_ALGO_ALPHA_S, .beta_ring = beta,
                             .beta_rhd = beta, .world = world, .bcast = bcast};
}

uint8_t msm_algo_for(const msm_t *m, int has, unsigned kind, uint8_t forced, uint64_t bytes,
                     const uint64_t *conns, uint32_t world) {
    if (!has || forced != WIRE_ALGO_AUTO) return msm_algo_choose(has, forced, NULL);
    msm_algo_links_t l;
    if (msm_algo_links(m, conns, world, &l) != 0) l = (msm_algo_links_t){0}; /* the defaults */
    msm_algo_cost_t c = msm_algo_cost_of(&l, bytes, world, kind == pcclExtCollBroadcast);
    c.half = kind == pcclExtCollReduceScatter || kind == pcclExtCollAllGather || kind == pcclExtCollAllGatherV;
    return msm_algo_choose(has, forced, &c);
}

const char *msm_algo_name(uint8_t algo) {
    return algo == WIRE_ALGO_AUTO ? "auto" : algo == WIRE_ALGO_RING ? "ring" : algo == WIRE_ALGO_RHD ? "rhd"
           : algo == WIRE_ALGO_RD ? "rd" : "unknown";
}
_Static_assert(MSM_ALGO_SLOTS == WIRE_ALGO_MAX + 1, "by_algo holds every algorithm a COMMENCE names");
