/*
 * shared_state.c - pcclSynchronizeSharedState and the p2p server that hands
 * tensors to outdated peers.
 *
 * A requester asks for byte ranges of tensors (the format is in ss_fetch.c,
 * which fetches them from every source of the plan at once and lands each
 * tensor only after its hash matched the one the master announced).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "comm/comm.h"
#include "base/base.h"
#include "p2p/p2p.h"
#include "pccl_kernels.h"
#include "pccl_leave.h"
#include "ss/ss.h"
#include "op/op.h"

/* One range a requester asked for. */
typedef struct ss_range_req {
    char key[WIRE_MAX_KEY + 1];
    uint64_t off, len;
} ss_range_req_t;

/* Takes a reference on the state being served for a server on fd, or NULL if this peer is not syncing. */
static ss_serving_t *serving_get(pcclComm_t *c, int fd) {
    pthread_mutex_lock(&c->mu);
    ss_serving_t *s = c->serving;
    if (s) {
        s->refs++;
        for (int i = 0; i < 16; i++)
            if (s->fds[i] < 0) {
                s->fds[i] = fd;
                break;
            }
    }
    pthread_mutex_unlock(&c->mu);
    return s;
}

static void serving_put(pcclComm_t *c, ss_serving_t *s, int fd) {
    pthread_mutex_lock(&c->mu);
    s->refs--;
    for (int i = 0; i < 16; i++)
        if (s->fds[i] == fd) {
            s->fds[i] = -1;
            break;
        }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Bytes a server sends between two looks at whether this peer is leaving. */
#define SERVE_PIECE ((uint64_t)4 << 20)

/* Answers one request: reads its whole list of ranges, then sends each (ss_fetch.c has the format).
 * @return 0 to wait for the requester's next one; else the connection ends: link_*_all's code (the requester
 * closed it or went silent past the socket timeout), -PERR_PROTOCOL, -PERR_NOMEM, -PERR_REFUSED (this peer
 * is not serving a sync any more) or -PERR_CANCELLED (a leave or destroy). */
static int serve_request(pcclComm_t *c, sec_link_t *link, int fd) {
    uint8_t b4[4];
    if (link_recv_all(link, fd, b4, 4) != 0) return -PERR_IO;
    uint32_t n = wire_get_u32(b4);
    if (n > WIRE_MAX_SS_RANGES) return -PERR_PROTOCOL;
    /* Read the whole request before answering: a requester that writes a long list
     * before reading must not block on a full socket while we block writing to it. */
    ss_range_req_t *req = NULL;
    for (uint32_t i = 0, cap = 0; i < n; i++) {
        uint8_t kl, pos[16];
        if (i == cap) { /* grown as entries arrive: memory follows what the requester really sent */
            cap = cap ? cap * 2 : 64;
            ss_range_req_t *g = realloc(req, (size_t)cap * sizeof *req);
            if (!g) {
                free(req);
                return -PERR_NOMEM;
            }
            req = g;
        }
        if (link_recv_all(link, fd, &kl, 1) != 0 || link_recv_all(link, fd, req[i].key, kl) != 0 ||
            link_recv_all(link, fd, pos, 16) != 0) {
            free(req);
            return -PERR_IO;
        }
        req[i].key[kl] = 0;
        req[i].off = wire_get_u64(pos);
        req[i].len = wire_get_u64(pos + 8);
    }
    ss_serving_t *s = serving_get(c, fd);
    ss_staging_t stg = {0};
    int rc = s ? 0 : -PERR_REFUSED;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const pcclTensorInfo_t *t = s ? ss_find_tensor(s->state, req[i].key) : NULL;
        uint64_t size = t ? ss_tensor_bytes(t) : 0;
        /* A range outside the tensor is unavailable, never a read past it. */
        int ok = t && req[i].off <= size && req[i].len <= size - req[i].off;
        uint8_t hdr[9] = {ok ? 0 : 1};
        wire_put_u64(hdr + 1, ok ? req[i].len : 0);
        rc = link_send_all(link, fd, hdr, sizeof hdr);
        /* In pieces, so that a leave stops serving soon: the requester takes the rest from other holders. */
        for (uint64_t at = 0; ok && rc == 0 && at < req[i].len; at += SERVE_PIECE) {
            uint64_t k = req[i].len - at < SERVE_PIECE ? req[i].len - at : SERVE_PIECE;
            rc = comm_cancelled(c) ? -PERR_CANCELLED
                                   : ss_send_range(link, fd, t, req[i].off + at, k, &stg, &s->tx_bytes);
        }
    }
    ss_staging_free(&stg);
    if (s) serving_put(c, s, fd);
    free(req);
    return rc;
}

/* Waits until the requester's next request arrives on fd: up to timeout_ms, or until a leave or destroy
 * (w, one of c's waits with an eventfd; a lost master only opens it again). @return 0 (readable), or as
 * net_wait_until (-PERR_TIMEOUT, -PERR_IO, -PERR_CANCELLED). */
static int wait_request(pcclComm_t *c, pwait_t *w, int fd) {
    uint64_t deadline = net_now_ms() + (uint64_t)(c->timeout_ms > 0 ? c->timeout_ms : 0);
    net_cancel_t cancel = {.wait = w};
    for (;;) {
        int rc = net_wait_until(fd, POLLIN, c->timeout_ms > 0 ? deadline : UINT64_MAX, &cancel);
        if (rc != -PERR_CANCELLED) return rc;
        pthread_mutex_lock(&c->mu);
        rc = ss_watch_again_locked(c, w);
        pthread_mutex_unlock(&c->mu);
        if (rc != 0) return rc;
    }
}

/* Serves one requester's requests, one per stage of its fetch, on the connection it keeps. The first
 * request follows the introduction at once; between two, the connection waits through w. */
void ss_serve_connection(pcclComm_t *c, sec_link_t *link, int fd) {
    pwait_t w;
    if (comm_wait_open(c, &w, 1) != 0) return;
    while (serve_request(c, link, fd) == 0 && wait_request(c, &w, fd) == 0) {
    }
    comm_wait_close(c, &w);
}

static int validate(const pcclSharedState_t *s) {
    if (!s || (s->count && !s->infos) || s->count > WIRE_MAX_TENSORS) return -PERR_INVALID;
    for (size_t i = 0; i < s->count; i++) {
        const pcclTensorInfo_t *t = &s->infos[i];
        if (!t->name || !t->name[0] || strlen(t->name) > WIRE_MAX_KEY || (!t->data && t->count) ||
            pccl_dtype_size(t->datatype) == 0)
            return -PERR_INVALID;
        if (ss_device_check(t) != 0) return -PERR_INVALID;
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->infos[j].name, t->name) == 0) {
                PLOG_ERROR("pccl", "shared-state key '%s' appears twice", t->name);
                return -PERR_INVALID;
            }
    }
    return 0;
}

/* The SYNC_SHARED_STATE vote of st: its revision, the strategy and every tensor's key, layout and hash. */
static int make_vote(pcclComm_t *c, const pcclSharedState_t *st, pcclSharedStateSyncStrategy_t strategy,
                              wire_msg_t *vote) {
    *vote = (wire_msg_t){.type = C2M_SYNC_SHARED_STATE};
    vote->u.sync.revision = st->revision;
    vote->u.sync.strategy = (uint8_t)strategy;
    vote->u.sync.n = (uint32_t)st->count;
    vote->u.sync.tensors = calloc(st->count ? st->count : 1, sizeof(wire_tensor_t));
    if (!vote->u.sync.tensors) return -PERR_NOMEM;
    for (size_t i = 0; i < st->count; i++) {
        const pcclTensorInfo_t *t = &st->infos[i];
        wire_tensor_t *w = &vote->u.sync.tensors[i];
        snprintf(w->key, sizeof w->key, "%s", t->name);
        w->dtype = (uint8_t)t->datatype;
        w->count = t->count;
        w->allow_inequality = t->allow_content_inequality;
        if (ss_hash(t, &w->hash) != 0) {
            PLOG_ERROR(c->log_name, "cannot hash shared-state tensor '%s'", t->name);
            wire_msg_free(vote);
            return -PERR_FAILED;
        }
    }
    return 0;
}

/* What the master's plan says of this sync: 0 (go on with it), or why it cannot be done (logged): -PERR_MISUSE
 * (refused as asked), -PERR_UNAVAILABLE (no peer holds the revision). */
static int plan_verdict(pcclComm_t *c, const pcclSharedState_t *st, const wire_msg_t *plan) {
    switch (plan->u.ss_plan.status) {
    case SS_OK: return 0;
    case SS_REVISION_REFUSED:
        PLOG_ERROR(c->log_name, "shared-state revision %llu refused: the group expects revision %llu",
                   (unsigned long long)st->revision, (unsigned long long)plan->u.ss_plan.revision);
        return -PERR_MISUSE;
    case SS_LAYOUT_MISMATCH:
        PLOG_ERROR(c->log_name, "shared-state keys, dtypes or counts differ from the group's popular state");
        return -PERR_MISUSE;
    case SS_CONFLICT:
        PLOG_ERROR(c->log_name,
                   "SEND_ONLY shared state refused: another SEND_ONLY peer holds different content (the master "
                   "kicks both), or this peer is behind revision %llu and would have to receive",
                   (unsigned long long)plan->u.ss_plan.revision);
        return -PERR_MISUSE;
    case SS_ABORTED:
        PLOG_ERROR(c->log_name, "shared-state sync aborted: other peers are in a different operation "
                   "(the run's peers are out of lockstep)");
        return -PERR_MISUSE;
    default:
        PLOG_ERROR(c->log_name, "no peer of the group can provide shared state revision %llu",
                   (unsigned long long)plan->u.ss_plan.revision);
        return -PERR_UNAVAILABLE;
    }
}

/* Fetches what the plan says, tells the master, and waits for SS_DONE while serving (the master says when
 * every peer is done). SS_DONE carries this peer's own outcome: a failed fetch fails only this call (the
 * revision stays; the caller retries). On success st takes the plan's revision. @return 0, -PERR_IO (this
 * peer's fetch failed), or comm_send's or comm_wait's code. */
static int fetch_and_finish(pcclComm_t *c, unsigned ep, pcclSharedState_t *st, wire_msg_t *vote,
                                     const wire_msg_t *plan, uint64_t *rx) {
    int ok = plan->u.ss_plan.n == 0 || ss_fetch(c, st, plan, rx) == 0;
    wire_msg_t done = {.type = C2M_SS_DIST_DONE}, fin = {0};
    done.u.flag.value = (uint8_t)ok;
    uint16_t tf[] = {M2C_SS_DONE};
    int rc = comm_send(c, ep, &done);
    if (rc == 0) rc = comm_wait(c, ep, tf, 1, -1, &fin);
    if (rc != 0) return rc;
    int result = -PERR_IO;
    if (ok && fin.u.flag.value) {
        st->revision = plan->u.ss_plan.revision;
        /* What this peer holds now: its own hashes, but the fetched tensors' are the source's. */
        for (uint32_t f = 0; f < plan->u.ss_plan.n; f++)
            for (uint32_t i = 0; i < vote->u.sync.n; i++)
                if (strcmp(vote->u.sync.tensors[i].key, plan->u.ss_plan.fetch[f].key) == 0)
                    vote->u.sync.tensors[i].hash = plan->u.ss_plan.fetch[f].hash;
        comm_note_sync(c, st->revision, vote->u.sync.tensors, vote->u.sync.n);
        result = 0;
    }
    wire_msg_free(&fin);
    return result;
}

/* Stops serving st and waits for the servers still holding it. They have bounded socket timeouts and signal
 * cv as they finish; a leave or destroy (which ends w) does not wait for them: it ends their connections. */
static void stop_serving(pcclComm_t *c, ss_serving_t *serving) {
    pwait_t w;
    int have_w = comm_wait_open(c, &w, 0) == 0;
    pthread_mutex_lock(&c->mu);
    c->serving = NULL;
    int shut = 0;
    while (serving->refs > 0) {
        if (!shut && (shut = comm_cancelled(c)))
            for (int i = 0; i < 16; i++)
                if (serving->fds[i] >= 0) shutdown(serving->fds[i], SHUT_RDWR);
        if (have_w && !pwait_result(&w)) pwait_sleep(&w, 0);
        else pwait_cond_sleep(&c->cv, &c->mu, 0);
    }
    pthread_mutex_unlock(&c->mu);
    if (have_w) comm_wait_close(c, &w);
}

/* A leave ends the wait for the plan, but when every member's vote was in, the master has commenced the sync and
 * keeps this peer as its member until it reports: without the report the leave waits out its grace and becomes
 * a departure. So a leaving peer whose vote went out takes the plan on its way and reports no fetch of its own
 * (SS_DIST_DONE 0, as a fetch the leave stopped). No plan comes when the vote was withdrawn: the master removes
 * the peer and closes the connection, which ends this wait. */
static void report_after_leave(pcclComm_t *c, unsigned ep) {
    wire_msg_t plan = {0};
    uint16_t tp[] = {M2C_SS_PLAN};
    if (comm_wait_owed(c, ep, tp, 1, PCCL_EXT_LEAVE_GRACE_MS, &plan) != 0) return;
    if (plan.u.ss_plan.status == SS_OK) { /* a refused plan owes no report */
        wire_msg_t done = {.type = C2M_SS_DIST_DONE};
        comm_send(c, ep, &done);
    }
    wire_msg_free(&plan);
}

/* The one mapping of a sync's rc to its result: the control path's codes (comm_begin, comm_send, comm_wait) as
 * comm_call_result says, where a restarted master, which knows nothing of this sync, is pcclRankConnectionLost
 * (the caller retries); every other code by its default (perr_result). */
static pcclResult_t sync_result(const pcclComm_t *c, int rc) {
    if (rc == -PERR_RESTARTED || rc == -PERR_LOST) return comm_call_result(c, rc, pcclRankConnectionLost);
    return perr_result(rc);
}

pcclResult_t pcclSynchronizeSharedState(const pcclComm_t *cc, pcclSharedState_t *st,
                                        pcclSharedStateSyncStrategy_t strategy, pcclSharedStateSyncInfo_t *info) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if (validate(st) != 0 || (unsigned)strategy > PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY) return pcclInvalidArgument;
    if (comm_ops_outstanding(c)) return pcclPendingAsyncOps;
    wire_msg_t vote;
    int rc = make_vote(c, st, strategy, &vote);
    if (rc != 0) return perr_result(rc);

    ss_serving_t serving = {.state = st, .refs = 0};
    atomic_init(&serving.tx_bytes, 0);
    for (int i = 0; i < 16; i++) serving.fds[i] = -1;
    pthread_mutex_lock(&c->mu);
    c->serving = &serving;
    pthread_mutex_unlock(&c->mu);

    uint64_t rx = 0;
    wire_msg_t plan = {0};
    uint16_t tp[] = {M2C_SS_PLAN};
    unsigned ep;
    rc = comm_begin(c, &ep);
    if (rc == 0) rc = comm_send(c, ep, &vote);
    int voted = rc == 0;
    if (rc == 0) rc = comm_wait(c, ep, tp, 1, -1, &plan);
    /* stopping: a leave was asked for (its LEAVE may still be on its way: the role changes after the cancel) */
    if (rc != 0 && voted && atomic_load(&c->stopping) && !atomic_load(&c->shutting_down)) report_after_leave(c, ep);
    if (rc == 0) rc = plan_verdict(c, st, &plan);
    if (rc == 0) rc = fetch_and_finish(c, ep, st, &vote, &plan, &rx);
    stop_serving(c, &serving);
    wire_msg_free(&vote);
    wire_msg_free(&plan);
    if (info) {
        info->tx_bytes = atomic_load(&serving.tx_bytes);
        info->rx_bytes = rx;
    }
    return sync_result(c, rc);
}
