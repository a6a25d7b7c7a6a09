/* sparse_residual.c - pccl_sparse.h's residual object and the parser of "topk:FRACTION[:BITS]". */
#include "op/sparse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "pccl_kernels.h"

int sparse_dtype_ok(pcclDataType_t dt) { return dt == pcclFloat || dt == pcclDouble; }

pcclResult_t pcclExtSparseResidualCreate(uint64_t count, pcclDataType_t datatype, pcclExtSparseResidual_t **out) {
    if (!out || count == 0 || !sparse_dtype_ok(datatype)) {
        PLOG_ERROR("pccl", "sparse residual: needs an out pointer, a count above 0 and dtype float or double");
        return pcclInvalidArgument;
    }
    size_t esz = pccl_dtype_size(datatype);
    if (count > SIZE_MAX / esz) {
        PLOG_ERROR("pccl", "sparse residual: %llu elements overflow the address space", (unsigned long long)count);
        return pcclInvalidArgument;
    }
    pcclExtSparseResidual_t *r = calloc(1, sizeof *r);
    void *data = r ? calloc((size_t)count, esz) : NULL;
    if (!data) {
        free(r);
        return pcclInternalError;
    }
    *r = (pcclExtSparseResidual_t){.count = count, .datatype = datatype, .data = data};
    *out = r;
    return pcclSuccess;
}

void pcclExtSparseResidualDestroy(pcclExtSparseResidual_t *residual) {
    if (!residual) return;
    free(residual->data);
    free(residual);
}

pcclResult_t pcclExtSparseResidualReset(pcclExtSparseResidual_t *residual) {
    if (!residual) return pcclInvalidArgument;
    memset(residual->data, 0, (size_t)residual->count * pccl_dtype_size(residual->datatype));
    return pcclSuccess;
}

const void *pcclExtSparseResidualData(const pcclExtSparseResidual_t *residual) {
    return residual ? residual->data : NULL;
}

int sparse_check_settings(double fraction, int bits, const char *who) {
    if (!(fraction > 0.0 && fraction <= 1.0)) {
        PLOG_ERROR("pccl", "%s: the fraction %g is outside (0, 1]", who, fraction);
        return -PERR_INVALID;
    }
    if (bits != 0 && bits != 2 && bits != 4) {
        PLOG_ERROR("pccl", "%s: %d bits do not exist (0: unquantized, 2 or 4)", who, bits);
        return -PERR_INVALID;
    }
    return 0;
}

/* "topk:FRACTION[:BITS]": 0 with both parsed, else -PERR_INVALID (logged). */
static int parse(const char *spec, double *fraction, int *bits) {
    if (!spec || strncmp(spec, "topk:", 5) != 0) {
        PLOG_ERROR("pccl", "sparsify '%s': expected topk:FRACTION[:BITS] (e.g. topk:0.03:2)", spec ? spec : "");
        return -PERR_INVALID;
    }
    char *end;
    errno = 0;
    double f = strtod(spec + 5, &end);
    long b = 0;
    if (end == spec + 5 || errno || (*end && *end != ':')) {
        PLOG_ERROR("pccl", "sparsify '%s': the fraction is not a number", spec);
        return -PERR_INVALID;
    }
    if (*end == ':') {
        const char *bs = end + 1;
        b = strtol(bs, &end, 10);
        if (end == bs || *end || b < 0 || b > 64) {
            PLOG_ERROR("pccl", "sparsify '%s': BITS is 0, 2 or 4", spec);
            return -PERR_INVALID;
        }
    }
    if (sparse_check_settings(f, (int)b, "sparsify") != 0) return -PERR_INVALID;
    *fraction = f;
    *bits = (int)b;
    return 0;
}

pcclResult_t pcclExtSparseParse(const char *spec, double *fraction, int *bits) {
    if (!fraction || !bits) return pcclInvalidArgument;
    return perr_result(parse(spec, fraction, bits));
}
