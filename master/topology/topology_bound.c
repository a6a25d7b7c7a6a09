/*
 * topology_bound.c - a proven upper bound on the bottleneck of any ring.
 *
 * Why: the heuristic needs a ceiling for its bottleneck search (trying values
 * above it is wasted time) and, when it reaches the ceiling, it can report
 * the bottleneck as proven optimal even for large n.
 *
 * A ring using only edges >= B needs, in the graph G_B of those edges:
 *   - strong connectivity. The largest such B is min over peers v of the
 *     widest-path values 0 -> v and v -> 0 (widest path = path maximizing
 *     its smallest edge), found with a dense Prim-like sweep in O(n^2),
 *     no sorting and no search needed;
 *   - a cycle cover: a perfect matching from "sender" peers to "receiver"
 *     peers (the ring itself is one). Searched over edge values below the
 *     connectivity bound with augmenting paths, warm-started from the last
 *     matching found; O(n^3) worst case per probe, so only up to
 *     TOPO_MATCHING_MAX_N.
 */
#include "topology/topology_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_MATCHING_MAX_N 128

/* min over v of the widest path value from 0 to v (reverse: v to 0). */
static double topo_widest_from_0(const double *bw, int n, int reverse, double *width, char *done) {
    for (int v = 0; v < n; v++) {
        width[v] = -1;
        done[v] = 0;
    }
    width[0] = INFINITY;
    double worst = INFINITY;
    for (int step = 0; step < n; step++) {
        int u = -1;
        for (int v = 0; v < n; v++)
            if (!done[v] && (u < 0 || width[v] > width[u])) u = v;
        done[u] = 1;
        if (width[u] < worst) worst = width[u];
        if (worst <= 0) return 0; /* some peer is cut off */
        for (int v = 0; v < n; v++) {
            if (done[v] || v == u) continue;
            double e = reverse ? bw[(size_t)v * n + u] : bw[(size_t)u * n + v];
            double w = e < width[u] ? e : width[u];
            if (w > width[v]) width[v] = w;
        }
    }
    return worst;
}

typedef struct {
    const double *bw;
    int n;
    double thr;
    int *owner;   /* owner[col] = row matched to it, -1 */
    int *match;   /* match[row] = its column, -1 */
    char *seen;
} topo_matching_t;

/* Kuhn's augmenting path from sender `row`; recursion depth <= n <= 128. */
static int topo_augment(topo_matching_t *mt, int row) {
    int n = mt->n;
    for (int j = 0; j < n; j++) {
        if (j == row || mt->seen[j] || mt->bw[(size_t)row * n + j] < mt->thr) continue;
        mt->seen[j] = 1;
        if (mt->owner[j] < 0 || topo_augment(mt, mt->owner[j])) {
            mt->owner[j] = row;
            mt->match[row] = j;
            return 1;
        }
    }
    return 0;
}

/* Completes the current matching at threshold thr after dropping the pairs
 * below it; 1 when every sender is matched. */
static int topo_cycle_cover(topo_matching_t *mt, double thr) {
    int n = mt->n;
    mt->thr = thr;
    for (int i = 0; i < n; i++) {
        int j = mt->match[i];
        if (j >= 0 && mt->bw[(size_t)i * n + j] < thr) {
            mt->match[i] = -1;
            mt->owner[j] = -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (mt->match[i] >= 0) continue;
        memset(mt->seen, 0, (size_t)n);
        if (!topo_augment(mt, i)) return 0;
    }
    return 1;
}

/* Largest edge value <= ceiling with a cycle cover; 0 if none. */
static double topo_cover_bound(const double *bw, int n, double ceiling, int *ibuf, char *cbuf) {
    int *best = ibuf + 2 * n; /* matching of the last feasible probe */
    topo_matching_t mt = {bw, n, 0, ibuf, ibuf + n, cbuf};
    for (int i = 0; i < n; i++) mt.owner[i] = mt.match[i] = best[i] = -1;
    if (topo_cycle_cover(&mt, ceiling)) return ceiling; /* the usual case: one probe */
    topo_values_t vs;
    if (topo_values_collect(&vs, bw, n, 0, ceiling) != 0) return ceiling; /* no memory: weaker bound */
    topo_values_keep_below(&vs, ceiling);
    double found = 0;
    while (vs.m > 0) {
        double x = topo_values_median(&vs);
        for (int i = 0; i < n; i++) mt.owner[i] = -1; /* restart from the last good matching */
        for (int i = 0; i < n; i++) {
            mt.match[i] = best[i];
            if (best[i] >= 0) mt.owner[best[i]] = i;
        }
        if (topo_cycle_cover(&mt, x)) {
            found = x;
            memcpy(best, mt.match, (size_t)n * sizeof *best);
            topo_values_keep_above(&vs, x);
        } else {
            topo_values_keep_below(&vs, x);
        }
    }
    topo_values_free(&vs);
    return found;
}

double topo_bottleneck_bound(const double *bw, int n) {
    if (n < 2) return INFINITY;
    double *width = malloc((size_t)n * sizeof *width);
    int *ibuf = malloc(3 * (size_t)n * sizeof *ibuf);
    char *cbuf = malloc((size_t)n);
    double bound = 0;
    if (!width || !ibuf || !cbuf) {
        /* no memory: the largest edge value is still a valid bound */
        for (size_t e = 0; e < (size_t)n * n; e++)
            if (e % ((size_t)n + 1) != 0 && bw[e] > bound) bound = bw[e];
        goto out;
    }
    double fwd = topo_widest_from_0(bw, n, 0, width, cbuf);
    double rev = topo_widest_from_0(bw, n, 1, width, cbuf);
    bound = fwd < rev ? fwd : rev;
    if (bound > 0 && n <= TOPO_MATCHING_MAX_N) bound = topo_cover_bound(bw, n, bound, ibuf, cbuf);
out:
    free(width);
    free(ibuf);
    free(cbuf);
    return bound;
}
