/*
 * quant_spec.c - the command line's spelling of quantization options ("minmax:uint4", "zps:int8", "none"),
 * shared by `pccl join --quantize` and the benchmarks.
 */
#include "pccl_compress.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "base/err.h"

#include <string.h>

int pccl_quant_parse(const char *s, pcclQuantizationOptions_t *q) {
    if (!s) return -PERR_INVALID;
    if (!strcmp(s, "none")) {
        *q = (pcclQuantizationOptions_t){.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone};
        return 0;
    }
    const char *colon = strchr(s, ':');
    if (!colon) return -PERR_INVALID;
    const size_t alen = (size_t)(colon - s);
    pcclQuantizationOptions_t r;
    if (alen == 6 && !strncmp(s, "minmax", 6)) r.algorithm = pcclQuantMinMax;
    else if ((alen == 16 && !strncmp(s, "zero-point-scale", 16)) || (alen == 3 && !strncmp(s, "zps", 3)))
        r.algorithm = pcclQuantZeroPointScale;
    else return -PERR_INVALID;
    const char *t = colon + 1;
    if (!strcmp(t, "uint4")) r.quantized_datatype = pcclExtUint4;
    else if (!strcmp(t, "uint2")) r.quantized_datatype = pcclExtUint2;
    else if (!pccl_dtype_parse(t, &r.quantized_datatype)) return -PERR_INVALID;
    if (pccl_quant_check(pcclFloat, r.algorithm, r.quantized_datatype) != 0) return -PERR_INVALID;
    *q = r;
    return 0;
}
