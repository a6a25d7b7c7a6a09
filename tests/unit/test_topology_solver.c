/* test_topology_solver.c - ring-order solver: exact vs brute force, heuristic
 * quality and budget, cancel flag, bad input. */
#include "tinytest.h"
#include "topology/topology_solver.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

static uint64_t rng_state = 0x1234567887654321ull;

static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

enum { GEN_UNIFORM, GEN_TIES, GEN_ZEROS, GEN_TIES_ZEROS, GEN_CLUSTERED, GEN_SPARSE, GEN_COUNT };

/* Fills an n x n matrix; the diagonal gets junk the solver must ignore. */
static void gen(double *bw, int n, int kind) {
    static const double levels[] = {100, 200, 400, 800};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double x;
            switch (kind) {
            case GEN_TIES: x = levels[rnd() % 4]; break;
            case GEN_ZEROS: x = rnd() % 3 == 0 ? 0 : 100 + 9900 * rnd_unit(); break;
            case GEN_TIES_ZEROS: x = rnd() % 4 == 0 ? 0 : levels[rnd() % 3]; break;
            case GEN_CLUSTERED: x = ((i < n / 2) == (j < n / 2)) ? 5000 + 5000 * rnd_unit() : 100 + 900 * rnd_unit(); break;
            case GEN_SPARSE: x = rnd() % 3 == 0 ? 100 + 9900 * rnd_unit() : 0; break;
            default: x = 100 + 9900 * rnd_unit(); break;
            }
            bw[i * n + j] = x;
        }
    for (int i = 0; i < n; i++) bw[i * n + i] = (i % 3 == 0) ? NAN : (i % 3 == 1 ? -1.0 : 0.0);
}

static int next_permutation(int *a, int len) {
    int i = len - 2;
    while (i >= 0 && a[i] >= a[i + 1]) i--;
    if (i < 0) return 0;
    int j = len - 1;
    while (a[j] <= a[i]) j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = len - 1; l < r; l++, r--) t = a[l], a[l] = a[r], a[r] = t;
    return 1;
}

/* Best (bottleneck, time) over all (n-1)! rings starting at 0. */
static void brute_force(const double *bw, int n, double *best_b, double *best_t) {
    int order[16];
    for (int i = 0; i < n; i++) order[i] = i;
    *best_b = -1;
    *best_t = INFINITY;
    do {
        double b = topo_ring_bottleneck(bw, n, order), t = topo_ring_time(bw, n, order);
        if (*best_b < 0 || topo_compare_values(b, t, *best_b, *best_t) < 0) *best_b = b, *best_t = t;
    } while (next_permutation(order + 1, n - 1));
}

static int is_ring(const int *order, int n) {
    char seen[TOPO_MAX_N] = {0};
    if (!order || order[0] != 0) return 0;
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]]) return 0;
        seen[order[i]] = 1;
    }
    return 1;
}

/* The reported numbers must be those of the returned ring. */
static int consistent(const double *bw, int n, const topo_solution_t *s) {
    if (s->n != n || !is_ring(s->order, n)) return 0;
    double b = topo_ring_bottleneck(bw, n, s->order), t = topo_ring_time(bw, n, s->order);
    return b == s->bottleneck_mbps && (t == s->total_time || fabs(t - s->total_time) <= 1e-12 * t) &&
           s->bottleneck_bound_mbps >= s->bottleneck_mbps;
}

/* Best of `tries` random rings. */
static void best_random(const double *bw, int n, int tries, double *best_b, double *best_t) {
    int order[TOPO_MAX_N];
    *best_b = -1;
    *best_t = INFINITY;
    for (int k = 0; k < tries; k++) {
        for (int i = 0; i < n; i++) order[i] = i;
        for (int i = n - 1; i > 1; i--) {
            int j = 1 + (int)(rnd() % (uint64_t)i);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double b = topo_ring_bottleneck(bw, n, order), t = topo_ring_time(bw, n, order);
        if (*best_b < 0 || topo_compare_values(b, t, *best_b, *best_t) < 0) *best_b = b, *best_t = t;
    }
}

static double bw_buf[TOPO_MAX_N * 8];

/* ---- tests ---- */

static void test_exact_matches_brute_force(void) {
    int instances = 0, mismatches = 0;
    for (int n = 2; n <= 9; n++)
        for (int rep = 0; rep < 48; rep++) {
            double *bw = bw_buf;
            gen(bw, n, rep % GEN_COUNT);
            double bb, bt;
            brute_force(bw, n, &bb, &bt);
            topo_solution_t s;
            CHECK(topo_solve(bw, n, 0, NULL, &s) == 0);
            CHECK(consistent(bw, n, &s));
            CHECK(s.optimal == 1 && s.bottleneck_optimal == 1);
            if (s.bottleneck_mbps != bb || topo_compare_values(s.bottleneck_mbps, s.total_time, bb, bt) != 0) {
                mismatches++;
                fprintf(stderr, "n=%d rep=%d: solver (%g, %.17g) brute (%g, %.17g)\n", n, rep, s.bottleneck_mbps,
                        s.total_time, bb, bt);
            }
            topo_solution_free(&s);
            instances++;
        }
    CHECK(instances >= 300);
    CHECK_EQ_U64(mismatches, 0);
}

/* Forced heuristic on small n must also reach the brute-force optimum
 * bottleneck (it is a 1 ms search space). */
static void test_heuristic_small_n_vs_brute_force(void) {
    topo_options_t opt;
    topo_options_init(&opt);
    opt.exact_max_n = 0;
#if defined(__SANITIZE_THREAD__)
    opt.time_limit_ms = 50; /* ThreadSanitizer runs the search about ten times slower */
#else
    opt.time_limit_ms = 5;
#endif
    int worse = 0;
    for (int n = 2; n <= 8; n++)
        for (int rep = 0; rep < 12; rep++) {
            double *bw = bw_buf;
            gen(bw, n, rep % GEN_COUNT);
            double bb, bt;
            brute_force(bw, n, &bb, &bt);
            topo_solution_t s;
            CHECK(topo_solve_ex(bw, n, &opt, &s) == 0);
            CHECK(consistent(bw, n, &s));
            CHECK(s.bottleneck_mbps <= bb);
            if (topo_compare_values(s.bottleneck_mbps, s.total_time, bb, bt) != 0) worse++;
            topo_solution_free(&s);
        }
    CHECK_EQ_U64(worse, 0);
}

static void test_known_ring(void) {
    /* Fast one-way ring 0 -> 2 -> 1 -> 3 -> 0 (1000 Mbit/s), everything else 100,
     * except 3 -> 0 which is also reachable at 900: bottleneck 900 via that ring. */
    double bw[16];
    for (int i = 0; i < 16; i++) bw[i] = 100;
    bw[0 * 4 + 2] = 1000;
    bw[2 * 4 + 1] = 1000;
    bw[1 * 4 + 3] = 1000;
    bw[3 * 4 + 0] = 900;
    topo_solution_t s;
    CHECK(topo_solve(bw, 4, TOPO_QUICK_TIME_MS, NULL, &s) == 0);
    CHECK(s.order[0] == 0 && s.order[1] == 2 && s.order[2] == 1 && s.order[3] == 3);
    CHECK(s.bottleneck_mbps == 900);
    CHECK(fabs(s.total_time - (3 / 1000.0 + 1 / 900.0)) < 1e-15);
    CHECK(s.optimal);
    CHECK(topo_ring_bottleneck_edge(bw, 4, s.order) == 3);
    topo_solution_free(&s);
}

static void test_trivial_sizes(void) {
    double one[1] = {NAN};
    topo_solution_t s;
    CHECK(topo_solve(one, 1, 0, NULL, &s) == 0);
    CHECK(s.n == 1 && s.order[0] == 0 && isinf(s.bottleneck_mbps) && s.total_time == 0 && s.optimal);
    topo_solution_free(&s);
    CHECK(s.order == NULL);
    topo_solution_free(&s); /* twice is fine */

    double two[4] = {0, 300, 200, 0};
    CHECK(topo_solve(two, 2, 0, NULL, &s) == 0);
    CHECK(s.order[0] == 0 && s.order[1] == 1 && s.bottleneck_mbps == 200 && s.optimal);
    CHECK(fabs(s.total_time - (1 / 300.0 + 1 / 200.0)) < 1e-15);
    topo_solution_free(&s);
}

static void test_unreachable(void) {
    double bw[36] = {0};
    topo_solution_t s;
    /* all unreachable: every ring ties at bottleneck 0 */
    CHECK(topo_solve(bw, 6, 10, NULL, &s) == 0);
    CHECK(consistent(bw, 6, &s) && s.bottleneck_mbps == 0 && isinf(s.total_time) && s.optimal);
    topo_solution_free(&s);

    /* one hidden ring among unreachable links, exact and heuristic */
    int n = 40, perm[40];
    double *big = bw_buf;
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < n * n; i++) big[i] = rnd() % 10 == 0 ? 50 + 50 * rnd_unit() : 0;
    for (int k = 0; k < n; k++) big[perm[k] * n + perm[(k + 1) % n]] = 100;
    CHECK(topo_solve(big, n, 300, NULL, &s) == 0);
    CHECK(consistent(big, n, &s));
    CHECK(s.bottleneck_mbps > 0);
    topo_solution_free(&s);
    CHECK(topo_solve(big, 10, 0, NULL, &s) == 0); /* leading 10 x 10 block: exact */
    CHECK(consistent(big, 10, &s) && s.optimal);
    topo_solution_free(&s);
}

static void test_bad_input(void) {
    double bw[9] = {0, 1, 2, 3, 0, 4, 5, 6, 0};
    topo_solution_t s;
    CHECK(topo_solve(NULL, 3, 0, NULL, &s) == -PERR_INVALID);
    CHECK(topo_solve(bw, 3, 0, NULL, NULL) == -PERR_INVALID);
    CHECK(topo_solve(bw, 0, 0, NULL, &s) == -PERR_INVALID);
    CHECK(topo_solve(bw, -2, 0, NULL, &s) == -PERR_INVALID);
    CHECK(topo_solve(bw_buf, TOPO_MAX_N + 1, 0, NULL, &s) == -PERR_INVALID);
    CHECK(s.order == NULL);
    bw[5] = -1;
    CHECK(topo_solve(bw, 3, 0, NULL, &s) == -PERR_INVALID);
    CHECK(topo_validate(bw, 3) == -PERR_INVALID);
    bw[5] = NAN;
    CHECK(topo_solve(bw, 3, 0, NULL, &s) == -PERR_INVALID);
    bw[5] = INFINITY;
    CHECK(topo_solve(bw, 3, 0, NULL, &s) == -PERR_INVALID);
    bw[5] = 4;
    bw[4] = NAN; /* diagonal: ignored */
    bw[0] = -5;
    CHECK(topo_validate(bw, 3) == 0);
    CHECK(topo_solve(bw, 3, 0, NULL, &s) == 0);
    CHECK(consistent(bw, 3, &s));
    topo_solution_free(&s);
}

static void test_compare(void) {
    CHECK(topo_compare_values(800, 1.0, 700, 0.5) < 0);
    CHECK(topo_compare_values(700, 0.5, 800, 1.0) > 0);
    CHECK(topo_compare_values(800, 0.5, 800, 1.0) < 0);
    CHECK(topo_compare_values(800, 1.0, 800, 1.0 + 1e-13) == 0);
    CHECK(topo_compare_values(0, INFINITY, 0, INFINITY) == 0);
    CHECK(topo_compare_values(0, INFINITY, 0, 1.0) > 0);
    double bw[9] = {0, 100, 300, 200, 0, 100, 100, 400, 0};
    int a[3] = {0, 1, 2}, b[3] = {0, 2, 1}, c[3] = {1, 2, 0};
    CHECK(topo_compare(bw, 3, a, b) > 0); /* a: 100,100,100  b: 300,400,200 */
    CHECK(topo_compare(bw, 3, b, a) < 0);
    CHECK(topo_compare(bw, 3, a, c) == 0); /* rotation */
}

/* n = 64: never worse than the best of 1,000 random rings. */
static void test_heuristic_beats_random_n64(void) {
    int n = 64;
    for (int kind = 0; kind < GEN_COUNT; kind++) {
        double *bw = bw_buf;
        gen(bw, n, kind);
        double rb, rt;
        best_random(bw, n, 1000, &rb, &rt);
        topo_solution_t s;
        double t0 = now_ms();
        CHECK(topo_solve(bw, n, 100, NULL, &s) == 0);
        double dt = now_ms() - t0;
        CHECK(consistent(bw, n, &s));
        CHECK(s.optimal == 0);
        CHECK(topo_compare_values(s.bottleneck_mbps, s.total_time, rb, rt) <= 0);
        CHECK(dt < 100 + 400); /* budget honoured, with slack for slow CI */
        fprintf(stderr, "  n=64 kind=%d: bottleneck %.1f (bound %.1f%s) time %.6g s/Mbit; best random %.1f %.6g; %.0f ms\n",
                kind, s.bottleneck_mbps, s.bottleneck_bound_mbps, s.bottleneck_optimal ? ", proven" : "",
                s.total_time, rb, rt, dt);
        topo_solution_free(&s);
    }
}

/* n = 12, heuristic forced, 10x the quick budget: the bottleneck must be the exact
 * one on every instance and the total time within 1% of the exact one;
 * most instances should hit the optimum exactly. */
static void test_heuristic_vs_exact_n12(void) {
    int n = 12, hits = 0, total = 0;
    double worst_gap = 0;
    topo_options_t heur;
    topo_options_init(&heur);
    heur.exact_max_n = 0;
    /* 10x the master's budget: the quality bar must not depend on how loaded the test machine is. */
    heur.time_limit_ms = 10 * TOPO_QUICK_TIME_MS;
    for (int rep = 0; rep < 24; rep++) {
        double *bw = bw_buf;
        gen(bw, n, rep % GEN_COUNT);
        topo_solution_t ex, h;
        CHECK(topo_solve(bw, n, 0, NULL, &ex) == 0);
        CHECK(ex.optimal);
        CHECK(topo_solve_ex(bw, n, &heur, &h) == 0);
        CHECK(consistent(bw, n, &h));
        CHECK(topo_compare_values(ex.bottleneck_mbps, ex.total_time, h.bottleneck_mbps, h.total_time) <= 0);
        CHECK(h.bottleneck_mbps == ex.bottleneck_mbps);
        if (isfinite(ex.total_time)) {
            double gap = h.total_time / ex.total_time - 1;
            if (gap > worst_gap) worst_gap = gap;
            CHECK(gap <= 0.01);
        }
        hits += topo_compare_values(ex.bottleneck_mbps, ex.total_time, h.bottleneck_mbps, h.total_time) == 0;
        total++;
        topo_solution_free(&ex);
        topo_solution_free(&h);
    }
    fprintf(stderr, "  n=12 heuristic: %d/%d optimal, worst time gap %.3g%%\n", hits, total, worst_gap * 100);
    CHECK(hits * 10 >= total * 8);
}

/* Exact up to the default limit; reports timings. */
static void test_exact_sizes(void) {
    for (int n = 10; n <= TOPO_EXACT_MAX_N; n += 2) {
        double *bw = bw_buf;
        gen(bw, n, GEN_UNIFORM);
        topo_solution_t s, h;
        double t0 = now_ms();
        CHECK(topo_solve(bw, n, 0, NULL, &s) == 0);
        double dt = now_ms() - t0;
        CHECK(consistent(bw, n, &s) && s.optimal);
        topo_options_t opt;
        topo_options_init(&opt);
        opt.exact_max_n = 0;
        opt.time_limit_ms = 20;
        CHECK(topo_solve_ex(bw, n, &opt, &h) == 0);
        CHECK(topo_compare(bw, n, s.order, h.order) <= 0);
        fprintf(stderr, "  exact n=%d: %.2f ms\n", n, dt);
        topo_solution_free(&s);
        topo_solution_free(&h);
    }
}

static void test_deterministic_without_limit(void) {
    double *bw = bw_buf;
    gen(bw, 50, GEN_TIES);
    topo_solution_t a, b;
    CHECK(topo_solve(bw, 50, 0, NULL, &a) == 0);
    CHECK(topo_solve(bw, 50, 0, NULL, &b) == 0);
    CHECK(memcmp(a.order, b.order, 50 * sizeof(int)) == 0);
    topo_solution_free(&a);
    topo_solution_free(&b);
}

typedef struct {
    atomic_bool *flag;
    int delay_ms;
} canceller_t;

static void *cancel_later(void *arg) {
    canceller_t *c = arg;
    struct timespec ts = {0, c->delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(c->flag, true);
    return NULL;
}

static void test_cancel(void) {
    atomic_bool flag;
    topo_solution_t s;
    double *bw = bw_buf;
    int n = 64;
    gen(bw, n, GEN_UNIFORM);

    /* already set: returns at once with a valid ring */
    atomic_init(&flag, true);
    double t0 = now_ms();
    CHECK(topo_solve(bw, n, 60000, &flag, &s) == 0);
    CHECK(now_ms() - t0 < 1000);
    CHECK(consistent(bw, n, &s));
    topo_solution_free(&s);

    /* exact path too (n = 16): valid ring, not claimed optimal */
    gen(bw, 16, GEN_UNIFORM);
    CHECK(topo_solve(bw, 16, 60000, &flag, &s) == 0);
    CHECK(consistent(bw, 16, &s));
    CHECK(s.optimal == 0);
    topo_solution_free(&s);

    /* set by another thread while a 60 s "moonshot" runs */
    gen(bw, n, GEN_CLUSTERED);
    atomic_store(&flag, false);
    canceller_t c = {&flag, 50};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, cancel_later, &c) == 0);
    t0 = now_ms();
    CHECK(topo_solve(bw, n, 60000, &flag, &s) == 0);
    double dt = now_ms() - t0;
    pthread_join(th, NULL);
    CHECK(dt >= 40 && dt < 2000);
    CHECK(consistent(bw, n, &s));
    topo_solution_free(&s);
}

/* The exact limit is an option: n = 17 is heuristic by default, exact when asked. */
static void test_exact_limit_option(void) {
    double *bw = bw_buf;
    gen(bw, 17, GEN_TIES);
    topo_options_t opt;
    topo_options_init(&opt);
    topo_solution_t def, ex;
    opt.time_limit_ms = 20;
    CHECK(topo_solve_ex(bw, 17, &opt, &def) == 0);
    CHECK(def.optimal == 0);
    opt.exact_max_n = 18;
    opt.time_limit_ms = 0;
    CHECK(topo_solve_ex(bw, 17, &opt, &ex) == 0);
    CHECK(ex.optimal == 1 && consistent(bw, 17, &ex));
    CHECK(topo_compare(bw, 17, ex.order, def.order) <= 0);
    opt.exact_max_n = 1000; /* clamped to TOPO_EXACT_HARD_MAX_N, not an error */
    topo_solution_free(&ex);
    CHECK(topo_solve_ex(bw, 17, &opt, &ex) == 0 && ex.optimal == 1);
    topo_solution_free(&def);
    topo_solution_free(&ex);
}

typedef struct {
    const double *bw;
    int n;
    topo_solution_t out;
    int rc;
} solve_job_t;

static void *solve_job(void *arg) {
    solve_job_t *j = arg;
    j->rc = topo_solve(j->bw, j->n, 0, NULL, &j->out);
    return NULL;
}

/* Concurrent calls do not interfere (no shared state): each thread gets
 * the same deterministic answer as a serial call. */
static void test_concurrent_calls(void) {
    static double bw[40 * 40];
    int n = 40;
    gen(bw, n, GEN_CLUSTERED);
    topo_solution_t ref;
    CHECK(topo_solve(bw, n, 0, NULL, &ref) == 0);
    solve_job_t jobs[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (solve_job_t){bw, n, {0}, -1};
        CHECK(pthread_create(&th[k], NULL, solve_job, &jobs[k]) == 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        CHECK(jobs[k].rc == 0);
        CHECK(memcmp(jobs[k].out.order, ref.order, (size_t)n * sizeof(int)) == 0);
        topo_solution_free(&jobs[k].out);
    }
    topo_solution_free(&ref);
}

/* Larger n: stays valid and within budget. */
static void test_large_n(void) {
    int n = 300;
    static double big[300 * 300];
    gen(big, n, GEN_CLUSTERED);
    double rb, rt;
    best_random(big, n, 1000, &rb, &rt);
    topo_solution_t s;
    double t0 = now_ms();
    CHECK(topo_solve(big, n, 200, NULL, &s) == 0);
    double dt = now_ms() - t0;
    CHECK(consistent(big, n, &s));
    CHECK(topo_compare_values(s.bottleneck_mbps, s.total_time, rb, rt) <= 0);
    CHECK(dt < 200 + 800);
    fprintf(stderr, "  n=300: bottleneck %.1f (bound %.1f) in %.0f ms\n", s.bottleneck_mbps, s.bottleneck_bound_mbps, dt);
    topo_solution_free(&s);
}

int main(void) {
    RUN_TEST(test_compare);
    RUN_TEST(test_trivial_sizes);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_known_ring);
    RUN_TEST(test_exact_matches_brute_force);
    RUN_TEST(test_heuristic_small_n_vs_brute_force);
    RUN_TEST(test_unreachable);
    RUN_TEST(test_exact_sizes);
    RUN_TEST(test_heuristic_vs_exact_n12);
    RUN_TEST(test_heuristic_beats_random_n64);
    RUN_TEST(test_deterministic_without_limit);
    RUN_TEST(test_cancel);
    RUN_TEST(test_exact_limit_option);
    RUN_TEST(test_concurrent_calls);
    RUN_TEST(test_large_n);
    TEST_MAIN_END();
}
