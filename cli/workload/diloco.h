/*
 * diloco.h - what DiLoCo (diloco.c) and Streaming DiLoCo (streaming.c) share in the fashion-mnist workload: one
 * peer's training state, its inner steps and the final report.
 */
#ifndef PCCL_WORKLOAD_DILOCO_H
#define PCCL_WORKLOAD_DILOCO_H

#include <stddef.h>
#include <stdint.h>

#include "join.h"
#include "mnist.h"
#include "optim.h"
#include "pccl.h"
#include "pccl_sparse.h"
#include "sampler.h"

typedef struct mlp_scratch mlp_scratch_t;

/* One peer's training: the shared outer parameters and momentum, its inner model, optimizer and sampler. */
typedef struct {
    size_t np;
    uint32_t batch, H;
    float *outer, *momentum, *inner, *grad, *delta;
    uint32_t *idx;
    mlp_scratch_t *scratch;
    adamw_state_t adam;
    adamw_config_t cfg;
    mnist_sampler_t sampler;
    uint64_t retries, tx_total, rx_total; /* for the done event */
    double inner_ms;                      /* time spent in inner steps, for compute_utilization */
    double prologue_ms, wait_ms;          /* time in topology updates and syncs; waiting for all-reduces */
    double t_first;                       /* when the first step began (after the world was assembled); 0 before */
    pcclExtSparseResidual_t **residual;   /* --sparsify: one per fragment, this peer's error feedback; else NULL */
} diloco_t;

double diloco_now_ms(void);
/* The first element of fragment f of K over n elements (f = K gives n). */
size_t diloco_frag_off(size_t n, uint32_t K, uint32_t f);
/* 0, or -1 after "out of memory" (t is freed either way by diloco_free). */
int diloco_init(diloco_t *t, const join_opts_t *o, const mnist_set_t *train);
void diloco_free(diloco_t *t, const join_opts_t *o);
/* n inner AdamW steps on t->inner; their summed loss is added to *loss; the time into t->inner_ms. -1 when a stop
 * request ended them (the inner steps may compute for minutes). */
int diloco_inner(diloco_t *t, const mnist_set_t *train, uint32_t n, float *loss);
/* The outer Nesterov step on elements [off, off + n) with the averaged pseudo-gradient in t->delta. */
void diloco_outer_step(diloco_t *t, const join_opts_t *o, size_t off, size_t n);
/* The two shared-state tensors (outer parameters, outer momentum) into infos[2]. */
void diloco_shared_infos(diloco_t *t, pcclTensorInfo_t infos[2]);
/* diloco_init, then the shared state ss (revision 0) over infos[2]. @return 0, or JOIN_EXIT_FAILED (t freed). */
int diloco_start(diloco_t *t, const join_opts_t *o, const mnist_set_t *train, pcclTensorInfo_t infos[2],
                 pcclSharedState_t *ss);
/* After the last step: a final sync, the test set's accuracy, the hashes every peer must agree on, the bytes and the
 * share of wall time spent in inner steps. */
void diloco_emit_done(pcclComm_t *comm, const join_opts_t *o, const diloco_t *t, pcclSharedState_t *ss,
                      const mnist_set_t *test);

/* Streaming DiLoCo (streaming.c): the loop of `--fragments K` (K > 1) or `--overlap-steps` > 0. */
int workload_streaming_diloco(pcclComm_t *comm, const join_opts_t *o, const join_data_t *d);

#endif
