/* pg_reduce.c - a pseudo-gradient's all-reduce, dense or sparse, launched and awaited apart (pg_reduce.h). */
#include "pg_reduce.h"

#include <stdint.h>
#include <string.h>

static void *sparse_main(void *arg) {
    pg_reduce_t *r = arg;
    pcclResult_t res = pcclExtSparseAllReduce(r->buf, r->buf, r->n, pcclFloat, pcclAvg, r->o->sparse_fraction,
                                              r->o->sparse_bits, r->residual, r->tag, r->comm, &r->info);
    return (void *)(intptr_t)res;
}

void pg_launch(pg_reduce_t *r, pcclComm_t *comm, const join_opts_t *o, float *buf, size_t n, uint64_t tag,
               pcclExtSparseResidual_t *residual) {
    *r = (pg_reduce_t){.o = o, .comm = comm, .buf = buf, .n = n, .tag = tag, .residual = residual};
    if (residual) {
        const float *e = pcclExtSparseResidualData(residual);
        const float decay_minus_1 = o->sparse_decay - 1.0f;
        /* The library selects from buf + residual: weighting the residual by the decay is this addition. */
        for (size_t i = 0; decay_minus_1 != 0.0f && i < n; i++) buf[i] += decay_minus_1 * e[i];
        r->launched = pthread_create(&r->thread, NULL, sparse_main, r) == 0 ? pcclSuccess : pcclInternalError;
        return;
    }
    pcclReduceDescriptor_t desc = {.count = n, .op = pcclAvg, .tag = tag,
                                   .src_descriptor = {.datatype = pcclFloat,
                                                      .distribution_hint = pcclDistributionNormal},
                                   .quantization_options = o->quant};
    r->launched = pcclAllReduceAsync(buf, buf, &desc, comm, &r->handle);
}

pcclResult_t pg_await(pg_reduce_t *r, pcclReduceInfo_t *ri) {
    memset(ri, 0, sizeof *ri);
    if (r->launched != pcclSuccess) return r->launched;
    if (!r->residual) return pcclAwaitAsyncReduce(&r->handle, ri);
    void *res = NULL;
    pthread_join(r->thread, &res);
    ri->tx_bytes = r->info.tx_bytes;
    ri->rx_bytes = r->info.rx_bytes;
    ri->local_world_size = r->info.world_size;
    return (pcclResult_t)(intptr_t)res;
}
