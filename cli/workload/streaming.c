/*
 * streaming.c - Streaming DiLoCo (Douillard et al. 2025, arXiv:2501.18512) in the fashion-mnist workload:
 * `pccl join --fragments K [--overlap-steps TAU]`.
 *
 * The model's parameters (one flat array, mlp.h) are split into K contiguous fragments of about equal size. One
 * outer step (one shared-state revision, as in diloco.c) is H inner steps in which each fragment is synced once, on
 * a staggered schedule (the paper's, section 2.2): fragment f at inner step floor((f + 1) H / K) of the outer step.
 * A sync point computes the fragment's outer gradient (outer - inner), launches its all-reduce (pcclAllReduceAsync,
 * tag f) and goes on with TAU more inner steps (the paper's tau, section 2.3: the overlap) before it awaits the
 * result; then the outer Nesterov step is applied to that fragment only and its inner parameters are replaced by the
 * new outer ones (the paper's merge with alpha = 0). The topology update and the shared-state sync run once per
 * outer step, before its first fragment, when nothing is in flight; newcomers are admitted there, so every peer
 * starts an outer step at fragment 0.
 *
 * Fault tolerance as in diloco.c: the master gives every member of an all-reduce the same outcome. A fragment
 * sync that failed is skipped alike on every peer (that fragment's outer parameters and momentum unchanged, its
 * inner parameters keep their progress) and the outer step ends there: the next one begins with a topology update
 * and a sync (the revision moves when at least one fragment was applied), and the skipped fragment's outer
 * gradient then covers the steps of both. A peer that received the shared state (a newcomer, an outdated peer)
 * restarts its inner parameters from the outer ones. Each fragment has its own tag, so peers that are out of step
 * never reduce different fragments together.
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "diloco.h"
#include "pg_reduce.h"

/* Fragment f's sync point: the inner steps before the launch (their losses added to *loss), the launch, TAU
 * overlapped inner steps, the wait; the all-reduce's result in *r. 0, or -1 after a stop request. */
static int sync_fragment(pcclComm_t *comm, const join_opts_t *o, diloco_t *t, const mnist_set_t *train,
                         uint32_t f, float *loss, pcclReduceInfo_t *ri, pcclResult_t *r) {
    uint32_t K = o->fragments ? o->fragments : 1, gap = (uint32_t)(diloco_frag_off(t->H, K, f + 1) - diloco_frag_off(t->H, K, f));
    size_t off = diloco_frag_off(t->np, K, f), n = diloco_frag_off(t->np, K, f + 1) - off;
    if (diloco_inner(t, train, gap - o->overlap_steps, loss) != 0) return -1;
    pg_reduce_t pg;
    outer_pseudo_grad(t->outer + off, t->inner + off, t->delta + off, n);
    pg_launch(&pg, comm, o, t->delta + off, n, f, t->residual ? t->residual[f] : NULL);
    int stopped = diloco_inner(t, train, o->overlap_steps, loss);
    /* Awaited even after a stop request: the stop's pcclExtLeave ends it soon, and nothing may stay in flight. */
    double tw = diloco_now_ms();
    *r = pg_await(&pg, ri);
    t->wait_ms += diloco_now_ms() - tw;
    return stopped;
}

/* The K fragment syncs of one outer step: how many were applied in *applied, their bytes in *ri (summed), the mean
 * loss of its inner steps in *loss. 0 when all were applied, 1 when one failed (the step ends there), -1 when the
 * run ends for this peer. */
static int outer_step(pcclComm_t *comm, const join_opts_t *o, diloco_t *t, const mnist_set_t *train,
                      uint32_t *rejected, uint32_t *applied, float *loss, pcclReduceInfo_t *ri) {
    const uint32_t K = o->fragments ? o->fragments : 1;
    *applied = 0;
    float sum = 0;
    for (uint32_t f = 0; f < K; f++) {
        pcclReduceInfo_t fi = {0};
        pcclResult_t r = pcclSuccess;
        if (sync_fragment(comm, o, t, train, f, &sum, &fi, &r) != 0) return -1; /* a stop request */
        *loss = sum / (float)diloco_frag_off(t->H, K, f + 1);
        ri->tx_bytes += fi.tx_bytes;
        ri->rx_bytes += fi.rx_bytes;
        if (fi.local_world_size) ri->local_world_size = fi.local_world_size;
        int outcome = join_reduce_outcome(o, r, rejected, &t->retries, "fragment_skipped");
        if (outcome != 0) return outcome;
        size_t off = diloco_frag_off(t->np, K, f), n = diloco_frag_off(t->np, K, f + 1) - off;
        diloco_outer_step(t, o, off, n);
        memcpy(t->inner + off, t->outer + off, n * sizeof *t->inner);
        ++*applied;
    }
    return 0;
}

int workload_streaming_diloco(pcclComm_t *comm, const join_opts_t *o, const join_data_t *d) {
    diloco_t t = {0};
    pcclTensorInfo_t infos[2];
    pcclSharedState_t ss;
    if (diloco_start(&t, o, &d->train, infos, &ss) != 0) return JOIN_EXIT_FAILED;
    uint32_t rejected = 0;
    int rc = JOIN_EXIT_OK, first = 1;
    uint64_t steps_done = 0;
    while (rc == JOIN_EXIT_OK && ss.revision < o->steps) {
        double t0 = diloco_now_ms();
        pcclSharedStateSyncInfo_t si;
        int begin = join_begin_step(comm, o, &ss, &first, &si);
        if (t.t_first > 0) t.prologue_ms += diloco_now_ms() - t0;
        if (begin == JOIN_STEPS_DONE) break;
        if (begin < 0) rc = JOIN_EXIT_FAILED; /* or a stop request: `pccl join` then leaves */
        if (begin != 0) continue;
        /* Received the run's state: this peer's inner progress refers to other outer parameters. */
        if (si.rx_bytes > 0) memcpy(t.inner, t.outer, t.np * sizeof *t.inner);
        if (t.t_first == 0) t.t_first = diloco_now_ms();
        float loss = 0;
        uint32_t applied = 0;
        pcclReduceInfo_t ri = {0};
        int outcome = outer_step(comm, o, &t, &d->train, &rejected, &applied, &loss, &ri);
        t.tx_total += ri.tx_bytes;
        t.rx_total += ri.rx_bytes;
        if (outcome < 0) rc = JOIN_EXIT_FAILED;
        if (outcome < 0 || applied == 0) continue;
        ss.revision++;
        cJSON *e = join_step_event(++steps_done, ss.revision, &ri, &si, diloco_now_ms() - t0);
        cJSON_AddNumberToObject(e, "fragments_applied", applied);
        cJSON_AddNumberToObject(e, "loss", loss);
        join_emit(o, e);
    }
    if (rc == JOIN_EXIT_OK) diloco_emit_done(comm, o, &t, &ss, &d->test);
    diloco_free(&t, o);
    return rc;
}
