/*
 * dtype.c - element sizes and names of pcclDataType_t, and the exported
 * float16/bfloat16 conversions (the inline versions are in pccl_half.h).
 */
#include "pccl_kernels.h"
#include "pccl_half.h"
#include "pccl_compress.h"

#include <string.h>

size_t pccl_dtype_size(pcclDataType_t dt)
{
    switch (dt) {
    case pcclUint8:
    case pcclInt8:
        return 1;
    case pcclInt16:
    case pcclUint16:
    case pcclFloat16:
    case pcclBFloat16:
        return 2;
    case pcclUint32:
    case pcclInt32:
    case pcclFloat:
        return 4;
    case pcclUint64:
    case pcclInt64:
    case pcclDouble:
        return 8;
    }
    return 0; /* out of range */
}

static const struct {
    pcclDataType_t dt;
    const char *name;
} pccl_dtype_names[] = {
    {pcclUint8, "uint8"},     {pcclInt8, "int8"},         {pcclInt16, "int16"},
    {pcclUint16, "uint16"},   {pcclUint32, "uint32"},     {pcclInt32, "int32"},
    {pcclUint64, "uint64"},   {pcclInt64, "int64"},       {pcclFloat16, "float16"},
    {pcclBFloat16, "bfloat16"}, {pcclFloat, "float"},     {pcclDouble, "double"},
};

/* Spellings common in ML code, accepted on input only. */
static const struct {
    pcclDataType_t dt;
    const char *name;
} pccl_dtype_aliases[] = {
    {pcclFloat16, "half"}, {pcclFloat16, "fp16"}, {pcclBFloat16, "bf16"},
    {pcclFloat, "float32"}, {pcclFloat, "fp32"},  {pcclDouble, "float64"},
    {pcclDouble, "fp64"},
};

#define PCCL_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

const char *pccl_dtype_name(pcclDataType_t dt)
{
    for (size_t i = 0; i < PCCL_COUNT_OF(pccl_dtype_names); i++)
        if (pccl_dtype_names[i].dt == dt)
            return pccl_dtype_names[i].name;
    /* Codes of pccl_compress.h: named (logs, the master's reasons), never parsed as a buffer's type. */
    if ((int)dt == (int)pcclExtUint4)
        return "uint4";
    if ((int)dt == (int)pcclExtUint2)
        return "uint2";
    return "invalid";
}

bool pccl_dtype_parse(const char *name, pcclDataType_t *out)
{
    if (!name)
        return false;
    for (size_t i = 0; i < PCCL_COUNT_OF(pccl_dtype_names); i++) {
        if (strcmp(name, pccl_dtype_names[i].name) == 0) {
            if (out)
                *out = pccl_dtype_names[i].dt;
            return true;
        }
    }
    for (size_t i = 0; i < PCCL_COUNT_OF(pccl_dtype_aliases); i++) {
        if (strcmp(name, pccl_dtype_aliases[i].name) == 0) {
            if (out)
                *out = pccl_dtype_aliases[i].dt;
            return true;
        }
    }
    return false;
}

float pccl_half_to_float(uint16_t h) { return pccl_f16_to_f32(h); }
uint16_t pccl_float_to_half(float f) { return pccl_f32_to_f16(f); }
float pccl_bf16_to_float(uint16_t h) { return pccl_bf16_to_f32(h); }
uint16_t pccl_float_to_bf16(float f) { return pccl_f32_to_bf16(f); }
