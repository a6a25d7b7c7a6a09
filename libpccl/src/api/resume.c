/*
 * resume.c - a peer outliving its master: when the control connection is lost
 * (and PCCL_MASTER_RECONNECT_MS > 0), the reader thread calls comm_reconnect.
 * It moves the epoch (waits and operations of the old connection end: in-flight
 * all-reduces abort and restore their buffers, phase calls return their
 * retryable failure), then connects again every 100 ms, then every 250 ms,
 * until the window passes. An accepted peer re-registers with RESUME (uuid,
 * group, ring, last synced revision and hashes) and waits for the master's
 * rebuild (RESUMED; before it, it wires the rebuilt ring: ESTABLISH_P2P); a
 * peer that was only registered sends HELLO again. One
 * that comes back after the rebuild is a newcomer to the new master: it is
 * accepted again at its next pcclUpdateTopology (comm.c). An all-reduce whose
 * ring had finished keeps its result until the RESUME's verdict (protocol.md,
 * "Collectives the lost master left without a verdict"). The p2p listener,
 * ring connections and the caller's state are kept throughout. pcclExtLeave and
 * pcclDestroyCommunicator end the loop at once (its connect, handshake, wait
 * for the answer and backoff); a SHUTDOWN in answer ends the run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "op/op.h"
#include "api/api.h"
#include "base/base.h"

/* Marks the connection down and ends everything that was waiting on it. */
static void begin_outage(pcclComm_t *c) {
    pthread_mutex_lock(&c->send_mu);
    comm_cancel_all(c, -PERR_RESTARTED);
    comm_close_master_locked(c);
    pthread_mutex_unlock(&c->send_mu);
}

/* RESUME for an accepted peer, HELLO for one that was only registered. */
static int send_registration(pcclComm_t *c, int fd) {
    wire_msg_t m = {.type = C2M_HELLO};
    int accepted = comm_role(c) == PEER_ACCEPTED;
    if (!accepted) {
        m.u.hello.magic = WIRE_MAGIC;
        m.u.hello.version = WIRE_VERSION;
        m.u.hello.peer_group = c->params.peer_group;
        comm_addr_announce(c, &m.u.hello.p2p_port, &m.u.hello.has_adv, &m.u.hello.adv_ip);
        m.u.hello.pool_size = c->pool_size;
        return comm_send_signed(c, fd, c->master_link, &m);
    }
    m.type = C2M_RESUME;
    __typeof__(m.u.resume) *r = &m.u.resume;
    r->magic = WIRE_MAGIC;
    r->version = WIRE_VERSION;
    r->peer_group = c->params.peer_group;
    comm_addr_announce(c, &r->p2p_port, &r->has_adv, &r->adv_ip);
    r->pool_size = c->pool_size;
    memcpy(r->uuid, c->uuid, 16);
    pthread_mutex_lock(&c->mu);
    r->has_revision = (uint8_t)c->has_revision;
    r->revision = c->last_revision;
    r->nring = c->last_nring;
    r->ring = c->last_ring;
    r->n = c->last_ntensors;
    r->tensors = c->last_tensors;
    int nops = allreduce_unsettled_locked(c, &r->ops);
    r->nops = nops > 0 ? (uint32_t)nops : 0;
    /* Without its list the master could complete an op this peer did not finish: try again later. */
    int rc = nops < 0 ? nops : comm_send_signed(c, fd, c->master_link, &m); /* under mu: the arrays are the communicator's */
    pthread_mutex_unlock(&c->mu);
    free(r->ops);
    return rc;
}

/* Waits for the answer to the registration, each message within wait_ms: 0 back in the run, -PERR_IO try again
 * (the connection failed or stayed silent), -PERR_REFUSED the master refused this peer or ended the run,
 * -PERR_CANCELLED a leave or destroy. */
static int await_answer(pcclComm_t *c, int fd, int wait_ms) {
    for (;;) {
        wire_msg_t m;
        char err[160];
        int got = comm_master_recv(c, fd, c->master_link, net_now_ms() + (uint64_t)wait_ms, &m, err, sizeof err);
        if (got != 0) return got == -PERR_CANCELLED ? got : -PERR_IO;
        int rc = -PERR_IO;
        switch (m.type) {
        case M2C_HEARTBEAT: wire_msg_free(&m); continue;
        case M2C_COLL_COMPLETE:
        case M2C_COLL_ABORT: /* the verdict on an op this RESUME listed as finished */
            if (!allreduce_route(c, &m)) wire_msg_free(&m);
            continue;
        case M2C_ESTABLISH_P2P: { /* the rebuilt ring is wired before RESUMED */
            wire_msg_t r = {.type = C2M_P2P_ESTABLISHED};
            r.u.flag.value = comm_establish_resuming(c, &m) == 0;
            wire_msg_free(&m);
            if (link_send_msg(c->master_link, fd, &r) != 0) return -PERR_IO;
            continue;
        }
        case M2C_WELCOME: /* registered again as a newcomer (its uuid is its key's: the same) */
            comm_set_uuid(c, m.u.welcome.uuid);
            rc = 0;
            break;
        case M2C_RESUMED:
            if (m.u.resumed.ok) {
                comm_set_world(c, &m.u.resumed.world);
                rc = 0;
            } else {
                /* Registered again as a newcomer (same uuid): the caller's next pcclUpdateTopology waits
                 * for an accept round, and the sync after it repairs this peer's state if it fell behind. */
                PLOG_WARN(c->log_name, "the restarted master rebuilt the run without this peer; "
                                       "joining again as a new peer");
                pthread_mutex_lock(&c->mu);
                atomic_store(&c->before, PEER_REJOINING); /* the state the outage ends in */
                pthread_mutex_unlock(&c->mu);
                rc = 0;
            }
            break;
        case M2C_KICK:
            PLOG_ERROR(c->log_name, "the restarted master refused this peer: %s", m.u.kick.reason);
            rc = -PERR_REFUSED;
            break;
        case M2C_SHUTDOWN:
            comm_note_shutdown(c, m.u.kick.reason);
            rc = -PERR_REFUSED;
            break;
        default:
            PLOG_ERROR(c->log_name, "the restarted master answered %s to the registration", wire_type_name(m.type));
            rc = -PERR_REFUSED;
            break;
        }
        wire_msg_free(&m);
        return rc;
    }
}

int comm_reconnect(pcclComm_t *c) {
    begin_outage(c);
    uint64_t start = c->down_since_ms, deadline = start + (uint64_t)c->reconnect_ms;
    PLOG_WARN(c->log_name, "lost the master; reconnecting for up to %d ms (operations in flight abort)",
              c->reconnect_ms);
    int delay = 100, tries = 0;
    while (!comm_cancelled(c)) {
        uint64_t now = net_now_ms();
        if (now >= deadline) break;
        int left = (int)(deadline - now);
        sec_link_t *link;
        int fd = comm_connect_master(c, left < c->connect_timeout_ms ? left : c->connect_timeout_ms, &link);
        tries++;
        if (fd >= 0) {
            pthread_mutex_lock(&c->send_mu); /* visible to pcclExtLeave and pcclDestroyCommunicator, which shut it down */
            c->master_fd = fd;
            c->master_link = link;
            if (comm_cancelled(c)) shutdown(fd, SHUT_RDWR); /* a leave that came during the connect */
            pthread_mutex_unlock(&c->send_mu);
            /* The rebuild waits for the other peers (up to a few seconds): the answer may take that long. */
            net_set_timeouts(fd, left);
            int rc = send_registration(c, fd) == 0 ? await_answer(c, fd, left) : -PERR_IO;
            /* Verdicts came before RESUMED: an op still waiting has none (it rejoins, or is new). */
            if (rc == 0) allreduce_settle_unanswered(c);
            /* Back only if nobody asked to leave meanwhile: pcclExtLeave decides under send_mu whether
             * the master is up to hear LEAVE, so the decision and this one cannot cross. */
            pthread_mutex_lock(&c->send_mu);
            if (rc == 0 && comm_cancelled(c)) rc = -PERR_CANCELLED;
            if (rc == 0) {
                net_set_timeouts(fd, c->timeout_ms > c->heartbeat_ms * 3 ? c->timeout_ms : c->heartbeat_ms * 3);
                pthread_mutex_lock(&c->mu);
                comm_transition_locked(c, PEER_BIT(PEER_MASTER_DOWN), (peer_state_t)atomic_load(&c->before));
                uint64_t rev = c->last_revision;
                int has_rev = c->has_revision;
                pthread_mutex_unlock(&c->mu);
                pthread_mutex_unlock(&c->send_mu);
                PLOG_WARN(c->log_name, "master back after %llu ms (%d connection attempts); %s at revision %llu%s",
                          (unsigned long long)(net_now_ms() - start), tries,
                          comm_state(c) == PEER_ACCEPTED ? "resumed" : "registered again", (unsigned long long)rev,
                          has_rev ? "" : " (no sync yet)");
                return 0;
            }
            comm_close_master_locked(c);
            pthread_mutex_unlock(&c->send_mu);
            if (rc != -PERR_IO) return rc; /* refused, or cancelled: no further try */
        } else if (fd == -PERR_IO && errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EHOSTUNREACH &&
                   errno != ENETUNREACH && errno != ECONNRESET) {
            PLOG_WARN(c->log_name, "reconnecting to the master: %s", strerror(errno));
        }
        comm_pause(c, delay);
        delay = delay * 2 > 250 ? 250 : delay * 2;
    }
    if (!comm_cancelled(c))
        PLOG_ERROR(c->log_name, "the master did not come back within %d ms (%d attempts)", c->reconnect_ms, tries);
    return comm_cancelled(c) ? -PERR_CANCELLED : -PERR_TIMEOUT;
}
