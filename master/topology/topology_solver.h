/*
 * topology_solver.h - choose the ring order for ring all-reduce.
 *
 * A ring all-reduce moves data around the ring at the pace of its slowest
 * hop, so the master measures directed peer-to-peer bandwidth and asks this
 * module for the best ring. Links are asymmetric (bw[i][j] != bw[j][i]), so
 * this is an asymmetric TSP variant.
 *
 * Input: n and an n x n row-major matrix, bw[i*n+j] = bandwidth in Mbit/s
 * from peer i to peer j. The diagonal is ignored (it may hold anything,
 * even NaN). 0 means "unreachable". Off-diagonal entries must be finite and
 * >= 0, otherwise the input is rejected.
 *
 * Objective (lexicographic), for a ring order[0] -> order[1] -> ... -> order[0]:
 *   1. maximize the bottleneck: min over ring edges of bw (Mbit/s);
 *   2. among rings with equal bottleneck, minimize the total transfer time
 *      sum over ring edges of 1/bw, in seconds per Mbit (the time each hop
 *      needs to push one Mbit, summed; numerically equal to ms per kbit).
 * A ring that uses an unreachable edge has bottleneck 0 and total time
 * +INFINITY; all such rings tie, so when no ring avoids unreachable edges
 * every ring is optimal.
 * Total times are compared with a relative tolerance of TOPO_TIME_RTOL,
 * because the same set of edges summed in another order may differ in the
 * last bits.
 *
 * Algorithms (see docs/topology.md):
 *   - exact for n <= TOPO_EXACT_MAX_N (default; up to TOPO_EXACT_HARD_MAX_N
 *     through topo_options_t.exact_max_n): binary search for the optimal
 *     bottleneck B* over the edge values, where "feasible" means a
 *     Hamiltonian cycle exists using only edges >= B* (bitset DP over
 *     subsets), then Held-Karp DP minimizing the sum of 1/bw over edges >= B*.
 *     Time and memory grow as 2^n (bench/topology.md).
 *   - heuristic above that: nearest-neighbour construction from several
 *     starts, a proven upper bound on the bottleneck (strong connectivity +
 *     cycle cover), a search that raises the bottleneck towards the bound,
 *     then iterated local search on the total time. All moves keep every
 *     segment's direction (asymmetric costs): 3-opt segment insertion
 *     (which includes or-opt), node swap, a two-segment bad-edge repair and
 *     a segment-reorder kick. bench/topology.md compares it with the exact
 *     optimum where both run.
 *
 * Time budget: the master runs a quick solve with TOPO_QUICK_TIME_MS (50 ms)
 * when the topology changes, then may keep a "moonshot" topo_solve running
 * on a background thread with a long limit and a cancel flag, and adopt its
 * ring if topo_compare says it is better. The CLI default is
 * TOPO_DEFAULT_TIME_MS.
 *
 * The module is pure: no I/O, no globals, no locks; each call only touches
 * its arguments and its own heap memory, so calls may run concurrently.
 */
#ifndef PCCL_TOPOLOGY_SOLVER_H
#define PCCL_TOPOLOGY_SOLVER_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/base.h"

#define TOPO_EXACT_MAX_N 16      /* default: solve exactly when n <= this */
#define TOPO_EXACT_HARD_MAX_N 20 /* exact DP refuses more (memory grows as 2^n * n) */
#define TOPO_MAX_N 2048          /* larger inputs are rejected (the solver allocates ~2 * 8 n^2 bytes) */
#define TOPO_QUICK_TIME_MS 50.0  /* budget of the master's quick solve */
#define TOPO_DEFAULT_TIME_MS 1000 /* default budget of `pccl solve-topology`, in ms (an integer: its help states it) */
#define TOPO_TIME_RTOL 1e-9      /* relative tolerance when comparing total times */

typedef struct topo_solution {
    int n;
    int *order;                   /* n peer ids, a permutation with order[0] == 0 */
    double bottleneck_mbps;       /* min bw over ring edges; INFINITY when n == 1 */
    double total_time;            /* sum of 1/bw over ring edges, s/Mbit; INFINITY if bottleneck is 0 */
    int optimal;                  /* 1: proven optimal for the lexicographic objective */
    int bottleneck_optimal;       /* 1: no ring has a larger bottleneck */
    double bottleneck_bound_mbps; /* proven upper bound on every ring's bottleneck */
} topo_solution_t;

typedef struct topo_options {
    double time_limit_ms;      /* > 0: deadline for the whole call; <= 0: no deadline
                                  (exact runs to the end, the heuristic only does
                                  deterministic descents, no iterated search) */
    const atomic_bool *cancel; /* optional; when it becomes true the call returns
                                  the best ring found so far (within ~1 ms) */
    int exact_max_n;           /* exact when n <= this (clamped to TOPO_EXACT_HARD_MAX_N);
                                  < 2 forces the heuristic */
    uint64_t seed;             /* random seed of the iterated search */
} topo_options_t;

/* Defaults: no time limit, no cancel flag, exact_max_n = TOPO_EXACT_MAX_N. */
void topo_options_init(topo_options_t *opt);

/* Solves with default options plus the given limit and cancel flag.
 * @return 0 (out filled, free with topo_solution_free); -PERR_INVALID for bad
 * input (NULL pointers, n < 1 or > TOPO_MAX_N, an off-diagonal entry that is
 * negative, NaN or infinite); -PERR_NOMEM.
 * n == 1 yields the trivial ring {0} (bottleneck INFINITY, time 0). */
int topo_solve(const double *bw, int n, double time_limit_ms, const atomic_bool *cancel, topo_solution_t *out);
int topo_solve_ex(const double *bw, int n, const topo_options_t *opt, topo_solution_t *out);

/* @return 0 when bw is acceptable input (see above), -PERR_INVALID otherwise. */
int topo_validate(const double *bw, int n);

/* Metrics of a ring given as a permutation of 0..n-1 (any rotation). */
double topo_ring_bottleneck(const double *bw, int n, const int *order);
/* Index k of the first edge order[k] -> order[(k+1) % n] that attains the bottleneck; -PERR_INVALID if n < 2. */
int topo_ring_bottleneck_edge(const double *bw, int n, const int *order);
double topo_ring_time(const double *bw, int n, const int *order);

/* Lexicographic comparison: < 0 when ring a is better than ring b, > 0 when
 * worse, 0 when they tie (equal bottleneck, times within TOPO_TIME_RTOL). */
int topo_compare(const double *bw, int n, const int *a, const int *b);
int topo_compare_values(double bottleneck_a, double time_a, double bottleneck_b, double time_b);

/* Frees out->order and zeroes the struct; safe on a zeroed struct. */
void topo_solution_free(topo_solution_t *s);

#endif
