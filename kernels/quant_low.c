/*
 * quant_low.c - 4-bit and 2-bit block codes (format and error bounds in pccl_quant.h and pccl_compress.h).
 *
 * A block is a 4-byte prefix and groups of PCCL_QLOW_GROUP elements, each with a float32 base and step and
 * packed codes. Decoding goes through a table of the group's 2^bits values, each computed once as
 * base + (q - off) * step in double and rounded once to the destination type: the result depends only on
 * the block's bytes, so every peer gets the same bits (this file is built with -ffp-contract=off).
 */
#include "quant_low.h"
#include "pccl_compress.h"
#include "pccl_half.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "base/err.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define G PCCL_QLOW_GROUP
#define PREFIX 4u
#define GHDR 8u
#define SPECIALS_BIT 0x80000000u /* sign bit of the step: codes 0, 1, 2 are NaN, +Inf, -Inf */

unsigned pccl_qlow_bits(pcclDataType_t qdt) {
    int v = (int)qdt;
    return v == (int)pcclExtUint4 ? 4u : v == (int)pcclExtUint2 ? 2u : 0u;
}

static size_t packed_bytes(size_t m, unsigned bits) { return (m * bits + 7) / 8; }
static size_t group_stride(unsigned bits) { return GHDR + G * bits / 8; }

size_t pccl_qlow_block_bytes(size_t n, unsigned bits) {
    return n ? PREFIX + GHDR * ((n + G - 1) / G) + packed_bytes(n, bits) : 0;
}

/* ---- parameters ---- */

typedef struct gparams {
    float base, step;
    unsigned off;     /* the code that stands for base */
    unsigned first;   /* the lowest code of a finite value: 3 when the group holds specials */
} gparams_t;

static double clampf32(double d) { return d < -FLT_MAX ? -FLT_MAX : d > FLT_MAX ? FLT_MAX : d; }
/* The float32 at or below / at or above d (d within float32's range). */
static float f32_down(double d) {
    float f = (float)d;
    return (double)f > d ? nextafterf(f, -INFINITY) : f;
}
static float f32_up(double d) {
    float f = (float)d;
    return (double)f < d ? nextafterf(f, INFINITY) : f;
}

/* Off, base and step of one group from its finite values; double values beyond float32's range count as its
 * largest value (the parameters are float32). */
static void choose(const double *x, size_t m, pcclQuantizationAlgorithm_t algo, unsigned levels, gparams_t *p) {
    double lo = INFINITY, hi = -INFINITY;
    int specials = pccl_qscan_range(x, m, &lo, &hi);
    if (lo > hi) lo = hi = 0; /* no finite value */
    lo = clampf32(lo);
    hi = clampf32(hi);
    p->first = specials ? 3u : 0u;
    p->base = p->step = 0;
    if (p->first == levels - 1) { /* 2 bits with specials: one code left for every finite value, the midpoint */
        p->off = p->first;
        p->base = (float)(lo / 2 + hi / 2);
        return;
    }
    if (algo == pcclQuantMinMax) {
        p->off = p->first;
        p->base = f32_down(lo);
        p->step = f32_up(hi / (levels - 1 - p->first) - (double)p->base / (levels - 1 - p->first));
    } else {
        p->off = levels / 2 > p->first ? levels / 2 : p->first;
        unsigned neg = p->off - p->first, pos = levels - 1 - p->off;
        p->step = f32_up(fmax(fabs(lo), fabs(hi)) / (neg < pos ? neg : pos));
    }
}

/* ---- encoding ---- */

/* One code per element (branch-free so that it vectorizes); non-finite values get their special code. */
static void group_codes(const double *x, size_t m, const gparams_t *p, unsigned levels, uint8_t *q) {
    const double base = p->base, inv = p->step > 0 ? 1.0 / (double)p->step : 0.0, off = p->off;
    const double kmin = p->first, kmax = levels - 1;
    for (size_t i = 0; i < m; i++) {
        double v = x[i];
        int finite = fabs(v) <= DBL_MAX;
        double c = finite ? (v < -FLT_MAX ? -FLT_MAX : v > FLT_MAX ? FLT_MAX : v) : base;
        double k = floor((c - base) * inv + 0.5) + off; /* round half up */
        k = k < kmin ? kmin : k;
        k = k > kmax ? kmax : k;
        uint8_t special = v != v ? 0 : v > 0 ? 1 : 2;
        q[i] = finite ? (uint8_t)(int)k : special;
    }
}

static void pack(const uint8_t *q, size_t m, unsigned bits, uint8_t *out) {
    size_t j = 0;
    if (bits == 4) {
        for (; 2 * j + 2 <= m; j++) out[j] = (uint8_t)(q[2 * j] | q[2 * j + 1] << 4);
    } else {
        for (; 4 * j + 4 <= m; j++)
            out[j] = (uint8_t)(q[4 * j] | q[4 * j + 1] << 2 | q[4 * j + 2] << 4 | q[4 * j + 3] << 6);
    }
    const size_t per = 8 / bits, done = j * per;
    if (done < m) { /* the tail: unused high bits stay zero */
        uint8_t b = 0;
        for (size_t i = done; i < m; i++) b = (uint8_t)(b | q[i] << (bits * (i - done)));
        out[j] = b;
    }
}

static void put_u32(uint8_t *w, uint32_t v) {
    for (int i = 0; i < 4; i++) w[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *w) {
    return (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
}

void pccl_qlow_encode(const double *x, size_t n, pcclQuantizationAlgorithm_t algo, unsigned bits, uint8_t *wire) {
    const unsigned levels = 1u << bits;
    wire[0] = (uint8_t)algo;
    wire[1] = (uint8_t)bits;
    wire[2] = wire[3] = 0;
    uint8_t *g = wire + PREFIX, q[G];
    for (size_t s = 0; s < n; s += G, g += group_stride(bits)) {
        const size_t m = n - s < G ? n - s : G;
        gparams_t p;
        choose(x + s, m, algo, levels, &p);
        uint32_t b, st;
        memcpy(&b, &p.base, 4);
        memcpy(&st, &p.step, 4);
        put_u32(g, b);
        put_u32(g + 4, st | (p.first ? SPECIALS_BIT : 0));
        group_codes(x + s, m, &p, levels, q);
        pack(q, m, bits, g + GHDR);
    }
}

/* ---- decoding ---- */

/* The block's prefix and every group's header; nothing is decoded from a malformed block. */
static int check_block(const uint8_t *wire, size_t n, unsigned bits) {
    const unsigned algo = wire[0];
    if ((algo != pcclQuantMinMax && algo != pcclQuantZeroPointScale) || wire[1] != bits || wire[2] || wire[3])
        return -PERR_PROTOCOL;
    const uint8_t *g = wire + PREFIX;
    for (size_t s = 0; s < n; s += G, g += group_stride(bits)) {
        uint32_t b = get_u32(g), st_raw = get_u32(g + 4), st = st_raw & ~SPECIALS_BIT;
        float base, step;
        memcpy(&base, &b, 4);
        memcpy(&step, &st, 4);
        const int one_code = bits == 2 && (st_raw & SPECIALS_BIT); /* base is the midpoint, for both algorithms */
        if (!isfinite(base) || !isfinite(step) || (algo == pcclQuantZeroPointScale && b != 0 && !one_code))
            return -PERR_PROTOCOL;
        const size_t m = n - s < G ? n - s : G, tail = m * bits % 8;
        if (tail && (g[GHDR + packed_bytes(m, bits) - 1] >> tail)) return -PERR_PROTOCOL; /* padding bits */
    }
    return 0;
}

/* The group's value of every code, in double. */
static void group_table(const uint8_t *g, unsigned algo, unsigned bits, double *lut) {
    const unsigned levels = 1u << bits;
    uint32_t b = get_u32(g), st = get_u32(g + 4);
    const int specials = (st & SPECIALS_BIT) != 0;
    st &= ~SPECIALS_BIT;
    float base, step;
    memcpy(&base, &b, 4);
    memcpy(&step, &st, 4);
    const unsigned first = specials ? 3u : 0u;
    const unsigned off = algo == pcclQuantMinMax ? first : (levels / 2 > first ? levels / 2 : first);
    for (unsigned q = 0; q < levels; q++) lut[q] = (double)base + ((double)q - (double)off) * (double)step;
    if (specials) {
        lut[0] = NAN;
        lut[1] = INFINITY;
        lut[2] = -INFINITY;
    }
}

static void unpack(const uint8_t *c, size_t m, unsigned bits, uint8_t *q) {
    if (bits == 4) {
        for (size_t j = 0; j < (m + 1) / 2; j++) {
            q[2 * j] = c[j] & 15;
            q[2 * j + 1] = c[j] >> 4;
        }
    } else {
        for (size_t j = 0; j < (m + 3) / 4; j++)
            for (unsigned t = 0; t < 4; t++) q[4 * j + t] = (c[j] >> (2 * t)) & 3;
    }
}

/* out[i] = the group's value of q[i] in dt (rounded once from double, as quantize.c's from_double). */
static void lookup(const double *lut, unsigned levels, const uint8_t *q, size_t m, pcclDataType_t dt, uint8_t *out) {
    if (dt == pcclDouble) {
        for (size_t i = 0; i < m; i++) memcpy(out + 8 * i, &lut[q[i]], 8);
    } else if (dt == pcclFloat) {
        float t[16];
        for (unsigned k = 0; k < levels; k++) t[k] = (float)lut[k];
        for (size_t i = 0; i < m; i++) memcpy(out + 4 * i, &t[q[i]], 4);
    } else {
        uint16_t t[16];
        for (unsigned k = 0; k < levels; k++)
            t[k] = dt == pcclFloat16 ? pccl_f32_to_f16((float)lut[k]) : pccl_f32_to_bf16((float)lut[k]);
        for (size_t i = 0; i < m; i++) memcpy(out + 2 * i, &t[q[i]], 2);
    }
}

/* out[i] += the group's value of q[i], in float (pccl_reduce_into's float sum, fused into one pass). */
static void lookup_add_f32(const double *lut, unsigned levels, const uint8_t *q, size_t m, uint8_t *out) {
    float t[16];
    for (unsigned k = 0; k < levels; k++) t[k] = (float)lut[k];
    for (size_t i = 0; i < m; i++) {
        float a;
        memcpy(&a, out + 4 * i, 4);
        a = a + t[q[i]];
        memcpy(out + 4 * i, &a, 4);
    }
}

int pccl_qlow_decode(const uint8_t *wire, size_t n, unsigned bits, void *dst, pcclDataType_t dt, int reduce,
                     pcclRedOp_t op) {
    if (check_block(wire, n, bits) != 0) return -PERR_PROTOCOL;
    const unsigned levels = 1u << bits, algo = wire[0];
    const size_t esz = pccl_dtype_size(dt);
    const int fused = reduce && dt == pcclFloat && (op == pcclSum || op == pcclAvg);
    const uint8_t *g = wire + PREFIX;
    uint8_t q[G + 3];
    uint64_t typed[G]; /* one decoded group in dt, aligned for any dt */
    double lut[16];
    for (size_t s = 0; s < n; s += G, g += group_stride(bits)) {
        const size_t m = n - s < G ? n - s : G;
        uint8_t *out = (uint8_t *)dst + s * esz;
        group_table(g, algo, bits, lut);
        unpack(g + GHDR, m, bits, q);
        if (fused) {
            lookup_add_f32(lut, levels, q, m, out);
        } else if (!reduce) {
            lookup(lut, levels, q, m, dt, out);
        } else {
            lookup(lut, levels, q, m, dt, (uint8_t *)typed);
            pccl_reduce_into(out, typed, m, dt, op);
        }
    }
    return 0;
}
