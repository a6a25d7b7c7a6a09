/* quant_values.h - what the quantization tests (test_quant*.c) share: a seeded generator, values stored in
 * and loaded from every floating source type, and half an ulp of each (the final rounding of a decode). */
#ifndef PCCL_TEST_QUANT_VALUES_H
#define PCCL_TEST_QUANT_VALUES_H

#include "pccl.h"
#include "pccl_half.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t qv_rng = 0x243F6A8885A308D3ull;
static inline double urand(void) { /* [0, 1) */
    qv_rng ^= qv_rng >> 12;
    qv_rng ^= qv_rng << 25;
    qv_rng ^= qv_rng >> 27;
    return (double)((qv_rng * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

static inline void store(void *buf, size_t i, pcclDataType_t dt, double v) {
    uint8_t *b = buf;
    if (dt == pcclFloat) { float f = (float)v; memcpy(b + 4 * i, &f, 4); }
    else if (dt == pcclDouble) memcpy(b + 8 * i, &v, 8);
    else { uint16_t h = dt == pcclFloat16 ? pccl_f32_to_f16((float)v) : pccl_f32_to_bf16((float)v); memcpy(b + 2 * i, &h, 2); }
}
static inline double load(const void *buf, size_t i, pcclDataType_t dt) {
    const uint8_t *b = buf;
    if (dt == pcclFloat) { float f; memcpy(&f, b + 4 * i, 4); return f; }
    if (dt == pcclDouble) { double d; memcpy(&d, b + 8 * i, 8); return d; }
    uint16_t h;
    memcpy(&h, b + 2 * i, 2);
    return dt == pcclFloat16 ? pccl_f16_to_f32(h) : pccl_bf16_to_f32(h);
}
/* Half an ulp of the source type at |v| (the final rounding), plus its smallest step. */
static inline double half_ulp(pcclDataType_t dt, double v) {
    double rel = dt == pcclFloat ? 0x1p-24 : dt == pcclDouble ? 0x1p-53 : dt == pcclFloat16 ? 0x1p-11 : 0x1p-8;
    double tiny = dt == pcclFloat ? 0x1p-149 : dt == pcclDouble ? 0x1p-1074 : dt == pcclFloat16 ? 0x1p-24 : 0x1p-133;
    return fabs(v) * rel + tiny;
}

/* The range [*lo, *hi] of the finite values of src[b0..b1) (0, 0 when none); 1 if any is NaN or Inf. */
static inline int finite_range(const void *src, size_t b0, size_t b1, pcclDataType_t dt, double *lo, double *hi) {
    int specials = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = b0; i < b1; i++) {
        double x = load(src, i, dt);
        if (!isfinite(x)) specials = 1;
        else { *lo = fmin(*lo, x); *hi = fmax(*hi, x); }
    }
    if (*lo > *hi) *lo = *hi = 0;
    return specials;
}

#endif
