/*
 * topology_values.c - candidate bottleneck values for the threshold searches.
 *
 * The optimal bottleneck is one of the edge values, so the exact solver,
 * the bound and the heuristic all binary-search over edge values. Sorting
 * all n^2 of them costs more than the whole 50 ms budget at n ~ 1000, so
 * instead each probe takes the median of the values still in play
 * (quickselect, O(m)) and then drops the half that is settled: O(m) work in
 * total for the whole search instead of O(m log m).
 */
#include "topology/topology_internal.h"

#include <stdlib.h>

int topo_values_collect(topo_values_t *vs, const double *bw, int n, double above, double at_most) {
    size_t cap = (size_t)n * (size_t)(n - 1), m = 0;
    vs->v = NULL;
    vs->m = 0;
    if (cap == 0 || !(at_most > above)) return 0;
    vs->v = malloc(cap * sizeof *vs->v);
    if (!vs->v) return -PERR_NOMEM;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double x = bw[(size_t)i * n + j];
            if (i != j && x > 0 && x > above && x <= at_most) vs->v[m++] = x;
        }
    vs->m = m;
    return 0;
}

/* k-th smallest (0-based) of v[0..m), reordering v; three-way partition so
 * that many equal values (common: quantized bandwidths) stay linear. */
static double topo_select(double *v, size_t m, size_t k) {
    size_t lo = 0, hi = m; /* answer lies in v[lo..hi) */
    for (;;) {
        if (hi - lo == 1) return v[lo];
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) < pivot, [lt,i) == pivot, [gt,hi) > pivot */
        while (i < gt) {
            double x = v[i];
            if (x < pivot) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x > pivot) {
                v[i] = v[--gt];
                v[gt] = x;
            } else {
                i++;
            }
        }
        if (k < lt) hi = lt;
        else if (k >= gt) lo = gt;
        else return pivot;
    }
}

double topo_values_median(topo_values_t *vs) {
    return topo_select(vs->v, vs->m, vs->m / 2);
}

double topo_values_max(const topo_values_t *vs) {
    double best = vs->v[0];
    for (size_t i = 1; i < vs->m; i++)
        if (vs->v[i] > best) best = vs->v[i];
    return best;
}

void topo_values_keep_above(topo_values_t *vs, double x) {
    size_t k = 0;
    for (size_t i = 0; i < vs->m; i++)
        if (vs->v[i] > x) vs->v[k++] = vs->v[i];
    vs->m = k;
}

void topo_values_keep_below(topo_values_t *vs, double x) {
    size_t k = 0;
    for (size_t i = 0; i < vs->m; i++)
        if (vs->v[i] < x) vs->v[k++] = vs->v[i];
    vs->m = k;
}

void topo_values_free(topo_values_t *vs) {
    free(vs->v);
    vs->v = NULL;
    vs->m = 0;
}
