/* test_topk.c - the sparse all-reduce's kernels (kernels/pccl_topk.h): per-chunk top-k selection with ties to
 * the lowest index, packing, 2/4-bit quantization, the residual (error feedback), non-finite values, the checks of
 * received packs; and pccl_sparse.h's residual object and "topk:FRACTION[:BITS]" parser. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "pccl_sparse.h"
#include "pccl_topk.h"
#include "tinytest.h"

static uint64_t rng = 88172645463325252ull;
static float rndf(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Encodes acc with cfg; returns the body (its bytes in *bytes when not NULL), acc becomes the residual. */
static uint8_t *encode_n(const pccl_topk_cfg_t *c, void *acc, size_t *bytes) {
    size_t max = pccl_topk_body_max(c);
    uint8_t *body = malloc(max);
    size_t n = pccl_topk_encode(c, acc, body);
    CHECK(n <= max);
    CHECK(pccl_topk_check(c, body, n, NULL, 0) == 0);
    if (bytes) *bytes = n;
    return body;
}

static uint8_t *encode(const pccl_topk_cfg_t *c, float *acc) { return encode_n(c, acc, NULL); }

static void test_k(void) {
    CHECK_EQ_U64(pccl_topk_k(4096, 0.03), 123); /* ceil(122.88) */
    CHECK_EQ_U64(pccl_topk_k(4096, 1.0), 4096);
    CHECK_EQ_U64(pccl_topk_k(10, 1e-9), 1);
    CHECK_EQ_U64(pccl_topk_k(1, 0.5), 1);
    pccl_topk_cfg_t c = {.count = 4096 + 100, .bits = 0, .fraction = 0.03};
    CHECK_EQ_U64(pccl_topk_kept(&c), 123 + 3);
}

/* The rule asserted: Rice-coded offsets cost at most about log2(1 / fraction) + 2 bits each, and every
 * fraction's stream fits the largest body. */
static void test_pack_size(void) {
    uint64_t n = 64 * 4096;
    float *in = malloc(n * sizeof *in), *acc = malloc(n * sizeof *acc);
    for (uint64_t i = 0; i < n; i++) in[i] = rndf();
    const double fr[] = {0.03, 0.01, 1.0, 0.5, 1e-6, 0.2};
    for (size_t t = 0; t < sizeof fr / sizeof *fr; t++) {
        pccl_topk_cfg_t c = {.count = n, .bits = 2, .fraction = fr[t]};
        size_t bytes;
        pccl_topk_accumulate(&c, acc, in, NULL);
        free(encode_n(&c, acc, &bytes));
        double bits_per_kept = ((double)bytes * 8 - 64.0 * 64 - 16.0 * 64) / (double)pccl_topk_kept(&c) - 2;
        CHECK(bits_per_kept <= log2(1 / fr[t]) + 2.6);
        if (fr[t] == 0.03) CHECK((double)n * 4 / (double)bytes > 97);
    }
    free(in), free(acc);
}

/* bits 0: the decoded body plus the residual is the input exactly; the kept values are each chunk's largest
 * magnitudes, ties to the lowest index, and the residual is exactly 0 where a value was sent. */
static void test_select_exact(void) {
    uint64_t n = 3 * 4096 + 777;
    pccl_topk_cfg_t c = {.count = n, .bits = 0, .fraction = 0.05};
    float *in = malloc(n * sizeof *in), *acc = malloc(n * sizeof *acc), *out = calloc(n, sizeof *out);
    for (uint64_t i = 0; i < n; i++) in[i] = rndf();
    for (uint64_t i = 4096; i < 8192; i++) in[i] = (i % 3 ? 1.0f : -1.0f) * (i < 4200 ? 0.5f : 0.25f); /* ties */
    CHECK_EQ_U64(pccl_topk_accumulate(&c, acc, in, NULL), 0);
    uint8_t *body = encode(&c, acc);
    pccl_topk_decode_add(&c, body, out);
    uint64_t sent = 0, bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        int s = out[i] != 0;
        sent += (uint64_t)s;
        bad += s ? !(out[i] == in[i] && acc[i] == 0) : acc[i] != in[i];
    }
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(sent, pccl_topk_kept(&c));
    for (uint64_t ch = 0; ch < 4; ch++) { /* every sent magnitude >= every unsent one in its chunk */
        float min_sent = INFINITY, max_unsent = 0;
        for (uint64_t i = ch * 4096; i < n && i < (ch + 1) * 4096; i++) {
            if (out[i] != 0) min_sent = fminf(min_sent, fabsf(in[i]));
            else max_unsent = fmaxf(max_unsent, fabsf(in[i]));
        }
        CHECK(min_sent >= max_unsent);
    }
    /* chunk 1: 104 values of 0.5 (offsets 0..103), k = 205: all of them and the first 101 of the 0.25s */
    uint64_t wrong = 0;
    for (uint64_t i = 4096; i < 8192; i++) wrong += (out[i] != 0) != (i < 4096 + 205);
    CHECK_EQ_U64(wrong, 0);
    free(in), free(acc), free(out), free(body);
}

/* bits 2 and 4: each sent value is a level between the chunk's smallest and largest kept magnitude, within half a
 * step of the input; decoded + residual gives the input back up to rounding; unsent values stay in the residual. */
static void test_quantized(void) {
    for (int bits = 2; bits <= 4; bits += 2) {
        uint64_t n = 2 * 4096 + 5;
        pccl_topk_cfg_t c = {.count = n, .bits = bits, .fraction = 0.1};
        float *in = malloc(n * sizeof *in), *res = malloc(n * sizeof *res), *acc = malloc(n * sizeof *acc);
        float *out = calloc(n, sizeof *out);
        for (uint64_t i = 0; i < n; i++) in[i] = rndf(), res[i] = rndf() * 0.01f;
        pccl_topk_accumulate(&c, acc, in, res);
        float *want = malloc(n * sizeof *want);
        memcpy(want, acc, n * sizeof *want);
        uint8_t *body = encode(&c, acc);
        pccl_topk_decode_add(&c, body, out);
        uint64_t bad = 0, sent = 0;
        for (uint64_t ch = 0; ch < 3; ch++) {
            float lo = INFINITY, hi = 0; /* the encoder's scales: the smallest and largest kept magnitude */
            for (uint64_t i = ch * 4096; i < n && i < (ch + 1) * 4096; i++)
                if (out[i] != 0) lo = fminf(lo, fabsf(want[i])), hi = fmaxf(hi, fabsf(want[i]));
            float step = (hi - lo) / (float)((1 << (bits - 1)) - 1);
            for (uint64_t i = ch * 4096; i < n && i < (ch + 1) * 4096; i++) {
                if (out[i] == 0) {
                    bad += acc[i] != want[i];
                    continue;
                }
                sent++;
                float m = fabsf(out[i]);
                bad += m < lo || m > hi || fabsf(fabsf(want[i]) - m) > step / 2 * 1.0001f;
                bad += (out[i] < 0) != (want[i] < 0);
                bad += fabsf(out[i] + acc[i] - want[i]) > 1e-6f;
                if (bits == 2) bad += m != lo && m != hi;
            }
        }
        CHECK_EQ_U64(bad, 0);
        CHECK_EQ_U64(sent, 410 + 410 + 1);
        free(in), free(res), free(acc), free(out), free(want), free(body);
    }
}

/* Doubles: the same contract through the 64-bit keys. */
static void test_double(void) {
    uint64_t n = 5000;
    pccl_topk_cfg_t c = {.count = n, .is_double = 1, .bits = 4, .fraction = 0.02};
    double *in = malloc(n * sizeof *in), *acc = malloc(n * sizeof *acc), *out = calloc(n, sizeof *out);
    for (uint64_t i = 0; i < n; i++) in[i] = rndf() * 1e3;
    pccl_topk_accumulate(&c, acc, in, NULL);
    uint8_t *body = encode_n(&c, acc, NULL);
    pccl_topk_decode_add(&c, body, out);
    uint64_t sent = 0, bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        sent += out[i] != 0;
        bad += fabs(out[i] + acc[i] - in[i]) > 1e-9;
    }
    CHECK_EQ_U64(sent, 82 + 19);
    CHECK_EQ_U64(bad, 0);
    free(in), free(acc), free(out), free(body);
}

/* NaN and infinities are taken out (exceptions, exact), count as 0 in their chunk and leave a 0 residual. */
static void test_nonfinite(void) {
    uint64_t n = 4096 + 10;
    pccl_topk_cfg_t c = {.count = n, .bits = 2, .fraction = 0.01};
    float *in = calloc(n, sizeof *in), *acc = malloc(n * sizeof *acc), *out = calloc(n, sizeof *out);
    for (uint64_t i = 0; i < n; i++) in[i] = rndf();
    in[7] = NAN, in[100] = INFINITY, in[4100] = -INFINITY;
    CHECK_EQ_U64(pccl_topk_accumulate(&c, acc, in, NULL), 3);
    uint8_t *exc = malloc(3 * pccl_topk_exc_bytes(&c));
    pccl_topk_take_nonfinite(&c, acc, exc);
    CHECK(acc[7] == 0 && acc[100] == 0 && acc[4100] == 0);
    CHECK(exc[0] == 7 && exc[12] == 100 && exc[24] == (4100 & 255) && exc[25] == 4100 >> 8);
    size_t bytes;
    uint8_t *body = encode_n(&c, acc, &bytes);
    CHECK(pccl_topk_check(&c, body, bytes, exc, 3) == 0);
    pccl_topk_decode_add(&c, body, out);
    pccl_topk_exc_add(&c, exc, 3, out);
    CHECK(isnan(out[7]) && out[100] == INFINITY && out[4100] == -INFINITY);
    CHECK(acc[7] == 0 && acc[100] == 0 && acc[4100] == 0);
    exc[24] = 0xff, exc[25] = 0xff; /* index 65535: out of range */
    CHECK(pccl_topk_check(&c, body, bytes, exc, 3) == -PERR_PROTOCOL);
    free(in), free(acc), free(out), free(exc), free(body);
}

/* A received body is refused when its records do not fill it exactly, or when an offset stream runs out or names an
 * offset past its chunk's end. */
static void test_check_offsets(void) {
    pccl_topk_cfg_t c = {.count = 4096 + 20, .bits = 0, .fraction = 0.1};
    float *acc = calloc(c.count, sizeof *acc);
    for (uint64_t i = 0; i < c.count; i++) acc[i] = (float)i;
    size_t bytes;
    uint8_t *body = encode_n(&c, acc, &bytes);
    CHECK(pccl_topk_check(&c, body, bytes - 1, NULL, 0) == -PERR_PROTOCOL);
    CHECK(pccl_topk_check(&c, body, bytes + 1, NULL, 0) == -PERR_PROTOCOL);
    /* the last chunk (20 elements, k 2, r 3) took offsets 18 and 19: gap 18 (2 ones, a zero, low bits 010), then
     * gap 0 (a zero, 000): 10 bits in 2 bytes */
    uint8_t *last = body + bytes - 2;
    CHECK(body[2] == 2 && body[3] == 0 && last[0] == (0x3 | 0x2 << 3) && last[1] == 0);
    last[0] = 0x3 | 0x7 << 3; /* gap 23: past the chunk */
    CHECK(pccl_topk_check(&c, body, bytes, NULL, 0) == -PERR_PROTOCOL);
    last[0] = last[1] = 0xff; /* the stream ends inside a gap */
    CHECK(pccl_topk_check(&c, body, bytes, NULL, 0) == -PERR_PROTOCOL);
    free(acc), free(body);
}

static void test_parse(void) {
    double f = -1;
    int b = -1;
    CHECK(pcclExtSparseParse("topk:0.03", &f, &b) == pcclSuccess && f == 0.03 && b == 0);
    CHECK(pcclExtSparseParse("topk:0.03:2", &f, &b) == pcclSuccess && f == 0.03 && b == 2);
    CHECK(pcclExtSparseParse("topk:1:4", &f, &b) == pcclSuccess && f == 1 && b == 4);
    const char *bad[] = {"topk:0", "topk:1.5", "topk:-0.1", "topk:nan", "topk:0.1:3", "topk:0.1:8", "topk:0.1:",
                         "topk:", "topk:x", "top:0.1", "0.1", "topk:0.1:2x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f = 7, b = 7;
        CHECK(pcclExtSparseParse(bad[i], &f, &b) == pcclInvalidArgument && f == 7 && b == 7);
    }
    CHECK(pcclExtSparseParse(NULL, &f, &b) == pcclInvalidArgument);
}

static void test_residual_object(void) {
    pcclExtSparseResidual_t *r = NULL;
    CHECK(pcclExtSparseResidualCreate(0, pcclFloat, &r) == pcclInvalidArgument);
    CHECK(pcclExtSparseResidualCreate(10, pcclInt32, &r) == pcclInvalidArgument);
    CHECK(pcclExtSparseResidualCreate(10, pcclFloat, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseResidualCreate(10, pcclDouble, &r) == pcclSuccess && r);
    const double *d = pcclExtSparseResidualData(r);
    double sum = 0;
    for (int i = 0; i < 10; i++) sum += fabs(d[i]);
    CHECK(sum == 0);
    CHECK(pcclExtSparseResidualReset(r) == pcclSuccess);
    CHECK(pcclExtSparseResidualReset(NULL) == pcclInvalidArgument);
    float buf[10] = {0};
    double dbuf[11] = {0};
    /* local mistakes are refused before the communicator is touched (this one is not a communicator at all) */
    const pcclComm_t *comm = (const pcclComm_t *)(void *)dbuf;
    CHECK(pcclExtSparseAllReduce(buf, buf, 10, pcclFloat, pcclSum, 0.5, 0, r, 1, NULL, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclFloat, pcclSum, 0.5, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 11, pcclDouble, pcclSum, 0.5, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclDouble, pcclMax, 0.5, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclDouble, pcclSum, 0.0, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclDouble, pcclSum, 1.5, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclDouble, pcclSum, NAN, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclDouble, pcclSum, 0.5, 3, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, NULL, 10, pcclDouble, pcclSum, 0.5, 0, r, 1, comm, NULL) == pcclInvalidArgument);
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf + 1, 10, pcclDouble, pcclSum, 0.5, 0, r, 1, comm, NULL) ==
          pcclInvalidArgument); /* overlapping */
    CHECK(pcclExtSparseAllReduce(dbuf, dbuf, 10, pcclDouble, pcclSum, 0.5, 0, NULL, 1, comm, NULL) ==
          pcclInvalidArgument);
    pcclExtSparseResidualDestroy(r);
    pcclExtSparseResidualDestroy(NULL);
}

int main(void) {
    RUN_TEST(test_k);
    RUN_TEST(test_pack_size);
    RUN_TEST(test_select_exact);
    RUN_TEST(test_quantized);
    RUN_TEST(test_double);
    RUN_TEST(test_nonfinite);
    RUN_TEST(test_check_offsets);
    RUN_TEST(test_parse);
    RUN_TEST(test_residual_object);
    TEST_MAIN_END();
}
