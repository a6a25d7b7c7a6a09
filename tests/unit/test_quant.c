/* test_quant.c - block quantization kernels: the error bounds stated in
 * pccl_quant.h for every (source, algorithm, target), the edge cases (zero
 * range, all negative, NaN/Inf, denormals, one element) and malformed headers. */
#include "pccl_half.h"
#include "base/err.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "quant_values.h"
#include "tinytest.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static const pcclDataType_t srcs[] = {pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
static const pcclDataType_t tgts[] = {pcclUint8, pcclInt8, pcclUint16, pcclFloat16};
static const pcclQuantizationAlgorithm_t algos[] = {pcclQuantMinMax, pcclQuantZeroPointScale};

/* The documented bound for one element of a block whose finite values span [lo, hi]. */
static double bound(pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt, pcclDataType_t dt, double lo, double hi,
                    int specials, double x) {
    double amax = fmax(fabs(lo), fabs(hi)), levels = qdt == pcclUint16 ? 65536 : 256, first = specials ? 3 : 0;
    double b;
    if (qdt == pcclFloat16) {
        int e = 0;
        if (amax > 0) frexp(amax / 65504.0, &e);
        b = fabs(x) * 0x1p-11 + ldexp(1.0, e) * 0x1p-25; /* relative half ulp, or half the smallest subnormal */
    } else if (algo == pcclQuantMinMax) {
        b = (hi - lo) / (levels - 1 - first) / 2;
    } else {
        double zp = levels / 2, m = fmin(zp - first, levels - 1 - zp);
        b = amax / m / 2;
    }
    return b * (1 + 1e-12) + half_ulp(dt, x) + half_ulp(pcclFloat, x) * (dt != pcclDouble); /* via float */
}

/* Quantizes n values, decodes them and checks every element against its block's bound. */
static int roundtrip_ok(const double *vals, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                        pcclDataType_t qdt) {
    static uint8_t src[4 * 8192 * 8], out[4 * 8192 * 8], wire[4 * (8192 * 2 + 24)];
    for (size_t i = 0; i < n; i++) store(src, i, dt, vals[i]);
    pccl_quantize(src, n, dt, algo, qdt, wire);
    if (pccl_dequantize(wire, n, qdt, out, dt) != 0) return 0;
    int ok = 1;
    for (size_t b0 = 0; b0 < n; b0 += PCCL_QBLOCK_ELEMS) {
        size_t b1 = b0 + PCCL_QBLOCK_ELEMS < n ? b0 + PCCL_QBLOCK_ELEMS : n;
        double lo, hi;
        int specials = finite_range(src, b0, b1, dt, &lo, &hi);
        for (size_t i = b0; i < b1; i++) {
            double x = load(src, i, dt), y = load(out, i, dt);
            if (!isfinite(x)) {
                if (isnan(x) ? !isnan(y) : x != y) ok = 0;
                continue;
            }
            if (!(fabs(y - x) <= bound(algo, qdt, dt, lo, hi, specials, x))) {
                if (ok) fprintf(stderr, "  %s->%s algo %d: x=%.17g y=%.17g err=%.3g bound=%.3g [%g,%g]\n",
                                pccl_dtype_name(dt), pccl_dtype_name(qdt), (int)algo, x, y, fabs(y - x),
                                bound(algo, qdt, dt, lo, hi, specials, x), lo, hi);
                ok = 0;
            }
        }
    }
    return ok;
}

static void for_each_format(const double *vals, size_t n, const char *what) {
    for (size_t s = 0; s < 4; s++)
        for (size_t a = 0; a < 2; a++)
            for (size_t t = 0; t < 4; t++) {
                if (pccl_quant_check(srcs[s], algos[a], tgts[t]) != 0) continue;
                int ok = roundtrip_ok(vals, n, srcs[s], algos[a], tgts[t]);
                if (!ok) fprintf(stderr, "  case %s\n", what);
                CHECK(ok);
            }
}

static double vals[4 * 8192];

static void test_support_matrix(void) {
    CHECK(pccl_quant_check(pcclFloat, pcclQuantMinMax, pcclUint8) == 0);
    CHECK(pccl_quant_check(pcclBFloat16, pcclQuantZeroPointScale, pcclFloat16) == 0);
    CHECK(pccl_quant_check(pcclFloat, pcclQuantMinMax, pcclFloat16) == -PERR_INVALID); /* not meaningful */
    CHECK(pccl_quant_check(pcclInt32, pcclQuantMinMax, pcclUint8) != 0);   /* integer sources */
    CHECK(pccl_quant_check(pcclFloat, pcclQuantMinMax, pcclFloat) != 0);
    CHECK(pccl_quant_check(pcclFloat, pcclQuantNone, pcclUint8) != 0);
    CHECK(pccl_quant_check(pcclFloat, (pcclQuantizationAlgorithm_t)7, pcclUint8) != 0);
    CHECK_EQ_U64(pccl_quant_wire_bytes(0, pcclUint8), 0);
    CHECK_EQ_U64(pccl_quant_wire_bytes(1, pcclUint8), 25);
    CHECK_EQ_U64(pccl_quant_wire_bytes(8193, pcclUint16), 2 * 24 + 2 * 8193);
    CHECK_EQ_U64(pccl_quant_block_bytes(pcclUint8), 24 + 8192);
}

static void test_random_ranges(void) {
    /* Three full blocks with different ranges and a partial one. */
    size_t n = 3 * 8192 + 17;
    for (size_t i = 0; i < n; i++) {
        double scale = i < 8192 ? 1.0 : i < 16384 ? 1000.0 : 1e-3;
        vals[i] = (urand() * 2 - 1) * scale + (i >= 16384 && i < 24576 ? 5e-3 : 0);
    }
    for_each_format(vals, n, "random");
}

static void test_edge_cases(void) {
    size_t n = 8192 + 5;
    for (size_t i = 0; i < n; i++) vals[i] = 0.375;
    for_each_format(vals, n, "all equal");
    for (size_t i = 0; i < n; i++) vals[i] = -1.0 - urand() * 7;
    for_each_format(vals, n, "all negative");
    for (size_t i = 0; i < n; i++) vals[i] = (urand() - 0.5) * 1e-41; /* float denormals */
    for_each_format(vals, n, "denormal");
    vals[0] = -3.25;
    for_each_format(vals, 1, "one element");
    for (size_t i = 0; i < n; i++) vals[i] = 0;
    for_each_format(vals, n, "zeros");
    for (size_t i = 0; i < n; i++) vals[i] = urand() * 4 - 2;
    vals[3] = NAN;
    vals[100] = INFINITY;
    vals[8192 + 1] = -INFINITY;
    for_each_format(vals, n, "nan/inf");
    for (size_t i = 0; i < n; i++) vals[i] = i % 2 ? NAN : INFINITY;
    for_each_format(vals, n, "no finite value");
}

/* The bound the issue states for min-max uint8 from float: (max-min)/255/2 plus the rounding to float. */
static void test_minmax_uint8_bound(void) {
    float x[1000], y[1000];
    uint8_t wire[24 + 1000];
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < 1000; i++) {
        x[i] = (float)(urand() * 10 - 3);
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    pccl_quant_block(x, 1000, pcclFloat, pcclQuantMinMax, pcclUint8, wire);
    CHECK(pccl_dequant_block(wire, 1000, pcclUint8, y, pcclFloat) == 0);
    double worst = 0;
    for (int i = 0; i < 1000; i++) worst = fmax(worst, fabs((double)y[i] - x[i]) - fabs(x[i]) * 0x1p-24);
    CHECK(worst <= ((double)hi - lo) / 255 / 2 * (1 + 1e-12));
    CHECK(worst > ((double)hi - lo) / 255 / 8); /* the quantization is real, not a copy */
    /* Min and max themselves decode exactly (codes 0 and 255). */
    for (int i = 0; i < 1000; i++)
        if (x[i] == lo || x[i] == hi) CHECK(y[i] == x[i]);
}

static void test_zero_point_keeps_zero(void) {
    double x[64], y[64];
    uint8_t wire[24 + 128];
    for (int i = 0; i < 64; i++) x[i] = i % 3 == 0 ? 0.0 : urand() * 6 - 1;
    for (size_t t = 0; t < 4; t++) {
        pccl_quant_block(x, 64, pcclDouble, pcclQuantZeroPointScale, tgts[t], wire);
        CHECK(pccl_dequant_block(wire, 64, tgts[t], y, pcclDouble) == 0);
        for (int i = 0; i < 64; i += 3) CHECK(y[i] == 0.0);
    }
}

static void test_reduce_block(void) {
    float acc[300], inc[300], dec[300], ref[300];
    uint8_t wire[24 + 600];
    const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin};
    for (size_t o = 0; o < 5; o++) {
        for (int i = 0; i < 300; i++) {
            acc[i] = (float)(urand() * 4 - 2);
            inc[i] = (float)(urand() * 4 - 2);
        }
        pccl_quant_block(inc, 300, pcclFloat, pcclQuantMinMax, pcclUint16, wire);
        CHECK(pccl_dequant_block(wire, 300, pcclUint16, dec, pcclFloat) == 0);
        memcpy(ref, acc, sizeof acc);
        pccl_reduce_into(ref, dec, 300, pcclFloat, ops[o]);
        CHECK(pccl_dequant_reduce_block(wire, 300, pcclUint16, acc, pcclFloat, ops[o]) == 0);
        CHECK(memcmp(acc, ref, sizeof acc) == 0);
    }
}

static void test_deterministic_and_malformed(void) {
    float x[500], y[500];
    uint8_t w1[24 + 500], w2[24 + 500];
    for (int i = 0; i < 500; i++) x[i] = (float)(urand() - 0.5);
    pccl_quant_block(x, 500, pcclFloat, pcclQuantMinMax, pcclInt8, w1);
    pccl_quant_block(x, 500, pcclFloat, pcclQuantMinMax, pcclInt8, w2);
    CHECK(memcmp(w1, w2, sizeof w1) == 0);
    memcpy(y, x, sizeof y);
    w1[20] = 0x80; /* unknown flag */
    CHECK(pccl_dequant_block(w1, 500, pcclInt8, y, pcclFloat) == -PERR_PROTOCOL);
    CHECK(pccl_dequant_reduce_block(w1, 500, pcclInt8, y, pcclFloat, pcclSum) == -PERR_PROTOCOL);
    CHECK(memcmp(x, y, sizeof y) == 0); /* nothing written */
    w2[23] = 1; /* reserved byte */
    CHECK(pccl_dequant_block(w2, 500, pcclInt8, y, pcclFloat) == -PERR_PROTOCOL);
}

int main(void) {
    RUN_TEST(test_support_matrix);
    RUN_TEST(test_random_ranges);
    RUN_TEST(test_edge_cases);
    RUN_TEST(test_minmax_uint8_bound);
    RUN_TEST(test_zero_point_keeps_zero);
    RUN_TEST(test_reduce_block);
    RUN_TEST(test_deterministic_and_malformed);
    TEST_MAIN_END();
}
