/*
 * shared_state.c - pcclSynchronizeSharedState and the p2p server that hands
 * tensors to outdated peers.
 *
 * Transfer protocol (on a p2p connection of kind SHARED_STATE):
 *   requester: u32 n, then n keys (u8 length + bytes)
 *   server:    per key: u8 status (0 ok, 1 unavailable), u64 byte count, bytes
 * The requester receives each tensor into a buffer of its own and copies it
 * into the tensor only after its hash matched the one the master announced
 * (fetch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "log.h"
#include "net.h"
#include "p2p.h"
#include "p2p_hello.h"
#include "pccl_kernels.h"
#include "ss_device.h"


static const pcclTensorInfo_t *find_tensor(const pcclSharedState_t *s, const char *key) {
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->infos[i].name, key) == 0) return &s->infos[i];
    return NULL;
}

/* Takes a reference on the state being served, or NULL if this peer is not syncing. */
static ss_serving_t *serving_get(pcclComm_t *c) {
    pthread_mutex_lock(&c->mu);
    ss_serving_t *s = c->serving;
    if (s) s->refs++;
    pthread_mutex_unlock(&c->mu);
    return s;
}

static void serving_put(pcclComm_t *c, ss_serving_t *s) {
    pthread_mutex_lock(&c->mu);
    s->refs--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void ss_serve_connection(pcclComm_t *c, sec_link_t *link, int fd) {
    uint8_t b4[4];
    if (link_recv_all(link, fd, b4, 4) != 0) return;
    uint32_t n = wire_get_u32(b4);
    if (n > WIRE_MAX_TENSORS) return;
    /* Read the whole request before answering: a requester that writes a long key list
     * before reading must not block on a full socket while we block writing to it. */
    char(*keys)[WIRE_MAX_KEY + 1] = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!keys) return;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t kl;
        if (link_recv_all(link, fd, &kl, 1) != 0 || link_recv_all(link, fd, keys[i], kl) != 0) {
            free(keys);
            return;
        }
        keys[i][kl] = 0;
    }
    ss_serving_t *s = serving_get(c);
    ss_staging_t stg = {0};
    for (uint32_t i = 0; i < n; i++) {
        const char *key = keys[i];
        const pcclTensorInfo_t *t = s ? find_tensor(s->state, key) : NULL;
        uint8_t hdr[9] = {t ? 0 : 1};
        uint64_t bytes = t ? ss_tensor_bytes(t) : 0;
        wire_put_u64(hdr + 1, bytes);
        if (link_send_all(link, fd, hdr, sizeof hdr) != 0) break;
        if (t && ss_send_tensor(link, fd, t, &stg, &s->tx_bytes) != 0) break;
    }
    ss_staging_free(&stg);
    if (s) serving_put(c, s);
    free(keys);
}

/*
 * Fetches the tensors of the plan from its source; 0 on success.
 * Received bytes land in a host buffer first and reach the caller's tensor only
 * once they hashed to the value the master announced, one tensor at a time: a
 * failed fetch (a lying or broken source, one that dies mid-transfer) leaves
 * every tensor it did not verify exactly as it was, while the tensors verified
 * before the failure already hold the elected content (a retry skips them).
 * The buffer holds the largest fetched tensor: that is what a fetch costs on
 * top of the state (a state of equal tensors fetched whole costs 1/n more),
 * where staging the whole fetch to land it all or nothing would double it.
 */
static int fetch(pcclComm_t *c, pcclSharedState_t *st, const wire_msg_t *plan, uint64_t *rx) {
    const __typeof__(plan->u.ss_plan) *p = &plan->u.ss_plan;
    size_t cap = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const pcclTensorInfo_t *t = find_tensor(st, p->fetch[i].key);
        if (t && ss_tensor_bytes(t) > cap) cap = ss_tensor_bytes(t);
    }
    uint8_t *land = cap ? malloc(cap) : NULL;
    if (cap && !land) {
        PLOG_ERROR(c->log_name, "cannot allocate %zu bytes to receive shared state into", cap);
        return -1;
    }
    ccoip_socket_address_t src = wire_peer_addr(&p->source);
    char where[ADDR_STRLEN];
    addr_str(&src, where);
    p2p_intro_t me = {.kind = P2P_KIND_SHARED_STATE};
    memcpy(me.uuid, c->uuid, 16);
    sec_link_t *link = NULL;
    char err[160];
    int fd = p2p_dial(&src, &c->sec, &me, p->source.uuid, c->connect_timeout_ms, NULL, &link,
                      err, sizeof err);
    if (fd < 0) {
        PLOG_WARN(c->log_name, "cannot reach shared-state source %s: %s", where, err);
        free(land);
        return -1;
    }
    net_set_timeouts(fd, c->timeout_ms);
    /* The key list in one piece: one write, and one frame per 256 KiB when the run encrypts. */
    uint8_t *req = malloc(4 + (size_t)p->n * (1 + WIRE_MAX_KEY));
    size_t rl = 4;
    if (req) {
        wire_put_u32(req, p->n);
        for (uint32_t i = 0; i < p->n; i++) {
            size_t kl = strlen(p->fetch[i].key);
            req[rl++] = (uint8_t)kl;
            memcpy(req + rl, p->fetch[i].key, kl);
            rl += kl;
        }
    }
    int rc = req ? link_send_all(link, fd, req, rl) : -1;
    free(req);
    for (uint32_t i = 0; i < p->n && rc == 0; i++) {
        const pcclTensorInfo_t *t = find_tensor(st, p->fetch[i].key);
        uint8_t hdr[9];
        if (!t || link_recv_all(link, fd, hdr, sizeof hdr) != 0) {
            rc = -1;
            break;
        }
        uint64_t bytes = wire_get_u64(hdr + 1);
        if (hdr[0] != 0 || bytes != ss_tensor_bytes(t)) {
            PLOG_WARN(c->log_name, "shared-state source cannot provide '%s' (%llu bytes)", t->name,
                      (unsigned long long)bytes);
            rc = -1;
            break;
        }
        if (ss_recv_bytes(link, fd, land, bytes) != 0) {
            PLOG_WARN(c->log_name, "shared-state transfer of '%s' from %s broke off", t->name, where);
            rc = -1;
            break;
        }
        *rx += bytes;
        uint64_t h = pccl_simplehash(land, bytes); /* equal to the CUDA hash of the same bytes */
        if (h != p->fetch[i].hash) {
            PLOG_ERROR(c->log_name, "received '%s' hashes to %016llx, the master announced %016llx; the tensor "
                       "keeps its bytes", t->name, (unsigned long long)h, (unsigned long long)p->fetch[i].hash);
            rc = -1;
        } else if (ss_land(t, land) != 0) {
            PLOG_ERROR(c->log_name, "cannot copy the received '%s' into its tensor", t->name);
            rc = -1;
        }
    }
    sec_link_free(link);
    close(fd);
    free(land);
    return rc;
}

static pcclResult_t validate(const pcclSharedState_t *s) {
    if (!s || (s->count && !s->infos) || s->count > WIRE_MAX_TENSORS) return pcclInvalidArgument;
    for (size_t i = 0; i < s->count; i++) {
        const pcclTensorInfo_t *t = &s->infos[i];
        if (!t->name || !t->name[0] || strlen(t->name) > WIRE_MAX_KEY || (!t->data && t->count) ||
            pccl_dtype_size(t->datatype) == 0)
            return pcclInvalidArgument;
        if (ss_device_check(t) != 0) return pcclInvalidArgument;
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->infos[j].name, t->name) == 0) {
                PLOG_ERROR("pccl", "shared-state key '%s' appears twice", t->name);
                return pcclInvalidArgument;
            }
    }
    return pcclSuccess;
}

pcclResult_t pcclSynchronizeSharedState(const pcclComm_t *cc, pcclSharedState_t *st,
                                        pcclSharedStateSyncStrategy_t strategy, pcclSharedStateSyncInfo_t *info) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if ((r = validate(st)) != pcclSuccess) return r;
    if ((unsigned)strategy > PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY) return pcclInvalidArgument;
    if (comm_ops_outstanding(c)) return pcclPendingAsyncOps;

    wire_msg_t vote = {.type = C2M_SYNC_SHARED_STATE};
    vote.u.sync.revision = st->revision;
    vote.u.sync.strategy = (uint8_t)strategy;
    vote.u.sync.n = (uint32_t)st->count;
    vote.u.sync.tensors = calloc(st->count ? st->count : 1, sizeof(wire_tensor_t));
    if (!vote.u.sync.tensors) return pcclInternalError;
    for (size_t i = 0; i < st->count; i++) {
        const pcclTensorInfo_t *t = &st->infos[i];
        wire_tensor_t *w = &vote.u.sync.tensors[i];
        snprintf(w->key, sizeof w->key, "%s", t->name);
        w->dtype = (uint8_t)t->datatype;
        w->count = t->count;
        w->allow_inequality = t->allow_content_inequality;
        if (ss_hash(t, &w->hash) != 0) {
            PLOG_ERROR(c->log_name, "cannot hash shared-state tensor '%s'", t->name);
            wire_msg_free(&vote);
            return pcclInternalError;
        }
    }

    ss_serving_t serving = {.state = st, .refs = 0};
    atomic_init(&serving.tx_bytes, 0);
    pthread_mutex_lock(&c->mu);
    c->serving = &serving;
    pthread_mutex_unlock(&c->mu);

    uint64_t rx = 0;
    pcclResult_t result = pcclSuccess;
    wire_msg_t plan = {0};
    uint16_t tp[] = {M2C_SS_PLAN};
    unsigned ep;
    int rc = comm_begin(c, &ep);
    if (rc == COMM_OK) rc = comm_send(c, ep, &vote);
    if (rc == COMM_OK) rc = comm_wait(c, ep, tp, 1, -1, &plan);
    if (rc != COMM_OK) {
        /* A restarted master knows nothing of this sync: the caller retries it. */
        result = rc == COMM_RESTARTED ? pcclRankConnectionLost : pcclMasterConnectionFailed;
        goto out;
    }
    switch (plan.u.ss_plan.status) {
    case SS_OK: break;
    case SS_REVISION_REFUSED:
        PLOG_ERROR(c->log_name, "shared-state revision %llu refused: the group expects revision %llu",
                   (unsigned long long)st->revision, (unsigned long long)plan.u.ss_plan.revision);
        result = pcclInvalidUsage;
        goto out;
    case SS_LAYOUT_MISMATCH:
        PLOG_ERROR(c->log_name, "shared-state keys, dtypes or counts differ from the group's popular state");
        result = pcclInvalidUsage;
        goto out;
    case SS_CONFLICT:
        PLOG_ERROR(c->log_name,
                   "SEND_ONLY shared state refused: another SEND_ONLY peer holds different content (the master "
                   "kicks both), or this peer is behind revision %llu and would have to receive",
                   (unsigned long long)plan.u.ss_plan.revision);
        result = pcclInvalidUsage;
        goto out;
    case SS_ABORTED:
        PLOG_ERROR(c->log_name, "shared-state sync aborted: other peers are in a different operation "
                   "(the run's peers are out of lockstep)");
        result = pcclInvalidUsage;
        goto out;
    default:
        PLOG_ERROR(c->log_name, "no peer of the group can provide shared state revision %llu",
                   (unsigned long long)plan.u.ss_plan.revision);
        result = pcclNoSharedStateAvailable;
        goto out;
    }
    int ok = plan.u.ss_plan.n == 0 || fetch(c, st, &plan, &rx) == 0;
    wire_msg_t done = {.type = C2M_SS_DIST_DONE};
    done.u.flag.value = (uint8_t)ok;
    wire_msg_t fin = {0};
    uint16_t tf[] = {M2C_SS_DONE};
    /* Keep serving until the master says every peer is done. SS_DONE carries this peer's own
     * outcome: a failed fetch fails only this call (the revision stays; the caller retries). */
    rc = comm_send(c, ep, &done);
    if (rc == COMM_OK) rc = comm_wait(c, ep, tf, 1, -1, &fin);
    if (rc != COMM_OK) {
        result = rc == COMM_RESTARTED ? pcclRankConnectionLost : pcclMasterConnectionFailed;
        goto out;
    }
    if (!ok || !fin.u.flag.value) {
        result = pcclRankConnectionLost;
    } else {
        st->revision = plan.u.ss_plan.revision;
        /* What this peer holds now: its own hashes, but the fetched tensors' are the source's. */
        for (uint32_t f = 0; f < plan.u.ss_plan.n; f++)
            for (uint32_t i = 0; i < vote.u.sync.n; i++)
                if (strcmp(vote.u.sync.tensors[i].key, plan.u.ss_plan.fetch[f].key) == 0)
                    vote.u.sync.tensors[i].hash = plan.u.ss_plan.fetch[f].hash;
        comm_note_sync(c, st->revision, vote.u.sync.tensors, vote.u.sync.n);
    }
    wire_msg_free(&fin);
out:
    pthread_mutex_lock(&c->mu);
    c->serving = NULL;
    while (serving.refs > 0) pthread_cond_wait(&c->cv, &c->mu); /* servers have bounded socket timeouts */
    pthread_mutex_unlock(&c->mu);
    wire_msg_free(&vote);
    wire_msg_free(&plan);
    if (info) {
        info->tx_bytes = atomic_load(&serving.tx_bytes);
        info->rx_bytes = rx;
    }
    return result;
}
