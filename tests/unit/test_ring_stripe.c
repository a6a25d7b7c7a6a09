/* test_ring_stripe.c - one all-reduce striped over k socket pairs per ring edge (ring_stripe.c):
 * the results have exactly the bits of one ring (rounding-sensitive floats, and quantized blocks),
 * including counts too small for every stripe to get elements; the in-place backup holds the whole
 * input; and a stripe whose link breaks mid-op fails every stripe of every rank well before the
 * progress timeout, with every rank's buffer back to its input. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/net.h"
#include "pccl_compress.h"
#include "pccl_quant.h"
#include "ring/ring.h"
#include "tinytest.h"

enum { N = 3, MAXK = 8 };
static pcclDataType_t g_qdt = pcclUint8; /* the codes of the quantized runs */

typedef struct rank_run {
    ring_io_t io[MAXK];
    uint32_t k, rank;
    float *buf, *input;
    size_t count;
    pcclQuantizationAlgorithm_t algo;
    uint8_t *wire;
    int rc;
} rank_run_t;

static void *rank_main(void *p) {
    rank_run_t *r = p;
    r->rc = ring_allreduce_striped(r->io, r->k, NULL, r->buf, r->count, pcclFloat, pcclSum, r->algo, g_qdt,
                                   r->wire, r->rank, N, 7);
    return NULL;
}

static void nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* Values whose sums round: a different reduction order would change bits. */
static float value(uint32_t rank, size_t i) {
    uint64_t s = (i + 1) * 0x9E3779B97F4A7C15ull ^ (rank + 1) * 0xBF58476D1CE4E5B9ull;
    s ^= s >> 31;
    return (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % 977);
}

typedef struct ring_runs {
    rank_run_t r[N];
    int links[MAXK][N][2]; /* stripe s: rank i sends on links[s][i][0], rank i+1 receives on [1] */
    pthread_t t[N];
    int efd;
} ring_runs_t;

static void start(ring_runs_t *x, uint32_t k, size_t count, pcclQuantizationAlgorithm_t algo) {
    x->efd = eventfd(0, EFD_NONBLOCK);
    for (uint32_t s = 0; s < k; s++)
        for (int i = 0; i < N; i++) {
            CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, x->links[s][i]) == 0);
            nonblock(x->links[s][i][0]);
            nonblock(x->links[s][i][1]);
        }
    for (uint32_t q = 0; q < N; q++) {
        rank_run_t *r = &x->r[q];
        *r = (rank_run_t){.k = k, .rank = q, .count = count, .algo = algo};
        r->buf = malloc(count * sizeof(float));
        r->input = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++) r->buf[i] = r->input[i] = value(q, i);
        uint8_t *backup = algo == pcclQuantNone ? malloc(count * sizeof(float)) : NULL;
        if (algo != pcclQuantNone) r->wire = malloc(ring_quant_wire_bytes(count, g_qdt, N));
        for (uint32_t s = 0; s < k; s++)
            r->io[s] = (ring_io_t){.tx_fd = x->links[s][q][0], .rx_fd = x->links[s][(q + N - 1) % N][1],
                                   .abort_fd = x->efd, .timeout_ms = 10000, .staging = malloc(4096),
                                   .staging_size = 4096, .backup = backup};
        pthread_create(&x->t[q], NULL, rank_main, r);
    }
}

static void finish(ring_runs_t *x) {
    for (int q = 0; q < N; q++) pthread_join(x->t[q], NULL);
}

static void release(ring_runs_t *x) {
    for (int q = 0; q < N; q++) {
        rank_run_t *r = &x->r[q];
        free(r->io[0].backup);
        for (uint32_t s = 0; s < r->k; s++) free(r->io[s].staging);
        free(r->buf);
        free(r->input);
        free(r->wire);
    }
    for (uint32_t s = 0; s < x->r[0].k; s++)
        for (int i = 0; i < N; i++) close(x->links[s][i][0]), close(x->links[s][i][1]);
    close(x->efd);
}

/* Rank 0's result with k stripes; every rank must have the same bits, and in place the backup the
 * stripes took must hold each rank's whole input. */
static float *reduce(uint32_t k, size_t count, pcclQuantizationAlgorithm_t algo) {
    ring_runs_t x;
    start(&x, k, count, algo);
    finish(&x);
    for (int q = 0; q < N; q++) {
        CHECK(x.r[q].rc == 0);
        CHECK(memcmp(x.r[q].buf, x.r[0].buf, count * sizeof(float)) == 0);
        if (algo == pcclQuantNone) CHECK(memcmp(x.r[q].io[0].backup, x.r[q].input, count * sizeof(float)) == 0);
    }
    float *out = malloc(count * sizeof(float));
    memcpy(out, x.r[0].buf, count * sizeof(float));
    release(&x);
    return out;
}

static void same_bits_as_one_ring(size_t count, pcclQuantizationAlgorithm_t algo) {
    float *one = reduce(1, count, algo);
    for (uint32_t k = 2; k <= MAXK; k += 3) {
        float *striped = reduce(k, count, algo);
        CHECK(memcmp(one, striped, count * sizeof(float)) == 0);
        free(striped);
    }
    free(one);
}

static void test_plain_bits(void) { same_bits_as_one_ring(100003, pcclQuantNone); }
static void test_plain_tiny(void) { same_bits_as_one_ring(5, pcclQuantNone); } /* most stripes move nothing */
/* 3 x 5 blocks per chunk: stripes of whole blocks, the last one partial. */
static void test_quant_bits(void) { same_bits_as_one_ring(3 * 5 * PCCL_QBLOCK_ELEMS - 77, pcclQuantMinMax); }
/* 4- and 2-bit blocks (groups of 128 inside): the same stripes of whole blocks. */
static void test_quant_low_bits(void) {
    const pcclDataType_t lows[] = {pcclExtUint4, pcclExtUint2};
    for (int i = 0; i < 2; i++) {
        g_qdt = lows[i];
        same_bits_as_one_ring(3 * 5 * PCCL_QBLOCK_ELEMS - 77, pcclQuantZeroPointScale);
    }
    g_qdt = pcclUint8;
}

/* One stripe's link is broken (rank 1 to rank 2, stripe 2) while the other stripes run: every
 * rank fails fast and is back to its input, whatever its stripes had reduced. */
static void test_broken_stripe_restores(void) {
    const size_t count = 1u << 20;
    ring_runs_t x;
    uint64_t t0 = net_now_ms();
    start(&x, 4, count, pcclQuantNone);
    shutdown(x.links[2][1][0], SHUT_RDWR);
    finish(&x);
    CHECK(net_now_ms() - t0 < 5000); /* the progress timeout is 10 s */
    for (int q = 0; q < N; q++) {
        CHECK(x.r[q].rc != 0);
        CHECK(memcmp(x.r[q].buf, x.r[q].input, count * sizeof(float)) == 0);
    }
    release(&x);
}

int main(void) {
    RUN_TEST(test_plain_bits);
    RUN_TEST(test_plain_tiny);
    RUN_TEST(test_quant_bits);
    RUN_TEST(test_quant_low_bits);
    RUN_TEST(test_broken_stripe_restores);
    TEST_MAIN_END();
}
