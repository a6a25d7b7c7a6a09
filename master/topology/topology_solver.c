/*
 * topology_solver.c - public entry points of the ring-order solver: input
 * validation, ring metrics and comparison, and the orchestration that picks
 * the exact solver or the heuristic (see topology_solver.h for the contract).
 */
#include "topology/topology_solver.h"
#include "topology/topology_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nearest-neighbour starts tried before searching: enough to avoid a bad
 * first ring, few enough to stay O(64 n^2). */
#define TOPO_CONSTRUCT_STARTS 64

/* ---- context helpers (shared with the other topology_*.c files) ---- */

double topo_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int topo_check_stop(topo_ctx_t *c) {
    if (c->stopped || c->slice_over) return 1;
    c->poll = 0;
    if (c->cancel && atomic_load(c->cancel)) {
        c->stopped = 1;
    } else if (c->deadline_s > 0 || c->slice_end_s > 0) {
        double now = topo_now_s();
        if (c->deadline_s > 0 && now >= c->deadline_s) c->stopped = 1;
        else if (c->slice_end_s > 0 && now >= c->slice_end_s) c->slice_over = 1;
    }
    return c->stopped || c->slice_over;
}

int topo_should_stop(topo_ctx_t *c) {
    if (c->stopped || c->slice_over) return 1;
    if (++c->poll < 64) return 0;
    return topo_check_stop(c);
}

void topo_set_slice(topo_ctx_t *c, double end_s) {
    c->slice_end_s = end_s;
    c->slice_over = 0;
}

/* splitmix64: tiny, good enough for kicks, state lives in the context. */
uint64_t topo_rand(topo_ctx_t *c) {
    uint64_t z = (c->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int topo_rand_below(topo_ctx_t *c, int bound) {
    return (int)(topo_rand(c) % (uint64_t)bound);
}

/* ---- validation and metrics ---- */

int topo_validate(const double *bw, int n) {
    if (!bw || n < 1 || n > TOPO_MAX_N) return -PERR_INVALID;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double x = bw[(size_t)i * n + j];
            if (i != j && (!isfinite(x) || x < 0)) return -PERR_INVALID;
        }
    return 0;
}

double topo_ring_bottleneck(const double *bw, int n, const int *order) {
    double b = INFINITY;
    if (n < 2) return b;
    for (int k = 0; k < n; k++) {
        double x = bw[(size_t)order[k] * n + order[(k + 1) % n]];
        if (x < b) b = x;
    }
    return b;
}

int topo_ring_bottleneck_edge(const double *bw, int n, const int *order) {
    if (n < 2) return -PERR_INVALID;
    int best = 0;
    for (int k = 1; k < n; k++)
        if (bw[(size_t)order[k] * n + order[(k + 1) % n]] < bw[(size_t)order[best] * n + order[best + 1]]) best = k;
    return best;
}

double topo_ring_time(const double *bw, int n, const int *order) {
    double t = 0;
    if (n < 2) return t;
    for (int k = 0; k < n; k++) {
        double x = bw[(size_t)order[k] * n + order[(k + 1) % n]];
        if (!(x > 0)) return INFINITY;
        t += 1.0 / x;
    }
    return t;
}

int topo_compare_values(double bottleneck_a, double time_a, double bottleneck_b, double time_b) {
    if (bottleneck_a > bottleneck_b) return -1;
    if (bottleneck_a < bottleneck_b) return 1;
    int inf_a = isinf(time_a) != 0, inf_b = isinf(time_b) != 0;
    if (inf_a || inf_b) return inf_a - inf_b; /* an infinite time loses, two tie */
    double tol = TOPO_TIME_RTOL * fmax(fabs(time_a), fabs(time_b));
    if (time_a < time_b - tol) return -1;
    if (time_a > time_b + tol) return 1;
    return 0;
}

int topo_compare(const double *bw, int n, const int *a, const int *b) {
    return topo_compare_values(topo_ring_bottleneck(bw, n, a), topo_ring_time(bw, n, a),
                               topo_ring_bottleneck(bw, n, b), topo_ring_time(bw, n, b));
}

void topo_solution_free(topo_solution_t *s) {
    if (!s) return;
    free(s->order);
    memset(s, 0, sizeof *s);
}

void topo_options_init(topo_options_t *opt) {
    memset(opt, 0, sizeof *opt);
    opt->exact_max_n = TOPO_EXACT_MAX_N;
    opt->seed = 0x5eed70b0u;
}

/* ---- orchestration ---- */

/* Rotates order so that it starts with peer 0 (the documented convention). */
static void topo_rotate_to_zero(int n, int *order, int *scratch) {
    int z = 0;
    while (z < n && order[z] != 0) z++;
    if (z == 0 || z == n) return;
    for (int k = 0; k < n; k++) scratch[k] = order[(z + k) % n];
    memcpy(order, scratch, (size_t)n * sizeof *order);
}

static void topo_fill(topo_solution_t *out, const double *bw, int n, int *order) {
    out->n = n;
    out->order = order;
    out->bottleneck_mbps = topo_ring_bottleneck(bw, n, order);
    out->total_time = topo_ring_time(bw, n, order);
}

int topo_solve(const double *bw, int n, double time_limit_ms, const atomic_bool *cancel, topo_solution_t *out) {
    topo_options_t opt;
    topo_options_init(&opt);
    opt.time_limit_ms = time_limit_ms;
    opt.cancel = cancel;
    return topo_solve_ex(bw, n, &opt, out);
}

int topo_solve_ex(const double *bw, int n, const topo_options_t *opt, topo_solution_t *out) {
    if (!out) return -PERR_INVALID;
    memset(out, 0, sizeof *out);
    topo_options_t defaults;
    if (!opt) {
        topo_options_init(&defaults);
        opt = &defaults;
    }
    int rc = topo_validate(bw, n);
    if (rc != 0) return rc;

    topo_ctx_t ctx = {.n = n, .bw = bw, .cancel = opt->cancel};
    ctx.rng = opt->seed ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull);
    if (opt->time_limit_ms > 0) ctx.deadline_s = topo_now_s() + opt->time_limit_ms / 1000.0;

    int *order = malloc((size_t)n * sizeof *order);
    int *scratch = malloc((size_t)n * sizeof *scratch);
    if (!order || !scratch) {
        free(order);
        free(scratch);
        return -PERR_NOMEM;
    }
    for (int i = 0; i < n; i++) order[i] = i;
    if (n == 1) {
        free(scratch);
        topo_fill(out, bw, n, order);
        out->optimal = out->bottleneck_optimal = 1;
        out->bottleneck_bound_mbps = INFINITY;
        return 0;
    }

    double bound = topo_bottleneck_bound(bw, n);
    if (bound <= 0) {
        /* No ring avoids unreachable edges: all rings tie at bottleneck 0. */
        free(scratch);
        topo_fill(out, bw, n, order);
        out->optimal = out->bottleneck_optimal = 1;
        out->bottleneck_bound_mbps = 0;
        return 0;
    }

    int optimal = 0;
    topo_construct(&ctx, TOPO_CONSTRUCT_STARTS, order, scratch);
    int exact_n = opt->exact_max_n < TOPO_EXACT_HARD_MAX_N ? opt->exact_max_n : TOPO_EXACT_HARD_MAX_N;
    if (n <= exact_n) {
        /* A quick descent first, so that a cancelled or timed-out exact run
         * still leaves a good ring behind. */
        rc = topo_search(&ctx, bound, 0, order);
        if (topo_exact_solve(&ctx, bound, scratch) == 0) {
            memcpy(order, scratch, (size_t)n * sizeof *order);
            optimal = 1;
        }
    }
    if (!optimal && rc == 0) rc = topo_search(&ctx, bound, ctx.deadline_s > 0, order);
    (void)rc; /* out of memory inside the search still leaves a valid ring */

    topo_rotate_to_zero(n, order, scratch);
    free(scratch);
    topo_fill(out, bw, n, order);
    out->optimal = optimal;
    out->bottleneck_bound_mbps = optimal ? out->bottleneck_mbps : bound;
    out->bottleneck_optimal = optimal || out->bottleneck_mbps >= bound;
    return 0;
}
