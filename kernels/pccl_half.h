/*
 * pccl_half.h - inline float16/bfloat16 <-> float32 conversions (internal).
 *
 * Branch-free (selects only) so that the reduce loops that call them
 * auto-vectorize; x86-64-v2 has no F16C. dtype.c exports them as functions.
 * Rounding is IEEE round-to-nearest-even, independent of the FP environment
 * except for the denormal path of pccl_f32_to_f16, which uses one float add
 * (exact under the default rounding mode).
 * NaNs keep their sign and as much payload as fits; a float NaN whose kept
 * payload bits would all be zero gets the quiet bit so it stays a NaN.
 */
#ifndef PCCL_HALF_H
#define PCCL_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t pccl_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float pccl_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* c ? x : y with a mask instead of a branch. The denormal paths below use
 * a float operation; written as a ternary, GCC sinks that operation into a
 * branch and then (FP ops may trap) refuses to vectorize the loop. A mask
 * keeps the operation unconditional. */
static inline uint32_t pccl_select_u32(int c, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - (uint32_t)(c != 0);
    return (x & m) | (y & ~m);
}

static inline float pccl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    /* Normal: rebias the exponent from 15 to 127. */
    uint32_t normal = sign | ((exp + 112u) << 23) | (man << 13);
    /* Inf/NaN: all-ones exponent, payload shifted into place. */
    uint32_t special = sign | 0x7F800000u | (man << 13);
    /* Zero/denormal: exactly man * 2^-24, a normal float (or zero). */
    uint32_t sub = sign | pccl_f32_bits((float)man * 0x1p-24f);
    uint32_t r = exp == 0x1Fu ? special : normal;
    return pccl_bits_f32(pccl_select_u32(exp == 0, sub, r));
}

static inline uint16_t pccl_f32_to_f16(float f)
{
    uint32_t x = pccl_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7FFFFFFFu;

    /* Normal range: rebias, then round to nearest even on the 13 dropped
     * bits; a carry out of the mantissa bumps the exponent, up to Inf. */
    uint32_t odd = (a >> 13) & 1u;
    uint32_t normal = (a - (112u << 23) + 0xFFFu + odd) >> 13;
    /* |f| < 2^-14: adding 0.5f lines the half denormal ulp (2^-24) up with
     * the float ulp of 0.5, so the FPU does the rounding; subtract it back. */
    uint32_t sub = pccl_f32_bits(pccl_bits_f32(a) + 0.5f) - 0x3F000000u;
    uint32_t nan = 0x7C00u | ((a >> 13) & 0x3FFu);
    nan = (a >> 13) & 0x3FFu ? nan : (nan | 0x200u);

    uint32_t r = pccl_select_u32(a < 0x38800000u, sub, normal);
    r = pccl_select_u32(a >= 0x47800000u, 0x7C00u, r); /* >= 65536: overflow to Inf */
    r = pccl_select_u32(a > 0x7F800000u, nan, r);
    return (uint16_t)(r | sign);
}

static inline float pccl_bf16_to_f32(uint16_t h)
{
    return pccl_bits_f32((uint32_t)h << 16);
}

static inline uint16_t pccl_f32_to_bf16(float f)
{
    uint32_t x = pccl_f32_bits(f);
    /* Round to nearest even on the low 16 bits; overflow carries into Inf. */
    uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x40u;
    nan = (x >> 16) & 0x7Fu ? (x >> 16) : nan;
    return (uint16_t)((x & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

#endif /* PCCL_HALF_H */
