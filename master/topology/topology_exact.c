/*
 * topology_exact.c - exact ring order for small n (Held-Karp style DP).
 *
 * Why two phases: a single DP over (bottleneck, sum) pairs is not exact,
 * because a partial path with a worse sum but a better bottleneck can be
 * the one that completes into the optimum, and one value per state cannot
 * keep both. Fixing the bottleneck first removes the conflict:
 *   1. B* = the largest edge value such that a Hamiltonian cycle exists using
 *      only edges >= B*. Found by binary search over the edge values up to
 *      the bound of topology_bound.c (probed first); each probe is a bitset DP: reach[S] = set of end peers v such that some path
 *      starts at peer 0, visits exactly S and ends at v. O(2^n n) bit ops.
 *   2. Held-Karp on the graph of edges >= B*: dp[S][v] = least sum of 1/bw
 *      over such paths. Every ring it can produce has bottleneck >= B*, and
 *      none exceeds B* by the choice of B*, so the least sum among them is
 *      the lexicographic optimum. O(2^n n^2) time, 2^(n-1) (n-1) states.
 * Peer 0 is the fixed start; peers 1..n-1 are bits 0..n-2 of S.
 */
#include "topology/topology_internal.h"
#include "topology/topology_solver.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    int m;                            /* n - 1: peers other than 0 */
    uint32_t from0;                   /* bit u: edge 0 -> u+1 allowed */
    uint32_t to0;                     /* bit v: edge v+1 -> 0 allowed */
    uint32_t succ[TOPO_EXACT_HARD_MAX_N]; /* bit u of succ[v]: edge v+1 -> u+1 allowed */
    uint32_t pred[TOPO_EXACT_HARD_MAX_N]; /* bit v of pred[u]: same edge seen from u */
} topo_allowed_t;

/* Edges usable at threshold thr (bw >= thr), as bitsets. */
static void topo_allowed_at(const topo_ctx_t *c, double thr, topo_allowed_t *a) {
    int n = c->n, m = n - 1;
    const double *bw = c->bw;
    a->m = m;
    a->from0 = a->to0 = 0;
    for (int u = 0; u < m; u++) {
        a->succ[u] = a->pred[u] = 0;
        if (bw[u + 1] >= thr) a->from0 |= 1u << u;
        if (bw[(size_t)(u + 1) * n] >= thr) a->to0 |= 1u << u;
    }
    for (int v = 0; v < m; v++)
        for (int u = 0; u < m; u++)
            if (u != v && bw[(size_t)(v + 1) * n + (u + 1)] >= thr) {
                a->succ[v] |= 1u << u;
                a->pred[u] |= 1u << v;
            }
}

/* Whether a ring using only allowed edges exists, in *exists. @return 0, or -PERR_CANCELLED when stopped by the
 * context (cancel or time limit). */
static int topo_ring_exists(topo_ctx_t *c, const topo_allowed_t *a, uint32_t *reach, int *exists) {
    uint32_t full = (1u << a->m) - 1;
    reach[0] = 0;
    for (uint32_t S = 1; S <= full; S++) {
        if (topo_should_stop(c)) return -PERR_CANCELLED;
        if ((S & (S - 1)) == 0) {
            reach[S] = S & a->from0;
            continue;
        }
        uint32_t r = 0;
        for (uint32_t rest = S; rest; rest &= rest - 1) {
            int u = __builtin_ctz(rest);
            if (reach[S ^ (1u << u)] & a->pred[u]) r |= 1u << u;
        }
        reach[S] = r;
    }
    *exists = (reach[full] & a->to0) != 0;
    return 0;
}

/* Least-sum ring over allowed edges, written to order. @return 0; -PERR_CANCELLED (stopped by the context);
 * -PERR_NOMEM; -PERR_FAILED (no ring: cannot happen when the probe said yes). */
static int topo_min_sum_ring(topo_ctx_t *c, const topo_allowed_t *a, int *order) {
    int n = c->n, m = a->m;
    const double *bw = c->bw;
    uint32_t full = (1u << m) - 1;
    size_t states = (size_t)(full + 1) * (size_t)m;
    double *dp = malloc(states * sizeof *dp);
    signed char *par = malloc(states);
    double (*w)[TOPO_EXACT_HARD_MAX_N] = malloc(sizeof(double[TOPO_EXACT_HARD_MAX_N]) * (size_t)m);
    if (!dp || !par || !w) {
        free(dp);
        free(par);
        free(w);
        return -PERR_NOMEM;
    }
    for (int v = 0; v < m; v++)
        for (int u = 0; u < m; u++)
            w[v][u] = u == v ? 0 : 1.0 / bw[(size_t)(v + 1) * n + (u + 1)];
    for (size_t s = 0; s < states; s++) dp[s] = INFINITY;
    for (uint32_t rest = a->from0; rest; rest &= rest - 1) {
        int u = __builtin_ctz(rest);
        dp[((size_t)1 << u) * m + u] = 1.0 / bw[u + 1];
        par[((size_t)1 << u) * m + u] = -1;
    }
    int rc = 0;
    for (uint32_t S = 1; S < full; S++) {
        if (topo_should_stop(c)) {
            rc = -PERR_CANCELLED;
            goto out;
        }
        const double *row = dp + (size_t)S * m;
        for (uint32_t ends = S; ends; ends &= ends - 1) {
            int v = __builtin_ctz(ends);
            double d = row[v];
            if (d == INFINITY) continue;
            for (uint32_t nx = a->succ[v] & ~S; nx; nx &= nx - 1) {
                int u = __builtin_ctz(nx);
                size_t t = (size_t)(S | (1u << u)) * m + u;
                double x = d + w[v][u];
                if (x < dp[t]) {
                    dp[t] = x;
                    par[t] = (signed char)v;
                }
            }
        }
    }
    double best = INFINITY;
    int last = -1;
    for (uint32_t rest = a->to0; rest; rest &= rest - 1) {
        int v = __builtin_ctz(rest);
        double x = dp[(size_t)full * m + v] + 1.0 / bw[(size_t)(v + 1) * n];
        if (x < best) {
            best = x;
            last = v;
        }
    }
    if (last < 0) {
        rc = -PERR_FAILED;
        goto out;
    }
    order[0] = 0;
    uint32_t S = full;
    for (int k = n - 1, v = last; k >= 1; k--) {
        order[k] = v + 1;
        int p = par[(size_t)S * m + v];
        S ^= 1u << v;
        v = p;
    }
out:
    free(dp);
    free(par);
    free(w);
    return rc;
}

int topo_exact_solve(topo_ctx_t *c, double bound, int *order) {
    int n = c->n;
    if (n < 2 || n > TOPO_EXACT_HARD_MAX_N) return -PERR_INVALID;
    uint32_t *reach = malloc(((size_t)1 << (n - 1)) * sizeof *reach);
    topo_values_t vs;
    if (!reach || topo_values_collect(&vs, c->bw, n, 0, bound) != 0) {
        free(reach);
        return -PERR_NOMEM;
    }
    /* B* = the largest value with a ring over edges >= B*; the bound caps it. */
    topo_allowed_t a;
    double best = 0;
    int first = 1;
    while (vs.m > 0) {
        /* The bound first: usually reachable, and then one probe settles it. */
        double x = first ? bound : topo_values_median(&vs);
        first = 0;
        topo_allowed_at(c, x, &a);
        int ok = 0, rc = topo_ring_exists(c, &a, reach, &ok);
        if (rc != 0) {
            free(reach);
            topo_values_free(&vs);
            return rc;
        }
        if (ok) {
            best = x;
            topo_values_keep_above(&vs, x);
        } else {
            topo_values_keep_below(&vs, x);
        }
    }
    free(reach);
    topo_values_free(&vs);
    if (best == 0) {
        /* Every ring uses an unreachable edge: all tie, any ring is optimal. */
        for (int i = 0; i < n; i++) order[i] = i;
        return 0;
    }
    topo_allowed_at(c, best, &a);
    return topo_min_sum_ring(c, &a, order); /* a failure lets the caller fall back to the heuristic */
}
