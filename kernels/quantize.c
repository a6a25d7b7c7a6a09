/*
 * quantize.c - block quantization kernels; format and error bounds in pccl_quant.h.
 *
 * Values pass through double: the source converts to double exactly (float,
 * float16, bfloat16, double), parameters are chosen and codes computed in
 * double, and decoding computes base + (q - off) * step in double before one
 * rounding to the destination type. Decoding is the only step whose result
 * must agree across peers; it is plain IEEE arithmetic on the block's bytes
 * (this file is built with -ffp-contract=off so no FMA can change a result).
 * Blocks are handled in sub-blocks of QSUB elements to keep stack use small.
 */
#include "pccl_quant.h"
#include "pccl_half.h"
#include "pccl_kernels.h"

#include <math.h>
#include <string.h>

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
    if (!is_float_family(src) || code_size(qdt) == 0) return -1;
    if (algo == pcclQuantZeroPointScale) return 0;
    if (algo == pcclQuantMinMax) return qdt == pcclFloat16 ? -1 : 0;
    return -1;
}

size_t pccl_quant_wire_bytes(size_t n, pcclDataType_t qdt) {
    size_t blocks = (n + PCCL_QBLOCK_ELEMS - 1) / PCCL_QBLOCK_ELEMS;
    return blocks * PCCL_QHDR_BYTES + n * code_size(qdt);
}

size_t pccl_quant_block_bytes(pcclDataType_t qdt) { return PCCL_QHDR_BYTES + PCCL_QBLOCK_ELEMS * code_size(qdt); }

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
    if ((w[20] & ~PCCL_QFLAG_SPECIALS) || w[21] || w[22] || w[23]) return -1;
    memcpy(&h->base, &b, 8);
    memcpy(&h->step, &s, 8);
    h->off = off;
    h->flags = w[20];
    return 0;
}

/* ---- encoding ---- */

static void put_code(uint8_t *codes, size_t i, pcclDataType_t qdt, uint32_t q) {
    if (qdt == pcclUint8) codes[i] = (uint8_t)q;
    else if (qdt == pcclInt8) codes[i] = (uint8_t)(q ^ 0x80u); /* stored as q - 128 */
    else {
        codes[2 * i] = (uint8_t)q;
        codes[2 * i + 1] = (uint8_t)(q >> 8);
    }
}

static uint32_t get_code(const uint8_t *codes, size_t i, pcclDataType_t qdt) {
    if (qdt == pcclUint8) return codes[i];
    if (qdt == pcclInt8) return codes[i] ^ 0x80u;
    return (uint32_t)codes[2 * i] | (uint32_t)codes[2 * i + 1] << 8;
}

/* Parameters of one block from its finite values. */
static void choose(const uint8_t *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                   pcclDataType_t qdt, qhdr_t *h) {
    double lo = INFINITY, hi = -INFINITY, tmp[QSUB];
    int specials = 0;
    const size_t esz = pccl_dtype_size(dt);
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        to_double(src + s * esz, m, dt, tmp);
        for (size_t i = 0; i < m; i++) {
            double v = tmp[i];
            if (!isfinite(v)) specials = 1;
            else {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
    }
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

static void encode(const double *x, size_t n, const qhdr_t *h, pcclDataType_t qdt, uint8_t *codes) {
    if (qdt == pcclFloat16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t c = pccl_f32_to_f16((float)(x[i] / h->step));
            codes[2 * i] = (uint8_t)c;
            codes[2 * i + 1] = (uint8_t)(c >> 8);
        }
        return;
    }
    const uint32_t levels = code_size(qdt) == 1 ? 256u : 65536u;
    const int specials = h->flags & PCCL_QFLAG_SPECIALS;
    const uint32_t first = specials ? 3u : 0u;
    /* Codes below off are allowed for zero-point (negative values), never below first. */
    const double inv = h->step > 0 ? 1.0 / h->step : 0.0;
    const double qmin = (double)first - (double)h->off, qmax = (double)(levels - 1) - (double)h->off;
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        uint32_t q;
        if (specials && !isfinite(v)) q = isnan(v) ? 0u : v > 0 ? 1u : 2u;
        else {
            double k = floor((v - h->base) * inv + 0.5); /* round half up */
            k = k < qmin ? qmin : k > qmax ? qmax : k;
            q = (uint32_t)(int64_t)(k + (double)h->off);
        }
        put_code(codes, i, qdt, q);
    }
}

void pccl_quant_block(const void *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                      pcclDataType_t qdt, uint8_t *wire) {
    qhdr_t h;
    const uint8_t *s8 = src;
    const size_t esz = pccl_dtype_size(dt), csz = code_size(qdt);
    choose(s8, n, dt, algo, qdt, &h);
    put_hdr(wire, &h);
    double tmp[QSUB];
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        to_double(s8 + s * esz, m, dt, tmp);
        encode(tmp, m, &h, qdt, wire + PCCL_QHDR_BYTES + s * csz);
    }
}

/* ---- decoding ---- */

static void decode(const uint8_t *codes, size_t n, const qhdr_t *h, pcclDataType_t qdt, double *out) {
    if (qdt == pcclFloat16) {
        for (size_t i = 0; i < n; i++) out[i] = (double)pccl_f16_to_f32((uint16_t)get_code(codes, i, qdt)) * h->step;
        return;
    }
    const int specials = h->flags & PCCL_QFLAG_SPECIALS;
    for (size_t i = 0; i < n; i++) {
        uint32_t q = get_code(codes, i, qdt);
        if (specials && q < 3) out[i] = q == 0 ? NAN : q == 1 ? INFINITY : -INFINITY;
        else out[i] = h->base + (double)((int64_t)q - (int64_t)h->off) * h->step;
    }
}

int pccl_dequant_block(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt) {
    qhdr_t h;
    if (get_hdr(wire, &h) != 0) return -1;
    const size_t esz = pccl_dtype_size(dt), csz = code_size(qdt);
    double tmp[QSUB];
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        decode(wire + PCCL_QHDR_BYTES + s * csz, m, &h, qdt, tmp);
        from_double(tmp, m, dt, (uint8_t *)dst + s * esz);
    }
    return 0;
}

int pccl_dequant_reduce_block(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt,
                              pcclRedOp_t op) {
    qhdr_t h;
    if (get_hdr(wire, &h) != 0) return -1;
    const size_t esz = pccl_dtype_size(dt), csz = code_size(qdt);
    double tmp[QSUB];
    uint64_t typed[QSUB]; /* decoded values in dt, aligned for any dt */
    for (size_t s = 0; s < n; s += QSUB) {
        size_t m = n - s < QSUB ? n - s : QSUB;
        decode(wire + PCCL_QHDR_BYTES + s * csz, m, &h, qdt, tmp);
        from_double(tmp, m, dt, (uint8_t *)typed);
        pccl_reduce_into((uint8_t *)dst + s * esz, typed, m, dt, op);
    }
    return 0;
}

void pccl_quantize(const void *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                   pcclDataType_t qdt, uint8_t *wire) {
    const size_t esz = pccl_dtype_size(dt), bb = pccl_quant_block_bytes(qdt);
    for (size_t b = 0; b * PCCL_QBLOCK_ELEMS < n; b++) {
        size_t s = b * PCCL_QBLOCK_ELEMS, m = n - s < PCCL_QBLOCK_ELEMS ? n - s : PCCL_QBLOCK_ELEMS;
        pccl_quant_block((const uint8_t *)src + s * esz, m, dt, algo, qdt, wire + b * bb);
    }
}

int pccl_dequantize(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt) {
    const size_t esz = pccl_dtype_size(dt), bb = pccl_quant_block_bytes(qdt);
    for (size_t b = 0; b * PCCL_QBLOCK_ELEMS < n; b++) {
        size_t s = b * PCCL_QBLOCK_ELEMS, m = n - s < PCCL_QBLOCK_ELEMS ? n - s : PCCL_QBLOCK_ELEMS;
        if (pccl_dequant_block(wire + b * bb, m, qdt, (uint8_t *)dst + s * esz, dt) != 0) return -1;
    }
    return 0;
}
