/* allreduce.c - the all-reduce kind (its data movement: the ring all-reduce, quantized or not, striped over the
 * connection slots, or recursive halving and doubling, op_rhd.c) and PCCL 1.0's all-reduce calls over the shared operation record (op_record.h). */
#include "op/op_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"

static int ar_validate(const pcclExtCollDescriptor_t *d) {
    if (!d->recvbuf || d->count == 0) return -PERR_INVALID;
    int rc = op_check_buffers(d, d->count, d->count);
    return rc ? rc : op_check_reduce(d);
}

/* Only in place needs a backup: out of place sendbuf is never written, so a failed op leaves the input intact
 * (recvbuf is then undefined) and a retry needs nothing restored; the plain ring also reads sendbuf directly, so
 * it copies nothing either. The plain ring takes the backup itself as it goes (ring_io_t.backup). */
static int ar_plan(pccl_op_t *o) {
    size_t bytes = o->d.count * pccl_dtype_size(o->d.datatype);
    o->info.count = o->d.count;
    o->move_bytes = bytes;
    o->splices = op_algo_rhd(o) ? P2P_SPLICE_NEVER : P2P_SPLICE_ALL_REDUCE;
    if (op_in_place(o)) {
        o->bk_len = bytes;
        o->ring_backs_up = o->d.quantization_options.algorithm == pcclQuantNone && !op_algo_rhd(o);
    }
    return 0;
}

/* The ring of this op (quantized or not) over its k stripes' connected sockets, or the recursive halving and
 * doubling (quantized or not, over k stripes) when the master chose it; the rank is the ring position. */
static int ar_run(pccl_op_t *o, ring_io_t *ios, uint32_t k) {
    const pcclExtCollDescriptor_t *d = &o->d;
    const pcclQuantizationOptions_t *qo = &d->quantization_options;
    pcclDataType_t dt = d->datatype;
    uint32_t me = o->pos, n = o->world;
    if (op_algo_rhd(o)) return op_rhd_allreduce(o, ios, k);
    if (qo->algorithm == pcclQuantNone) {
        if (k == 1) return ring_allreduce(ios, d->sendbuf, d->recvbuf, d->count, dt, d->op, me, n, o->op_seq);
        return ring_allreduce_striped(ios, k, d->sendbuf, d->recvbuf, d->count, dt, d->op, pcclQuantNone, dt, NULL,
                                      me, n, o->op_seq);
    }
    size_t need = ring_quant_wire_bytes(d->count, qo->quantized_datatype, n), cap = 0;
    uint8_t *wire = bufpool_get(&o->comm->buffers, need, &cap);
    if (!wire) {
        snprintf(ios->err, sizeof ios->err, "out of memory for %zu bytes of quantized blocks", need);
        return -PERR_IO;
    }
    if (!op_in_place(o)) memcpy(d->recvbuf, d->sendbuf, o->move_bytes); /* the quantized ring works in place */
    int rc = k == 1 ? ring_allreduce_quant(ios, d->recvbuf, d->count, dt, d->op, qo->algorithm,
                                           qo->quantized_datatype, wire, me, n, o->op_seq)
                    : ring_allreduce_striped(ios, k, d->recvbuf, d->recvbuf, d->count, dt, d->op, qo->algorithm,
                                             qo->quantized_datatype, wire, me, n, o->op_seq);
    bufpool_put(&o->comm->buffers, wire, cap);
    return rc;
}

const op_kind_t op_kind_all_reduce = {"all_reduce", 1, ar_validate, ar_plan, ar_run};

/* PCCL 1.0's descriptor as the shared one (both buffers are required). */
static int as_collective(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                         pcclExtCollDescriptor_t *out) {
    if (!sendbuf || !recvbuf || !d) return -PERR_INVALID;
    *out = (pcclExtCollDescriptor_t){.kind = pcclExtCollAllReduce, .tag = d->tag, .sendbuf = sendbuf,
                                     .recvbuf = recvbuf, .count = d->count, .recv_capacity = d->count,
                                     .datatype = d->src_descriptor.datatype, .op = d->op,
                                     .quantization_options = d->quantization_options};
    return 0;
}

static void reduce_info(const pcclExtCollInfo_t *ci, pcclReduceInfo_t *info) {
    if (info) *info = (pcclReduceInfo_t){.local_world_size = ci->world_size, .tx_bytes = ci->tx_bytes,
                                         .rx_bytes = ci->rx_bytes};
}

/* Launch only registers the op and hands it to a parked worker, which votes and runs it. */
pcclResult_t pcclAllReduceAsync(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                                const pcclComm_t *cc, pcclAsyncReduceOp_t *handle) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    pcclExtCollDescriptor_t cd;
    pccl_op_t *o;
    int rc = handle ? as_collective(sendbuf, recvbuf, d, &cd) : -PERR_INVALID;
    if (rc == 0) rc = op_launch(c, &cd, 1, &o);
    if (rc == 0) *handle = (pcclAsyncReduceOp_t){.comm = c, .tag = d->tag};
    return op_result(c, rc);
}

pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *h, pcclReduceInfo_t *info) {
    if (!h || !h->comm) return pcclInvalidArgument;
    pcclExtCollInfo_t ci = {0};
    int rc = op_await(h->comm, h->tag, &ci);
    if (rc != -PERR_INVALID) reduce_info(&ci, info);
    return op_result(h->comm, rc);
}

/* The blocking call runs the op on the caller's thread: no hand-off to a worker and back. */
pcclResult_t pcclAllReduce(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                           const pcclComm_t *cc, pcclReduceInfo_t *info) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    pcclExtCollDescriptor_t cd;
    pccl_op_t *o;
    int rc = as_collective(sendbuf, recvbuf, d, &cd);
    if (rc == 0) rc = op_launch(c, &cd, 0, &o);
    if (rc == 0) {
        pcclExtCollInfo_t ci;
        op_run(o);
        rc = op_finish(c, o, &ci);
        reduce_info(&ci, info);
    }
    return op_result(c, rc);
}

pcclResult_t pcclAllReduceMultipleWithRetry(const pcclReduceOpDescriptor_t *descs, size_t count,
                                            const pcclComm_t *cc, pcclReduceInfo_t *info, int max_in_flight) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if (!descs || count == 0 || max_in_flight <= 0) return pcclInvalidArgument;
    pcclExtCollDescriptor_t *cds = malloc(count * sizeof *cds);
    pcclExtCollInfo_t *infos = calloc(count, sizeof *infos);
    int rc = cds && infos ? 0 : -PERR_NOMEM;
    for (size_t i = 0; i < count && rc == 0; i++) {
        pcclExtCollDescriptor_t d;
        if ((rc = as_collective(descs[i].sendbuf, descs[i].recvbuf, &descs[i].descriptor, &d)) == 0)
            rc = op_validate(&d, &cds[i]);
    }
    r = rc == 0 ? op_multiple_with_retry(c, cds, count, infos, max_in_flight) : op_result(c, rc);
    pcclReduceInfo_t total = {0};
    for (size_t i = 0; infos && i < count; i++) {
        total.tx_bytes += infos[i].tx_bytes;
        total.rx_bytes += infos[i].rx_bytes;
        if (infos[i].world_size) total.local_world_size = infos[i].world_size;
    }
    if (info) *info = total;
    free(cds);
    free(infos);
    return r;
}
