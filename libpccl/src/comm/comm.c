/*
 * comm.c - the communicator's state and its control connection to the master: sending, the inbox
 * that waits match against, the master epoch, cancellation, connecting and the key handshake.
 */
#include "comm/comm.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "pccl_leave.h"


static atomic_int g_initialized;

pcclResult_t pcclInit(void) {
    atomic_store(&g_initialized, 1);
    return pcclSuccess;
}

int pccl__initialized(void) { return atomic_load(&g_initialized); }

const char *pcclResultString(pcclResult_t r) {
    if (r == pcclExtRunShutDown) return "the master ended the run (shut down)";
    switch (r) {
#define PCCL_RESULT_STR_(name, value, text) case name: return text;
        PCCL_RESULT_MAP(PCCL_RESULT_STR_)
#undef PCCL_RESULT_STR_
    }
    return "unknown result code";
}

pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info) {
    if (!info) return pcclInvalidArgument;
#ifdef PCCL_HAS_CUDA
    info->has_cuda_support = true;
#else
    info->has_cuda_support = false;
#endif
    return pcclSuccess;
}

int comm_env_int(const char *name, int def, int min, int max) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < min || v > max) {
        PLOG_WARN("pccl", "ignoring %s=%s (expected an integer in [%d, %d])", name, s, min, max);
        return def;
    }
    return (int)v;
}

int comm_algo_from_env(uint8_t *algo) {
    const char *s = getenv("PCCL_ALGO");
    *algo = WIRE_ALGO_AUTO;
    if (!s || !*s || strcmp(s, "auto") == 0) return 0;
    if (strcmp(s, "ring") == 0) *algo = WIRE_ALGO_RING;
    else if (strcmp(s, "rhd") == 0) *algo = WIRE_ALGO_RHD;
    else if (strcmp(s, "rd") == 0) *algo = WIRE_ALGO_RD;
    else {
        PLOG_ERROR("pccl", "PCCL_ALGO=%s: expected auto, ring, rhd or rd", s);
        return -PERR_INVALID;
    }
    return 0;
}

void comm_inbox_clear(pcclComm_t *c) {
    while (c->inbox_head) {
        inbox_item_t *it = c->inbox_head;
        c->inbox_head = it->next;
        wire_msg_free(&it->msg);
        free(it);
    }
    c->inbox_tail = NULL;
}

/* ---------- control connection ---------- */

int comm_wait_open(pcclComm_t *c, pwait_t *w, int with_fd) {
    if (pwait_init(w, &c->mu, &c->cv, with_fd) != 0) return -PERR_FAILED;
    pthread_mutex_lock(&c->mu);
    pwait_set_add_locked(&c->waits, w);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void comm_wait_close(pcclComm_t *c, pwait_t *w) {
    pthread_mutex_lock(&c->mu);
    pwait_set_remove_locked(w);
    pthread_mutex_unlock(&c->mu);
    pwait_destroy(w);
}

void comm_stop(pcclComm_t *c, atomic_int *flag) {
    pthread_mutex_lock(&c->mu);
    atomic_store(flag, 1);
    pwait_set_cancel_locked(&c->waits, -PERR_CANCELLED, 1);
    pthread_cond_broadcast(&c->cv); /* also the waits that had ended already and sleep on cv alone */
    pthread_mutex_unlock(&c->mu);
}

void comm_close_master_locked(pcclComm_t *c) {
    if (c->master_fd >= 0) close(c->master_fd);
    c->master_fd = -1;
    sec_link_free(c->master_link);
    c->master_link = NULL;
}

peer_state_t comm_state(const pcclComm_t *c) { return (peer_state_t)atomic_load(&c->state); }

peer_state_t comm_role(const pcclComm_t *c) {
    peer_state_t s = comm_state(c);
    if (s == PEER_MASTER_DOWN) return (peer_state_t)atomic_load(&c->before);
    if (s == PEER_ENDED && atomic_load(&c->before) == PEER_LEAVING) return PEER_LEAVING;
    return s;
}

int comm_ended(const pcclComm_t *c) { return comm_state(c) == PEER_ENDED; }

int comm_transition_locked(pcclComm_t *c, unsigned from, peer_state_t to) {
    peer_state_t was = comm_state(c);
    if (!(from & PEER_BIT(was))) return -PERR_INVALID;
    if (to == PEER_MASTER_DOWN || to == PEER_ENDED) atomic_store(&c->before, was);
    /* The waits of the lost connection end: for good once ended, else the peer waits for the next one. */
    if (to == PEER_MASTER_DOWN) pwait_set_cancel_locked(&c->waits, -PERR_RESTARTED, 0);
    if (to == PEER_ENDED) pwait_set_cancel_locked(&c->waits, -PERR_LOST, 0);
    atomic_store(&c->state, to);
    pthread_cond_broadcast(&c->cv);
    if (to == PEER_ENDED) pthread_cond_broadcast(&c->hb_cv);
    return (int)was;
}

int comm_transition(pcclComm_t *c, unsigned from, peer_state_t to) {
    pthread_mutex_lock(&c->mu);
    int rc = comm_transition_locked(c, from, to);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int comm_cancelled(const pcclComm_t *c) { return pwait_set_sticky(&c->waits) != 0; }

void comm_note_shutdown(pcclComm_t *c, const char *reason) {
    atomic_fetch_or(&c->departed, DEPARTED_SHUT_DOWN);
    PLOG_WARN(c->log_name, "the run was shut down by the master: %s", reason[0] ? reason : "no reason given");
}

pcclResult_t comm_lost_result(const pcclComm_t *c) {
    return atomic_load(&c->departed) & DEPARTED_SHUT_DOWN ? pcclExtRunShutDown : pcclMasterConnectionFailed;
}

pcclResult_t comm_call_result(const pcclComm_t *c, int rc, pcclResult_t restarted) {
    if (rc == 0) return pcclSuccess;
    return rc == -PERR_RESTARTED ? restarted : comm_lost_result(c);
}

void comm_pause(pcclComm_t *c, int ms) {
    pwait_t w;
    if (comm_wait_open(c, &w, 0) != 0) return;
    pwait_pause(&w, ms);
    comm_wait_close(c, &w);
}

static uint64_t local_peers(pcclComm_t *c) {
    pthread_mutex_lock(&c->p2p.mu);
    uint64_t local = c->p2p.local_peers;
    pthread_mutex_unlock(&c->p2p.mu);
    return local;
}

int comm_local_peers_fit(pcclComm_t *c) { return local_peers(c) <= (uint64_t)c->ncpus; }

uint64_t comm_spin_until(pcclComm_t *c) {
    uint64_t local = local_peers(c); /* 0 until the master's first peer list: nothing is known to fit yet */
    return local && local <= (uint64_t)c->ncpus ? pwait_now_us() + COMM_SPIN_US : 0;
}

int comm_begin(pcclComm_t *c, unsigned *epoch) {
    /* The reader bounds an outage by the reconnect window; this bound only guards against a stuck reader.
     * A peer that is leaving starts nothing new (its votes would not be sent). */
    uint64_t deadline = net_now_ms() + (uint64_t)c->reconnect_ms + (uint64_t)c->connect_timeout_ms + 5000;
    pwait_t w;
    *epoch = atomic_load(&c->master_epoch);
    if (comm_wait_open(c, &w, 0) != 0) return -PERR_LOST;
    pthread_mutex_lock(&c->mu);
    while (comm_state(c) == PEER_MASTER_DOWN && pwait_sleep(&w, deadline) == 0) {
    }
    peer_state_t s = comm_state(c);
    int rc = s == PEER_ENDED || comm_cancelled(c) || s == PEER_MASTER_DOWN ? -PERR_LOST : 0;
    *epoch = atomic_load(&c->master_epoch);
    pthread_mutex_unlock(&c->mu);
    comm_wait_close(c, &w);
    return rc;
}

/* The votes of the operation kinds: after LEAVE the master kicks a peer for any of them. */
static int is_vote(uint16_t type) {
    return type == C2M_UPDATE_TOPOLOGY || type == C2M_PEERS_PENDING || type == C2M_SYNC_SHARED_STATE ||
           type == C2M_COLL_INIT || type == C2M_OPTIMIZE_TOPOLOGY;
}

int comm_send(pcclComm_t *c, unsigned epoch, const wire_msg_t *m) {
    if (comm_ended(c)) return -PERR_LOST;
    pthread_mutex_lock(&c->send_mu);
    /* PEER_LEAVING is entered under send_mu before LEAVE goes out, so no vote follows it on the wire. */
    peer_state_t s = comm_state(c);
    if (s == PEER_LEAVING && is_vote(m->type)) {
        pthread_mutex_unlock(&c->send_mu);
        return -PERR_LOST;
    }
    int rc = -PERR_RESTARTED;
    /* A peer the restarted master took back as a newcomer may not vote: a call that began before the
     * outage ends with its retryable failure instead of being kicked for an out-of-state vote. It may leave. */
    int may_send = s != PEER_REJOINING || m->type == C2M_HEARTBEAT || m->type == C2M_P2P_ESTABLISHED ||
                   m->type == C2M_LEAVE;
    if (may_send && atomic_load(&c->master_epoch) == epoch && s != PEER_MASTER_DOWN) {
        rc = link_send_msg(c->master_link, c->master_fd, m) == 0 ? 0 : c->reconnect_ms ? -PERR_RESTARTED : -PERR_LOST;
        /* A master that stopped reading: make the reader notice now rather than at its next read. */
        if (rc != 0) shutdown(c->master_fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&c->send_mu);
    if (rc != 0 && rc != -PERR_RESTARTED)
        PLOG_WARN(c->log_name, "sending %s to the master failed", wire_type_name(m->type));
    return rc;
}

void comm_set_uuid(pcclComm_t *c, const uint8_t uuid[16]) {
    /* under mu: the p2p acceptor's threads read the uuid (comm_uuid) while the master's welcome sets it */
    pthread_mutex_lock(&c->mu);
    memcpy(c->uuid, uuid, 16);
    pthread_mutex_unlock(&c->mu);
    snprintf(c->log_name, sizeof c->log_name, "peer:%02x%02x%02x%02x", uuid[0], uuid[1], uuid[2], uuid[3]);
}

void comm_uuid(pcclComm_t *c, uint8_t out[16]) {
    pthread_mutex_lock(&c->mu);
    memcpy(out, c->uuid, 16);
    pthread_mutex_unlock(&c->mu);
}

void comm_note_ring(pcclComm_t *c, const uint8_t (*ring)[16], uint32_t n) {
    uint8_t(*copy)[16] = n ? malloc((size_t)n * 16) : NULL;
    if (n && !copy) return;
    if (n) memcpy(copy, ring, (size_t)n * 16);
    pthread_mutex_lock(&c->mu);
    free(c->last_ring);
    c->last_ring = copy;
    c->last_nring = n;
    pthread_mutex_unlock(&c->mu);
}

void comm_note_sync(pcclComm_t *c, uint64_t revision, const wire_tensor_t *t, uint32_t n) {
    wire_tensor_t *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
    if (n && !copy) return;
    if (n) memcpy(copy, t, (size_t)n * sizeof *copy);
    pthread_mutex_lock(&c->mu);
    free(c->last_tensors);
    c->last_tensors = copy;
    c->last_ntensors = n;
    c->has_revision = 1;
    c->last_revision = revision;
    pthread_mutex_unlock(&c->mu);
}

void comm_set_world(pcclComm_t *c, const wire_world_t *w) {
    pthread_mutex_lock(&c->mu);
    c->world = *w;
    pthread_mutex_unlock(&c->mu);
}

/* Takes the first inbox message whose type is one of types[0..ntypes) into *msg (caller holds mu). 1 if taken. */
static int inbox_take_locked(pcclComm_t *c, const uint16_t *types, int ntypes, wire_msg_t *msg) {
    inbox_item_t *prev = NULL, *it = c->inbox_head;
    for (; it; prev = it, it = it->next) {
        int match = 0;
        for (int i = 0; i < ntypes; i++) match |= it->msg.type == types[i];
        if (match) break;
    }
    if (!it) return 0;
    if (prev) prev->next = it->next;
    else c->inbox_head = it->next;
    if (c->inbox_tail == it) c->inbox_tail = prev;
    *msg = it->msg;
    free(it);
    return 1;
}

int comm_wait_owed(pcclComm_t *c, unsigned epoch, const uint16_t *types, int ntypes, int timeout_ms, wire_msg_t *msg) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int rc = -PERR_TIMEOUT;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (atomic_load(&c->master_epoch) != epoch && !comm_ended(c)) {
            rc = -PERR_RESTARTED;
            break;
        }
        if (inbox_take_locked(c, types, ntypes, msg)) {
            rc = 0;
            break;
        }
        if (comm_ended(c)) {
            rc = -PERR_LOST;
            break;
        }
        /* The reader broadcasts cv for each message and at the connection's end. */
        if (pwait_cond_sleep(&c->cv, &c->mu, deadline) != 0) break;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int comm_wait(pcclComm_t *c, unsigned epoch, const uint16_t *types, int ntypes, int timeout_ms, wire_msg_t *msg) {
    uint64_t deadline = timeout_ms >= 0 ? net_now_ms() + (uint64_t)timeout_ms : 0, spin_until = comm_spin_until(c);
    pwait_t w;
    if (comm_wait_open(c, &w, 0) != 0) return -PERR_LOST;
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        /* A wait for an older connection's answer: the inbox was emptied when the epoch moved. */
        if (atomic_load(&c->master_epoch) != epoch && !comm_ended(c)) {
            rc = -PERR_RESTARTED;
            break;
        }
        if (inbox_take_locked(c, types, ntypes, msg)) break;
        if (comm_ended(c)) {
            rc = -PERR_LOST;
            break;
        }
        /* Woken by the reader for each message; ended by a lost connection (-PERR_RESTARTED: the new master
         * knows nothing of the request), the end of the run, a leave or destroy, or the deadline. A message
         * that came before the end is still taken: the inbox is looked at first. */
        int r = pwait_result(&w);
        if (!r && timeout_ms >= 0 && net_now_ms() >= deadline) r = -PERR_TIMEOUT;
        if (r == -PERR_TIMEOUT) rc = -PERR_TIMEOUT;
        else if (r == -PERR_RESTARTED) rc = -PERR_RESTARTED;
        else if (r) rc = -PERR_LOST;
        if (r) break;
        pwait_sleep_spin(&w, timeout_ms >= 0 ? deadline : 0, spin_until);
    }
    pthread_mutex_unlock(&c->mu);
    comm_wait_close(c, &w);
    return rc;
}

pcclResult_t comm_check_ready(const pcclComm_t *c) {
    if (!pccl__initialized()) return pcclNotInitialized;
    if (!c) return pcclInvalidArgument;
    peer_state_t role = comm_role(c);
    if (role == PEER_LEAVING) return pcclInvalidUsage;
    /* A peer waiting to be accepted again after a master restart is in no ring yet. */
    if (role == PEER_REJOINING) return pcclTooFewPeers;
    if (role == PEER_ENDED) return comm_lost_result(c);
    if (role != PEER_ACCEPTED) return pcclInvalidUsage;
    return pcclSuccess;
}

/* Connects within timeout_ms. "No route" errors are retried until then: a link that is coming up
 * (ARP not yet resolved, interface just restored) answers them for a moment. A refused connection
 * means nobody listens there and fails at once. @return fd, -PERR_CANCELLED, or -PERR_IO (errno set;
 * ETIMEDOUT: no answer to the connect). */
static int connect_retrying(pcclComm_t *c, int timeout_ms) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    ccoip_socket_address_t to[ADDR_MAX_RESOLVED];
    for (;;) {
        uint64_t now = net_now_ms();
        int n = comm_master_addrs(c, to);
        if (n < 0) return n;
        pwait_t w;
        if (comm_wait_open(c, &w, 1) != 0) return -PERR_IO;
        net_cancel_t cancel = {.wait = &w};
        /* From the p2p port: the master observes the address this peer's punches come from (docs/nat.md). */
        int fd = net_connect_first_from(to, n, c->p2p.port, now < deadline ? (int)(deadline - now) : 1, &cancel,
                                        NULL);
        int e = errno;
        comm_wait_close(c, &w);
        errno = e;
        if (fd == -PERR_TIMEOUT) fd = -PERR_IO; /* errno ETIMEDOUT: nobody answered the connect */
        if (fd >= 0 || fd == -PERR_CANCELLED || (e != EHOSTUNREACH && e != ENETUNREACH)) return fd;
        if (net_now_ms() + 100 >= deadline) return -PERR_IO;
        comm_pause(c, 100);
        if (comm_cancelled(c)) {
            errno = ECANCELED;
            return -PERR_CANCELLED;
        }
    }
}

int comm_master_recv(pcclComm_t *c, int fd, sec_link_t *link, uint64_t deadline_ms, wire_msg_t *m, char *err,
                     size_t errlen) {
    pwait_t w;
    if (comm_wait_open(c, &w, 1) != 0) {
        snprintf(err, errlen, "out of descriptors");
        return -PERR_IO;
    }
    net_cancel_t cancel = {.wait = &w};
    int rc = net_wait_until(fd, POLLIN, deadline_ms, &cancel);
    comm_wait_close(c, &w);
    if (rc != 0) {
        snprintf(err, errlen, "%s", rc == -PERR_TIMEOUT ? "no answer in time" : rc == -PERR_CANCELLED ? "cancelled"
                                                                                     : strerror(errno));
        return rc;
    }
    /* The message has begun: the rest of it comes within what is left of the deadline. */
    uint64_t now = net_now_ms();
    net_set_timeouts(fd, now < deadline_ms ? (int)(deadline_ms - now) : 1);
    return link_recv_msg(link, fd, m, err, errlen);
}

/* The master's proof of the key, and whether it encrypts: a peer learns that here and uses it for
 * its p2p connections, so a restarted master must announce the same. @return 0, or whether another try
 * may work: -PERR_REFUSED (a refused proof, a changed encryption) never does; -PERR_IO (the master closed the
 * handshake: restarting, or its gate; errno ECONNRESET), -PERR_TIMEOUT (no answer) or -PERR_CANCELLED. */
static int handshake_master(pcclComm_t *c, int fd, sec_link_t **link) {
    sec_hs_t hs;
    sec_hs_params_t p = {.role = SEC_INITIATOR, .purpose = SEC_PURPOSE_CONTROL, .flags = -1};
    char err[160] = "handshake: cannot start";
    int first = comm_state(c) == PEER_CONNECTING, rc = -PERR_REFUSED;
    pwait_t w;
    if (comm_wait_open(c, &w, 1) != 0) return -PERR_IO;
    net_cancel_t cancel = {.wait = &w};
    int started = sec_hs_start(&hs, &c->sec, &p) == 0;
    if (started) rc = sec_handshake_fd(fd, &hs, net_now_ms() + SEC_HS_TIMEOUT_MS, &cancel, err, sizeof err);
    comm_wait_close(c, &w);
    if (rc != 0 && started && !hs.err[0]) {
        /* The master did not finish it: no proof was refused. */
        rc = comm_cancelled(c) ? -PERR_CANCELLED : strstr(err, "no answer") ? -PERR_TIMEOUT : -PERR_IO;
        errno = ECONNRESET;
        PLOG_INFO(c->log_name, "master %s", err);
    } else if (rc != 0) {
        rc = -PERR_REFUSED;
        PLOG_ERROR(c->log_name, "master %s", err);
    } else if (!first && hs.session.encrypt != c->sec.encrypt) {
        PLOG_ERROR(c->log_name, "the restarted master %s encryption; this peer's run cannot go on",
                   hs.session.encrypt ? "turned on" : "turned off");
        rc = -PERR_REFUSED;
    } else {
        c->sec.encrypt = hs.session.encrypt;
        if (hs.session.encrypt && !(*link = sec_link_new(&hs.session))) rc = -PERR_REFUSED;
    }
    if (started) sec_hs_wipe(&hs);
    return rc;
}

int comm_connect_master(pcclComm_t *c, int timeout_ms, sec_link_t **link) {
    *link = NULL;
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int fd = connect_retrying(c, timeout_ms);
    if (fd < 0) return fd;
    int rc = c->sec.keyed ? handshake_master(c, fd, link) : 0;
    /* The master's first message: the nonce HELLO or RESUME signs (comm_identity.c). */
    if (rc == 0) rc = comm_read_challenge(c, fd, *link, deadline);
    if (rc != 0) {
        int e = errno;
        sec_link_free(*link);
        *link = NULL;
        close(fd);
        errno = e;
        return rc;
    }
    return fd;
}
