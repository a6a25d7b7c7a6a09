/* collective.c - pccl_coll.h's calls over the shared operation record, and the API edge's retry loop
 * (op_record.h). */
#include "op/op_record.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

pcclResult_t op_multiple_with_retry(pcclComm_t *c, const pcclExtCollDescriptor_t *descs, size_t n,
                                    pcclExtCollInfo_t *infos, int max_in_flight) {
    size_t *todo = malloc(n * sizeof *todo), *failed = malloc(n * sizeof *failed), ntodo = n;
    pccl_op_t **h = malloc(n * sizeof *h);
    pcclResult_t result = todo && failed && h ? pcclSuccess : pcclInternalError;
    for (size_t i = 0; todo && i < n; i++) todo[i] = i;
    /* Rounds: every member sees the same per-tag outcomes, so every member retries the same list. */
    while (ntodo && result == pcclSuccess) {
        size_t nfailed = 0, launched = 0, awaited = 0;
        while (awaited < ntodo) {
            while (launched < ntodo && launched - awaited < (size_t)max_in_flight) {
                pcclResult_t lr = comm_check_ready(c);
                int rc = lr == pcclSuccess ? op_launch(c, &descs[todo[launched]], 1, &h[launched]) : 0;
                if (lr == pcclSuccess) lr = op_result(c, rc);
                if (lr != pcclSuccess) {
                    result = lr;
                    break;
                }
                launched++;
            }
            if (awaited == launched) break;
            size_t i = todo[awaited];
            pcclExtCollInfo_t one = {0};
            pcclResult_t ar = op_result(c, op_finish(c, h[awaited], &one));
            one.tx_bytes += infos[i].tx_bytes;
            one.rx_bytes += infos[i].rx_bytes;
            infos[i] = one;
            if (ar == pcclRankConnectionLost) failed[nfailed++] = i;
            else if (ar != pcclSuccess && result == pcclSuccess) result = ar;
            awaited++;
        }
        memcpy(todo, failed, nfailed * sizeof *todo);
        ntodo = nfailed;
    }
    free(todo);
    free(failed);
    free(h);
    return result;
}

/* The descriptor a collective runs with: 0 or -PERR_INVALID (an all-reduce, which has its own calls; logged).
 * A barrier carries no buffers, count or dtype, whatever the caller left in them. */
static int normalize(const pcclExtCollDescriptor_t *desc, pcclExtCollDescriptor_t *out) {
    if (!desc) return -PERR_INVALID;
    if (desc->kind == pcclExtCollAllReduce) {
        PLOG_ERROR("pccl", "tag %llu: all-reduces run through pcclAllReduce, not pcclExtCollective",
                   (unsigned long long)desc->tag);
        return -PERR_INVALID;
    }
    *out = *desc;
    if (out->kind == pcclExtCollBarrier) {
        out->sendbuf = out->recvbuf = NULL;
        out->count = out->recv_capacity = 0;
        out->datatype = pcclUint8;
        out->op = pcclSum;
        out->quantization_options = (pcclQuantizationOptions_t){0};
    }
    return 0;
}

/* Normalizes and launches (op_launch). */
static int launch(const pcclExtCollDescriptor_t *desc, pcclComm_t *c, int is_async, pccl_op_t **o) {
    pcclExtCollDescriptor_t d;
    int rc = normalize(desc, &d);
    return rc ? rc : op_launch(c, &d, is_async, o);
}

pcclResult_t pcclExtCollective(const pcclExtCollDescriptor_t *desc, const pcclComm_t *communicator,
                               pcclExtCollInfo_t *info) {
    pcclComm_t *c = (pcclComm_t *)communicator;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    pccl_op_t *o;
    int rc = launch(desc, c, 0, &o);
    if (rc == 0) {
        pcclExtCollInfo_t ci;
        op_run(o);
        rc = op_finish(c, o, &ci);
        if (info) *info = ci;
    }
    return op_result(c, rc);
}

pcclResult_t pcclExtCollectiveAsync(const pcclExtCollDescriptor_t *desc, const pcclComm_t *communicator,
                                    pcclExtAsyncCollOp_t *handle) {
    pcclComm_t *c = (pcclComm_t *)communicator;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    pccl_op_t *o;
    int rc = handle ? launch(desc, c, 1, &o) : -PERR_INVALID;
    if (rc == 0) *handle = (pcclExtAsyncCollOp_t){.comm = c, .tag = desc->tag};
    return op_result(c, rc);
}

pcclResult_t pcclExtAwaitCollective(const pcclExtAsyncCollOp_t *handle, pcclExtCollInfo_t *info) {
    if (!handle || !handle->comm) return pcclInvalidArgument;
    pcclExtCollInfo_t ci = {0};
    int rc = op_await(handle->comm, handle->tag, &ci);
    if (info && rc != -PERR_INVALID) *info = ci;
    return op_result(handle->comm, rc);
}

pcclResult_t pcclExtCollectiveMultipleWithRetry(const pcclExtCollDescriptor_t *descs, size_t n,
                                                const pcclComm_t *communicator, pcclExtCollInfo_t *info,
                                                int max_in_flight) {
    pcclComm_t *c = (pcclComm_t *)communicator;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if (!descs || n == 0 || max_in_flight <= 0) return pcclInvalidArgument;
    pcclExtCollDescriptor_t *ds = malloc(n * sizeof *ds);
    pcclExtCollInfo_t *infos = calloc(n, sizeof *infos);
    int rc = ds && infos ? 0 : -PERR_NOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        pcclExtCollDescriptor_t nd;
        if ((rc = normalize(&descs[i], &nd)) == 0) rc = op_validate(&nd, &ds[i]);
    }
    r = rc == 0 ? op_multiple_with_retry(c, ds, n, infos, max_in_flight) : op_result(c, rc);
    if (info && infos) memcpy(info, infos, n * sizeof *info);
    free(ds);
    free(infos);
    return r;
}

pcclResult_t pcclExtBroadcast(const void *sendbuf, void *recvbuf, uint64_t count, pcclDataType_t datatype,
                              bool is_root, uint64_t tag, const pcclComm_t *communicator, pcclExtCollInfo_t *info) {
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollBroadcast, .tag = tag, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                 .count = count, .recv_capacity = count, .datatype = datatype,
                                 .flags = is_root ? PCCL_EXT_COLL_ROOT : 0};
    return pcclExtCollective(&d, communicator, info);
}

pcclResult_t pcclExtAllGather(const void *sendbuf, void *recvbuf, uint64_t count, uint64_t recv_capacity,
                              pcclDataType_t datatype, uint64_t tag, const pcclComm_t *communicator,
                              pcclExtCollInfo_t *info) {
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollAllGather, .tag = tag, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                 .count = count, .recv_capacity = recv_capacity, .datatype = datatype};
    return pcclExtCollective(&d, communicator, info);
}

pcclResult_t pcclExtAllGatherV(const void *sendbuf, uint64_t count, void *recvbuf, uint64_t recv_capacity,
                               uint64_t *counts, uint32_t counts_capacity, pcclDataType_t datatype, uint64_t tag,
                               const pcclComm_t *communicator, pcclExtCollInfo_t *info) {
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollAllGatherV, .tag = tag, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                 .count = count, .recv_capacity = recv_capacity, .datatype = datatype,
                                 .counts = counts, .counts_capacity = counts_capacity};
    return pcclExtCollective(&d, communicator, info);
}

pcclResult_t pcclExtReduceScatter(const void *sendbuf, void *recvbuf, uint64_t count, uint64_t recv_capacity,
                                  pcclDataType_t datatype, pcclRedOp_t op, uint64_t tag,
                                  const pcclComm_t *communicator, pcclExtCollInfo_t *info) {
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollReduceScatter, .tag = tag, .sendbuf = sendbuf,
                                 .recvbuf = recvbuf, .count = count, .recv_capacity = recv_capacity,
                                 .datatype = datatype, .op = op,
                                 .quantization_options = {.quantized_datatype = datatype,
                                                          .algorithm = pcclQuantNone}};
    return pcclExtCollective(&d, communicator, info);
}

pcclResult_t pcclExtBarrier(uint64_t tag, const pcclComm_t *communicator, pcclExtCollInfo_t *info) {
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollBarrier, .tag = tag};
    return pcclExtCollective(&d, communicator, info);
}
