/* e2e_dtype.h - exact values of every dtype and the check macro of the e2e all-reduce peers. */
#ifndef PCCL_E2E_DTYPE_H
#define PCCL_E2E_DTYPE_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>

#include "pccl.h"
#include "pccl_kernels.h"

/* Counts a failed check (the includer defines `failures` and `g_rank`) and says what failed. */
#define EXPECT(cond, ...)                                                                                             \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            failures++;                                                                                               \
            fprintf(stderr, "rank %d: FAILED: ", g_rank);                                                             \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fprintf(stderr, "\n");                                                                                    \
        }                                                                                                             \
    } while (0)

static inline int is_int(pcclDataType_t dt) {
    return dt != pcclFloat && dt != pcclDouble && dt != pcclFloat16 && dt != pcclBFloat16;
}

static inline void store(void *buf, size_t i, pcclDataType_t dt, double v) {
    switch (dt) {
    case pcclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case pcclInt8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case pcclUint16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case pcclInt16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case pcclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case pcclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case pcclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case pcclInt64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case pcclFloat: ((float *)buf)[i] = (float)v; break;
    case pcclDouble: ((double *)buf)[i] = v; break;
    case pcclFloat16: ((uint16_t *)buf)[i] = pccl_float_to_half((float)v); break;
    case pcclBFloat16: ((uint16_t *)buf)[i] = pccl_float_to_bf16((float)v); break;
    default: break;
    }
}

static inline double load(const void *buf, size_t i, pcclDataType_t dt) {
    switch (dt) {
    case pcclUint8: return ((const uint8_t *)buf)[i];
    case pcclInt8: return ((const int8_t *)buf)[i];
    case pcclUint16: return ((const uint16_t *)buf)[i];
    case pcclInt16: return ((const int16_t *)buf)[i];
    case pcclUint32: return ((const uint32_t *)buf)[i];
    case pcclInt32: return ((const int32_t *)buf)[i];
    case pcclUint64: return (double)((const uint64_t *)buf)[i];
    case pcclInt64: return (double)((const int64_t *)buf)[i];
    case pcclFloat: return ((const float *)buf)[i];
    case pcclDouble: return ((const double *)buf)[i];
    case pcclFloat16: return pccl_half_to_float(((const uint16_t *)buf)[i]);
    case pcclBFloat16: return pccl_bf16_to_float(((const uint16_t *)buf)[i]);
    default: return NAN;
    }
}

/* Contribution of the peer numbered id at element i: small enough that products of 4 peers never overflow,
 * negative in some places for the signed and floating dtypes. */
static inline double e2e_contrib(int id, size_t i, pcclDataType_t dt) {
    int v = (int)((i * 31 + (size_t)id * 17) % 5) + 1; /* 1..5 */
    if (dt == pcclInt8 || dt == pcclInt16 || dt == pcclInt32 || dt == pcclInt64 || !is_int(dt))
        if ((i + (size_t)id) % 3 == 0) v = -v;
    return v;
}

/* The exact sum/avg/... acc of world contributions as the dtype stores it (avg divided at the end). */
static inline double finish_expected(double acc, pcclDataType_t dt, pcclRedOp_t op, int world) {
    if (op == pcclAvg) acc = is_int(dt) ? trunc(acc / world) : acc / world;
    if (dt == pcclFloat) acc = (float)acc;
    if (dt == pcclFloat16) acc = pccl_half_to_float(pccl_float_to_half((float)acc));
    if (dt == pcclBFloat16) acc = pccl_bf16_to_float(pccl_float_to_bf16((float)acc));
    return acc;
}

/* Element i of the reduction of the contributions of ids 0..world-1 with op, computed here in ring-independent
 * order (exact for the test's small integers), as the dtype stores it. */
static inline double e2e_reduced(size_t i, pcclDataType_t dt, pcclRedOp_t op, int world) {
    double acc = e2e_contrib(0, i, dt);
    for (int id = 1; id < world; id++) {
        double v = e2e_contrib(id, i, dt);
        switch (op) {
        case pcclSum: case pcclAvg: acc += v; break;
        case pcclProd: acc *= v; break;
        case pcclMax: acc = v > acc ? v : acc; break;
        case pcclMin: acc = v < acc ? v : acc; break;
        }
    }
    return finish_expected(acc, dt, op, world);
}

/* A plain (unquantized) descriptor. */
static inline pcclReduceDescriptor_t desc(size_t count, pcclRedOp_t op, uint64_t tag, pcclDataType_t dt) {
    pcclReduceDescriptor_t d = {.count = count, .op = op, .tag = tag,
                                .src_descriptor = {.datatype = dt, .distribution_hint = pcclDistributionNone},
                                .quantization_options = {.quantized_datatype = dt, .algorithm = pcclQuantNone}};
    return d;
}

#endif
