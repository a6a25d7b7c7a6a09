/* op_check.c - the checks every kind's launch shares, and the table of kinds (op_record.h). */
#include "op/op_record.h"

#include "base/base.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"

const op_kind_t *op_kind_of(int k) {
    static const op_kind_t *const kinds[] = {
        [pcclExtCollAllReduce] = &op_kind_all_reduce,         [pcclExtCollBroadcast] = &op_kind_broadcast,
        [pcclExtCollAllGather] = &op_kind_all_gather,         [pcclExtCollAllGatherV] = &op_kind_all_gather_v,
        [pcclExtCollReduceScatter] = &op_kind_reduce_scatter, [pcclExtCollBarrier] = &op_kind_barrier,
    };
    return k >= 0 && (size_t)k < sizeof kinds / sizeof kinds[0] ? kinds[k] : NULL;
}

int op_in_place(const pccl_op_t *o) { return o->d.sendbuf == o->d.recvbuf; }

int op_reports_unreachable(const pccl_op_t *o, int rc) {
    return !o->pipelined && !(rc == -PERR_TIMEOUT && pwait_result(&o->w));
}

int op_check_buffers(const pcclExtCollDescriptor_t *d, uint64_t send_elems, uint64_t recv_elems) {
    size_t esz = pccl_dtype_size(d->datatype);
    if (esz == 0) {
        PLOG_ERROR("pccl", "tag %llu: unknown dtype %d", (unsigned long long)d->tag, (int)d->datatype);
        return -PERR_INVALID;
    }
    if (send_elems > SIZE_MAX / esz || recv_elems > SIZE_MAX / esz) {
        PLOG_ERROR("pccl", "tag %llu: a count overflows the address space", (unsigned long long)d->tag);
        return -PERR_INVALID;
    }
    const uint8_t *s = d->sendbuf, *r = d->recvbuf;
    if (s && r && s != r && s < r + recv_elems * esz && r < s + send_elems * esz) {
        PLOG_ERROR("pccl", "tag %llu: the send and receive buffers overlap", (unsigned long long)d->tag);
        return -PERR_INVALID;
    }
    return 0;
}

int op_check_reduce(const pcclExtCollDescriptor_t *d) {
    if ((unsigned)d->op > pcclMin) {
        PLOG_ERROR("pccl", "tag %llu: unknown reduce op %d", (unsigned long long)d->tag, (int)d->op);
        return -PERR_INVALID;
    }
    const pcclQuantizationOptions_t *q = &d->quantization_options;
    if (q->algorithm != pcclQuantNone && pccl_quant_check(d->datatype, q->algorithm, q->quantized_datatype) != 0) {
        PLOG_ERROR("pccl", "cannot quantize %s to %s with algorithm %d (sources: float, double, float16, bfloat16; "
                   "targets: uint8, int8, uint16, uint4, uint2, and float16 with zero-point-scale)",
                   pccl_dtype_name(d->datatype),
                   pccl_dtype_name(q->quantized_datatype), (int)q->algorithm);
        return -PERR_INVALID;
    }
    return 0;
}
