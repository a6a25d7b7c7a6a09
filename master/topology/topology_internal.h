/*
 * topology_internal.h - pieces shared by the topology solver's files:
 * topology_solver.c (API, orchestration), topology_values.c (threshold
 * candidates), topology_bound.c, topology_exact.c, and the heuristic
 * (topology_search.c, topology_local.c, topology_repair.c; their own
 * shared state is in topology_search.h). Not part of the public API.
 */
#ifndef PCCL_TOPOLOGY_INTERNAL_H
#define PCCL_TOPOLOGY_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Per-call state: the input, the stop conditions and the random stream.
 * Lives on the caller's stack, which is what keeps the module thread-safe. */
typedef struct topo_ctx {
    int n;
    const double *bw;          /* caller's matrix, row-major, Mbit/s */
    double deadline_s;         /* monotonic seconds; 0 = none */
    double slice_end_s;        /* end of the current search step; 0 = none */
    const atomic_bool *cancel; /* may be NULL */
    unsigned poll;             /* calls since the last clock/flag read */
    int stopped;               /* latched once the deadline passed or cancel was set */
    int slice_over;            /* latched once slice_end_s passed, until the next slice */
    uint64_t rng;
} topo_ctx_t;

double topo_now_s(void);
/* Cheap stop test for inner loops: reads the flag and the clock every 64th call. */
int topo_should_stop(topo_ctx_t *c);
/* Reads the flag and the clock now. */
int topo_check_stop(topo_ctx_t *c);
/* Starts a search step that must end by end_s (0: only the call's deadline).
 * Why: one step (e.g. one bottleneck probe at n = 2048) could otherwise eat
 * the whole budget inside a single descent. */
void topo_set_slice(topo_ctx_t *c, double end_s);
uint64_t topo_rand(topo_ctx_t *c);
/* Uniform integer in [0, bound), bound >= 1. */
int topo_rand_below(topo_ctx_t *c, int bound);

/* Edge values still in play in a search for the best threshold (unsorted;
 * see topology_values.c). */
typedef struct topo_values {
    double *v;
    size_t m;
} topo_values_t;

/* Positive off-diagonal values x with above < x <= at_most. @return 0, or -PERR_NOMEM. */
int topo_values_collect(topo_values_t *vs, const double *bw, int n, double above, double at_most);
/* Median of the values in play (m > 0); reorders them. */
double topo_values_median(topo_values_t *vs);
double topo_values_max(const topo_values_t *vs);
/* Drop the values <= x (a ring with bottleneck >= x is known) ... */
void topo_values_keep_above(topo_values_t *vs, double x);
/* ... or the values >= x (x was not reached). */
void topo_values_keep_below(topo_values_t *vs, double x);
void topo_values_free(topo_values_t *vs);

/* A proven upper bound on the bottleneck of every ring: the largest edge
 * value B such that the graph of edges >= B is strongly connected and (for
 * n <= 128) has a cycle cover, both necessary for a ring. 0 when even the
 * positive edges admit no ring (every ring has bottleneck 0). */
double topo_bottleneck_bound(const double *bw, int n);

/* Exact solver (2 <= n <= TOPO_EXACT_HARD_MAX_N); bound as above (> 0).
 * Writes an optimal ring into order (order[0] == 0). @return 0; -PERR_CANCELLED
 * (stopped by the context: cancel or time limit); -PERR_NOMEM; -PERR_INVALID (n
 * out of range); -PERR_FAILED (no ring where the probe found one). */
int topo_exact_solve(topo_ctx_t *c, double bound, int *order);

/* Heuristic solver. order holds a starting ring on entry (any permutation)
 * and the best ring found on return. iterate = 0 limits it to deterministic
 * descents (no kicks). @return 0, or -PERR_NOMEM (order then still valid). */
int topo_search(topo_ctx_t *c, double bound, int iterate, int *order);

/* Best of nearest-neighbour constructions (highest-bandwidth successor first)
 * from up to max_starts evenly spaced start peers, into order. */
void topo_construct(topo_ctx_t *c, int max_starts, int *order, int *scratch);

#endif
