/*
 * quantize.c - block quantization kernels; format and error bounds in pccl_quant.h.
 *
 * Values pass through double: the source converts to double exactly (float,
 * float16, bfloat16, double), parameters are chosen and codes computed in
 * double, and decoding computes base + (q - off) * step in double before one
 * rounding to the destination type. Decoding is the only step whose result
 * must agree across peers; it is plain IEEE arithmetic on the block's bytes
 * (this file is built with -ffp-contract=off so no FMA can change a result;
 * -fno-trapping-math lets floor() vectorize and changes no value).
 * Blocks are handled in sub-blocks of QSUB elements to keep stack use small.
 */
#include "pccl_quant.h"
#include "pccl_half.h"
#include "pccl_kernels.h"
#include "quant_low.h"
#include "base/err.h"

#include <float.h>
#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define QSUB 1024u

static size_t code_size(pcclDataType_t qdt) {
    switch (qdt) {
    case pcclUint8:
    case pcclInt8: return 1;
    case pcclUint16:
    case pcclFloat16: return 2;
    default: return 0;
    }
}

static int is_float_family(pcclDataType_t dt) {
    return dt == pcclFloat || dt == pcclDouble || dt == pcclFloat16 || dt == pcclBFloat16;
}

int pccl_quant_check(pcclDataType_t src, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt) {
    if (!is_float_family(src)) return -PERR_INVALID;
    if (pccl_qlow_bits(qdt)) return algo == pcclQuantMinMax || algo == pcclQuantZeroPointScale ? 0 : -PERR_INVALID;
    if (code_size(qdt) == 0) return -PERR_INVALID;
    if (algo == pcclQuantZeroPointScale) return 0;
    if (algo == pcclQuantMinMax) return qdt == pcclFloat16 ? -PERR_INVALID : 0;
    return -PERR_INVALID;
}

size_t pccl_quant_wire_bytes(size_t n, pcclDataType_t qdt) {
    const unsigned bits = pccl_qlow_bits(qdt);
    if (bits)
        return n / PCCL_QBLOCK_ELEMS * pccl_qlow_block_bytes(PCCL_QBLOCK_ELEMS, bits) +
               pccl_qlow_block_bytes(n % PCCL_QBLOCK_ELEMS, bits);
    size_t blocks = (n + PCCL_QBLOCK_ELEMS - 1) / PCCL_QBLOCK_ELEMS;
    return blocks * PCCL_QHDR_BYTES + n * code_size(qdt);
}

size_t pccl_quant_block_bytes(pcclDataType_t qdt) {
    const unsigned bits = pccl_qlow_bits(qdt);
    if (bits) return pccl_qlow_block_bytes(PCCL_QBLOCK_ELEMS, bits);
    return PCCL_QHDR_BYTES + PCCL_QBLOCK_ELEMS * code_size(qdt); }

/* ---- conversions between the source types and double ---- */

static void to_double(const uint8_t *src, size_t n, pcclDataType_t dt, double *out) {
    switch (dt) {
    case pcclFloat:
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, src + 4 * i, 4);
            out[i] = v;
        }
        break;
    case pcclDouble: memcpy(out, src, n * 8); break;
    case pcclFloat16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            out[i] = pccl_f16_to_f32(h);
        }
        break;
    default: /* bfloat16 */
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            out[i] = pccl_bf16_to_f32(h);
        }
        break;
    }
}

static void from_double(const double *in, size_t n, pcclDataType_t dt, uint8_t *dst) {
    switch (dt) {
    case pcclFloat:
        for (size_t i = 0; i < n; i++) {
            float v = (float)in[i];
            memcpy(dst + 4 * i, &v, 4);
        }
        break;
    case pcclDouble: memcpy(dst, in, n * 8); break;
    case pcclFloat16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = pccl_f32_to_f16((float)in[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    default:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = pccl_f32_to_bf16((float)in[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        break;
    }
}

/* ---- header ---- */

typedef struct qhdr {
    double base, step;
    uint32_t off;
    uint8_t flags;
} qhdr_t;

static void put_hdr(uint8_t *w, const qhdr_t *h) {
    uint64_t b, s;
    memcpy(&b, &h->base, 8);
    memcpy(&s, &h->step, 8);
    for (int i = 0; i < 8; i++) {
        w[i] = (uint8_t)(b >> (8 * i));
        w[8 + i] = (uint8_t)(s >> (8 * i));
    }
    for (int i = 0; i < 4; i++) w[16 + i] = (uint8_t)(h->off >> (8 * i));
    w[20] = h->flags;
    w[21] = w[22] = w[23] = 0;
}

static int get_hdr(const uint8_t *w, qhdr_t *h) {
    uint64_t b = 0, s = 0;
    uint32_t off = 0;
    for (int i = 7; i >= 0; i--) {
        b = b << 8 | w[i];
        s = s << 8 | w[8 + i];
    }
    for (int i = 3; i >= 0; i--) off = off << 8 | w[16 + i];
    /* off is a code (at most 16 bits); a larger one would overflow the decoder's int32 arithmetic */
    if ((w[20] & ~PCCL_QFLAG_SPECIALS) || w[21] || w[22] || w[23] || off > 65535u) return -PERR_PROTOCOL;
    memcpy(&h->base, &b, 8);
    memcpy(&h->step, &s, 8);
    h->off = off;
    h->flags = w[20];
    return 0;
}

/* ---- encoding ---- */

static uint32_t get_code(const uint8_t *codes, size_t i, pcclDataType_t qdt) {
    if (qdt == pcclUint8) return codes[i];
    if (qdt == pcclInt8) return codes[i] ^ 0x80u;
    return (uint32_t)codes[2 * i] | (uint32_t)codes[2 * i + 1] << 8;
}

/* Range of the finite values of x[0..n) folded into lo/hi; returns 1 if any value is NaN or Inf.
 * Four independent lanes: a single min/max chain would wait on each compare's latency. */
int pccl_qscan_range(const double *x, size_t n, double *plo, double *phi) {
    double lo[4] = {*plo, *plo, *plo, *plo}, hi[4] = {*phi, *phi, *phi, *phi};
    int bad = 0;
    size_t i = 0;
#ifdef __SSE2__
    /* The compiler does not vectorize floating min/max reductions (their NaN/-0 rules); with non-finite
     * lanes masked out, minpd/maxpd give the same result as the scalar loop below. */
    __m128d vlo = _mm_set1_pd(*plo), vhi = _mm_set1_pd(*phi), vbad = _mm_setzero_pd();
    const __m128d absmask = _mm_castsi128_pd(_mm_set1_epi64x(INT64_MAX)), big = _mm_set1_pd(DBL_MAX);
    for (; i + 2 <= n; i += 2) {
        __m128d v = _mm_loadu_pd(x + i);
        __m128d a = _mm_and_pd(v, absmask);
        __m128d finite = _mm_cmple_pd(a, big);              /* false for NaN and Inf */
        vbad = _mm_or_pd(vbad, _mm_cmpnle_pd(a, big));      /* all ones for NaN and Inf */
        vlo = _mm_min_pd(vlo, _mm_or_pd(_mm_and_pd(finite, v), _mm_andnot_pd(finite, vlo)));
        vhi = _mm_max_pd(vhi, _mm_or_pd(_mm_and_pd(finite, v), _mm_andnot_pd(finite, vhi)));
    }
    double l2[2], h2[2];
    _mm_storeu_pd(l2, vlo);
    _mm_storeu_pd(h2, vhi);
    bad = _mm_movemask_pd(vbad) != 0;
    lo[0] = l2[0];
    lo[1] = l2[1];
    hi[0] = h2[0];
    hi[1] = h2[1];
#endif
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) {
            double v = x[i + j];
            int finite = fabs(v) <= DBL_MAX;
            bad |= !finite;
            double w = finite ? v : lo[j];
            lo[j] = w < lo[j] ? w : lo[j];
            w = finite ? v : hi[j];
            hi[j] = w > hi[j] ? w : hi[j];
        }
    for (; i < n; i++) {
        double v = x[i];
        if (!(fabs(v) <= DBL_MAX)) bad = 1;
        else {
            lo[0] = v < lo[0] ? v : lo[0];
            hi[0] = v > hi[0] ? v : hi[0];
        }
    }
    for (int j = 1; j < 4; j++) {
        lo[0] = lo[j] < lo[0] ? lo[j] : lo[0];
        hi[0] = hi[j] > hi[0] ? hi[j] : hi[0];
    }
    *plo = lo[0];
    *phi = hi[0];
    return bad;
}

/* Parameters of one block from its finite values (x: the block as doubles). */
static void choose(const double *x, size_t n, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt, qhdr_t *h) {
    double lo = INFINITY, hi = -INFINITY;
    int specials = pccl_qscan_range(x, n, &lo, &hi);
    if (lo > hi) lo = hi = 0; /* no finite value */
    h->flags = 0;
    h->base = 0;
    h->off = 0;
    if (qdt == pcclFloat16) { /* power-of-two scale: x / step is exact, max|x| / step lands in (32752, 65504] */
        double amax = fmax(fabs(lo), fabs(hi));
        int e = 0;
        if (amax > 0) frexp(amax / 65504.0, &e);
        h->step = ldexp(1.0, e);
        return;
    }
    const uint32_t levels = code_size(qdt) == 1 ? 256u : 65536u, first = specials ? 3u : 0u;
    h->flags = specials ? PCCL_QFLAG_SPECIALS : 0;
    if (algo == pcclQuantMinMax) {
        h->base = lo;
        h->off = first;
        h->step = hi / (double)(levels - 1 - first) - lo / (double)(levels - 1 - first);
    } else {
        uint32_t zp = levels / 2, m = zp - first < levels - 1 - zp ? zp - first : levels - 1 - zp;
        h->off = zp;
        h->step = fmax(fabs(lo), fabs(hi)) / (double)m;
    }
}

/* Branch-free loops per code type so that they vectorize; non-finite inputs
 * are replaced before (encode) or patched after (decode), in blocks that have them. */
#define PCCL_DEF_CODEC(tag, T, BIAS)                                                                  \
    static void enc_##tag(const double *x, size_t n, double base, double inv, double kmin, double kmax, \
                          double off, uint8_t *codes) {                                               \
        for (size_t i = 0; i < n; i++) {                                                              \
            double k = floor((x[i] - base) * inv + 0.5); /* round half up */                          \
            k = k < kmin ? kmin : k;                                                                  \
            k = k > kmax ? kmax : k;                                                                  \
            T c = (T)((int32_t)(k + off) - (BIAS));                                                   \
            memcpy(codes + i * sizeof(T), &c, sizeof(T));                                             \
        }                                                                                             \
    }                                                                                                 \
    static void dec_##tag##_f64(const uint8_t *codes, size_t n, double base, double step, int32_t off, \
                                double *out) {                                                        \
        for (size_t i = 0; i < n; i++) {                                                              \
            T c;                                                                                      \
            memcpy(&c, codes + i * sizeof(T), sizeof(T));                                             \
            out[i] = base + (double)((int32_t)c + (BIAS) - off) * step;                               \
        }                                                                                             \
    }                                                                                                 \
    static void dec_##tag##_f32(const uint8_t *codes, size_t n, double base, double step, int32_t off, \
                                uint8_t *out) {                                                       \
        for (size_t i = 0; i < n; i++) {                                                              \
            T c;                                                                                      \
            memcpy(&c, codes + i * sizeof(T), sizeof(T));                                             \
            float v = (float)(base + (double)((int32_t)c + (BIAS) - off) * step);                     \
            memcpy(out + 4 * i, &v, 4);                                                               \
        }                                                                                             \
    }                                                                                                 \
    /* out[i] += decoded (float sum of pccl_reduce_into, fused: one pass instead of two) */           \
    static void dec_##tag##_f32_add(const uint8_t *codes, size_t n, double base, double step, int32_t off, \
                                    uint8_t *out) {                                                   \
        for (size_t i = 0; i < n; i++) {                                                              \
            T c;                                                                                      \
            float a;                                                                                  \
            memcpy(&c, codes + i * sizeof(T), sizeof(T));                                             \
            memcpy(&a, out + 4 * i, 4);                                                               \
            a = a + (float)(base + (double)((int32_t)c + (BIAS) - off) * step);                       \
            memcpy(out + 4 * i, &a, 4);                                                               \
        }                                                                                             \
    }

PCCL_DEF_CODEC(u8, uint8_t, 0)
PCCL_DEF_CODEC(i8, int8_t, 128) /* int8 holds q - 128 */
PCCL_DEF_CODEC(u16, uint16_t, 0)

static void encode(double *x, size_t n, const qhdr_t *h, pcclDataType_t qdt, uint8_t *codes) {
    if (qdt == pcclFloat16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t c = pccl_f32_to_f16((float)(x[i] / h->step));
            memcpy(codes + 2 * i, &c, 2);
        }
        return;
    }
    const uint32_t levels = code_size(qdt) == 1 ? 256u : 65536u;
    const int specials = h->flags & PCCL_QFLAG_SPECIALS;
    if (specials) /* keep the arithmetic finite; the codes are patched afterwards */
        for (size_t i = 0; i < n; i++) x[i] = isfinite(x[i]) ? x[i] : h->base;
    const double inv = h->step > 0 ? 1.0 / h->step : 0.0, off = (double)h->off;
    /* Codes below off are allowed for zero-point (negative values), never below the specials. */
    const double kmin = (specials ? 3.0 : 0.0) - off, kmax = (double)(levels - 1) - off;
    if (qdt == pcclUint8) enc_u8(x, n, h->base, inv, kmin, kmax, off, codes);
    else if (qdt == pcclInt8) enc_i8(x, n, h->base, inv, kmin, kmax, off, codes);
    else enc_u16(x, n, h->base, inv, kmin, kmax, off, codes);
}

/* Codes of the non-finite values of src[0..n) (a block with PCCL_QFLAG_SPECIALS). */
static void patch_special_codes(const uint8_t *src, size_t n, pcclDataType_t dt, pcclDataType_t qdt,
                                uint8_t *codes) {
    double tmp[QSUB];
    const size_t esz = pccl_dtype_size(dt);
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        to_double(src + s * esz, m, dt, tmp);
        for (size_t i = 0; i < m; i++) {
            if (isfinite(tmp[i])) continue;
            uint32_t q = isnan(tmp[i]) ? 0u : tmp[i] > 0 ? 1u : 2u;
            if (qdt == pcclUint8) codes[s + i] = (uint8_t)q;
            else if (qdt == pcclInt8) codes[s + i] = (uint8_t)(q ^ 0x80u);
            else {
                codes[2 * (s + i)] = (uint8_t)q;
                codes[2 * (s + i) + 1] = 0;
            }
        }
    }
}

/* The block being encoded, as doubles: converted once for the scan and the encode. Per thread,
 * since ring workers encode concurrently; 64 KiB is too much for some threads' stacks. */
static _Thread_local double qblock[PCCL_QBLOCK_ELEMS];

void pccl_quant_block(const void *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                      pcclDataType_t qdt, uint8_t *wire) {
    qhdr_t h;
    double *x = qblock;
    to_double(src, n, dt, x);
    const unsigned bits = pccl_qlow_bits(qdt);
    if (bits) {
        pccl_qlow_encode(x, n, algo, bits, wire);
        return;
    }
    choose(x, n, algo, qdt, &h);
    put_hdr(wire, &h);
    encode(x, n, &h, qdt, wire + PCCL_QHDR_BYTES);
    if (qdt != pcclFloat16 && (h.flags & PCCL_QFLAG_SPECIALS))
        patch_special_codes(src, n, dt, qdt, wire + PCCL_QHDR_BYTES);
}

/* ---- decoding ---- */

/* Decodes n codes into out (type dt): float directly, the other types through double. */
static void decode(const uint8_t *codes, size_t n, const qhdr_t *h, pcclDataType_t qdt, pcclDataType_t dt,
                   uint8_t *out) {
    double tmp[QSUB];
    const int32_t off = (int32_t)h->off;
    const int specials = qdt != pcclFloat16 && (h->flags & PCCL_QFLAG_SPECIALS);
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        const uint8_t *cs = codes + s * code_size(qdt);
        uint8_t *o = out + s * pccl_dtype_size(dt);
        if (qdt == pcclFloat16) {
            for (size_t i = 0; i < m; i++) {
                uint16_t c;
                memcpy(&c, cs + 2 * i, 2);
                tmp[i] = (double)pccl_f16_to_f32(c) * h->step;
            }
        } else if (dt == pcclFloat && !specials) {
            if (qdt == pcclUint8) dec_u8_f32(cs, m, h->base, h->step, off, o);
            else if (qdt == pcclInt8) dec_i8_f32(cs, m, h->base, h->step, off, o);
            else dec_u16_f32(cs, m, h->base, h->step, off, o);
            continue;
        } else {
            if (qdt == pcclUint8) dec_u8_f64(cs, m, h->base, h->step, off, tmp);
            else if (qdt == pcclInt8) dec_i8_f64(cs, m, h->base, h->step, off, tmp);
            else dec_u16_f64(cs, m, h->base, h->step, off, tmp);
            if (specials)
                for (size_t i = 0; i < m; i++) {
                    uint32_t q = get_code(cs, i, qdt);
                    if (q < 3) tmp[i] = q == 0 ? NAN : q == 1 ? INFINITY : -INFINITY;
                }
        }
        from_double(tmp, m, dt, o);
    }
}

int pccl_dequant_block(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt) {
    const unsigned bits = pccl_qlow_bits(qdt);
    if (bits) return pccl_qlow_decode(wire, n, bits, dst, dt, 0, pcclSum);
    qhdr_t h;
    if (get_hdr(wire, &h) != 0) return -PERR_PROTOCOL;
    decode(wire + PCCL_QHDR_BYTES, n, &h, qdt, dt, dst);
    return 0;
}

int pccl_dequant_reduce_block(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt,
                              pcclRedOp_t op) {
    const unsigned bits = pccl_qlow_bits(qdt);
    if (bits) return pccl_qlow_decode(wire, n, bits, dst, dt, 1, op);
    qhdr_t h;
    if (get_hdr(wire, &h) != 0) return -PERR_PROTOCOL;
    const size_t esz = pccl_dtype_size(dt), csz = code_size(qdt);
    if (dt == pcclFloat && (op == pcclSum || op == pcclAvg) && qdt != pcclFloat16 &&
        !(h.flags & PCCL_QFLAG_SPECIALS)) {
        const uint8_t *cs = wire + PCCL_QHDR_BYTES;
        if (qdt == pcclUint8) dec_u8_f32_add(cs, n, h.base, h.step, (int32_t)h.off, dst);
        else if (qdt == pcclInt8) dec_i8_f32_add(cs, n, h.base, h.step, (int32_t)h.off, dst);
        else dec_u16_f32_add(cs, n, h.base, h.step, (int32_t)h.off, dst);
        return 0;
    }
    uint64_t typed[QSUB]; /* decoded values in dt, aligned for any dt */
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        decode(wire + PCCL_QHDR_BYTES + s * csz, m, &h, qdt, dt, (uint8_t *)typed);
        pccl_reduce_into((uint8_t *)dst + s * esz, typed, m, dt, op);
    }
    return 0;
}

/* Whole buffers (tests and benches; the rings encode block by block): blocks are independent, so threads
 * share them out once there are enough to pay for starting them. */
#define QPAR_MIN_BLOCKS 8

void pccl_quantize(const void *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                   pcclDataType_t qdt, uint8_t *wire) {
    const size_t esz = pccl_dtype_size(dt), bb = pccl_quant_block_bytes(qdt);
    const long nb = (long)((n + PCCL_QBLOCK_ELEMS - 1) / PCCL_QBLOCK_ELEMS);
#pragma omp parallel for schedule(static) if (nb >= QPAR_MIN_BLOCKS)
    for (long b = 0; b < nb; b++) {
        size_t s = (size_t)b * PCCL_QBLOCK_ELEMS, m = n - s < PCCL_QBLOCK_ELEMS ? n - s : PCCL_QBLOCK_ELEMS;
        pccl_quant_block((const uint8_t *)src + s * esz, m, dt, algo, qdt, wire + (size_t)b * bb);
    }
}

int pccl_dequantize(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt) {
    const size_t esz = pccl_dtype_size(dt), bb = pccl_quant_block_bytes(qdt);
    const long nb = (long)((n + PCCL_QBLOCK_ELEMS - 1) / PCCL_QBLOCK_ELEMS);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (nb >= QPAR_MIN_BLOCKS)
    for (long b = 0; b < nb; b++) {
        size_t s = (size_t)b * PCCL_QBLOCK_ELEMS, m = n - s < PCCL_QBLOCK_ELEMS ? n - s : PCCL_QBLOCK_ELEMS;
        bad |= pccl_dequant_block(wire + (size_t)b * bb, m, qdt, (uint8_t *)dst + s * esz, dt) != 0;
    }
    return bad ? -PERR_PROTOCOL : 0;
}
