/*
 * diloco.c - `pccl join --workload fashion-mnist`: DiLoCo (Douillard et al.
 * 2023, arXiv:2311.08105; PCCL technical report section 3.2) training the
 * 784-128-10 MLP on Fashion-MNIST.
 *
 * Shared state: the outer parameters and the outer Nesterov momentum
 * (101,770 floats each). Each outer step: H inner AdamW steps on this peer's
 * own batches starting from the outer parameters, all-reduce (average) of the
 * pseudo-gradient outer - inner, then the outer Nesterov SGD step, which is
 * element-wise and therefore bit-identical on every peer. The inner AdamW
 * state is private to the peer and persists across outer steps.
 * With --fragments K > 1 or --overlap-steps, streaming.c runs the loop instead.
 */
#include "diloco.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mlp.h"
#include "pccl_kernels.h"
#include "pg_reduce.h"

double diloco_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

size_t diloco_frag_off(size_t n, uint32_t K, uint32_t f) { return (size_t)((unsigned __int128)n * f / K); }

/* --sparsify: a zero residual per fragment (a newcomer starts with an empty one). 0, or -1 without memory. */
static int residuals_init(diloco_t *t, const join_opts_t *o) {
    if (o->sparse_fraction <= 0) return 0;
    uint32_t K = o->fragments ? o->fragments : 1;
    t->residual = calloc(K, sizeof *t->residual);
    if (!t->residual) return -1;
    for (uint32_t f = 0; f < K; f++)
        if (pcclExtSparseResidualCreate(diloco_frag_off(t->np, K, f + 1) - diloco_frag_off(t->np, K, f), pcclFloat,
                                        &t->residual[f]) != pcclSuccess)
            return -1;
    return 0;
}

static void residuals_free(diloco_t *t, const join_opts_t *o) {
    for (uint32_t f = 0; t->residual && f < (o->fragments ? o->fragments : 1); f++)
        pcclExtSparseResidualDestroy(t->residual[f]);
    free(t->residual);
}

void diloco_free(diloco_t *t, const join_opts_t *o) {
    residuals_free(t, o);
    free(t->outer);
    free(t->momentum);
    free(t->inner);
    free(t->grad);
    free(t->delta);
    free(t->idx);
    mlp_scratch_free(t->scratch);
    adamw_free(&t->adam);
    mnist_sampler_free(&t->sampler);
}

int diloco_init(diloco_t *t, const join_opts_t *o, const mnist_set_t *train) {
    const size_t np = MLP_NPARAMS;
    t->np = np;
    t->batch = o->batch ? o->batch : JOIN_DEFAULT_BATCH;
    t->H = o->inner_steps ? o->inner_steps : JOIN_DEFAULT_INNER_STEPS;
    t->outer = malloc(np * sizeof *t->outer);
    t->momentum = calloc(np, sizeof *t->momentum);
    t->inner = malloc(np * sizeof *t->inner);
    t->grad = malloc(np * sizeof *t->grad);
    t->delta = malloc(np * sizeof *t->delta);
    t->idx = malloc(t->batch * sizeof *t->idx);
    t->scratch = mlp_scratch_new(t->batch > 1000 ? t->batch : 1000);
    if (!t->outer || !t->momentum || !t->inner || !t->grad || !t->delta || !t->idx || !t->scratch ||
        adamw_init(&t->adam, np) != 0 || mnist_sampler_init(&t->sampler, train->n, 0, 1, o->seed) != 0 ||
        residuals_init(t, o) != 0) {
        cli_err("pccl join: out of memory\n");
        return -1;
    }
    /* Every peer starts from the same initial weights; a joining peer is overwritten by the sync anyway. */
    mlp_init(t->outer, 42);
    memcpy(t->inner, t->outer, np * sizeof *t->inner);
    t->cfg = adamw_defaults(o->inner_lr > 0 ? o->inner_lr : (float)JOIN_DEFAULT_INNER_LR);
    return 0;
}

int diloco_inner(diloco_t *t, const mnist_set_t *train, uint32_t n, float *loss) {
    double t0 = diloco_now_ms();
    for (uint32_t h = 0; h < n && !join_stop_requested(); h++) {
        mnist_sampler_next(&t->sampler, t->idx, t->batch);
        *loss += mlp_loss_grad(t->inner, train->images, train->labels, t->idx, t->batch, t->grad, t->scratch);
        adamw_step(&t->adam, &t->cfg, t->inner, t->grad);
    }
    t->inner_ms += diloco_now_ms() - t0;
    return join_stop_requested() ? -1 : 0;
}

void diloco_outer_step(diloco_t *t, const join_opts_t *o, size_t off, size_t n) {
    outer_nesterov_step(t->outer + off, t->delta + off, t->momentum + off, n,
                        o->outer_lr > 0 ? o->outer_lr : (float)JOIN_DEFAULT_OUTER_LR,
                        o->outer_momentum >= 0 ? o->outer_momentum : (float)JOIN_DEFAULT_OUTER_MOMENTUM);
}

void diloco_shared_infos(diloco_t *t, pcclTensorInfo_t infos[2]) {
    infos[0] = (pcclTensorInfo_t){.name = "mlp.params", .data = t->outer, .count = t->np, .datatype = pcclFloat,
                                  .device_type = pcclDeviceCpu};
    infos[1] = (pcclTensorInfo_t){.name = "outer.momentum", .data = t->momentum, .count = t->np,
                                  .datatype = pcclFloat, .device_type = pcclDeviceCpu};
}

int diloco_start(diloco_t *t, const join_opts_t *o, const mnist_set_t *train, pcclTensorInfo_t infos[2],
                 pcclSharedState_t *ss) {
    if (diloco_init(t, o, train) != 0) {
        diloco_free(t, o);
        return JOIN_EXIT_FAILED;
    }
    diloco_shared_infos(t, infos);
    *ss = (pcclSharedState_t){.revision = 0, .count = 2, .infos = infos};
    return 0;
}

/* The average of the peers' pseudo-gradients (outer - inner) into t->delta. */
static pcclResult_t reduce_pseudo_grad(pcclComm_t *comm, const join_opts_t *o, diloco_t *t, pcclReduceInfo_t *ri) {
    outer_pseudo_grad(t->outer, t->inner, t->delta, t->np);
    if (t->residual) { /* one attempt: a failure leaves delta and the residual as they were, and the step is retried */
        pg_reduce_t pg;
        pg_launch(&pg, comm, o, t->delta, t->np, 0, t->residual[0]);
        pcclResult_t r = pg_await(&pg, ri);
        t->tx_total += ri->tx_bytes;
        t->rx_total += ri->rx_bytes;
        return r;
    }
    pcclReduceOpDescriptor_t d = {
        .sendbuf = t->delta, .recvbuf = t->delta,
        .descriptor = {.count = t->np, .op = pcclAvg, .tag = 0,
                       .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNormal},
                       .quantization_options = o->quant}};
    pcclResult_t r = pcclAllReduceMultipleWithRetry(&d, 1, comm, ri, 1);
    t->tx_total += ri->tx_bytes;
    t->rx_total += ri->rx_bytes;
    return r;
}

/* --quantize as given: "none" or "ALGO:TYPE". */
static void quant_name(const pcclQuantizationOptions_t *q, char *out, size_t cap) {
    if (q->algorithm == pcclQuantNone) {
        snprintf(out, cap, "none");
        return;
    }
    snprintf(out, cap, "%s:%s", q->algorithm == pcclQuantMinMax ? "minmax" : "zero-point-scale",
             pccl_dtype_name(q->quantized_datatype));
}

void diloco_emit_done(pcclComm_t *comm, const join_opts_t *o, const diloco_t *t, pcclSharedState_t *ss,
                      const mnist_set_t *test) {
    double wall = t->t_first > 0 ? diloco_now_ms() - t->t_first : 0;
    pcclSharedStateSyncInfo_t si = {0};
    pcclResult_t r = pcclSynchronizeSharedState(comm, ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si);
    float acc = 0, tloss = 0;
    mlp_evaluate(t->outer, test, t->scratch, &acc, &tloss);
    char hp[17], hm[17], qname[48];
    join_hex64(pccl_simplehash(t->outer, t->np * sizeof *t->outer), hp);
    join_hex64(pccl_simplehash(t->momentum, t->np * sizeof *t->momentum), hm);
    quant_name(&o->quant, qname, sizeof qname);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "done");
    cJSON_AddNumberToObject(e, "revision", (double)ss->revision);
    cJSON_AddNumberToObject(e, "test_accuracy", acc);
    cJSON_AddNumberToObject(e, "test_loss", tloss);
    cJSON_AddStringToObject(e, "hash", hp);
    cJSON_AddStringToObject(e, "momentum_hash", hm);
    cJSON_AddBoolToObject(e, "final_sync_ok", r == pcclSuccess);
    cJSON_AddNumberToObject(e, "allreduce_tx_bytes", (double)t->tx_total);
    cJSON_AddNumberToObject(e, "allreduce_rx_bytes", (double)t->rx_total);
    cJSON_AddNumberToObject(e, "retries", (double)t->retries);
    cJSON_AddStringToObject(e, "quantize", qname);
    if (o->sparse_fraction > 0) {
        char sname[48];
        snprintf(sname, sizeof sname, "topk:%g:%d", o->sparse_fraction, o->sparse_bits);
        cJSON_AddStringToObject(e, "sparsify", sname);
        cJSON_AddNumberToObject(e, "sparse_decay", o->sparse_decay);
    } else {
        cJSON_AddStringToObject(e, "sparsify", "none");
    }
    cJSON_AddNumberToObject(e, "fragments", o->fragments ? o->fragments : 1);
    cJSON_AddNumberToObject(e, "overlap_steps", o->overlap_steps);
    cJSON_AddNumberToObject(e, "inner_ms", t->inner_ms);
    cJSON_AddNumberToObject(e, "wall_ms", wall);
    cJSON_AddNumberToObject(e, "prologue_ms", t->prologue_ms);
    cJSON_AddNumberToObject(e, "allreduce_wait_ms", t->wait_ms);
    cJSON_AddNumberToObject(e, "compute_utilization", wall > 0 ? t->inner_ms / wall : 0);
    join_emit(o, e);
}

int workload_fashion_mnist(pcclComm_t *comm, const join_opts_t *o, const join_data_t *d) {
    if (o->fragments > 1 || o->overlap_steps > 0) return workload_streaming_diloco(comm, o, d);
    diloco_t t = {0};
    pcclTensorInfo_t infos[2];
    pcclSharedState_t ss;
    if (diloco_start(&t, o, &d->train, infos, &ss) != 0) return JOIN_EXIT_FAILED;
    uint32_t rejected = 0; /* rejected all-reduces in a row */
    int rc = JOIN_EXIT_OK, first = 1;
    uint64_t steps_done = 0; /* steps this peer took part in (a newcomer starts mid-run) */
    while (rc == JOIN_EXIT_OK && ss.revision < o->steps) {
        double t0 = diloco_now_ms();
        pcclSharedStateSyncInfo_t si;
        int begin = join_begin_step(comm, o, &ss, &first, &si);
        if (t.t_first > 0) t.prologue_ms += diloco_now_ms() - t0;
        if (begin == JOIN_STEPS_DONE) break;
        if (begin < 0) rc = JOIN_EXIT_FAILED; /* or a stop request: `pccl join` then leaves */
        if (begin != 0) continue;
        if (t.t_first == 0) t.t_first = diloco_now_ms();
        float loss = 0;
        /* Each outer step's inner steps start from the outer parameters (a discarded step's progress is lost). */
        memcpy(t.inner, t.outer, t.np * sizeof *t.inner);
        if (diloco_inner(&t, &d->train, t.H, &loss) != 0) {
            rc = JOIN_EXIT_FAILED; /* `pccl join` then leaves */
            break;
        }
        loss /= (float)t.H;
        pcclReduceInfo_t ri = {0};
        double tw = diloco_now_ms();
        pcclResult_t r = reduce_pseudo_grad(comm, o, &t, &ri);
        t.wait_ms += diloco_now_ms() - tw;
        int outcome = join_reduce_outcome(o, r, &rejected, &t.retries, "step_discarded");
        if (outcome < 0) rc = JOIN_EXIT_FAILED;
        if (outcome != 0) continue;
        diloco_outer_step(&t, o, 0, t.np);
        ss.revision++;
        cJSON *e = join_step_event(++steps_done, ss.revision, &ri, &si, diloco_now_ms() - t0);
        cJSON_AddNumberToObject(e, "loss", loss);
        join_emit(o, e);
    }
    if (rc == JOIN_EXIT_OK) diloco_emit_done(comm, o, &t, &ss, &d->test);
    diloco_free(&t, o);
    return rc;
}
