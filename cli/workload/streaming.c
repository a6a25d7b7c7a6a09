/*
 * streaming.c - Streaming DiLoCo (Douillard et al. 2025, arXiv:2501.18512) in the fashion-mnist workload:
 * `pccl join --fragments K [--overlap-steps TAU]`.
 *
 * The model's parameters (one flat array, mlp.h) are split into K contiguous fragments of about equal size.
 * One shared-state revision is one fragment sync; revision r syncs fragment r mod K, so each fragment is synced
 * once every H inner steps and the K syncs are staggered across them (the paper's staggered schedule, section
 * 2.2: fragment f at the inner steps t with t = floor((f + 1) H / K) mod H). A sync point computes the fragment's
 * outer gradient (outer - inner), launches its all-reduce (pcclAllReduceAsync) and goes on with TAU more inner
 * steps (the paper's tau, section 2.3: the overlap) before it awaits the result; then the outer Nesterov step is
 * applied to that fragment only and its inner parameters are replaced by the new outer ones (the paper's merge
 * with alpha = 0). Every peer runs the same schedule, since it follows from the revision.
 *
 * Fault tolerance as in diloco.c: the master gives every member of an all-reduce the same outcome. A fragment
 * sync that failed is skipped alike on every peer (outer parameters, momentum and revision unchanged) and
 * retried at the next sync point, after a topology update; the inner parameters keep their progress. The
 * topology update (which admits newcomers) runs at the start of each cycle of K syncs and after a failure; the
 * shared state is synced at every revision. A peer that received the shared state (a newcomer, an outdated
 * peer) restarts its inner parameters from the outer ones.
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "diloco.h"

/* The first element of fragment f of K over n elements (f = K gives n). */
static size_t frag_off(size_t n, uint32_t K, uint32_t f) { return (size_t)((unsigned __int128)n * f / K); }

/* Inner steps from the previous sync point to fragment f's (they sum to H over the K fragments). */
static uint32_t frag_gap(uint32_t H, uint32_t K, uint32_t f) {
    return (uint32_t)((uint64_t)(f + 1) * H / K - (uint64_t)f * H / K);
}

/* Launches fragment [off, off + n)'s all-reduce of the pseudo-gradient in t->delta. */
static pcclResult_t launch(pcclComm_t *comm, const join_opts_t *o, diloco_t *t, size_t off, size_t n,
                           pcclAsyncReduceOp_t *h) {
    outer_pseudo_grad(t->outer + off, t->inner + off, t->delta + off, n);
    pcclReduceDescriptor_t desc = {.count = n, .op = pcclAvg, .tag = 0,
                                   .src_descriptor = {.datatype = pcclFloat,
                                                      .distribution_hint = pcclDistributionNormal},
                                   .quantization_options = o->quant};
    return pcclAllReduceAsync(t->delta + off, t->delta + off, &desc, comm, h);
}

/* One sync point's work after the prologue: the inner steps before the launch, the launch, TAU overlapped inner
 * steps, the wait; the all-reduce's result in *r. 0, or -1 after a stop request. */
static int sync_fragment(pcclComm_t *comm, const join_opts_t *o, diloco_t *t, const mnist_set_t *train,
                         uint32_t f, float *loss, pcclReduceInfo_t *ri, pcclResult_t *r) {
    uint32_t K = o->fragments ? o->fragments : 1, gap = frag_gap(t->H, K, f);
    size_t off = frag_off(t->np, K, f), n = frag_off(t->np, K, f + 1) - off;
    if (diloco_inner(t, train, gap - o->overlap_steps, loss) != 0) return -1;
    pcclAsyncReduceOp_t h;
    *r = launch(comm, o, t, off, n, &h);
    int stopped = diloco_inner(t, train, o->overlap_steps, loss);
    /* Awaited even after a stop request: the stop's pcclExtLeave ends it soon, and nothing may stay in flight. */
    if (*r == pcclSuccess) *r = pcclAwaitAsyncReduce(&h, ri);
    t->tx_total += ri->tx_bytes;
    t->rx_total += ri->rx_bytes;
    *loss /= (float)gap;
    return stopped;
}

int workload_streaming_diloco(pcclComm_t *comm, const join_opts_t *o, const join_data_t *d) {
    diloco_t t = {0};
    if (diloco_init(&t, o, &d->train) != 0) {
        diloco_free(&t);
        return JOIN_EXIT_FAILED;
    }
    const uint32_t K = o->fragments ? o->fragments : 1;
    pcclTensorInfo_t infos[2];
    diloco_shared_infos(&t, infos);
    pcclSharedState_t ss = {.revision = 0, .count = 2, .infos = infos};
    uint32_t rejected = 0;
    int rc = JOIN_EXIT_OK, first = 1, update = 1;
    uint64_t steps_done = 0;
    while (rc == JOIN_EXIT_OK && ss.revision < o->steps) {
        double t0 = diloco_now_ms();
        pcclSharedStateSyncInfo_t si;
        int begin = join_begin_step(comm, o, &ss, &first, &si, update);
        update = 1; /* until this sync point succeeded */
        if (begin == JOIN_STEPS_DONE) break;
        if (begin < 0) rc = JOIN_EXIT_FAILED; /* or a stop request: `pccl join` then leaves */
        if (begin != 0) continue;
        /* Received the run's state: this peer's inner progress refers to other outer parameters. */
        if (si.rx_bytes > 0) memcpy(t.inner, t.outer, t.np * sizeof *t.inner);
        if (t.t_first == 0) t.t_first = diloco_now_ms();
        uint32_t f = (uint32_t)(ss.revision % K);
        float loss = 0;
        pcclReduceInfo_t ri = {0};
        pcclResult_t r = pcclSuccess;
        if (sync_fragment(comm, o, &t, &d->train, f, &loss, &ri, &r) != 0) {
            rc = JOIN_EXIT_FAILED; /* a stop request: `pccl join` then leaves */
            break;
        }
        int outcome = join_reduce_outcome(o, r, &rejected, &t.retries, "fragment_skipped");
        if (outcome < 0) rc = JOIN_EXIT_FAILED;
        if (outcome != 0) continue;
        size_t off = frag_off(t.np, K, f), n = frag_off(t.np, K, f + 1) - off;
        diloco_outer_step(&t, o, off, n);
        memcpy(t.inner + off, t.outer + off, n * sizeof *t.inner);
        ss.revision++;
        update = ss.revision % K == 0;
        cJSON *e = join_step_event(++steps_done, ss.revision, &ri, &si, diloco_now_ms() - t0);
        cJSON_AddNumberToObject(e, "fragment", f);
        cJSON_AddNumberToObject(e, "loss", loss);
        join_emit(o, e);
    }
    if (rc == JOIN_EXIT_OK) diloco_emit_done(comm, o, &t, &ss, &d->test);
    diloco_free(&t);
    return rc;
}
