/* test_reduce.c - reduce kernels, dtype helpers and half/bfloat16 conversions
 * against straightforward references that share no code with the kernels. */
#include "base/err.h"
#include "pccl_kernels.h"
#include "tinytest.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

static const pcclDataType_t all_dtypes[] = {pcclUint8,  pcclInt8,    pcclInt16,    pcclUint16,
                                            pcclUint32, pcclInt32,   pcclUint64,   pcclInt64,
                                            pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
static const pcclRedOp_t all_ops[] = {pcclSum, pcclAvg, pcclProd, pcclMax, pcclMin};
#define NDT (sizeof(all_dtypes) / sizeof(all_dtypes[0]))
#define NOP (sizeof(all_ops) / sizeof(all_ops[0]))

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* ---- independent models of binary16 and bfloat16 ---- */

typedef struct {
    int man_bits, exp_bits, bias;
    uint16_t max_finite; /* largest positive finite pattern */
    double vals[0x7F80]; /* value of every positive finite pattern, by pattern */
} fmt16;

static fmt16 f16fmt = {10, 5, 15, 0x7BFF, {0}};
static fmt16 bf16fmt = {7, 8, 127, 0x7F7F, {0}};

/* Value of a pattern from the textbook formula. */
static double fmt_value(const fmt16 *f, uint16_t b)
{
    int e = (b >> f->man_bits) & ((1 << f->exp_bits) - 1);
    int m = b & ((1 << f->man_bits) - 1);
    double v;
    if (e == (1 << f->exp_bits) - 1)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, 1 - f->bias - f->man_bits);
    else
        v = ldexp((1 << f->man_bits) + m, e - f->bias - f->man_bits);
    return (b & 0x8000) ? -v : v;
}

static void fmt_init(fmt16 *f)
{
    for (unsigned b = 0; b <= f->max_finite; b++)
        f->vals[b] = fmt_value(f, (uint16_t)b);
}

/* Round-to-nearest-even of a double by search over all values: the
 * reference for every conversion and every float16/bfloat16 op below. */
static uint16_t fmt_round(const fmt16 *f, double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    uint16_t inf = (uint16_t)(f->max_finite + 1);
    if (isnan(x))
        return (uint16_t)(sign | inf | (1 << (f->man_bits - 1)));
    double ax = fabs(x);
    double maxv = f->vals[f->max_finite];
    double ulp_top = maxv - f->vals[f->max_finite - 1];
    if (ax >= maxv + ulp_top / 2) /* the tie rounds to Inf: max has an odd mantissa */
        return sign | inf;
    unsigned lo = 0, hi = f->max_finite; /* largest lo with vals[lo] <= ax */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (f->vals[mid] <= ax)
            lo = mid;
        else
            hi = mid - 1;
    }
    unsigned r = lo;
    if (lo < f->max_finite) {
        double d1 = ax - f->vals[lo], d2 = f->vals[lo + 1] - ax;
        if (d2 < d1 || (d2 == d1 && (lo & 1)))
            r = lo + 1;
    }
    return (uint16_t)(sign | r);
}

static uint16_t ref_to16(pcclDataType_t dt, double x) { return fmt_round(dt == pcclFloat16 ? &f16fmt : &bf16fmt, x); }
static double ref_from16(pcclDataType_t dt, uint16_t b) { return fmt_value(dt == pcclFloat16 ? &f16fmt : &bf16fmt, b); }
static int is_nan16(pcclDataType_t dt, uint16_t b)
{
    return dt == pcclFloat16 ? (b & 0x7FFF) > 0x7C00 : (b & 0x7FFF) > 0x7F80;
}

static void test_conversions_exhaustive(void)
{
    int bad_h = 0, bad_b = 0, bad_rt_h = 0, bad_rt_b = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        float fh = pccl_half_to_float(h), fb = pccl_bf16_to_float(h);
        double rh = fmt_value(&f16fmt, h), rb = fmt_value(&bf16fmt, h);
        if (isnan(rh) ? !isnan(fh) : ((double)fh != rh || !signbit(fh) != !signbit(rh)))
            bad_h++;
        if (isnan(rb) ? !isnan(fb) : ((double)fb != rb || !signbit(fb) != !signbit(rb)))
            bad_b++;
        /* Every pattern, NaN payloads included, survives the round trip. */
        if (pccl_float_to_half(fh) != h)
            bad_rt_h++;
        if (pccl_float_to_bf16(fb) != h)
            bad_rt_b++;
    }
    CHECK_EQ_U64(bad_h, 0);
    CHECK_EQ_U64(bad_b, 0);
    CHECK_EQ_U64(bad_rt_h, 0);
    CHECK_EQ_U64(bad_rt_b, 0);
}

/* Midpoints between neighbours and one float ulp either side: exercises
 * ties-to-even and the rounding direction everywhere, denormals included. */
static void check_rounding_near_midpoints(pcclDataType_t dt, const fmt16 *f)
{
    int bad = 0;
    for (unsigned b = 0; b < f->max_finite; b++) {
        float mid = (float)((f->vals[b] + f->vals[b + 1]) / 2); /* exact in float */
        float probes[3] = {nextafterf(mid, 0.0f), mid, nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            for (int s = 0; s < 2; s++) {
                float x = s ? -probes[k] : probes[k];
                uint16_t got = dt == pcclFloat16 ? pccl_float_to_half(x) : pccl_float_to_bf16(x);
                if (got != fmt_round(f, x))
                    bad++;
            }
        }
    }
    CHECK_EQ_U64(bad, 0);
}

static void test_conversions_rounding(void)
{
    check_rounding_near_midpoints(pcclFloat16, &f16fmt);
    check_rounding_near_midpoints(pcclBFloat16, &bf16fmt);

    /* Random float bit patterns (all exponents, NaN and Inf included). */
    int bad_h = 0, bad_b = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rnd();
        float x;
        memcpy(&x, &u, sizeof x);
        uint16_t h = pccl_float_to_half(x), b = pccl_float_to_bf16(x);
        if (isnan(x)) {
            bad_h += !is_nan16(pcclFloat16, h) || ((h >> 15) != (u >> 31));
            bad_b += !is_nan16(pcclBFloat16, b) || ((b >> 15) != (u >> 31));
        } else {
            bad_h += h != fmt_round(&f16fmt, x);
            bad_b += b != fmt_round(&bf16fmt, x);
        }
    }
    CHECK_EQ_U64(bad_h, 0);
    CHECK_EQ_U64(bad_b, 0);
}

static void test_conversions_known(void)
{
    CHECK_EQ_U64(pccl_float_to_half(1.0f), 0x3C00);
    CHECK_EQ_U64(pccl_float_to_half(-2.0f), 0xC000);
    CHECK_EQ_U64(pccl_float_to_half(65504.0f), 0x7BFF);
    CHECK_EQ_U64(pccl_float_to_half(65519.99f), 0x7BFF);
    CHECK_EQ_U64(pccl_float_to_half(65520.0f), 0x7C00); /* overflow to Inf */
    CHECK_EQ_U64(pccl_float_to_half(1e10f), 0x7C00);
    CHECK_EQ_U64(pccl_float_to_half(-INFINITY), 0xFC00);
    CHECK_EQ_U64(pccl_float_to_half(0x1p-24f), 0x0001);  /* smallest denormal */
    CHECK_EQ_U64(pccl_float_to_half(0x1p-25f), 0x0000);  /* tie to even: 0 */
    CHECK_EQ_U64(pccl_float_to_half(0x1.8p-24f), 0x0002); /* tie to even: 2 */
    CHECK_EQ_U64(pccl_float_to_half(0x1p-14f), 0x0400);  /* smallest normal */
    CHECK_EQ_U64(pccl_float_to_half(-0.0f), 0x8000);
    CHECK_EQ_U64(pccl_float_to_half(1.0f + 0x1p-11f), 0x3C00); /* tie to even */
    CHECK_EQ_U64(pccl_float_to_half(1.0f + 0x1.8p-10f), 0x3C02);
    CHECK(isnan(pccl_half_to_float(pccl_float_to_half(NAN))));
    CHECK(pccl_half_to_float(0x3555) == 0x1.554p-2f);
    CHECK(pccl_half_to_float(0x0001) == 0x1p-24f);
    CHECK(pccl_half_to_float(0x7C00) == INFINITY);

    CHECK_EQ_U64(pccl_float_to_bf16(1.0f), 0x3F80);
    CHECK_EQ_U64(pccl_float_to_bf16(3.140625f), 0x4049);
    CHECK_EQ_U64(pccl_float_to_bf16(1.0f + 0x1p-8f), 0x3F80); /* tie to even */
    CHECK_EQ_U64(pccl_float_to_bf16(1.0f + 0x1.8p-7f), 0x3F82);
    CHECK_EQ_U64(pccl_float_to_bf16(3.4028235e38f), 0x7F80); /* FLT_MAX rounds to Inf */
    CHECK_EQ_U64(pccl_float_to_bf16(-INFINITY), 0xFF80);
    CHECK(isnan(pccl_bf16_to_float(pccl_float_to_bf16(NAN))));
    uint32_t nan_low_payload = 0x7F800001u; /* payload only in dropped bits */
    float f;
    memcpy(&f, &nan_low_payload, sizeof f);
    CHECK(isnan(pccl_bf16_to_float(pccl_float_to_bf16(f))));
    CHECK(isnan(pccl_half_to_float(pccl_float_to_half(f))));
}

static void test_dtype_helpers(void)
{
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};
    for (size_t i = 0; i < NDT; i++) {
        pcclDataType_t dt = all_dtypes[i], back = pcclUint8;
        CHECK_EQ_U64(pccl_dtype_size(dt), sizes[i]);
        const char *name = pccl_dtype_name(dt);
        CHECK(strcmp(name, "invalid") != 0);
        CHECK(pccl_dtype_parse(name, &back));
        CHECK_EQ_U64(back, dt);
    }
    CHECK(strcmp(pccl_dtype_name(pcclBFloat16), "bfloat16") == 0);
    CHECK(strcmp(pccl_dtype_name(pcclFloat), "float") == 0);
    CHECK_EQ_U64(pccl_dtype_size((pcclDataType_t)12), 0);
    CHECK_EQ_U64(pccl_dtype_size((pcclDataType_t)-1), 0);
    CHECK(strcmp(pccl_dtype_name((pcclDataType_t)12), "invalid") == 0);
    pcclDataType_t out = pcclUint8;
    CHECK(!pccl_dtype_parse("float128", &out));
    CHECK(!pccl_dtype_parse("", &out));
    CHECK(!pccl_dtype_parse("invalid", &out));
    CHECK(!pccl_dtype_parse(NULL, &out));
    CHECK(pccl_dtype_parse("bf16", &out) && out == pcclBFloat16);
    CHECK(pccl_dtype_parse("float32", &out) && out == pcclFloat);
}

/* ---- element-wise reference, one element at a time, in wide types ---- */

static int is_float_dt(pcclDataType_t dt)
{
    return dt == pcclFloat16 || dt == pcclBFloat16 || dt == pcclFloat || dt == pcclDouble;
}

static int64_t load_int(pcclDataType_t dt, const unsigned char *p)
{
    switch (dt) {
    case pcclUint8: return *p;
    case pcclInt8: { int8_t v; memcpy(&v, p, 1); return v; }
    case pcclUint16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case pcclInt16: { int16_t v; memcpy(&v, p, 2); return v; }
    case pcclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case pcclInt32: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; } /* both 64-bit types, as bits */
    }
}

static double load_flt(pcclDataType_t dt, const unsigned char *p)
{
    if (dt == pcclFloat) { float v; memcpy(&v, p, 4); return v; }
    if (dt == pcclDouble) { double v; memcpy(&v, p, 8); return v; }
    uint16_t b;
    memcpy(&b, p, 2);
    return ref_from16(dt, b);
}

static void store_flt(pcclDataType_t dt, unsigned char *p, double x)
{
    if (dt == pcclFloat) { float v = (float)x; memcpy(p, &v, 4); }
    else if (dt == pcclDouble) memcpy(p, &x, 8);
    else { uint16_t b = ref_to16(dt, x); memcpy(p, &b, 2); }
}

/* Max/min choice with the documented semantics: NaN wins (dst's first),
 * otherwise IEEE order with -0 < +0. Returns 0 for dst (a), 1 for src (b). */
static int ref_pick(double a, double b, int is_max)
{
    if (isnan(a)) return 0;
    if (isnan(b)) return 1;
    if (a == b) {
        if (!signbit(a) == !signbit(b)) return 0; /* identical value */
        int a_pos = !signbit(a);
        return is_max ? !a_pos : a_pos;
    }
    return is_max ? !(a > b) : !(a < b);
}

static void ref_elem(pcclDataType_t dt, pcclRedOp_t op, unsigned char *d, const unsigned char *s)
{
    size_t es = pccl_dtype_size(dt);
    if (op == pcclMax || op == pcclMin) {
        int pick_src;
        if (is_float_dt(dt))
            pick_src = ref_pick(load_flt(dt, d), load_flt(dt, s), op == pcclMax);
        else if (dt == pcclUint64) {
            uint64_t a, b;
            memcpy(&a, d, 8);
            memcpy(&b, s, 8);
            pick_src = op == pcclMax ? b > a : b < a;
        } else {
            int64_t a = load_int(dt, d), b = load_int(dt, s);
            pick_src = op == pcclMax ? b > a : b < a;
        }
        if (pick_src)
            memcpy(d, s, es);
        return;
    }
    if (is_float_dt(dt)) {
        /* Exact in double for 16-bit types, then one rounding; for float and
         * double this is the plain IEEE op. */
        double a = load_flt(dt, d), b = load_flt(dt, s);
        if (dt == pcclFloat) {
            float fa = (float)a, fb = (float)b;
            store_flt(dt, d, op == pcclProd ? fa * fb : fa + fb);
        } else {
            store_flt(dt, d, op == pcclProd ? a * b : a + b);
        }
        return;
    }
    /* Integers: exact product/sum of the bit patterns modulo 2^64, truncated. */
    uint64_t a, b;
    a = (uint64_t)load_int(dt, d);
    b = (uint64_t)load_int(dt, s);
    uint64_t r = op == pcclProd ? a * b : a + b;
    memcpy(d, &r, es); /* little-endian: the low bytes */
}

static int elem_equal(pcclDataType_t dt, const unsigned char *x, const unsigned char *y)
{
    if (is_float_dt(dt)) {
        double a = load_flt(dt, x), b = load_flt(dt, y);
        if (isnan(a) || isnan(b))
            return isnan(a) && isnan(b); /* payload of a computed NaN is not specified */
    }
    return memcmp(x, y, pccl_dtype_size(dt)) == 0;
}

/* Random element, biased toward interesting values (extremes, zeros of both
 * signs, Inf, NaN, denormals) so wrap-around and NaN paths are exercised. */
static void rand_elem(pcclDataType_t dt, unsigned char *p)
{
    size_t es = pccl_dtype_size(dt);
    uint64_t r = rnd();
    int kind = (int)(rnd() % 16);
    if (!is_float_dt(dt)) {
        if (kind == 0) r = 0;
        else if (kind == 1) r = ~0ull;                 /* -1 / max unsigned */
        else if (kind == 2) r = 1ull << (es * 8 - 1);  /* INT_MIN */
        else if (kind == 3) r = (1ull << (es * 8 - 1)) - 1; /* INT_MAX */
        else if (kind < 8) r %= 7;                    /* small values */
        memcpy(p, &r, es);
        return;
    }
    double v;
    switch (kind) {
    case 0: v = 0.0; break;
    case 1: v = -0.0; break;
    case 2: v = INFINITY; break;
    case 3: v = -INFINITY; break;
    case 4: v = NAN; break;
    case 5: v = -NAN; break;
    case 6: v = ldexp((double)(r % 100), -140); break; /* denormal territory */
    default: v = ((double)(int64_t)(r % 2001) - 1000.0) / 8.0; break;
    }
    if (dt == pcclDouble && kind == 7) {
        memcpy(p, &r, 8); /* arbitrary bit pattern */
        return;
    }
    if (dt == pcclFloat && kind == 7) {
        uint32_t u = (uint32_t)r;
        memcpy(p, &u, 4);
        return;
    }
    if ((dt == pcclFloat16 || dt == pcclBFloat16) && kind == 7) {
        uint16_t u = (uint16_t)r;
        memcpy(p, &u, 2);
        return;
    }
    if (dt == pcclFloat) { float f = (float)v; memcpy(p, &f, 4); }
    else if (dt == pcclDouble) memcpy(p, &v, 8);
    else { uint16_t b = ref_to16(dt, v); memcpy(p, &b, 2); }
}

/* One reduce of count elements at byte offsets dofs/sofs from 16-aligned
 * buffers; returns the number of mismatching elements. three: out of place
 * (pccl_reduce_to into a third buffer, at offset dofs + 2), which must give the
 * same bits and leave both inputs untouched. */
static size_t run_case_mode(pcclDataType_t dt, pcclRedOp_t op, size_t count, size_t dofs, size_t sofs, int three)
{
    size_t es = pccl_dtype_size(dt), nb = count * es;
    unsigned char *dbuf = malloc(nb + 32), *sbuf = malloc(nb + 32), *ref = malloc(nb + 1);
    unsigned char *obuf = malloc(nb + 32), *orig = malloc(nb + 1), *sorig = malloc(nb + 1);
    unsigned char *d = dbuf + dofs, *s = sbuf + sofs;
    for (size_t i = 0; i < count; i++) {
        rand_elem(dt, d + i * es);
        rand_elem(dt, s + i * es);
    }
    memcpy(ref, d, nb);
    memcpy(orig, d, nb);
    memcpy(sorig, s, nb);
    for (size_t i = 0; i < count; i++)
        ref_elem(dt, op, ref + i * es, s + i * es);
    size_t bad = 0;
    unsigned char *res = d;
    if (three) {
        res = obuf + dofs + 2;
        memset(res, 0x5A, nb);
        if (pccl_reduce_to(res, d, s, count, dt, op) != 0)
            bad++;
        bad += memcmp(d, orig, nb) != 0 || memcmp(s, sorig, nb) != 0; /* inputs untouched */
    } else if (pccl_reduce_into(d, s, count, dt, op) != 0) {
        bad++;
    }
    for (size_t i = 0; i < count; i++)
        if (!elem_equal(dt, res + i * es, ref + i * es))
            bad++;
    free(dbuf);
    free(sbuf);
    free(obuf);
    free(orig);
    free(sorig);
    free(ref);
    return bad;
}

static size_t run_case(pcclDataType_t dt, pcclRedOp_t op, size_t count, size_t dofs, size_t sofs)
{
    return run_case_mode(dt, op, count, dofs, sofs, 0) + run_case_mode(dt, op, count, dofs, sofs, 1);
}

static void test_reduce_all(void)
{
    static const size_t counts[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1000, 4099};
    for (size_t di = 0; di < NDT; di++) {
        for (size_t oi = 0; oi < NOP; oi++) {
            size_t bad = 0;
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
                bad += run_case(all_dtypes[di], all_ops[oi], counts[ci], ci % 3 == 1 ? 1 : 0,
                                ci % 3 == 2 ? 3 : 0); /* some unaligned pointers */
            if (bad)
                fprintf(stderr, "  %s op %d: %zu mismatches\n", pccl_dtype_name(all_dtypes[di]),
                        (int)all_ops[oi], bad);
            CHECK_EQ_U64(bad, 0);
        }
    }
}

/* Past the parallel threshold with several thread counts: same bits. */
static void test_reduce_parallel(void)
{
    static const pcclDataType_t dts[] = {pcclFloat, pcclBFloat16, pcclInt8, pcclDouble};
    for (int t = 1; t <= 3; t++) {
        omp_set_num_threads(TT_OMP_THREADS(t));
        for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++)
            CHECK_EQ_U64(run_case(dts[i], i % 2 ? pcclMax : pcclSum, (1u << 20) + 13, 0, 1), 0);
    }
    omp_set_num_threads(TT_OMP_THREADS(omp_get_num_procs()));
}

static void test_reduce_edges(void)
{
    unsigned char a[16], b[16];
    memset(a, 0x11, sizeof a);
    memset(b, 0x22, sizeof b);
    /* Invalid dt/op: -1 and nothing written. */
    CHECK(pccl_reduce_into(a, b, 4, (pcclDataType_t)-1, pcclSum) == -PERR_INVALID);
    CHECK(pccl_reduce_into(a, b, 4, (pcclDataType_t)12, pcclSum) == -PERR_INVALID);
    CHECK(pccl_reduce_into(a, b, 4, (pcclDataType_t)14, pcclSum) == -PERR_INVALID);
    CHECK(pccl_reduce_into(a, b, 4, pcclFloat, (pcclRedOp_t)5) == -PERR_INVALID);
    CHECK(pccl_reduce_into(a, b, 4, pcclFloat, (pcclRedOp_t)-1) == -PERR_INVALID);
    CHECK(pccl_reduce_to(a, b, b, 2, (pcclDataType_t)14, pcclSum) == -PERR_INVALID);
    CHECK(pccl_reduce_to(a, b, b, 2, pcclFloat, (pcclRedOp_t)5) == -PERR_INVALID);
    CHECK(a[0] == 0x11 && a[15] == 0x11);
    CHECK(pccl_reduce_to(NULL, NULL, NULL, 0, pcclFloat, pcclSum) == 0);
    /* Count 0 touches nothing, even with NULL buffers. */
    CHECK(pccl_reduce_into(NULL, NULL, 0, pcclFloat, pcclSum) == 0);
    /* Known wrap-around values. */
    int8_t i8a = 127, i8b = 1;
    CHECK(pccl_reduce_into(&i8a, &i8b, 1, pcclInt8, pcclSum) == 0 && i8a == -128);
    uint16_t u16a = 65535, u16b = 65535;
    CHECK(pccl_reduce_into(&u16a, &u16b, 1, pcclUint16, pcclProd) == 0 && u16a == 1);
    int32_t i32a = INT32_MIN, i32b = -1;
    CHECK(pccl_reduce_into(&i32a, &i32b, 1, pcclInt32, pcclProd) == 0 && i32a == INT32_MIN);
    int64_t i64a = INT64_MAX, i64b = 1;
    CHECK(pccl_reduce_into(&i64a, &i64b, 1, pcclInt64, pcclSum) == 0 && i64a == INT64_MIN);
    /* NaN propagation and signed zeros. */
    float fa[4] = {NAN, 1.0f, -0.0f, 0.0f}, fb[4] = {2.0f, NAN, 0.0f, -0.0f};
    CHECK(pccl_reduce_into(fa, fb, 4, pcclFloat, pcclMax) == 0);
    CHECK(isnan(fa[0]) && isnan(fa[1]) && fa[2] == 0.0f && !signbit(fa[2]) && !signbit(fa[3]));
    float fc[2] = {-0.0f, 0.0f}, fd[2] = {0.0f, -0.0f};
    CHECK(pccl_reduce_into(fc, fd, 2, pcclFloat, pcclMin) == 0);
    CHECK(signbit(fc[0]) && signbit(fc[1]));
    double da[2] = {INFINITY, -INFINITY}, db[2] = {-INFINITY, -INFINITY};
    CHECK(pccl_reduce_into(da, db, 2, pcclDouble, pcclSum) == 0);
    CHECK(isnan(da[0]) && da[1] == -INFINITY);
}

static void test_finalize_avg(void)
{
    int32_t i32[4] = {-7, 7, INT32_MIN, INT32_MAX};
    CHECK(pccl_reduce_finalize_avg(i32, 4, pcclInt32, 2) == 0);
    CHECK(i32[0] == -3 && i32[1] == 3 && i32[2] == INT32_MIN / 2 && i32[3] == INT32_MAX / 2);
    int32_t big[2] = {-5, INT32_MIN};
    CHECK(pccl_reduce_finalize_avg(big, 2, pcclInt32, 0x80000001u) == 0 && big[0] == 0 && big[1] == 0);
    uint8_t u8[3] = {255, 10, 1};
    CHECK(pccl_reduce_finalize_avg(u8, 3, pcclUint8, 3) == 0 && u8[0] == 85 && u8[1] == 3 && u8[2] == 0);
    int64_t i64 = INT64_MIN;
    CHECK(pccl_reduce_finalize_avg(&i64, 1, pcclInt64, 4) == 0 && i64 == INT64_MIN / 4);
    uint64_t u64 = UINT64_MAX;
    CHECK(pccl_reduce_finalize_avg(&u64, 1, pcclUint64, 5) == 0 && u64 == UINT64_MAX / 5);
    int8_t i8 = -128;
    CHECK(pccl_reduce_finalize_avg(&i8, 1, pcclInt8, 3) == 0 && i8 == -42);
    int16_t i16 = -32768;
    CHECK(pccl_reduce_finalize_avg(&i16, 1, pcclInt16, 7) == 0 && i16 == -4681);
    float f[3] = {1.0f, -3.0f, NAN};
    CHECK(pccl_reduce_finalize_avg(f, 3, pcclFloat, 3) == 0);
    CHECK(f[0] == 1.0f / 3.0f && f[1] == -1.0f && isnan(f[2]));
    double d = 1.0;
    CHECK(pccl_reduce_finalize_avg(&d, 1, pcclDouble, 3) == 0 && d == 1.0 / 3.0);

    /* Every float16 / bfloat16 pattern divided by several world sizes
     * equals the correctly rounded quotient. */
    static const uint32_t ws[] = {1, 2, 3, 7, 1000};
    static const pcclDataType_t hdt[] = {pcclFloat16, pcclBFloat16};
    uint16_t *buf = malloc(65536 * sizeof(uint16_t));
    for (size_t k = 0; k < 2; k++) {
        for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
            for (uint32_t i = 0; i < 65536; i++)
                buf[i] = (uint16_t)i;
            CHECK(pccl_reduce_finalize_avg(buf, 65536, hdt[k], ws[w]) == 0);
            size_t bad = 0;
            for (uint32_t i = 0; i < 65536; i++) {
                double x = ref_from16(hdt[k], (uint16_t)i);
                if (isnan(x))
                    bad += !is_nan16(hdt[k], buf[i]);
                else
                    bad += buf[i] != ref_to16(hdt[k], x / ws[w]);
            }
            CHECK_EQ_U64(bad, 0);
        }
    }
    free(buf);

    CHECK(pccl_reduce_finalize_avg(f, 3, pcclFloat, 0) == -PERR_INVALID);
    CHECK(pccl_reduce_finalize_avg(f, 3, (pcclDataType_t)12, 2) == -PERR_INVALID);
    CHECK(pccl_reduce_finalize_avg(NULL, 0, pcclFloat, 2) == 0);
}

int main(void)
{
    fmt_init(&f16fmt);
    fmt_init(&bf16fmt);
    RUN_TEST(test_dtype_helpers);
    RUN_TEST(test_conversions_exhaustive);
    RUN_TEST(test_conversions_known);
    RUN_TEST(test_conversions_rounding);
    RUN_TEST(test_reduce_all);
    RUN_TEST(test_reduce_edges);
    RUN_TEST(test_reduce_parallel);
    RUN_TEST(test_finalize_avg);
    TEST_MAIN_END();
}
