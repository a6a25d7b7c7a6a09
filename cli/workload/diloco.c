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
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "join.h"
#include "mlp.h"
#include "mnist.h"
#include "optim.h"
#include "pccl_kernels.h"
#include "sampler.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void emit_error(const join_opts_t *o, const char *event, pcclResult_t r) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", event);
    cJSON_AddStringToObject(e, "error", pcclResultString(r));
    join_emit(o, e);
}

int workload_fashion_mnist(pcclComm_t *comm, const join_opts_t *o, const join_data_t *d) {
    const mnist_set_t train = d->train, test = d->test;
    const size_t np = MLP_NPARAMS;
    float *outer = malloc(np * sizeof *outer), *momentum = calloc(np, sizeof *momentum);
    float *inner = malloc(np * sizeof *inner), *grad = malloc(np * sizeof *grad), *delta = malloc(np * sizeof *delta);
    uint32_t batch = o->batch ? o->batch : JOIN_DEFAULT_BATCH;
    uint32_t *idx = malloc(batch * sizeof *idx);
    mlp_scratch_t *scratch = mlp_scratch_new(batch > 1000 ? batch : 1000);
    adamw_state_t adam = {0};
    mnist_sampler_t sampler = {0};
    int rc = JOIN_EXIT_OK;
    if (!outer || !momentum || !inner || !grad || !delta || !idx || !scratch || adamw_init(&adam, np) != 0 ||
        mnist_sampler_init(&sampler, train.n, 0, 1, o->seed) != 0) {
        cli_err("pccl join: out of memory\n");
        rc = JOIN_EXIT_FAILED;
        goto out;
    }
    /* Every peer starts from the same initial weights; a joining peer is overwritten by the sync anyway. */
    mlp_init(outer, 42);
    adamw_config_t cfg = adamw_defaults(o->inner_lr > 0 ? o->inner_lr : (float)JOIN_DEFAULT_INNER_LR);
    pcclTensorInfo_t infos[2] = {
        {.name = "mlp.params", .data = outer, .count = np, .datatype = pcclFloat, .device_type = pcclDeviceCpu},
        {.name = "outer.momentum", .data = momentum, .count = np, .datatype = pcclFloat, .device_type = pcclDeviceCpu},
    };
    pcclSharedState_t ss = {.revision = 0, .count = 2, .infos = infos};
    uint32_t H = o->inner_steps ? o->inner_steps : JOIN_DEFAULT_INNER_STEPS;
    uint64_t retries = 0, tx_total = 0, rx_total = 0;
    uint32_t rejected = 0; /* rejected all-reduces in a row */

    int first = 1;
    uint64_t steps_done = 0; /* steps this peer took part in (a newcomer starts mid-run) */
    while (ss.revision < o->steps) {
        double t0 = now_ms();
        pcclSharedStateSyncInfo_t si;
        int begin = join_begin_step(comm, o, &ss, &first, &si);
        if (begin < 0) {
            rc = JOIN_EXIT_FAILED; /* or a stop request: `pccl join` then leaves */
            break;
        }
        if (begin > 0) continue;
        if (ss.revision >= o->steps) break;

        memcpy(inner, outer, np * sizeof *inner);
        float loss = 0;
        /* A stop request ends the step here: the inner steps may compute for minutes. */
        for (uint32_t h = 0; h < H && !join_stop_requested(); h++) {
            mnist_sampler_next(&sampler, idx, batch);
            loss += mlp_loss_grad(inner, train.images, train.labels, idx, batch, grad, scratch);
            adamw_step(&adam, &cfg, inner, grad);
        }
        if (join_stop_requested()) {
            rc = JOIN_EXIT_FAILED; /* `pccl join` then leaves */
            break;
        }
        loss /= (float)H;
        outer_pseudo_grad(outer, inner, delta, np);
        pcclReduceOpDescriptor_t d = {
            .sendbuf = delta, .recvbuf = delta,
            .descriptor = {.count = np, .op = pcclAvg, .tag = 0,
                           .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNormal},
                           .quantization_options = o->quant}};
        pcclReduceInfo_t ri = {0};
        pcclResult_t r = pcclAllReduceMultipleWithRetry(&d, 1, comm, &ri, 1);
        tx_total += ri.tx_bytes;
        rx_total += ri.rx_bytes;
        if (join_stop_requested() || join_run_over(r)) {
            rc = JOIN_EXIT_FAILED; /* `pccl join` tells a stop, a shutdown and a lost master apart */
            break;
        }
        int rej = join_check_rejected(o, r, &rejected);
        if (rej < 0) {
            rc = JOIN_EXIT_FAILED;
            break;
        }
        if (rej > 0 || r == pcclTooFewPeers || r == pcclRankConnectionLost) {
            retries++;
            if (!rej) emit_error(o, "step_discarded", r);
            continue;
        }
        if (r != pcclSuccess) {
            cli_err("pccl join: all-reduce failed: %s\n", pcclResultString(r));
            rc = JOIN_EXIT_FAILED;
            break;
        }
        outer_nesterov_step(outer, delta, momentum, np, o->outer_lr > 0 ? o->outer_lr : (float)JOIN_DEFAULT_OUTER_LR,
                            o->outer_momentum >= 0 ? o->outer_momentum : (float)JOIN_DEFAULT_OUTER_MOMENTUM);
        ss.revision++;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "step");
        cJSON_AddNumberToObject(e, "step", (double)++steps_done);
        cJSON_AddNumberToObject(e, "revision", (double)ss.revision);
        cJSON_AddNumberToObject(e, "world_size", ri.local_world_size);
        cJSON_AddNumberToObject(e, "loss", loss);
        cJSON_AddNumberToObject(e, "tx_bytes", (double)ri.tx_bytes);
        cJSON_AddNumberToObject(e, "rx_bytes", (double)ri.rx_bytes);
        cJSON_AddNumberToObject(e, "ss_tx_bytes", (double)si.tx_bytes);
        cJSON_AddNumberToObject(e, "ss_rx_bytes", (double)si.rx_bytes);
        cJSON_AddNumberToObject(e, "ms", now_ms() - t0);
        join_emit(o, e);
    }
    if (rc == 0) {
        pcclSharedStateSyncInfo_t si = {0};
        pcclResult_t r = pcclSynchronizeSharedState(comm, &ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si);
        float acc = 0, tloss = 0;
        mlp_evaluate(outer, &test, scratch, &acc, &tloss);
        char hp[17], hm[17];
        join_hex64(pccl_simplehash(outer, np * sizeof *outer), hp);
        join_hex64(pccl_simplehash(momentum, np * sizeof *momentum), hm);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "done");
        cJSON_AddNumberToObject(e, "revision", (double)ss.revision);
        cJSON_AddNumberToObject(e, "test_accuracy", acc);
        cJSON_AddNumberToObject(e, "test_loss", tloss);
        cJSON_AddStringToObject(e, "hash", hp);
        cJSON_AddStringToObject(e, "momentum_hash", hm);
        cJSON_AddBoolToObject(e, "final_sync_ok", r == pcclSuccess);
        cJSON_AddNumberToObject(e, "allreduce_tx_bytes", (double)tx_total);
        cJSON_AddNumberToObject(e, "allreduce_rx_bytes", (double)rx_total);
        cJSON_AddNumberToObject(e, "retries", (double)retries);
        char qname[48];
        snprintf(qname, sizeof qname, "%s%s%s",
                 o->quant.algorithm == pcclQuantNone      ? "none"
                 : o->quant.algorithm == pcclQuantMinMax ? "minmax"
                                                          : "zero-point-scale",
                 o->quant.algorithm == pcclQuantNone ? "" : ":",
                 o->quant.algorithm == pcclQuantNone ? "" : pccl_dtype_name(o->quant.quantized_datatype));
        cJSON_AddStringToObject(e, "quantize", qname);
        join_emit(o, e);
    }
out:
    free(outer);
    free(momentum);
    free(inner);
    free(grad);
    free(delta);
    free(idx);
    mlp_scratch_free(scratch);
    adamw_free(&adam);
    mnist_sampler_free(&sampler);
    return rc;
}
