/* test_ring_coll.c - the ring all-gather(v), reduce-scatter and broadcast (ring_gather.c, ring_rs.c,
 * ring_rs_quant.c, ring_bcast.c) with 2 to 5 members on threads over socket pairs, against references
 * computed here: every dtype's blocks placed by rank (rank_of not the identity), variable counts with zero
 * counts, in place and out of place; reduce-scatter with every reduce op in the ring's fixed order, uneven
 * blocks and count < world; 2 and 3 stripes bit-identical to one; quantized reduce-scatter within the
 * quantization error and identical across stripe counts; broadcast from one or several holders, zero bytes. */
#include <math.h>
#include <stdio.h>

#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring_coll_harness.h"

static uint8_t byte_of(uint32_t rank, size_t j) { return (uint8_t)(rank * 131u + j * 7u + 3u + (j >> 8)); }

/* All-gather of counts[r] elements of esz bytes per rank, K stripes; in_place 1: src is the first counts[me]
 * elements of buf (3: the same, passed as NULL), 2: src is the block's own place in buf, 0: a separate buffer. Every member's buf must be the
 * blocks in rank order. */
static void allgather_case(uint32_t W, uint32_t K, const uint64_t *counts, size_t esz, int in_place, int permuted) {
    net_t n;
    net_open(&n, W, K, 0);
    uint32_t rank_of[MAXW];
    if (permuted) perm_of(rank_of, W);
    uint64_t total = 0, at[MAXW];
    for (uint32_t r = 0; r < W; r++) at[r] = total, total += counts[r];
    uint8_t *want = malloc(total * esz + 1), *bufs[MAXW], *srcs[MAXW] = {0};
    for (uint32_t r = 0; r < W; r++)
        for (size_t j = 0; j < counts[r] * esz; j++) want[at[r] * esz + j] = byte_of(r, j);
    member_t m[MAXW];
    for (uint32_t p = 0; p < W; p++) {
        uint32_t r = permuted ? rank_of[p] : p;
        member_init(&m[p], &n, KIND_AG, p, 4096);
        m[p].rank_of = permuted ? rank_of : NULL;
        m[p].counts = counts;
        m[p].esz = esz;
        bufs[p] = malloc(total * esz + 1);
        memset(bufs[p], 0xEE, total * esz + 1);
        uint8_t *src = in_place == 1 || in_place == 3 ? bufs[p]
                       : in_place == 2                ? bufs[p] + at[r] * esz
                                                      : (srcs[p] = malloc(counts[r] * esz + 1));
        for (size_t j = 0; j < counts[r] * esz; j++) src[j] = byte_of(r, j);
        m[p].src = in_place == 3 ? NULL : src;
        m[p].buf = bufs[p];
    }
    run_members(m, W);
    for (uint32_t p = 0; p < W; p++) {
        CHECK(m[p].rc == 0);
        CHECK(memcmp(bufs[p], want, total * esz) == 0);
        CHECK(bufs[p][total * esz] == 0xEE); /* nothing written past the blocks */
        if (srcs[p]) {
            uint32_t r = permuted ? rank_of[p] : p;
            for (size_t j = 0; j < counts[r] * esz; j++) CHECK(srcs[p][j] == byte_of(r, j));
        }
        uint64_t moved = 0; /* every block but its own arrives once */
        for (uint32_t r = 0; r < W; r++) moved += counts[r] * esz;
        CHECK(m[p].io[0].rx_bytes == moved - counts[permuted ? rank_of[p] : p] * esz);
        member_free(&m[p]);
        free(bufs[p]);
        free(srcs[p]);
    }
    free(want);
    net_close(&n);
}

static void test_allgather_every_dtype(void) {
    for (uint32_t W = 2; W <= MAXW; W++)
        for (int dt = pcclUint8; dt <= pcclDouble; dt++) {
            uint64_t counts[MAXW];
            for (uint32_t r = 0; r < W; r++) counts[r] = 1001;
            allgather_case(W, 1, counts, pccl_dtype_size((pcclDataType_t)dt), 0, dt % 2);
        }
}

static void test_allgather_v(void) {
    for (uint32_t W = 2; W <= MAXW; W++)
        for (uint32_t K = 1; K <= MAXK; K++)
            for (int in_place = 0; in_place <= 3; in_place++) {
                uint64_t counts[MAXW];
                for (uint32_t r = 0; r < W; r++) counts[r] = (r + W) % 3 == 0 ? 0 : 20000 + 37 * r;
                allgather_case(W, K, counts, 4, in_place, 1);
                for (uint32_t r = 0; r < W; r++) counts[r] = r % 2; /* fewer elements than stripes */
                allgather_case(W, K, counts, 8, in_place, 1);
                for (uint32_t r = 0; r < W; r++) counts[r] = 0; /* the headers only */
                allgather_case(W, K, counts, 2, in_place, 0);
            }
    /* Out of place the own block reaches its place behind its send in steps (RING_COPY_STEP): blocks of
     * several steps, one stripe and two, an odd length. */
    uint64_t big[MAXW] = {(3u << 18) + 7, (1u << 18) + 3, (5u << 17) + 1};
    allgather_case(2, 1, big, 4, 0, 0);
    allgather_case(3, 2, big, 4, 0, 1);
}

/* Input element i of ring position p: rounding-sensitive for the floats (a different order changes bits). */
static double value_of(pcclDataType_t dt, pcclRedOp_t op, uint32_t p, size_t i) {
    uint64_t s = (i + 1) * 0x9E3779B97F4A7C15ull ^ (p + 1) * 0xBF58476D1CE4E5B9ull;
    s ^= s >> 31;
    if (dt == pcclInt32 || op == pcclAvg || op == pcclProd) return (double)(s % 7) - 3.0; /* exact */
    return ((double)(s >> 11) / 9007199254740992.0 - 0.5) * (double)(1 + i % 977);
}

static void put(pcclDataType_t dt, uint8_t *at, double v) {
    if (dt == pcclFloat) *(float *)at = (float)v;
    else if (dt == pcclDouble) *(double *)at = v;
    else *(int32_t *)at = (int32_t)v;
}

#define FOLD(T, x, acc, op) \
    (op == pcclMin ? ((x) < (acc) ? (x) : (acc)) : op == pcclMax ? ((x) > (acc) ? (x) : (acc)) \
     : op == pcclProd ? (T)((x) * (acc)) : (T)((x) + (acc)))

/* The reference for element i of the block that ends at position q: from position q + 1 along the ring, own
 * (op) the partial so far at each member, in dt's arithmetic; avg divides the sum by W at the end. */
static void reference(pcclDataType_t dt, pcclRedOp_t op, uint32_t W, uint32_t q, size_t i, uint8_t *out) {
    float f = (float)value_of(dt, op, (q + 1) % W, i);
    double d = value_of(dt, op, (q + 1) % W, i);
    int32_t n = (int32_t)d;
    for (uint32_t j = 2; j <= W; j++) {
        double x = value_of(dt, op, (q + j) % W, i);
        f = FOLD(float, (float)x, f, op);
        d = FOLD(double, x, d, op);
        n = FOLD(int32_t, (int32_t)x, n, op);
    }
    if (op == pcclAvg) f /= (float)W, d /= (double)W, n = (int32_t)((int64_t)n / (int64_t)W);
    if (dt == pcclFloat) memcpy(out, &f, 4);
    else if (dt == pcclDouble) memcpy(out, &d, 8);
    else memcpy(out, &n, 4);
}

/* A reduce-scatter of count elements over W members and K stripes; the block of each member (out of place, or
 * in place at its block's offset in src) is returned in outs[p] (malloc'd), compared with the reference
 * (exact, or within tol for the quantized ring). */
static int narrow_edge; /* position 1's send buffers are tiny: it sends slower than it receives */
static void reduce_scatter_case(uint32_t W, uint32_t K, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                                pcclQuantizationAlgorithm_t algo, int in_place, double tol, uint8_t **outs) {
    net_t n;
    net_open(&n, W, K, 0);
    for (uint32_t s = 0; narrow_edge && s < K; s++) {
        int tiny = 2048;
        setsockopt(n.links[s][1][0], SOL_SOCKET, SO_SNDBUF, &tiny, sizeof tiny);
        setsockopt(n.links[s][1][1], SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny);
    }
    uint32_t rank_of[MAXW];
    perm_of(rank_of, W);
    const size_t esz = pccl_dtype_size(dt), wire_bytes = ring_quant_wire_bytes(count, pcclUint8, W);
    member_t m[MAXW];
    uint8_t *srcs[MAXW];
    for (uint32_t p = 0; p < W; p++) {
        member_init(&m[p], &n, KIND_RS, p, 4099); /* odd: elements split between receives */
        uint32_t r = rank_of[p];
        size_t off = r * (count / W) + (r < count % W ? r : count % W);
        srcs[p] = malloc(count * esz + 1);
        for (size_t i = 0; i < count; i++) put(dt, srcs[p] + i * esz, value_of(dt, op, p, i));
        m[p].src = srcs[p];
        m[p].buf = in_place ? srcs[p] + off * esz : malloc(count / W * esz + esz);
        m[p].count = count;
        m[p].dt = dt;
        m[p].op = op;
        m[p].algo = algo;
        m[p].rank_of = rank_of;
        m[p].wire = algo != pcclQuantNone ? malloc(wire_bytes) : NULL;
    }
    run_members(m, W);
    for (uint32_t p = 0; p < W; p++) {
        CHECK(m[p].rc == 0);
        uint32_t r = rank_of[p];
        size_t off = r * (count / W) + (r < count % W ? r : count % W), len = count / W + (r < count % W);
        size_t bad = 0;
        for (size_t i = 0; i < len; i++) {
            uint8_t want[8];
            reference(dt, op, W, p, off + i, want);
            const uint8_t *got = (uint8_t *)m[p].buf + i * esz;
            if (tol == 0) bad += memcmp(got, want, esz) != 0;
            else bad += fabs((double)*(const float *)got - (double)*(const float *)want) > tol;
        }
        if (bad) fprintf(stderr, "W %u K %u count %zu dt %d op %d pos %u: %zu bad\n", W, K, count, dt, op, p, bad);
        CHECK(bad == 0);
        outs[p] = malloc(len * esz + 1);
        memcpy(outs[p], m[p].buf, len * esz);
        for (size_t i = 0; !in_place && i < count; i++) { /* the input is never written */
            uint8_t v[8];
            put(dt, v, value_of(dt, op, p, i));
            CHECK(memcmp(srcs[p] + i * esz, v, esz) == 0);
        }
        if (!in_place) free(m[p].buf);
        free(srcs[p]);
        free(m[p].wire);
        member_free(&m[p]);
    }
    net_close(&n);
}

static void free_outs(uint8_t **outs, uint32_t W) {
    for (uint32_t p = 0; p < W; p++) free(outs[p]);
}

static void test_reduce_scatter_ops(void) {
    static const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclMin, pcclMax, pcclProd};
    static const pcclDataType_t dts[] = {pcclFloat, pcclDouble, pcclInt32};
    uint8_t *outs[MAXW];
    for (uint32_t W = 2; W <= MAXW; W++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
                reduce_scatter_case(W, 1, 1003, dts[d], ops[o], pcclQuantNone, (int)(o % 2), 0, outs);
                free_outs(outs, W);
                reduce_scatter_case(W, 1, W - 1, dts[d], ops[o], pcclQuantNone, 0, 0, outs); /* count < W */
                free_outs(outs, W);
            }
}

/* 2 and 3 stripes give the bits of one (the reference checks the order too). */
static void test_reduce_scatter_striped(void) {
    for (uint32_t W = 2; W <= MAXW; W++)
        for (int in_place = 0; in_place <= 1; in_place++) {
            uint8_t *one[MAXW], *striped[MAXW];
            const size_t count = 100003;
            reduce_scatter_case(W, 1, count, pcclFloat, pcclSum, pcclQuantNone, in_place, 0, one);
            for (uint32_t K = 2; K <= MAXK; K++) {
                reduce_scatter_case(W, K, count, pcclFloat, pcclSum, pcclQuantNone, in_place, 0, striped);
                for (uint32_t p = 0; p < W; p++) CHECK(memcmp(one[p], striped[p], count / W * 4) == 0);
                free_outs(striped, W);
            }
            free_outs(one, W);
            reduce_scatter_case(W, MAXK, W + 1, pcclFloat, pcclSum, pcclQuantNone, in_place, 0, one); /* tiny */
            free_outs(one, W);
        }
}

/* Blocks far smaller than the socket buffers upstream of a member whose own sends crawl: it receives two
 * steps ahead of what it sends, and a partial-sum slot may be reused only as far as its send has taken it. */
static void test_reduce_scatter_slow_successor(void) {
    narrow_edge = 1;
    for (int round = 0; round < 10; round++)
        for (uint32_t W = 4; W <= MAXW; W++) {
            uint8_t *outs[MAXW];
            reduce_scatter_case(W, 1 + round % 2, W * 3000 + 1, pcclFloat, pcclSum, pcclQuantNone, round % 3 == 0, 0,
                                outs);
            free_outs(outs, W);
        }
    narrow_edge = 0;
}

/* Several blocks per stripe, the last partial; pcclAvg of integers in [-3, 3]: each of the W - 1 encodings of a
 * partial sum (within [-3W, 3W]) to 255 steps errs by half a step, and the average divides that by W. */
static void test_reduce_scatter_quantized(void) {
    for (uint32_t W = 2; W <= MAXW; W++)
        for (int in_place = 0; in_place <= 1; in_place++) {
            const size_t count = (size_t)W * 5 * PCCL_QBLOCK_ELEMS - 77;
            const double tol = (double)(W - 1) * 3.0 / 255.0 + 1e-4;
            uint8_t *one[MAXW], *striped[MAXW];
            reduce_scatter_case(W, 1, count, pcclFloat, pcclAvg, pcclQuantMinMax, in_place, tol, one);
            for (uint32_t K = 2; K <= MAXK; K++) {
                reduce_scatter_case(W, K, count, pcclFloat, pcclAvg, pcclQuantMinMax, in_place, tol, striped);
                for (uint32_t p = 0; p < W; p++) CHECK(memcmp(one[p], striped[p], count / W * 4) == 0);
                free_outs(striped, W);
            }
            free_outs(one, W);
            reduce_scatter_case(W, MAXK, W - 1, pcclFloat, pcclAvg, pcclQuantMinMax, in_place, tol, one); /* tiny */
            free_outs(one, W);
        }
}

/* Broadcast of bytes from the positions in holds (a holder's src is a separate buffer when out_of_place). */
static void broadcast_case(uint32_t W, uint32_t K, size_t bytes, const uint8_t *holds, int out_of_place) {
    net_t n;
    net_open(&n, W, K, 0);
    member_t m[MAXW];
    uint8_t *bufs[MAXW], *srcs[MAXW] = {0};
    for (uint32_t p = 0; p < W; p++) {
        member_init(&m[p], &n, KIND_BC, p, 4096);
        bufs[p] = malloc(bytes + 1);
        memset(bufs[p], 0xEE, bytes + 1);
        m[p].buf = bufs[p];
        m[p].bytes = bytes;
        m[p].holds = holds;
        if (holds[p]) {
            uint8_t *src = out_of_place ? (srcs[p] = malloc(bytes + 1)) : bufs[p];
            for (size_t j = 0; j < bytes; j++) src[j] = byte_of(9, j);
            m[p].src = out_of_place ? src : NULL;
        }
    }
    run_members(m, W);
    for (uint32_t p = 0; p < W; p++) {
        CHECK(m[p].rc == 0);
        size_t bad = 0;
        for (size_t j = 0; j < bytes; j++) bad += bufs[p][j] != byte_of(9, j);
        CHECK(bad == 0);
        CHECK(bufs[p][bytes] == 0xEE);
        CHECK(m[p].io[0].rx_bytes == (holds[p] ? 0 : bytes)); /* a holder receives nothing */
        CHECK(m[p].io[0].tx_bytes == (holds[(p + 1) % W] ? 0 : bytes));
        member_free(&m[p]);
        free(bufs[p]);
        free(srcs[p]);
    }
    net_close(&n);
}

static void test_broadcast(void) {
    for (uint32_t W = 2; W <= MAXW; W++)
        for (uint32_t K = 1; K <= 2; K++)
            for (uint32_t pattern = 1; pattern < (1u << W); pattern += W) { /* holder sets, one root and more */
                uint8_t holds[MAXW];
                for (uint32_t p = 0; p < W; p++) holds[p] = pattern >> p & 1;
                broadcast_case(W, K, 300007, holds, (int)(pattern % 2));
                broadcast_case(W, K, 0, holds, 1);
                broadcast_case(W, K, 1, holds, 0);
            }
    uint8_t all[MAXW] = {1, 1, 1, 1, 1}, root[MAXW] = {0, 0, 1, 0, 0};
    broadcast_case(5, 3, 1 << 20, root, 1);
    broadcast_case(4, 2, 12345, all, 1); /* every edge carries the header only */
    /* A holder out of place copies behind its sends in steps: slices of several steps, one stripe and two. */
    uint8_t pair[MAXW] = {1, 0, 1, 0, 0};
    broadcast_case(3, 1, (5u << 20) + 77, root, 1);
    broadcast_case(4, 2, (3u << 20) + 5, pair, 1);
    broadcast_case(4, 1, (3u << 20) + 5, all, 1); /* no sends: the whole copy after the flow */
}

int main(void) {
    RUN_TEST(test_allgather_every_dtype);
    RUN_TEST(test_allgather_v);
    RUN_TEST(test_reduce_scatter_ops);
    RUN_TEST(test_reduce_scatter_striped);
    RUN_TEST(test_reduce_scatter_slow_successor);
    RUN_TEST(test_reduce_scatter_quantized);
    RUN_TEST(test_broadcast);
    TEST_MAIN_END();
}
