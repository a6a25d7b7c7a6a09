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

/* The synthetic workload's buffers: the shared state, this step's contributions, and the all-reduces' pieces. */
typedef struct {
    size_t n, per;   /* elements; elements per piece (the last takes the rest) */
    uint32_t pieces; /* concurrent all-reduces */
    float *state, *buf, *out; /* out == buf in place */
    pcclReduceOpDescriptor_t *descs;
} synth_t;

static void synth_free(synth_t *t) {
    free(t->state);
    if (t->out != t->buf) free(t->out);
    free(t->buf);
    free(t->descs);
}

/* 0, or -1 after "out of memory" (t is freed either way by synth_free). */
static int synth_init(synth_t *t, const join_opts_t *o) {
    t->n = o->size_bytes / sizeof(float);
    if (t->n == 0) t->n = 1;
    t->pieces = o->tensors ? o->tensors : 1;
    if (t->pieces > t->n) t->pieces = (uint32_t)t->n;
    t->per = t->n / t->pieces;
    t->state = calloc(t->n, sizeof *t->state);
    t->buf = malloc(t->n * sizeof *t->buf);
    /* Out of place the input stays intact across failed attempts; the result lands in out. */
    t->out = o->out_of_place ? malloc(t->n * sizeof *t->out) : t->buf;
    t->descs = calloc(t->pieces, sizeof *t->descs);
    if (t->state && t->buf && t->out && t->descs) return 0;
    cli_err("pccl join: out of memory for %zu elements\n", t->n);
    return -1;
}

/* Offset and length of piece p. */
static void piece(const synth_t *t, uint32_t p, size_t *off, size_t *cnt) {
    *off = p * t->per;
    *cnt = p + 1 == t->pieces ? t->n - *off : t->per;
}

/* This revision's contributions, and one all-reduce descriptor per piece. */
static void fill_step(synth_t *t, const join_opts_t *o, uint64_t revision) {
    for (size_t i = 0; i < t->n; i++) t->buf[i] = contribution(i, revision);
    for (uint32_t p = 0; p < t->pieces; p++) {
        size_t off, cnt;
        piece(t, p, &off, &cnt);
        t->descs[p].sendbuf = t->buf + off;
        t->descs[p].recvbuf = t->out + off;
        t->descs[p].descriptor = (pcclReduceDescriptor_t){
            .count = cnt, .op = pcclSum, .tag = p,
            .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
            .quantization_options = o->quant};
    }
}

/* JOIN_EXIT_OK when every piece holds the sum of the peers' contributions, else JOIN_EXIT_WRONG (reported). */
static int check_result(const synth_t *t, const join_opts_t *o, uint64_t revision) {
    int rc = JOIN_EXIT_OK;
    for (uint32_t p = 0; p < t->pieces; p++) {
        size_t off, cnt;
        piece(t, p, &off, &cnt);
        int k = o->quant.algorithm == pcclQuantNone ? check_piece(t->out + off, off, cnt, revision)
                                                    : check_piece_quantized(t->out + off, off, cnt, revision, &o->quant);
        if (k < 0) {
            cli_err("pccl join: WRONG all-reduce result in piece %u at revision %llu\n", p,
                    (unsigned long long)revision);
            rc = JOIN_EXIT_WRONG;
        }
    }
    return rc;
}

/* The step event, with the state's hash (equal on every peer) and the world size of all groups. */
static void emit_step(pcclComm_t *comm, const join_opts_t *o, const synth_t *t, cJSON *e) {
    char hex[17];
    join_hex64(pccl_simplehash(t->state, t->n * sizeof *t->state), hex);
    int gws = 0;
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &gws);
    cJSON_AddStringToObject(e, "hash", hex);
    cJSON_AddNumberToObject(e, "global_world_size", gws);
    join_emit(o, e);
}

/* A final sync proves every surviving peer ends with the same state: JOIN_EXIT_OK, or JOIN_EXIT_FAILED when it
 * failed otherwise than for too few peers. */
static int finish(pcclComm_t *comm, const join_opts_t *o, const synth_t *t, pcclSharedState_t *ss, uint64_t retries) {
    pcclSharedStateSyncInfo_t si = {0};
    pcclResult_t r = pcclSynchronizeSharedState(comm, ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si);
    char hex[17];
    join_hex64(pccl_simplehash(t->state, t->n * sizeof *t->state), hex);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", "done");
    cJSON_AddNumberToObject(e, "revision", (double)ss->revision);
    cJSON_AddStringToObject(e, "hash", hex);
    cJSON_AddBoolToObject(e, "final_sync_ok", r == pcclSuccess);
    cJSON_AddNumberToObject(e, "ss_rx_bytes", (double)si.rx_bytes);
    cJSON_AddNumberToObject(e, "retries", (double)retries);
    join_emit(o, e);
    return r != pcclSuccess && r != pcclTooFewPeers ? JOIN_EXIT_FAILED : JOIN_EXIT_OK;
}

int workload_synthetic(pcclComm_t *comm, const join_opts_t *o) {
    synth_t t = {0};
    if (synth_init(&t, o) != 0) {
        synth_free(&t);
        return JOIN_EXIT_FAILED;
    }
    pcclTensorInfo_t info = {.name = "state", .data = t.state, .count = t.n, .datatype = pcclFloat,
                             .device_type = pcclDeviceCpu};
    pcclSharedState_t ss = {.revision = 0, .count = 1, .infos = &info};
    int rc = JOIN_EXIT_OK, first = 1;
    uint64_t retries = 0;
    uint32_t rejected = 0; /* rejected all-reduces in a row */
    uint64_t steps_done = 0; /* steps this peer took part in (a newcomer starts mid-run) */
    while (rc == JOIN_EXIT_OK && ss.revision < o->steps) {
        double t0 = now_ms();
        pcclSharedStateSyncInfo_t si;
        int begin = join_begin_step(comm, o, &ss, &first, &si);
        if (begin == JOIN_STEPS_DONE) break;
        if (begin < 0) rc = JOIN_EXIT_FAILED; /* or a stop request: `pccl join` then leaves */
        if (begin != 0) continue;
        fill_step(&t, o, ss.revision);
        pcclReduceInfo_t ri = {0};
        pcclResult_t r = pcclAllReduceMultipleWithRetry(t.descs, t.pieces, comm, &ri, (int)t.pieces);
        int outcome = join_reduce_outcome(o, r, &rejected, &retries, NULL);
        if (outcome < 0) rc = JOIN_EXIT_FAILED;
        if (outcome != 0) continue; /* discard this step; the revision stays */
        if ((rc = check_result(&t, o, ss.revision)) != JOIN_EXIT_OK) break;
        for (size_t i = 0; i < t.n; i++) t.state[i] += t.out[i] * 0.5f;
        ss.revision++;
        emit_step(comm, o, &t, join_step_event(++steps_done, ss.revision, &ri, &si, now_ms() - t0));
        join_sleep_ms(o->step_delay_ms);
    }
    if (rc == JOIN_EXIT_OK) rc = finish(comm, o, &t, &ss, retries);
    synth_free(&t);
    return rc;
}
