/*
 * test_mlp.c - the fashion-mnist workload's model and optimizers:
 * gradient check against a double-precision reference, init determinism,
 * AdamW / outer Nesterov steps against hand-computed values, the sampler, and
 * a short real training run when the dataset is installed.
 *
 * The workload sources live in the pccl binary, not in libpccl, so they are
 * compiled into this test directly.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tinytest.h"

#include "../../cli/workload/mlp.c"
#include "../../cli/workload/mnist.c"
#include "../../cli/workload/optim.c"
#include "../../cli/workload/sampler.c"

/* Test-local PRNG (independent of the code under test). */
static uint64_t t_rng = 0x1234567887654321ull;
static uint64_t t_next(void) {
    t_rng ^= t_rng << 13;
    t_rng ^= t_rng >> 7;
    t_rng ^= t_rng << 17;
    return t_rng;
}
static double t_unif(void) { return (double)(t_next() >> 11) * (1.0 / 9007199254740992.0); }

/* Straightforward double-precision forward pass: the oracle for mlp_loss_grad. */
static double ref_loss(const double *p, const float *x, const uint8_t *y, size_t nb) {
    double total = 0.0;
    for (size_t b = 0; b < nb; b++) {
        double h[MLP_HIDDEN], o[MLP_OUT];
        for (int j = 0; j < MLP_HIDDEN; j++) {
            double z = p[MLP_B1_OFF + j];
            for (int k = 0; k < MLP_IN; k++) z += p[MLP_W1_OFF + j * MLP_IN + k] * (double)x[b * MLP_IN + k];
            h[j] = z > 0.0 ? z : 0.0;
        }
        double m = -INFINITY;
        for (int c = 0; c < MLP_OUT; c++) {
            double z = p[MLP_B2_OFF + c];
            for (int j = 0; j < MLP_HIDDEN; j++) z += p[MLP_W2_OFF + c * MLP_HIDDEN + j] * h[j];
            o[c] = z;
            if (z > m) m = z;
        }
        double s = 0.0;
        for (int c = 0; c < MLP_OUT; c++) s += exp(o[c] - m);
        total += m + log(s) - o[y[b]];
    }
    return total / (double)nb;
}

/* A tiny synthetic batch: half the pixels zero like real images, the rest in (0,1]. */
#define GC_BATCH 5 /* not a multiple of 4: exercises the padded forward block */
static float gc_x[GC_BATCH * MLP_IN];
static uint8_t gc_y[GC_BATCH];

static void make_batch(void) {
    for (size_t i = 0; i < GC_BATCH * MLP_IN; i++) gc_x[i] = t_unif() < 0.5 ? 0.0f : (float)t_unif();
    for (int b = 0; b < GC_BATCH; b++) gc_y[b] = (uint8_t)(t_next() % MLP_OUT);
}

/* Checks n sampled entries of one tensor [off, off+len) against central differences. */
static void grad_check_range(const char *name, double *pd, const float *grad, size_t off, size_t len, int n) {
    const double h = 1e-5;
    int sizable = 0, bad = 0;
    double worst = 0.0;
    for (int s = 0; s < n; s++) {
        size_t i = off + (size_t)(t_next() % len);
        const double save = pd[i];
        pd[i] = save + h;
        const double lp = ref_loss(pd, gc_x, gc_y, GC_BATCH);
        pd[i] = save - h;
        const double lm = ref_loss(pd, gc_x, gc_y, GC_BATCH);
        pd[i] = save;
        const double num = (lp - lm) / (2.0 * h);
        const double err = fabs((double)grad[i] - num);
        /* float32 forward/backward vs a double oracle: errors are ~1e-7 here;
         * a wrong index or a missing term is off by the gradient itself. */
        const double tol = 1e-6 + 1e-4 * fabs(num);
        if (err > worst) worst = err;
        if (err > tol) {
            bad++;
            fprintf(stderr, "  %s[%zu]: analytic %.8g numeric %.8g\n", name, i - off, (double)grad[i], num);
        }
        if (fabs(num) > 1e-4) sizable++;
    }
    fprintf(stderr, "  %s: %d samples, %d with |grad|>1e-4, max abs err %.3g\n", name, n, sizable, worst);
    CHECK(bad == 0);
    CHECK(sizable >= n / 4); /* the check must not pass on all-zero gradients */
}

static void test_grad_check(void) {
    make_batch();
    float *p = malloc(sizeof(float) * MLP_NPARAMS), *g = malloc(sizeof(float) * MLP_NPARAMS);
    double *pd = malloc(sizeof(double) * MLP_NPARAMS);
    mlp_init(p, 7);
    /* Nonzero biases so their paths are exercised (init sets them to 0). */
    for (int j = 0; j < MLP_HIDDEN; j++) p[MLP_B1_OFF + j] = (float)(0.2 * (t_unif() - 0.5));
    for (int c = 0; c < MLP_OUT; c++) p[MLP_B2_OFF + c] = (float)(0.2 * (t_unif() - 0.5));
    for (size_t i = 0; i < MLP_NPARAMS; i++) pd[i] = p[i];
    mlp_scratch_t *s = mlp_scratch_new(GC_BATCH);
    CHECK(s != NULL);
    const float loss = mlp_loss_grad(p, gc_x, gc_y, NULL, GC_BATCH, g, s);
    const double ref = ref_loss(pd, gc_x, gc_y, GC_BATCH);
    fprintf(stderr, "  loss %.7f, double reference %.7f\n", (double)loss, ref);
    CHECK(fabs((double)loss - ref) < 1e-5 * (1.0 + fabs(ref)));
    grad_check_range("W1", pd, g, MLP_W1_OFF, (size_t)MLP_HIDDEN * MLP_IN, 60);
    grad_check_range("b1", pd, g, MLP_B1_OFF, MLP_HIDDEN, 24);
    grad_check_range("W2", pd, g, MLP_W2_OFF, (size_t)MLP_OUT * MLP_HIDDEN, 40);
    grad_check_range("b2", pd, g, MLP_B2_OFF, MLP_OUT, 10);
    /* The forward-only entry point computes the same loss, bit for bit. */
    CHECK(mlp_loss(p, gc_x, gc_y, NULL, GC_BATCH, s) == loss);
    mlp_scratch_free(s);
    free(p);
    free(g);
    free(pd);
}

/* Index gathering and chunking (batch > scratch size) give the same answer. */
static void test_batch_paths(void) {
    make_batch();
    float *p = malloc(sizeof(float) * MLP_NPARAMS);
    float *g1 = malloc(sizeof(float) * MLP_NPARAMS), *g2 = malloc(sizeof(float) * MLP_NPARAMS);
    float *g3 = malloc(sizeof(float) * MLP_NPARAMS);
    mlp_init(p, 11);
    /* Reversed order through idx vs. a reversed copy of the rows. */
    float xr[GC_BATCH * MLP_IN];
    uint8_t yr[GC_BATCH];
    uint32_t idx[GC_BATCH];
    for (int b = 0; b < GC_BATCH; b++) {
        idx[b] = (uint32_t)(GC_BATCH - 1 - b);
        memcpy(xr + b * MLP_IN, gc_x + idx[b] * MLP_IN, sizeof(float) * MLP_IN);
        yr[b] = gc_y[idx[b]];
    }
    mlp_scratch_t *big = mlp_scratch_new(64), *small = mlp_scratch_new(2);
    const float l1 = mlp_loss_grad(p, gc_x, gc_y, idx, GC_BATCH, g1, big);
    const float l2 = mlp_loss_grad(p, xr, yr, NULL, GC_BATCH, g2, big);
    CHECK(l1 == l2);
    CHECK(memcmp(g1, g2, sizeof(float) * MLP_NPARAMS) == 0);
    /* Chunks of 4 (2 rounded up to the block size) sum partial gradients in a
     * different order: equal up to float rounding. */
    const float l3 = mlp_loss_grad(p, xr, yr, NULL, GC_BATCH, g3, small);
    CHECK(fabsf(l3 - l2) < 1e-5f);
    double maxd = 0.0;
    for (size_t i = 0; i < MLP_NPARAMS; i++) {
        const double d = fabs((double)g3[i] - (double)g2[i]);
        if (d > maxd) maxd = d;
    }
    CHECK(maxd < 1e-6);
    CHECK(isnan(mlp_loss_grad(p, gc_x, gc_y, NULL, 0, g1, big)));
    mlp_scratch_free(big);
    mlp_scratch_free(small);
    free(p);
    free(g1);
    free(g2);
    free(g3);
}

/* FNV-1a over the float bit patterns, byte order fixed (endian-independent). */
static uint64_t params_hash(const float *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        for (int k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

static void test_init(void) {
    float *a = malloc(sizeof(float) * MLP_NPARAMS), *b = malloc(sizeof(float) * MLP_NPARAMS);
    mlp_init(a, 42);
    mlp_init(b, 42);
    CHECK(memcmp(a, b, sizeof(float) * MLP_NPARAMS) == 0);
    /* Golden value: the same seed must give the same bits on every machine. */
    const uint64_t h = params_hash(a, MLP_NPARAMS);
    fprintf(stderr, "  seed 42 params hash %016llx\n", (unsigned long long)h);
    CHECK_EQ_U64(h, 0x81a7168c44223c8full);
    mlp_init(b, 43);
    CHECK(memcmp(a, b, sizeof(float) * MLP_NPARAMS) != 0);
    const float lim1 = sqrtf(6.0f / 784.0f), lim2 = sqrtf(6.0f / 138.0f);
    int in_range = 1;
    double sum = 0.0, sq = 0.0;
    for (size_t i = 0; i < (size_t)MLP_HIDDEN * MLP_IN; i++) {
        in_range &= fabsf(a[MLP_W1_OFF + i]) <= lim1;
        sum += a[MLP_W1_OFF + i];
        sq += (double)a[MLP_W1_OFF + i] * a[MLP_W1_OFF + i];
    }
    for (size_t i = 0; i < (size_t)MLP_OUT * MLP_HIDDEN; i++) in_range &= fabsf(a[MLP_W2_OFF + i]) <= lim2;
    CHECK(in_range);
    const double n1 = (double)MLP_HIDDEN * MLP_IN;
    const double std1 = sqrt(sq / n1 - (sum / n1) * (sum / n1));
    CHECK(fabs(sum / n1) < 0.01 * lim1);
    CHECK(fabs(std1 - lim1 / sqrt(3.0)) < 0.01 * lim1); /* uniform(-l,l) has std l/sqrt(3) */
    int zero_bias = 1;
    for (int j = 0; j < MLP_HIDDEN; j++) zero_bias &= a[MLP_B1_OFF + j] == 0.0f;
    for (int c = 0; c < MLP_OUT; c++) zero_bias &= a[MLP_B2_OFF + c] == 0.0f;
    CHECK(zero_bias);
    free(a);
    free(b);
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_adamw(void) {
    /* 7 elements: the 4-wide path plus a scalar tail; element i uses case i % 3. */
    const float p0[3] = {1.0f, -2.0f, 0.5f}, g1[3] = {0.1f, -0.2f, 0.0f}, g2[3] = {-0.3f, 0.05f, 0.4f};
    float p[7], g[7];
    adamw_state_t st;
    CHECK(adamw_init(&st, 7) == 0);
    adamw_config_t cfg = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    for (int i = 0; i < 7; i++) {
        p[i] = p0[i % 3];
        g[i] = g1[i % 3];
    }
    adamw_step(&st, &cfg, p, g);
    /* Step 1 by hand: m_hat = g and v_hat = g^2, so the update is lr*sign(g)
     * (0 for g = 0), after decay by 1 - lr*wd = 0.999. */
    const double want1[3] = {1.0 * 0.999 - 0.1, -2.0 * 0.999 + 0.1, 0.5 * 0.999};
    for (int i = 0; i < 7; i++) CHECK(near(p[i], want1[i % 3], 1e-6));
    CHECK_EQ_U64(st.step, 1);
    /* Step 2 against the formulas in double. */
    for (int i = 0; i < 7; i++) g[i] = g2[i % 3];
    adamw_step(&st, &cfg, p, g);
    for (int i = 0; i < 3; i++) {
        const double m1 = 0.1 * g1[i], v1 = 0.001 * g1[i] * g1[i];
        const double m2 = 0.9 * m1 + 0.1 * g2[i], v2 = 0.999 * v1 + 0.001 * g2[i] * g2[i];
        const double mh = m2 / (1.0 - 0.81), vh = v2 / (1.0 - 0.999 * 0.999);
        const double want = want1[i] * 0.999 - 0.1 * mh / (sqrt(vh) + 1e-8);
        CHECK(near(p[i], want, 2e-6));
        CHECK(p[i + 3] == p[i]); /* vector lane and scalar tail agree exactly */
    }
    CHECK(p[6] == p[0]);
    adamw_reset(&st);
    CHECK(st.step == 0 && st.m[3] == 0.0f && st.v[6] == 0.0f);
    adamw_free(&st);

    float q[2] = {1.0f, -1.0f};
    const float gq[2] = {0.5f, 0.25f};
    sgd_step(q, gq, 2, 0.1f, 0.0f);
    CHECK(near(q[0], 0.95, 1e-7) && near(q[1], -1.025, 1e-7));
    sgd_step(q, gq, 2, 0.1f, 0.1f); /* q -= 0.1 * (g + 0.1 q) */
    CHECK(near(q[0], 0.95 - 0.1 * (0.5 + 0.095), 1e-6));
}

/* The outer step, replayed one correctly rounded float operation at a time:
 * volatile forces each intermediate to be stored as a float (no fusion). */
static float outer_ref(float *p, float g, float *mom, float lr, float mu) {
    volatile float buf = mu * *mom;
    buf = buf + g;
    *mom = buf;
    volatile float upd = mu * buf;
    upd = g + upd;
    volatile float delta = lr * upd;
    volatile float np = *p - delta;
    *p = np;
    return np;
}

static void test_outer_nesterov(void) {
    float p[2] = {1.0f, 2.0f}, mom[2] = {0.0f, 0.2f};
    const float pg[2] = {0.5f, -1.0f};
    outer_nesterov_step(p, pg, mom, 2, 0.7f, 0.9f);
    /* By hand: buf = 0.9*0 + 0.5 = 0.5; p = 1 - 0.7*(0.5 + 0.9*0.5) = 0.335.
     *          buf = 0.9*0.2 - 1 = -0.82; p = 2 - 0.7*(-1 + 0.9*-0.82) = 3.2166. */
    CHECK(near(mom[0], 0.5, 1e-7) && near(mom[1], -0.82, 1e-6));
    CHECK(near(p[0], 0.335, 1e-6) && near(p[1], 3.2166, 1e-6));

    /* Bit-exact against the operation-by-operation replay, over many random
     * elements and three consecutive rounds (momentum carried over). */
    enum { N = 1003 };
    static float a[N], ma[N], b[N], mb[N], gg[N];
    for (int i = 0; i < N; i++) {
        a[i] = b[i] = (float)(t_unif() * 2 - 1);
        ma[i] = mb[i] = 0.0f;
    }
    int exact = 1;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) gg[i] = (float)((t_unif() * 2 - 1) * 1e-2);
        outer_nesterov_step(a, gg, ma, N, 0.7f, 0.9f);
        for (int i = 0; i < N; i++) {
            outer_ref(&b[i], gg[i], &mb[i], 0.7f, 0.9f);
            exact &= memcmp(&a[i], &b[i], 4) == 0 && memcmp(&ma[i], &mb[i], 4) == 0;
        }
    }
    CHECK(exact);

    /* lr 1, mu 0 is plain averaging: the new params are exactly outer - g. */
    float outer[3] = {0.25f, -1.5f, 3.0f}, inner[3] = {0.125f, -1.0f, 2.0f}, d[3], m0[3] = {0};
    outer_pseudo_grad(outer, inner, d, 3);
    CHECK(d[0] == 0.125f && d[1] == -0.5f && d[2] == 1.0f);
    outer_nesterov_step(outer, d, m0, 3, 1.0f, 0.0f);
    CHECK(memcmp(outer, inner, sizeof outer) == 0);
}

static void test_sampler(void) {
    enum { N = 103, W = 4 };
    int seen[N] = {0};
    for (uint32_t r = 0; r < W; r++) {
        mnist_sampler_t s, s2;
        CHECK(mnist_sampler_init(&s, N, r, W, 99) == 0);
        CHECK(mnist_sampler_init(&s2, N, r, W, 99) == 0);
        uint32_t idx[N], idx2[N];
        const size_t cnt = s.count;
        CHECK(cnt == (N - r + W - 1) / W);
        /* One epoch covers the shard exactly once. */
        mnist_sampler_next(&s, idx, cnt);
        mnist_sampler_next(&s2, idx2, cnt);
        CHECK(memcmp(idx, idx2, sizeof(uint32_t) * cnt) == 0);
        for (size_t i = 0; i < cnt; i++) {
            CHECK(idx[i] < N && idx[i] % W == r);
            seen[idx[i]]++;
        }
        /* The next epoch is a different order of the same shard. */
        uint32_t next[N];
        mnist_sampler_next(&s, next, cnt);
        CHECK(memcmp(idx, next, sizeof(uint32_t) * cnt) != 0);
        CHECK(s.epoch == 1);
        mnist_sampler_free(&s);
        mnist_sampler_free(&s2);
    }
    int once = 1;
    for (int i = 0; i < N; i++) once &= seen[i] == 1;
    CHECK(once); /* shards are disjoint and together cover the set */
    mnist_sampler_t bad;
    CHECK(mnist_sampler_init(&bad, 10, 4, 4, 1) == -1);
    CHECK(mnist_sampler_init(&bad, 10, 0, 0, 1) == -1);
}

static double t_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_train_fashion_mnist(void) {
    struct stat sb;
    if (stat(MNIST_DEFAULT_DIR, &sb) != 0) {
        fprintf(stderr, "  SKIP: dataset not installed (%s)\n", MNIST_DEFAULT_DIR);
        return;
    }
    mnist_set_t train, test;
    char err[512];
    if (mnist_load(MNIST_DEFAULT_DIR, "train", &train, err, sizeof err) != 0 ||
        mnist_load(MNIST_DEFAULT_DIR, "t10k", &test, err, sizeof err) != 0) {
        fprintf(stderr, "  %s\n", err);
        CHECK(0);
        return;
    }
    enum { STEPS = 300, BATCH = 64 };
    float *p = malloc(sizeof(float) * MLP_NPARAMS), *g = malloc(sizeof(float) * MLP_NPARAMS);
    mlp_init(p, 1);
    mlp_scratch_t *s = mlp_scratch_new(BATCH);
    adamw_state_t st;
    CHECK(adamw_init(&st, MLP_NPARAMS) == 0);
    const adamw_config_t cfg = adamw_defaults(2e-3f);
    mnist_sampler_t smp;
    CHECK(mnist_sampler_init(&smp, train.n, 0, 1, 1) == 0);
    uint32_t idx[BATCH];
    float acc0 = 0, loss0 = 0, acc = 0, loss = 0, first = 0, last = 0;
    CHECK(mlp_evaluate(p, &test, s, &acc0, &loss0) == 0);
    const double t0 = t_now();
    for (int it = 0; it < STEPS; it++) {
        mnist_sampler_next(&smp, idx, BATCH);
        const float l = mlp_loss_grad(p, train.images, train.labels, idx, BATCH, g, s);
        if (it == 0) first = l;
        last = l;
        adamw_step(&st, &cfg, p, g);
    }
    const double dt = t_now() - t0;
    CHECK(mlp_evaluate(p, &test, NULL, &acc, &loss) == 0);
    fprintf(stderr, "  %d AdamW steps (batch %d): %.2f s, train loss %.3f -> %.3f, test acc %.4f -> %.4f (loss %.3f)\n",
            STEPS, BATCH, dt, (double)first, (double)last, (double)acc0, (double)acc, (double)loss);
    CHECK(acc >= 0.70f);
    CHECK(loss < loss0);
    mnist_sampler_free(&smp);
    adamw_free(&st);
    mlp_scratch_free(s);
    free(p);
    free(g);
    mnist_free(&train);
    mnist_free(&test);
}

int main(void) {
    RUN_TEST(test_grad_check);
    RUN_TEST(test_batch_paths);
    RUN_TEST(test_init);
    RUN_TEST(test_adamw);
    RUN_TEST(test_outer_nesterov);
    RUN_TEST(test_sampler);
    RUN_TEST(test_train_fashion_mnist);
    TEST_MAIN_END();
}
