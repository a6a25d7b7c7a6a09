/*
 * reduce.c - element-wise reduce kernels for every dtype x op.
 *
 * Every kernel is a plain loop over elements that GCC auto-vectorizes at -O3
 * (plus an F16C variant of the float16 arithmetic, see below).
 * Elements are loaded and stored with memcpy so that buffers at any byte
 * address are fine (the pipeline hands out chunks of user buffers, and
 * misaligned typed access would be UB); the compiler turns these into
 * unaligned vector loads, at no cost on current x86.
 * Results depend only on each element's operands, never on how the range is
 * split across threads, so they are bit-for-bit deterministic.
 *
 * Integer sum/prod are done in the unsigned type of the same width, which
 * wraps modulo 2^bits (defined behaviour; signed overflow would be UB) and
 * gives the two's-complement result for signed types too.
 *
 * Floating max/min (float, double, float16, bfloat16) compare by IEEE value
 * with -0 < +0, so the result never depends on operand order for non-NaN
 * input. NaN propagates: if either operand is NaN the result is NaN (dst's
 * NaN if dst is one, else src's). They work on the raw bits, so float16 and
 * bfloat16 pick an operand unchanged, without rounding.
 */
#include "pccl_kernels.h"
#include "pccl_half.h"
#include "base/err.h"

#include <omp.h>
#include <string.h>

/* Called per pipeline chunk (~64-256 KiB), where a parallel region would
 * cost more than it saves; only whole large buffers are split across threads. */
#define PCCL_REDUCE_PAR_MIN ((size_t)1 << 20)

typedef void (*pccl_elem_fn)(void *dst, const void *src, size_t n, uint32_t arg);
/* dst = op(a, b) with three distinct buffers (pccl_reduce_to). */
typedef void (*pccl_elem3_fn)(void *dst, const void *a, const void *b, size_t n);

#define PCCL_DEF_LOADSTORE(T, tag)                                               \
    static inline T ld_##tag(const unsigned char *p, size_t i)                   \
    {                                                                            \
        T v;                                                                     \
        memcpy(&v, p + i * sizeof(T), sizeof(T));                                \
        return v;                                                                \
    }                                                                            \
    static inline void st_##tag(unsigned char *p, size_t i, T v)                 \
    {                                                                            \
        memcpy(p + i * sizeof(T), &v, sizeof(T));                                \
    }

PCCL_DEF_LOADSTORE(uint8_t, u8)
PCCL_DEF_LOADSTORE(uint16_t, u16)
PCCL_DEF_LOADSTORE(uint32_t, u32)
PCCL_DEF_LOADSTORE(uint64_t, u64)
PCCL_DEF_LOADSTORE(int8_t, i8)
PCCL_DEF_LOADSTORE(int16_t, i16)
PCCL_DEF_LOADSTORE(int32_t, i32)
PCCL_DEF_LOADSTORE(int64_t, i64)
PCCL_DEF_LOADSTORE(float, f32)
PCCL_DEF_LOADSTORE(double, f64)

/* dst[i] = EXPR(a = dst[i], b = src[i]); fname##_to: dst[i] = EXPR(a = x[i], b = y[i]),
 * one pass where an out-of-place reduce would otherwise copy x into dst first. */
#define PCCL_DEF_BINOP(fname, T, tag, EXPR)                                      \
    static void fname(void *dstv, const void *srcv, size_t n, uint32_t arg)      \
    {                                                                            \
        unsigned char *restrict d = dstv;                                        \
        const unsigned char *restrict s = srcv;                                  \
        (void)arg;                                                               \
        for (size_t i = 0; i < n; i++) {                                         \
            T a = ld_##tag(d, i), b = ld_##tag(s, i);                            \
            st_##tag(d, i, (T)(EXPR));                                           \
        }                                                                        \
    }                                                                            \
    static void fname##_to(void *dstv, const void *xv, const void *yv, size_t n) \
    {                                                                            \
        unsigned char *restrict d = dstv;                                        \
        const unsigned char *restrict x = xv, *restrict y = yv;                  \
        for (size_t i = 0; i < n; i++) {                                         \
            T a = ld_##tag(x, i), b = ld_##tag(y, i);                            \
            st_##tag(d, i, (T)(EXPR));                                           \
        }                                                                        \
    }

/* buf[i] = EXPR(a = buf[i], w = world size). */
#define PCCL_DEF_UNOP(fname, T, tag, EXPR)                                       \
    static void fname(void *dstv, const void *srcv, size_t n, uint32_t w)        \
    {                                                                            \
        unsigned char *restrict d = dstv;                                        \
        (void)srcv;                                                              \
        for (size_t i = 0; i < n; i++) {                                         \
            T a = ld_##tag(d, i);                                                \
            st_##tag(d, i, (T)(EXPR));                                           \
        }                                                                        \
    }

/* Integer sum/prod: unsigned arithmetic, wide enough that uint16 * uint16
 * does not promote to (overflowing) int. */
#define PCCL_DEF_UINT_ARITH(T, tag, W)                                           \
    PCCL_DEF_BINOP(sum_##tag, T, tag, (W)a + (W)b)                               \
    PCCL_DEF_BINOP(prod_##tag, T, tag, (W)a * (W)b)

PCCL_DEF_UINT_ARITH(uint8_t, u8, uint32_t)
PCCL_DEF_UINT_ARITH(uint16_t, u16, uint32_t)
PCCL_DEF_UINT_ARITH(uint32_t, u32, uint32_t)
PCCL_DEF_UINT_ARITH(uint64_t, u64, uint64_t)

#define PCCL_DEF_MAXMIN(T, tag)                                                  \
    PCCL_DEF_BINOP(max_##tag, T, tag, a > b ? a : b)                             \
    PCCL_DEF_BINOP(min_##tag, T, tag, a < b ? a : b)

PCCL_DEF_MAXMIN(uint8_t, u8)
PCCL_DEF_MAXMIN(uint16_t, u16)
PCCL_DEF_MAXMIN(uint32_t, u32)
PCCL_DEF_MAXMIN(uint64_t, u64)
PCCL_DEF_MAXMIN(int8_t, i8)
PCCL_DEF_MAXMIN(int16_t, i16)
PCCL_DEF_MAXMIN(int32_t, i32)
PCCL_DEF_MAXMIN(int64_t, i64)

PCCL_DEF_BINOP(sum_f32, float, f32, a + b)
PCCL_DEF_BINOP(prod_f32, float, f32, a * b)
PCCL_DEF_BINOP(sum_f64, double, f64, a + b)
PCCL_DEF_BINOP(prod_f64, double, f64, a * b)

/* float16/bfloat16: widen to float, operate, round once. Float has enough
 * precision (24 >= 2*11+2) that this equals a correctly rounded half op. */
#define PCCL_DEF_HALF_ARITH(tag, TOF, FROMF)                                     \
    PCCL_DEF_BINOP(sum_##tag, uint16_t, u16, FROMF(TOF(a) + TOF(b)))             \
    PCCL_DEF_BINOP(prod_##tag, uint16_t, u16, FROMF(TOF(a) * TOF(b)))

PCCL_DEF_HALF_ARITH(f16, pccl_f16_to_f32, pccl_f32_to_f16)
PCCL_DEF_HALF_ARITH(bf16, pccl_bf16_to_f32, pccl_f32_to_bf16)

/*
 * Floating max/min on the bit pattern U of a type with sign bit SIGN and
 * +Inf pattern INF. The key flips the bits of negatives and sets the sign bit
 * of positives, so unsigned key order is IEEE order with -0 < +0.
 */
#define PCCL_FKEY(U, x, SIGN) ((U)((x) ^ ((U)((U)0 - (U)((x) & (SIGN) ? 1u : 0u)) | (SIGN))))
#define PCCL_FNAN(U, x, SIGN, INF) ((U)((x) & (U)~(SIGN)) > (INF))
#define PCCL_DEF_FMAXMIN(tag, U, utag, SIGN, INF)                                \
    PCCL_DEF_BINOP(max_##tag, U, utag,                                           \
                   PCCL_FNAN(U, a, SIGN, INF) ? a                                \
                   : PCCL_FNAN(U, b, SIGN, INF)                                  \
                       ? b                                                       \
                       : (PCCL_FKEY(U, a, SIGN) > PCCL_FKEY(U, b, SIGN) ? a : b)) \
    PCCL_DEF_BINOP(min_##tag, U, utag,                                           \
                   PCCL_FNAN(U, a, SIGN, INF) ? a                                \
                   : PCCL_FNAN(U, b, SIGN, INF)                                  \
                       ? b                                                       \
                       : (PCCL_FKEY(U, a, SIGN) < PCCL_FKEY(U, b, SIGN) ? a : b))

PCCL_DEF_FMAXMIN(f16, uint16_t, u16, 0x8000u, 0x7C00u)
PCCL_DEF_FMAXMIN(bf16, uint16_t, u16, 0x8000u, 0x7F80u)
PCCL_DEF_FMAXMIN(f32, uint32_t, u32, 0x80000000u, 0x7F800000u)
PCCL_DEF_FMAXMIN(f64, uint64_t, u64, 0x8000000000000000ull, 0x7FF0000000000000ull)

/* Average finalization: truncating integer division (in int64 for signed
 * types so that a world size >= 2^31 stays positive), IEEE division for
 * floats, rounded once for float16/bfloat16. */
PCCL_DEF_UNOP(avg_u8, uint8_t, u8, a / w)
PCCL_DEF_UNOP(avg_u16, uint16_t, u16, a / w)
PCCL_DEF_UNOP(avg_u32, uint32_t, u32, a / w)
PCCL_DEF_UNOP(avg_u64, uint64_t, u64, a / (uint64_t)w)
PCCL_DEF_UNOP(avg_i8, int8_t, i8, (int64_t)a / (int64_t)w)
PCCL_DEF_UNOP(avg_i16, int16_t, i16, (int64_t)a / (int64_t)w)
PCCL_DEF_UNOP(avg_i32, int32_t, i32, (int64_t)a / (int64_t)w)
PCCL_DEF_UNOP(avg_i64, int64_t, i64, a / (int64_t)w)
PCCL_DEF_UNOP(avg_f32, float, f32, a / (float)w)
PCCL_DEF_UNOP(avg_f64, double, f64, a / (double)w)
PCCL_DEF_UNOP(avg_f16, uint16_t, u16, pccl_f32_to_f16(pccl_f16_to_f32(a) / (float)w))
PCCL_DEF_UNOP(avg_bf16, uint16_t, u16, pccl_f32_to_bf16(pccl_bf16_to_f32(a) / (float)w))

/*
 * float16 sum/prod/avg with F16C: x86-64-v2 has no half conversions, and the
 * portable bit-twiddling costs tens of instructions per element, which would
 * make float16 the bottleneck of an all-reduce. F16C converts 8
 * elements in one instruction. The results are bit-identical to the
 * portable kernels (both exact widening, one IEEE op, round-to-nearest-even;
 * only the payload of a NaN may differ), so peers with and without F16C
 * agree. Chosen at run time; the tail (< 8 elements) uses the portable kernel.
 * GCC only: clang 14's __builtin_cpu_supports does not know "f16c", so clang
 * builds (the libFuzzer harnesses) use the portable kernels.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define PCCL_HAVE_F16C 1

#define PCCL_DEF_F16C(fname, portable, VEXPR)                                    \
    __attribute__((target("avx,f16c"))) static void fname(void *dstv, const void *srcv, size_t n, \
                                                           uint32_t w)           \
    {                                                                            \
        unsigned char *restrict d = dstv;                                        \
        const unsigned char *restrict s = srcv;                                  \
        size_t i = 0;                                                            \
        for (; i + 8 <= n; i += 8) {                                             \
            __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + 2 * i))); \
            __m256 b = s ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))) \
                         : _mm256_setzero_ps();                                  \
            (void)b;                                                             \
            (void)w;                                                             \
            _mm_storeu_si128((__m128i *)(d + 2 * i),                             \
                             _mm256_cvtps_ph((VEXPR), _MM_FROUND_TO_NEAREST_INT)); \
        }                                                                        \
        if (i < n)                                                               \
            portable(d + 2 * i, s ? s + 2 * i : NULL, n - i, w);                 \
    }

PCCL_DEF_F16C(sum_f16_f16c, sum_f16, _mm256_add_ps(a, b))
PCCL_DEF_F16C(prod_f16_f16c, prod_f16, _mm256_mul_ps(a, b))

#define PCCL_DEF_F16C_TO(fname, portable, VEXPR)                                 \
    __attribute__((target("avx,f16c"))) static void fname(void *dstv, const void *xv, const void *yv, \
                                                           size_t n)             \
    {                                                                            \
        unsigned char *restrict d = dstv;                                        \
        const unsigned char *restrict x = xv, *restrict y = yv;                  \
        size_t i = 0;                                                            \
        for (; i + 8 <= n; i += 8) {                                             \
            __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 2 * i))); \
            __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + 2 * i))); \
            _mm_storeu_si128((__m128i *)(d + 2 * i),                             \
                             _mm256_cvtps_ph((VEXPR), _MM_FROUND_TO_NEAREST_INT)); \
        }                                                                        \
        if (i < n)                                                               \
            portable(d + 2 * i, x + 2 * i, y + 2 * i, n - i);                    \
    }

PCCL_DEF_F16C_TO(sum_f16_to_f16c, sum_f16_to, _mm256_add_ps(a, b))
PCCL_DEF_F16C_TO(prod_f16_to_f16c, prod_f16_to, _mm256_mul_ps(a, b))
PCCL_DEF_F16C(avg_f16_f16c, avg_f16, _mm256_div_ps(a, _mm256_set1_ps((float)w)))

/* Two bit tests of libgcc's CPU model (filled in by its constructor). */
static int pccl_cpu_has_f16c(void)
{
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}
#endif

#define PCCL_DT_SLOTS (pcclDouble + 1)
#define PCCL_OP_SLOTS 5

/* Signed sum/prod share the unsigned kernels (same bits modulo 2^n);
 * pcclAvg accumulates as a sum. */
#define PCCL_INT_ROW(s, u) {sum_##u, sum_##u, prod_##u, max_##s, min_##s}
#define PCCL_FLT_ROW(f) {sum_##f, sum_##f, prod_##f, max_##f, min_##f}
#define PCCL_INT_ROW3(s, u) {sum_##u##_to, sum_##u##_to, prod_##u##_to, max_##s##_to, min_##s##_to}
#define PCCL_FLT_ROW3(f) {sum_##f##_to, sum_##f##_to, prod_##f##_to, max_##f##_to, min_##f##_to}

/* One row per dtype; IROW(signed kernel, unsigned kernel) for integers, FROW(kernel) for floats. */
#define PCCL_REDUCE_ROWS(IROW, FROW)                                             \
    {                                                                            \
        [pcclUint8] = IROW(u8, u8),     [pcclInt8] = IROW(i8, u8),               \
        [pcclInt16] = IROW(i16, u16),   [pcclUint16] = IROW(u16, u16),           \
        [pcclUint32] = IROW(u32, u32),  [pcclInt32] = IROW(i32, u32),            \
        [pcclUint64] = IROW(u64, u64),  [pcclInt64] = IROW(i64, u64),            \
        [pcclFloat16] = FROW(f16),      [pcclBFloat16] = FROW(bf16),             \
        [pcclFloat] = FROW(f32),        [pcclDouble] = FROW(f64),                \
    }

static const pccl_elem_fn pccl_reduce_table[PCCL_DT_SLOTS][PCCL_OP_SLOTS] =
    PCCL_REDUCE_ROWS(PCCL_INT_ROW, PCCL_FLT_ROW);
static const pccl_elem3_fn pccl_reduce_to_table[PCCL_DT_SLOTS][PCCL_OP_SLOTS] =
    PCCL_REDUCE_ROWS(PCCL_INT_ROW3, PCCL_FLT_ROW3);

static const pccl_elem_fn pccl_avg_table[PCCL_DT_SLOTS] = {
    [pcclUint8] = avg_u8,     [pcclInt8] = avg_i8,   [pcclInt16] = avg_i16,
    [pcclUint16] = avg_u16,   [pcclUint32] = avg_u32, [pcclInt32] = avg_i32,
    [pcclUint64] = avg_u64,   [pcclInt64] = avg_i64, [pcclFloat16] = avg_f16,
    [pcclBFloat16] = avg_bf16, [pcclFloat] = avg_f32, [pcclDouble] = avg_f64,
};

/* fn(dst, src, n, arg), or three(dst, a, src, n) when a is given, on one range. */
static void pccl_run_range(pccl_elem_fn fn, pccl_elem3_fn three, unsigned char *dst, const unsigned char *a,
                           const unsigned char *src, size_t n, uint32_t arg)
{
    if (a)
        three(dst, a, src, n);
    else
        fn(dst, src, n, arg);
}

/* Runs the kernel over count elements (see pccl_run_range), split into one
 * contiguous range per thread when the buffer is large enough to pay for the
 * parallel region. */
static void pccl_run_elementwise(pccl_elem_fn fn, pccl_elem3_fn three, void *dst, const void *a, const void *src,
                                 size_t count, size_t esize, uint32_t arg)
{
    if (count < PCCL_REDUCE_PAR_MIN || omp_get_max_threads() < 2 || omp_in_parallel()) {
        pccl_run_range(fn, three, dst, a, src, count, arg);
        return;
    }
#pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads();
        size_t t = (size_t)omp_get_thread_num();
        /* Ranges start on multiples of 64 elements: whole cache lines for
         * aligned buffers, so threads do not share lines they write. */
        size_t per = ((count + nt - 1) / nt + 63) & ~(size_t)63;
        size_t lo = t * per;
        if (lo < count) {
            size_t len = count - lo < per ? count - lo : per;
            const unsigned char *s = src ? (const unsigned char *)src + lo * esize : NULL;
            const unsigned char *x = a ? (const unsigned char *)a + lo * esize : NULL;
            pccl_run_range(fn, three, (unsigned char *)dst + lo * esize, x, s, len, arg);
        }
    }
}

/* The kernels of (dt, op), in place (two operands) and out of place (three). @return 0, or -PERR_INVALID. */
static int pccl_reduce_lookup(pcclDataType_t dt, pcclRedOp_t op, pccl_elem_fn *two, pccl_elem3_fn *three)
{
    if ((int)dt < 0 || (int)dt >= PCCL_DT_SLOTS || (int)op < 0 || (int)op >= PCCL_OP_SLOTS)
        return -PERR_INVALID;
    *two = pccl_reduce_table[dt][op];
    *three = pccl_reduce_to_table[dt][op];
#ifdef PCCL_HAVE_F16C
    if (dt == pcclFloat16 && op != pcclMax && op != pcclMin && pccl_cpu_has_f16c()) {
        *two = op == pcclProd ? prod_f16_f16c : sum_f16_f16c;
        *three = op == pcclProd ? prod_f16_to_f16c : sum_f16_to_f16c;
    }
#endif
    return *two ? 0 : -PERR_INVALID;
}

static pccl_elem_fn pccl_avg_lookup(pcclDataType_t dt)
{
    if ((int)dt < 0 || (int)dt >= PCCL_DT_SLOTS)
        return NULL;
#ifdef PCCL_HAVE_F16C
    if (dt == pcclFloat16 && pccl_cpu_has_f16c())
        return avg_f16_f16c;
#endif
    return pccl_avg_table[dt];
}

/*
 * See pccl_kernels.h. Floating-point pcclMax/pcclMin: NaN propagates (if
 * either operand is NaN the result is NaN: dst's if dst is NaN, else src's);
 * otherwise IEEE order with -0 < +0, so max(-0, +0) = +0 and
 * min(-0, +0) = -0 whatever the operand order.
 */
int pccl_reduce_into(void *dst, const void *src, size_t count, pcclDataType_t dt, pcclRedOp_t op)
{
    return pccl_reduce_to(dst, NULL, src, count, dt, op);
}

/* a == NULL: in place (dst = op(dst, b)), the form pccl_reduce_into documents. */
int pccl_reduce_to(void *dst, const void *a, const void *b, size_t count, pcclDataType_t dt, pcclRedOp_t op)
{
    pccl_elem_fn two;
    pccl_elem3_fn three;
    int rc = pccl_reduce_lookup(dt, op, &two, &three);
    if (rc != 0)
        return rc;
    if (count == 0)
        return 0;
    pccl_run_elementwise(two, three, dst, a, b, count, pccl_dtype_size(dt), 0);
    return 0;
}

int pccl_reduce_finalize_avg(void *buf, size_t count, pcclDataType_t dt, uint32_t world_size)
{
    pccl_elem_fn fn = pccl_avg_lookup(dt);
    if (!fn || world_size == 0) /* a zero world size would divide by zero */
        return -PERR_INVALID;
    if (count == 0)
        return 0;
    pccl_run_elementwise(fn, NULL, buf, NULL, NULL, count, pccl_dtype_size(dt), world_size);
    return 0;
}
