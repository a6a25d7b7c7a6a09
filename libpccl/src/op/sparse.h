/* sparse.h - the sparse all-reduce's residual object and shared checks (internal to op/; pccl_sparse.h). */
#ifndef PCCL_OP_SPARSE_H
#define PCCL_OP_SPARSE_H

#include <stdint.h>

#include "pccl_sparse.h"

struct pcclExtSparseResidual {
    uint64_t count;
    pcclDataType_t datatype;
    void *data; /* count elements; replaced whole by a succeeded call */
};

/* float or double: the dtypes a sparse all-reduce takes. */
int sparse_dtype_ok(pcclDataType_t dt);
/* fraction in (0, 1] and bits 0, 2 or 4: 0, or -PERR_INVALID with the reason logged under who. */
int sparse_check_settings(double fraction, int bits, const char *who);

#endif
