/* test_quant_low.c - 4-bit and 2-bit block codes (pccl_compress.h, pccl_quant.h): the error bound of every
 * group for every (source, algorithm, width), packing at odd counts and counts below a group or a block,
 * NaN/Inf, the reduce, the command line's spelling and malformed blocks. */
#include "pccl_compress.h"
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

#define GRP PCCL_QLOW_GROUP
#define MAXN (3 * 8192 + 17)

static const pcclDataType_t srcs[] = {pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
static const pcclDataType_t lows[] = {pcclExtUint4, pcclExtUint2};
static const pcclQuantizationAlgorithm_t algos[] = {pcclQuantMinMax, pcclQuantZeroPointScale};

/* The documented bound for one element of a group whose finite values span [lo, hi]: step / 2 with 2^bits
 * codes (three fewer with specials), the parameters rounded outwards to float32, the result to dt. */
static double bound(pcclQuantizationAlgorithm_t algo, unsigned bits, pcclDataType_t dt, double lo, double hi,
                    int specials, double x) {
    const double levels = 1u << bits, first = specials ? 3 : 0, amax = fmax(fabs(lo), fabs(hi));
    const double f32 = 1 + 0x1p-22, tiny = 0x1p-149;
    double b;
    if (first == levels - 1) { /* one code: the midpoint, rounded to float32 */
        b = (hi - lo) / 2 + amax * 0x1p-24 + tiny;
    } else if (algo == pcclQuantMinMax) {
        b = (((hi - lo) + fabs(lo) * 0x1p-23 + tiny) / (levels - 1 - first) * f32 + tiny) / 2;
    } else {
        double off = fmax(levels / 2, first), m = fmin(off - first, levels - 1 - off);
        b = (amax / m * f32 + tiny) / 2;
    }
    return b * (1 + 1e-12) + half_ulp(dt, x) + half_ulp(pcclFloat, x) * (dt != pcclDouble);
}

static uint8_t src[MAXN * 8], out[MAXN * 8], wire[MAXN * 8];

/* Quantizes vals[0..n), decodes, and checks every element against its group's bound; *worst gets the largest
 * error relative to the group's range. */
static int roundtrip_ok(const double *vals, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                        pcclDataType_t qdt, double *worst) {
    const unsigned bits = qdt == pcclExtUint4 ? 4 : 2;
    for (size_t i = 0; i < n; i++) store(src, i, dt, vals[i]);
    memset(wire, 0xA5, pccl_quant_wire_bytes(n, qdt) + 16);
    pccl_quantize(src, n, dt, algo, qdt, wire);
    if (wire[pccl_quant_wire_bytes(n, qdt)] != 0xA5) return 0; /* wrote past its size */
    if (pccl_dequantize(wire, n, qdt, out, dt) != 0) return 0;
    int ok = 1;
    *worst = 0;
    for (size_t g0 = 0; g0 < n; g0 += GRP) {
        size_t g1 = g0 + GRP < n ? g0 + GRP : n;
        double lo, hi;
        int specials = finite_range(src, g0, g1, dt, &lo, &hi);
        for (size_t i = g0; i < g1; i++) {
            /* the final rounding is half an ulp of the decoded value, which may lie a step away from x */
            double x = load(src, i, dt), y = load(out, i, dt);
            double b = bound(algo, bits, dt, lo, hi, specials, fmax(fabs(x), fabs(y)));
            if (!isfinite(x)) {
                if (isnan(x) ? !isnan(y) : x != y) ok = 0;
                continue;
            }
            if (hi > lo) *worst = fmax(*worst, fabs(y - x) / (hi - lo));
            if (!(fabs(y - x) <= b)) {
                if (ok) fprintf(stderr, "  %s->%s algo %d: i=%zu x=%.9g y=%.9g err=%.3g bound=%.3g [%g,%g]\n",
                                pccl_dtype_name(dt), pccl_dtype_name(qdt), (int)algo, i, x, y, fabs(y - x), b, lo, hi);
                ok = 0;
            }
        }
    }
    return ok;
}

static double vals[MAXN];

static void for_each_format(size_t n, const char *what) {
    for (size_t s = 0; s < 4; s++)
        for (size_t a = 0; a < 2; a++)
            for (size_t t = 0; t < 2; t++) {
                double worst;
                int ok = roundtrip_ok(vals, n, srcs[s], algos[a], lows[t], &worst);
                if (!ok) fprintf(stderr, "  case %s n=%zu\n", what, n);
                CHECK(ok);
            }
}

static void test_support_and_sizes(void) {
    for (size_t s = 0; s < 4; s++)
        for (size_t a = 0; a < 2; a++) {
            CHECK(pccl_quant_check(srcs[s], algos[a], pcclExtUint4) == 0);
            CHECK(pccl_quant_check(srcs[s], algos[a], pcclExtUint2) == 0);
        }
    CHECK(pccl_quant_check(pcclFloat, pcclQuantNone, pcclExtUint4) == -PERR_INVALID);
    CHECK(pccl_quant_check(pcclInt32, pcclQuantMinMax, pcclExtUint2) == -PERR_INVALID);
    CHECK(pccl_quant_check(pcclFloat, pcclQuantMinMax, (pcclDataType_t)66) == -PERR_INVALID);
    CHECK(pccl_quant_check(pcclFloat, pcclQuantMinMax, (pcclDataType_t)63) == -PERR_INVALID);
    /* prefix 4, 8 bytes per group of 128, packed codes */
    CHECK_EQ_U64(pccl_quant_wire_bytes(0, pcclExtUint4), 0);
    CHECK_EQ_U64(pccl_quant_wire_bytes(1, pcclExtUint4), 4 + 8 + 1);
    CHECK_EQ_U64(pccl_quant_wire_bytes(1, pcclExtUint2), 4 + 8 + 1);
    CHECK_EQ_U64(pccl_quant_wire_bytes(5, pcclExtUint2), 4 + 8 + 2);
    CHECK_EQ_U64(pccl_quant_wire_bytes(129, pcclExtUint4), 4 + 16 + 65);
    CHECK_EQ_U64(pccl_quant_block_bytes(pcclExtUint4), 4 + 64 * 8 + 4096);
    CHECK_EQ_U64(pccl_quant_block_bytes(pcclExtUint2), 4 + 64 * 8 + 2048);
    CHECK_EQ_U64(pccl_quant_wire_bytes(8193, pcclExtUint2), 4 + 64 * 8 + 2048 + 13);
    CHECK_EQ_U64(pccl_quant_wire_bytes(2 * 8192, pcclExtUint4), 2 * (4 + 64 * 8 + 4096));
}

static void test_command_line_spelling(void) {
    pcclQuantizationOptions_t q = {0};
    CHECK(pccl_quant_parse("minmax:uint4", &q) == 0 && q.algorithm == pcclQuantMinMax && q.quantized_datatype == pcclExtUint4);
    CHECK(pccl_quant_parse("zero-point-scale:uint2", &q) == 0 && q.algorithm == pcclQuantZeroPointScale &&
          q.quantized_datatype == pcclExtUint2);
    CHECK(pccl_quant_parse("zps:uint4", &q) == 0 && q.quantized_datatype == pcclExtUint4);
    CHECK(pccl_quant_parse("minmax:uint8", &q) == 0 && q.quantized_datatype == pcclUint8);
    CHECK(pccl_quant_parse("none", &q) == 0 && q.algorithm == pcclQuantNone);
    q.algorithm = pcclQuantMinMax;
    const char *bad[] = {"minmax:uint3", "minmax:uint1", "minmax:float16", "minmax", "topk:uint4", "minmax:uint4x",
                         "minmax:", ":uint4", "", "zps:float"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(pccl_quant_parse(bad[i], &q) == -PERR_INVALID);
    CHECK(q.algorithm == pcclQuantMinMax); /* unchanged by a rejected spelling */
    CHECK(strcmp(pccl_dtype_name(pcclExtUint4), "uint4") == 0 && strcmp(pccl_dtype_name(pcclExtUint2), "uint2") == 0);
    pcclDataType_t dt;
    CHECK(!pccl_dtype_parse("uint4", &dt)); /* a code, never a buffer's type */
    CHECK_EQ_U64(pccl_dtype_size(pcclExtUint4), 0);
}

static void test_bounds_random(void) {
    /* Groups of different scales and offsets; counts around group, byte and block edges. */
    const size_t counts[] = {1, 2, 3, 5, 127, 128, 129, 255, 1001, 8191, 8192, 8193, MAXN};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t n = counts[c];
        for (size_t i = 0; i < n; i++) {
            double scale = ldexp(1.0, (int)((i / GRP) % 17) - 8), shift = (i / GRP) % 3 == 1 ? 3 * scale : 0;
            vals[i] = (urand() * 2 - 1) * scale + shift;
        }
        for_each_format(n, "random");
    }
}

/* The quantization is real: the worst error is a sizeable part of step / 2. */
static void test_error_is_that_of_the_width(void) {
    for (size_t i = 0; i < 8192; i++) vals[i] = urand() * 2 - 1;
    double w4, w2;
    CHECK(roundtrip_ok(vals, 8192, pcclFloat, pcclQuantMinMax, pcclExtUint4, &w4));
    CHECK(roundtrip_ok(vals, 8192, pcclFloat, pcclQuantMinMax, pcclExtUint2, &w2));
    CHECK(w4 > 1.0 / 30 * 0.8 && w4 <= 1.0 / 30 * (1 + 1e-6));
    CHECK(w2 > 1.0 / 6 * 0.8 && w2 <= 1.0 / 6 * (1 + 1e-6));
}

static void test_edge_values(void) {
    size_t n = 8192 + 5;
    for (size_t i = 0; i < n; i++) vals[i] = 0.375;
    for_each_format(n, "all equal");
    for (size_t i = 0; i < n; i++) vals[i] = -1.0 - urand() * 7;
    for_each_format(n, "all negative");
    for (size_t i = 0; i < n; i++) vals[i] = (urand() - 0.5) * 1e-41; /* float denormals */
    for_each_format(n, "denormal");
    for (size_t i = 0; i < n; i++) vals[i] = 0;
    for_each_format(n, "zeros");
    for (size_t i = 0; i < n; i++) vals[i] = (urand() * 2 - 1) * 3e38; /* near float's largest */
    for_each_format(n, "huge");
}

/* Values on the code grid come back exactly: the packing keeps every code in its place at every count. */
static void test_packing_exact(void) {
    for (size_t t = 0; t < 2; t++) {
        const unsigned levels = lows[t] == pcclExtUint4 ? 16 : 4;
        for (size_t n = 1; n <= 2 * GRP + 9; n++) {
            float x[2 * GRP + 9], y[2 * GRP + 9];
            uint8_t w[512];
            for (size_t i = 0; i < n; i++) x[i] = (float)((i * 7 + n) % levels);
            for (size_t g = 0; g < n; g += GRP) x[g] = 0, x[n - 1 < g + GRP - 1 ? n - 1 : g + 1] = (float)(levels - 1);
            pccl_quant_block(x, n, pcclFloat, pcclQuantMinMax, lows[t], w);
            CHECK(pccl_dequant_block(w, n, lows[t], y, pcclFloat) == 0);
            CHECK(memcmp(x, y, n * sizeof x[0]) == 0);
        }
    }
}

static void test_nan_inf(void) {
    /* Group 0: NaN, +Inf and -Inf among finite values; group 1: finite only; group 2: nothing finite. */
    const size_t n = 3 * GRP;
    for (size_t i = 0; i < n; i++) vals[i] = urand() * 4 - 1;
    vals[3] = NAN;
    vals[50] = INFINITY;
    vals[127] = -INFINITY;
    for (size_t i = 2 * GRP; i < n; i++) vals[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
    for_each_format(n, "nan/inf");
    /* 2 bits: one code is left for the finite values of a group with specials: the midpoint, for both
     * algorithms. */
    float x[3 * GRP], y[3 * GRP];
    uint8_t w[1024];
    for (size_t i = 0; i < n; i++) x[i] = (float)vals[i];
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < GRP; i++)
        if (isfinite(x[i])) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    pccl_quant_block(x, n, pcclFloat, pcclQuantMinMax, pcclExtUint2, w);
    CHECK(pccl_dequant_block(w, n, pcclExtUint2, y, pcclFloat) == 0);
    for (size_t i = 0; i < GRP; i++)
        if (isfinite(x[i])) CHECK(y[i] == (float)((double)lo / 2 + (double)hi / 2));
    CHECK(isnan(y[3]) && y[50] == INFINITY && y[127] == -INFINITY);
    int distinct = 0; /* group 1 keeps its 4 codes */
    for (size_t i = GRP + 1; i < 2 * GRP; i++) distinct |= y[i] != y[GRP];
    CHECK(distinct);
    pccl_quant_block(x, n, pcclFloat, pcclQuantZeroPointScale, pcclExtUint2, w);
    CHECK(pccl_dequant_block(w, n, pcclExtUint2, y, pcclFloat) == 0);
    for (size_t i = 0; i < GRP; i++)
        if (isfinite(x[i])) CHECK(y[i] == (float)((double)lo / 2 + (double)hi / 2));
    /* Sums propagate them as the unquantized all-reduce does: Inf + -Inf is NaN. */
    float acc[3 * GRP];
    for (size_t i = 0; i < n; i++) acc[i] = 1.0f;
    acc[50] = -INFINITY;
    pccl_quant_block(x, n, pcclFloat, pcclQuantMinMax, pcclExtUint4, w);
    CHECK(pccl_dequant_reduce_block(w, n, pcclExtUint4, acc, pcclFloat, pcclSum) == 0);
    CHECK(isnan(acc[3]) && isnan(acc[50]) && acc[127] == -INFINITY && isfinite(acc[4]));
}

static void test_zero_point_keeps_zero(void) {
    double x[300], y[300];
    uint8_t w[512];
    for (int i = 0; i < 300; i++) x[i] = i % 3 == 0 ? 0.0 : urand() * 6 - 1;
    for (size_t t = 0; t < 2; t++) {
        pccl_quant_block(x, 300, pcclDouble, pcclQuantZeroPointScale, lows[t], w);
        CHECK(pccl_dequant_block(w, 300, lows[t], y, pcclDouble) == 0);
        for (int i = 0; i < 300; i += 3) CHECK(y[i] == 0.0);
    }
}

/* The fused float sum and the other ops give the bits of decode + pccl_reduce_into. */
static void test_reduce_block(void) {
    const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin};
    for (size_t s = 0; s < 4; s++)
        for (size_t t = 0; t < 2; t++)
            for (size_t o = 0; o < 5; o++) {
                const size_t n = 333, esz = pccl_dtype_size(srcs[s]);
                uint8_t acc[333 * 8], inc[333 * 8], dec[333 * 8], ref[333 * 8], w[512];
                for (size_t i = 0; i < n; i++) {
                    store(acc, i, srcs[s], urand() * 4 - 2);
                    store(inc, i, srcs[s], urand() * 4 - 2);
                }
                pccl_quant_block(inc, n, srcs[s], pcclQuantMinMax, lows[t], w);
                CHECK(pccl_dequant_block(w, n, lows[t], dec, srcs[s]) == 0);
                memcpy(ref, acc, n * esz);
                pccl_reduce_into(ref, dec, n, srcs[s], ops[o]);
                CHECK(pccl_dequant_reduce_block(w, n, lows[t], acc, srcs[s], ops[o]) == 0);
                CHECK(memcmp(acc, ref, n * esz) == 0);
            }
}

/* Each corruption of a valid block must be refused by decode and reduce, leaving dst as it was. */
static void test_malformed(void) {
    float x[300], y[300], keep[300];
    uint8_t good[512], w[512];
    for (int i = 0; i < 300; i++) x[i] = (float)(urand() - 0.5);
    for (size_t t = 0; t < 2; t++)
        for (size_t a = 0; a < 2; a++) {
            const size_t n = 299, len = pccl_quant_wire_bytes(n, lows[t]);
            pccl_quant_block(x, n, pcclFloat, algos[a], lows[t], good);
            pccl_quant_block(x, n, pcclFloat, algos[a], lows[t], w);
            CHECK(memcmp(good, w, len) == 0); /* deterministic */
            const uint32_t nan_bits = 0x7FC00000u, inf_bits = 0x7F800000u, one = 0x3F800000u;
            struct { size_t at; uint32_t v; int width; } bad[] = {
                {0, 0, 1}, {0, 3, 1}, {1, t == 0 ? 2 : 4, 1}, {2, 1, 1}, {3, 0x80, 1}, /* prefix */
                {8, inf_bits, 4},                                                           /* step of group 0 */
                {4, nan_bits, 4},                                                           /* base of group 0 */
                {len - 1, 0xFF, 1},                                                         /* padding bits */
            };
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                memcpy(w, good, len);
                if (bad[b].width == 1) w[bad[b].at] = (uint8_t)bad[b].v;
                else memcpy(w + bad[b].at, &bad[b].v, 4);
                memcpy(y, x, sizeof y);
                memcpy(keep, x, sizeof keep);
                CHECK(pccl_dequant_block(w, n, lows[t], y, pcclFloat) == -PERR_PROTOCOL);
                CHECK(pccl_dequant_reduce_block(w, n, lows[t], y, pcclFloat, pcclSum) == -PERR_PROTOCOL);
                CHECK(memcmp(y, keep, sizeof y) == 0);
            }
            if (algos[a] == pcclQuantZeroPointScale) { /* zero-point blocks have base 0 */
                memcpy(w, good, len);
                memcpy(w + 4 + 8 + (t == 0 ? 64 : 32), &one, 4); /* base of group 1 */
                CHECK(pccl_dequant_block(w, n, lows[t], y, pcclFloat) == -PERR_PROTOCOL);
            }
            /* A block of the other width is refused (its prefix names its width). */
            CHECK(pccl_dequant_block(good, n, lows[1 - t], y, pcclFloat) == -PERR_PROTOCOL);
        }
}

/* A double beyond float32's range counts as float32's largest value (the parameters are float32). */
static void test_double_beyond_float(void) {
    double x[10] = {1e300, -1e300, 1, 2, 3, 4, 5, 6, 7, 8}, y[10];
    uint8_t w[64];
    pccl_quant_block(x, 10, pcclDouble, pcclQuantMinMax, pcclExtUint4, w);
    CHECK(pccl_dequant_block(w, 10, pcclExtUint4, y, pcclDouble) == 0);
    CHECK(isfinite(y[0]) && y[0] >= FLT_MAX * 0.99 && y[0] <= FLT_MAX * (1 + 1e-6));
    CHECK(isfinite(y[1]) && y[1] <= -FLT_MAX * 0.99);
}

int main(void) {
    RUN_TEST(test_support_and_sizes);
    RUN_TEST(test_command_line_spelling);
    RUN_TEST(test_bounds_random);
    RUN_TEST(test_error_is_that_of_the_width);
    RUN_TEST(test_edge_values);
    RUN_TEST(test_packing_exact);
    RUN_TEST(test_nan_inf);
    RUN_TEST(test_zero_point_keeps_zero);
    RUN_TEST(test_reduce_block);
    RUN_TEST(test_malformed);
    RUN_TEST(test_double_beyond_float);
    TEST_MAIN_END();
}
