/*
 * pg_reduce.h - the fashion-mnist workload's all-reduce of a pseudo-gradient, dense (pcclAllReduceAsync, quantized
 * as --quantize says) or sparse (pcclExtSparseAllReduce with error feedback, as --sparsify says), launched and
 * awaited apart so that inner steps can run in between. The sparse all-reduce blocks, so it runs on a thread of its
 * own; the caller makes no library call on the communicator until it awaited.
 */
#ifndef PCCL_WORKLOAD_PG_REDUCE_H
#define PCCL_WORKLOAD_PG_REDUCE_H

#include <pthread.h>
#include <stddef.h>

#include "join.h"
#include "pccl.h"
#include "pccl_sparse.h"

typedef struct {
    const join_opts_t *o;
    pcclComm_t *comm;
    float *buf;
    size_t n;
    uint64_t tag;
    pcclExtSparseResidual_t *residual; /* NULL: dense */
    pcclAsyncReduceOp_t handle;        /* dense */
    pthread_t thread;                  /* sparse */
    pcclExtSparseInfo_t info;          /* sparse, written by the thread */
    pcclResult_t launched;             /* pcclSuccess while an operation is to be awaited */
} pg_reduce_t;

/* Launches the average of buf[0, n) over the group (in place) under tag; residual is n floats' (NULL: dense).
 * Await it with pg_await whatever this returned. */
void pg_launch(pg_reduce_t *r, pcclComm_t *comm, const join_opts_t *o, float *buf, size_t n, uint64_t tag,
               pcclExtSparseResidual_t *residual);
/* The operation's result; its bytes and world size into *ri. */
pcclResult_t pg_await(pg_reduce_t *r, pcclReduceInfo_t *ri);

#endif
