/*
 * synthetic.c - `pccl join --workload synthetic`: all-reduces checkable data
 * each step and advances a shared state from the results.
 *
 * Every peer contributes v(i, r) = (7 i + r) mod 13 for element i at revision
 * r, so a correct sum is k * v(i, r) with one k (the operation's world size)
 * for the whole operation; any corrupted, misplaced or dropped chunk breaks
 * that. The shared state advances as state += result / 2, so its hash is equal
 * on every peer exactly when all results were bit-identical. With --quantize
 * the sum is checked within the quantization bound instead of exactly.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "join.h"
#include "pccl_kernels.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float contribution(size_t i, uint64_t r) { return (float)((i * 7 + r) % 13); }

/* Checks one reduced piece; returns the multiplier k (>= 2) or -1. */
static int check_piece(const float *res, size_t off, size_t n, uint64_t r) {
    int k = -1;
    for (size_t j = 0; j < n; j++) {
        float v = contribution(off + j, r);
        if (v == 0.0f) {
            if (res[j] != 0.0f) return -1;
            continue;
        }
        float q = res[j] / v;
        if (q != floorf(q) || q < 2.0f) return -1;
        if (k < 0) k = (int)q;
        else if ((int)q != k) return -1;
    }
    return k < 0 ? 2 : k;
}

/*
 * As check_piece for a quantized all-reduce: the result is k * v(i) up to the quantization
 * error, which is at most (k + 1) encodes of values within [0, 12 k] (pccl_quant.h bounds).
 */
static int check_piece_quantized(const float *res, size_t off, size_t n, uint64_t r, const pcclQuantizationOptions_t *q) {
    double rel = q->quantized_datatype == pcclFloat16 ? 0x1p-10 : q->quantized_datatype == pcclUint16 ? 1.0 / 65532 : 1.0 / 252;
    int k = -1;
    for (size_t j = 0; j < n && k < 0; j++)
        if (contribution(off + j, r) == 12.0f) k = (int)lrint(res[j] / 12.0);
    if (k < 0) k = 2; /* a piece too small to hold a 12: only the bound below is checked */
    if (k < 2) return -1;
    double tol = (k + 1) * 12.0 * k * rel;
    for (size_t j = 0; j < n; j++)
        if (!(fabs(res[j] - (double)k * contribution(off + j, r)) <= tol)) return -1;
    return k;
}

int workload_synthetic(pcclComm_t *comm, const join_opts_t *o) {
    size_t n = o->size_bytes / sizeof(float);
    if (n == 0) n = 1;
    uint32_t pieces = o->tensors ? o->tensors : 1;
    if (pieces > n) pieces = (uint32_t)n;
    float *state = calloc(n, sizeof *state), *buf = malloc(n * sizeof *buf);
    /* Out of place the input stays intact across failed attempts; the result lands in out. */
    float *out = o->out_of_place ? malloc(n * sizeof *out) : buf;
    pcclReduceOpDescriptor_t *descs = calloc(pieces, sizeof *descs);
    if (!state || !buf || !out || !descs) {
        cli_err("pccl join: out of memory for %zu elements\n", n);
        return JOIN_EXIT_FAILED;
    }
    pcclTensorInfo_t info = {.name = "state", .data = state, .count = n, .datatype = pcclFloat,
                             .device_type = pcclDeviceCpu};
    pcclSharedState_t ss = {.revision = 0, .count = 1, .infos = &info};
    int rc = JOIN_EXIT_OK;
    uint64_t retries = 0;
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
        for (size_t i = 0; i < n; i++) buf[i] = contribution(i, ss.revision);
        size_t per = n / pieces;
        for (uint32_t p = 0; p < pieces; p++) {
            size_t off = p * per, cnt = p + 1 == pieces ? n - off : per;
            descs[p].sendbuf = buf + off;
            descs[p].recvbuf = out + off;
            descs[p].descriptor = (pcclReduceDescriptor_t){
                .count = cnt, .op = pcclSum, .tag = p,
                .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                .quantization_options = o->quant};
        }
        pcclReduceInfo_t ri = {0};
        pcclResult_t r = pcclAllReduceMultipleWithRetry(descs, pieces, comm, &ri, (int)pieces);
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
            continue; /* discard this step; the revision stays */
        }
        if (r != pcclSuccess) {
            cli_err("pccl join: all-reduce failed: %s\n", pcclResultString(r));
            rc = JOIN_EXIT_FAILED;
            break;
        }
        for (uint32_t p = 0; p < pieces; p++) {
            size_t off = p * per, cnt = p + 1 == pieces ? n - off : per;
            int k = o->quant.algorithm == pcclQuantNone ? check_piece(out + off, off, cnt, ss.revision)
                                                        : check_piece_quantized(out + off, off, cnt, ss.revision, &o->quant);
            if (k < 0) {
                cli_err("pccl join: WRONG all-reduce result in piece %u at revision %llu\n", p,
                        (unsigned long long)ss.revision);
                rc = JOIN_EXIT_WRONG;
            }
        }
        if (rc) break;
        for (size_t i = 0; i < n; i++) state[i] += out[i] * 0.5f;
        ss.revision++;
        char hex[17];
        join_hex64(pccl_simplehash(state, n * sizeof *state), hex);
        int gws = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &gws);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "step");
        cJSON_AddNumberToObject(e, "step", (double)++steps_done);
        cJSON_AddNumberToObject(e, "revision", (double)ss.revision);
        cJSON_AddStringToObject(e, "hash", hex);
        cJSON_AddNumberToObject(e, "world_size", ri.local_world_size);
        cJSON_AddNumberToObject(e, "global_world_size", gws);
        cJSON_AddNumberToObject(e, "tx_bytes", (double)ri.tx_bytes);
        cJSON_AddNumberToObject(e, "rx_bytes", (double)ri.rx_bytes);
        cJSON_AddNumberToObject(e, "ss_tx_bytes", (double)si.tx_bytes);
        cJSON_AddNumberToObject(e, "ss_rx_bytes", (double)si.rx_bytes);
        cJSON_AddNumberToObject(e, "ms", now_ms() - t0);
        join_emit(o, e);
        join_sleep_ms(o->step_delay_ms);
    }
    if (rc == 0) {
        /* A final sync proves every surviving peer ends with the same state. */
        pcclSharedStateSyncInfo_t si = {0};
        pcclResult_t r = pcclSynchronizeSharedState(comm, &ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si);
        char hex[17];
        join_hex64(pccl_simplehash(state, n * sizeof *state), hex);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "event", "done");
        cJSON_AddNumberToObject(e, "revision", (double)ss.revision);
        cJSON_AddStringToObject(e, "hash", hex);
        cJSON_AddBoolToObject(e, "final_sync_ok", r == pcclSuccess);
        cJSON_AddNumberToObject(e, "ss_rx_bytes", (double)si.rx_bytes);
        cJSON_AddNumberToObject(e, "retries", (double)retries);
        join_emit(o, e);
        if (r != pcclSuccess && r != pcclTooFewPeers) rc = JOIN_EXIT_FAILED;
    }
    free(state);
    free(buf);
    if (out != buf) free(out);
    free(descs);
    return rc;
}
