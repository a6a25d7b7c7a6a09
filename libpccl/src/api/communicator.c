/*
 * communicator.c - the communicator's lifecycle (create, connect, destroy), the reader thread that
 * routes the master's messages, the heartbeat, ring wiring, and the run-wide calls (update topology,
 * are-peers-pending, optimize topology, attributes).
 */
#include "api/api.h"

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

#include "op/op.h"
#include "p2p/p2p.h"
#include "ss/ss.h"
#include "base/base.h"
#include "pccl_leave.h"


/* The verdicts of an accept or optimize round, which end its wiring (c->wiring). */
static int round_verdict(uint16_t type) { return type == M2C_TOPOLOGY_DONE || type == M2C_OPTIMIZE_DONE; }

/* ---------- creation / destruction ---------- */

pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params, pcclComm_t **comm_out) {
    if (!pccl__initialized()) return pcclNotInitialized;
    if (!params || !comm_out) return pcclInvalidArgument;
    if (params->master_address.inet.protocol != inetIPv4 && params->master_address.inet.protocol != inetIPv6) {
        PLOG_ERROR("pccl", "the master address is neither IPv4 nor IPv6");
        return pcclInvalidArgument;
    }
    pcclComm_t *c = calloc(1, sizeof *c);
    if (!c) return pcclInternalError;
    c->params = *params;
    c->pool_size = params->p2p_connection_pool_size ? params->p2p_connection_pool_size : 1;
    if (c->pool_size > 64) c->pool_size = 64;
    c->timeout_ms = comm_env_int("PCCL_TIMEOUT_MS", 10000, 100, 3600000);
    c->connect_timeout_ms = comm_env_int("PCCL_CONNECT_TIMEOUT_MS", 10000, 100, 3600000);
    c->heartbeat_ms = comm_env_int("PCCL_HEARTBEAT_MS", 1000, 10, 600000);
    c->reconnect_ms = comm_env_int("PCCL_MASTER_RECONNECT_MS", 60000, 0, 86400000);
    c->connect_retry_ms = comm_env_int("PCCL_CONNECT_RETRY_MS", 0, 0, 86400000);
    /* Spliced sends pay off from 48 MiB with one core per peer; below that they win or lose with the
     * machine's load, and where a host's peers outnumber its CPUs copying is faster. With two CPUs per
     * local peer same-host edges splice from 4 MiB (p2p_splice_min; bench/analysis.md, "Large
     * all-reduces" and "A machine with cores to spare"). */
    c->zerocopy_min_bytes = comm_env_int("PCCL_ZEROCOPY_MIN_BYTES", 48 << 20, -1, INT_MAX);
    c->zerocopy_every_edge = getenv("PCCL_ZEROCOPY_MIN_BYTES") != NULL; /* set: as given, on every edge */
    /* The measured best cap for peers on one host (bench/analysis.md, "Same-host connections"). */
    c->local_notsent_bytes = comm_env_int("PCCL_LOCAL_NOTSENT_BYTES", 64 << 10, 0, INT_MAX);
    cpu_set_t cpus;
    c->ncpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    char err[256];
    if (comm_addr_from_env(c) != 0 || comm_algo_from_env(&c->algo) != 0) {
        free(c);
        return pcclInvalidArgument;
    }
    if (sec_key_from_env(&c->sec, err, sizeof err) < 0) {
        PLOG_ERROR("pccl", "PCCL_KEY_FILE: %s", err);
        free(c);
        return pcclInvalidArgument;
    }
    c->master_fd = -1;
    c->p2p.listen_fd = -1;
    c->p2p.serve_ss = ss_serve_connection;
    snprintf(c->log_name, sizeof c->log_name, "peer");
    pthread_mutex_init(&c->send_mu, NULL);
    pthread_mutex_init(&c->mu, NULL);
    pwait_cond_init(&c->cv); /* waits on these have deadlines on net_now_ms's clock */
    pwait_cond_init(&c->hb_cv);
    pthread_cond_init(&c->work_cv, NULL);
    pthread_mutex_init(&c->p2p.mu, NULL);
    pwait_cond_init(&c->p2p.cv);
    pwait_set_init(&c->waits, &c->mu);
    bufpool_init(&c->buffers);
    if (comm_identity_init(c) != 0) {
        pcclDestroyCommunicator(c);
        return pcclInvalidArgument;
    }
    *comm_out = c;
    return pcclSuccess;
}

void comm_cancel_all(pcclComm_t *c, int reason) {
    pthread_mutex_lock(&c->mu);
    if (reason == -PERR_RESTARTED) {
        comm_transition_locked(c, PEER_REGISTERED_UP, PEER_MASTER_DOWN);
        atomic_fetch_add(&c->master_epoch, 1);
        c->down_since_ms = net_now_ms();
        comm_inbox_clear(c); /* the old master's answers mean nothing to the new one */
    } else if (reason == -PERR_LOST) {
        comm_transition_locked(c, ~PEER_BIT(PEER_ENDED), PEER_ENDED);
    } else {
        atomic_store(&c->shutting_down, 1);
    }
    pwait_set_cancel_locked(&c->waits, reason, reason == -PERR_CANCELLED);
    pthread_cond_broadcast(&c->cv); /* also the waits that had ended already and sleep on cv alone */
    allreduce_abort_all_locked(c, reason);
    pthread_mutex_unlock(&c->mu);
    p2p_wake(c); /* a ring waiting for its predecessor's connection */
}

pcclResult_t pcclDestroyCommunicator(pcclComm_t *c) {
    if (!c) return pcclInvalidArgument;
    comm_cancel_all(c, -PERR_CANCELLED);
    pthread_mutex_lock(&c->send_mu); /* the reader may be swapping in a new master connection */
    if (c->master_fd >= 0) shutdown(c->master_fd, SHUT_RDWR);
    pthread_mutex_unlock(&c->send_mu);
    allreduce_join_all(c);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->hb_cv); /* wakes the heartbeat thread */
    pthread_mutex_unlock(&c->mu);
    if (c->heartbeat_started) pthread_join(c->heartbeat, NULL);
    if (c->reader_started) pthread_join(c->reader, NULL);
    p2p_stop(c);
    if (c->master_fd >= 0) close(c->master_fd);
    sec_link_free(c->master_link);
    pthread_mutex_lock(&c->mu);
    comm_inbox_clear(c);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_destroy(&c->send_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->hb_cv);
    pthread_cond_destroy(&c->work_cv);
    pthread_mutex_destroy(&c->p2p.mu);
    pthread_cond_destroy(&c->p2p.cv);
    bufpool_destroy(&c->buffers);
    free(c->last_ring);
    free(c->last_tensors);
    free(c);
    return pcclSuccess;
}

/* Reads the master connection until it fails. @return -PERR_IO: the connection was lost (worth
 * re-establishing); -PERR_LOST: the master ended this peer's run (a kick, a shutdown, a protocol error). */
static int read_master(pcclComm_t *c) {
    for (;;) {
        wire_msg_t msg;
        char err[160];
        if (link_recv_msg(c->master_link, c->master_fd, &msg, err, sizeof err) != 0) {
            if (comm_state(c) == PEER_LEAVING) PLOG_INFO(c->log_name, "left the run");
            else if (!comm_cancelled(c)) PLOG_WARN(c->log_name, "master connection lost: %s", err);
            return -PERR_IO;
        }
        if (!wire_type_is_m2c(msg.type)) {
            PLOG_ERROR(c->log_name, "master sent %s, which is not a master-to-peer message", wire_type_name(msg.type));
            wire_msg_free(&msg);
            return -PERR_LOST;
        }
        if (msg.type == M2C_KICK) {
            atomic_fetch_or(&c->departed, DEPARTED_KICKED);
            PLOG_ERROR(c->log_name, "kicked by the master: %s", msg.u.kick.reason);
            wire_msg_free(&msg);
            return -PERR_LOST;
        }
        if (msg.type == M2C_SHUTDOWN) {
            comm_note_shutdown(c, msg.u.kick.reason);
            wire_msg_free(&msg);
            return -PERR_LOST;
        }
        if (msg.type == M2C_HEARTBEAT) {
            wire_msg_free(&msg);
            continue;
        }
        if (allreduce_route(c, &msg)) continue; /* collective messages go to their operation */
        if (p2p_route_rendezvous(c, &msg)) continue; /* a punch's answer or its target half (docs/nat.md) */
        inbox_item_t *it = malloc(sizeof *it);
        if (!it) {
            wire_msg_free(&msg);
            continue;
        }
        it->msg = msg;
        it->next = NULL;
        pthread_mutex_lock(&c->mu);
        if (c->inbox_tail) c->inbox_tail->next = it;
        else c->inbox_head = it;
        c->inbox_tail = it;
        if (c->wiring && round_verdict(it->msg.type)) pwait_cancel_locked(c->wiring, -PERR_ABORTED);
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
}

static void *reader_main(void *arg) {
    pcclComm_t *c = arg;
    /* A peer that is leaving takes the master's close as the end of its run. */
    while (read_master(c) == -PERR_IO && !comm_cancelled(c) && comm_state(c) != PEER_LEAVING && c->reconnect_ms > 0 &&
           comm_reconnect(c) == 0) {
    }
    comm_cancel_all(c, -PERR_LOST);
    return NULL;
}

/* Sends HEARTBEAT every heartbeat_ms until shutdown or the master is lost. It sleeps on its own hb_cv, which
 * only the end of the run and shutdown broadcast: on c->cv every message the reader delivers would wake it
 * (a thread wake-up per control answer, next to the caller's). */
static void *heartbeat_main(void *arg) {
    pcclComm_t *c = arg;
    pthread_mutex_lock(&c->mu);
    uint64_t next = net_now_ms() + (uint64_t)c->heartbeat_ms;
    while (!atomic_load(&c->shutting_down) && !comm_ended(c)) {
        if (net_now_ms() < next) {
            pwait_cond_sleep(&c->hb_cv, &c->mu, next);
            continue;
        }
        next = net_now_ms() + (uint64_t)c->heartbeat_ms;
        pthread_mutex_unlock(&c->mu);
        wire_msg_t hb = {.type = C2M_HEARTBEAT};
        if (comm_state(c) != PEER_MASTER_DOWN) comm_send(c, atomic_load(&c->master_epoch), &hb);
        bufpool_trim(&c->buffers, BUFPOOL_IDLE_MS); /* give back all-reduce buffers nobody used lately */
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---------- ring wiring ---------- */

static int establish(pcclComm_t *c, const wire_msg_t *e, pwait_t *w);

/* Wires the ring of e through one of the communicator's waits. watch_verdict: the wiring is moot once the
 * round's verdict came (the master ends a round early when a member left, and that member may be the
 * successor this peer still waits on), so the reader ends it then (c->wiring). */
static int establish_within(pcclComm_t *c, const wire_msg_t *e, int watch_verdict) {
    pwait_t w;
    if (comm_wait_open(c, &w, 1) != 0) return -PERR_FAILED;
    if (watch_verdict) {
        pthread_mutex_lock(&c->mu);
        c->wiring = &w;
        for (inbox_item_t *it = c->inbox_head; it; it = it->next)
            if (round_verdict(it->msg.type)) pwait_cancel_locked(&w, -PERR_ABORTED);
        pthread_mutex_unlock(&c->mu);
    }
    int rc = establish(c, e, &w);
    if (watch_verdict) {
        pthread_mutex_lock(&c->mu);
        c->wiring = NULL;
        pthread_mutex_unlock(&c->mu);
    }
    comm_wait_close(c, &w);
    return rc;
}

int comm_establish(pcclComm_t *c, const wire_msg_t *e) { return establish_within(c, e, 1); }

int comm_establish_resuming(pcclComm_t *c, const wire_msg_t *e) { return establish_within(c, e, 0); }

static int establish(pcclComm_t *c, const wire_msg_t *e, pwait_t *w) {
    const wire_peer_t *peers = e->u.establish.peers;
    uint32_t n = e->u.establish.n;
    p2p_set_peers(c, peers, n);
    uint8_t(*ring)[16] = n ? malloc((size_t)n * 16) : NULL;
    for (uint32_t i = 0; i < n && ring; i++) memcpy(ring[i], peers[i].uuid, 16);
    if (ring || !n) comm_note_ring(c, (const uint8_t(*)[16])ring, n);
    free(ring);
    uint32_t me = n;
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(peers[i].uuid, c->uuid, 16) == 0) me = i;
    if (me == n) {
        PLOG_ERROR(c->log_name, "ring from the master does not contain this peer");
        return -PERR_PROTOCOL;
    }
    if (n < 2) return 0;
    const uint8_t *next = peers[(me + 1) % n].uuid;
    for (uint32_t slot = 0; slot < c->pool_size; slot++) {
        p2p_conn_t *k = p2p_get_tx(c, next, slot, c->connect_timeout_ms, w);
        if (!k) return -PERR_IO;
        p2p_release(c, k, 0);
    }
    return 0;
}

/* One accept round from the peer's side: wire the ring, report, await the verdict. 0 or -PERR_<NAME> (comm_wait). */
static int run_round(pcclComm_t *c, unsigned ep, const wire_msg_t *establish, int *ok_out) {
    int ok = comm_establish(c, establish) == 0;
    if (ok) p2p_report_edges(c, ep); /* before the report that ends the round */
    wire_msg_t r = {.type = C2M_P2P_ESTABLISHED};
    r.u.flag.value = (uint8_t)ok;
    int rc = comm_send(c, ep, &r);
    if (rc != 0) return rc;
    uint16_t t[] = {M2C_TOPOLOGY_DONE};
    wire_msg_t done;
    if ((rc = comm_wait(c, ep, t, 1, -1, &done)) != 0) return rc;
    *ok_out = done.u.topo_done.ok;
    if (done.u.topo_done.ok) comm_set_world(c, &done.u.topo_done.world);
    wire_msg_free(&done);
    return 0;
}

/* Waits, as a newcomer, for an accept round that succeeds. @return 0, or -PERR_LOST: the run ended for this peer
 * (the caller maps it with comm_lost_result). */
static int await_acceptance(pcclComm_t *c) {
    /* Accept rounds may fail (a peer vanished while wiring): wait for the next one. A restarted master
     * knows this peer again once the reader re-registered it: keep waiting in the new epoch. */
    for (;;) {
        uint16_t te[] = {M2C_ESTABLISH_P2P};
        wire_msg_t e;
        unsigned ep;
        if (comm_begin(c, &ep) != 0) return -PERR_LOST;
        int rc = comm_wait(c, ep, te, 1, -1, &e);
        if (rc == -PERR_RESTARTED) continue;
        if (rc != 0) return -PERR_LOST;
        int ok = 0;
        rc = run_round(c, ep, &e, &ok);
        wire_msg_free(&e);
        if (rc == -PERR_RESTARTED) continue;
        if (rc != 0) return -PERR_LOST;
        if (ok) break;
        PLOG_INFO(c->log_name, "accept round failed; waiting for the next one");
    }
    /* Accepted during an outage: the peer returns to the run as a member (it re-registers as one). */
    pthread_mutex_lock(&c->mu);
    if (comm_transition_locked(c, PEER_BIT(PEER_REGISTERED) | PEER_BIT(PEER_REJOINING), PEER_ACCEPTED) < 0 &&
        comm_state(c) == PEER_MASTER_DOWN)
        atomic_store(&c->before, PEER_ACCEPTED);
    pthread_mutex_unlock(&c->mu);
    PLOG_INFO(c->log_name, "accepted into the run");
    return 0;
}

/* pcclConnect's and pcclUpdateTopology's result for await_acceptance's and comm_register_first's rc: a
 * cancelled registration (leave, destroy) failed to connect; any other failure ended the run for this peer. */
static pcclResult_t joining_result(const pcclComm_t *c, int rc) {
    if (rc == 0) return pcclSuccess;
    return rc == -PERR_CANCELLED ? pcclMasterConnectionFailed : comm_lost_result(c);
}

pcclResult_t pcclConnect(pcclComm_t *c) {
    if (!pccl__initialized()) return pcclNotInitialized;
    if (!c) return pcclInvalidArgument;
    if (comm_transition(c, PEER_BIT(PEER_CREATED), PEER_CONNECTING) < 0) return pcclInvalidUsage;
    /* After CONNECTING: a pcclExtLeave from then on cancels this call, one before it is seen here. */
    if (atomic_load(&c->stopping)) {
        comm_transition(c, PEER_BIT(PEER_CONNECTING), PEER_CREATED);
        return pcclMasterConnectionFailed;
    }
    if (p2p_start(c) != 0) {
        if (c->p2p_listen_port)
            PLOG_ERROR(c->log_name, "cannot listen on p2p port %u (PCCL_P2P_PORT): %s", c->p2p_listen_port,
                       strerror(errno));
        else
            PLOG_ERROR(c->log_name, "cannot open the p2p listening socket: %s", strerror(errno));
        comm_transition(c, PEER_BIT(PEER_CONNECTING), PEER_CREATED);
        return pcclInternalError;
    }
    pcclResult_t r = joining_result(c, comm_register_first(c));
    if (r == pcclSuccess && pthread_create(&c->reader, NULL, reader_main, c) != 0) r = pcclInternalError;
    if (r != pcclSuccess) {
        pthread_mutex_lock(&c->send_mu);
        comm_close_master_locked(c);
        comm_transition(c, PEER_BIT(PEER_CONNECTING) | PEER_BIT(PEER_REGISTERED), PEER_CREATED);
        pthread_mutex_unlock(&c->send_mu);
        p2p_stop(c);
        return r;
    }
    c->reader_started = 1;
    /* The master answers heartbeats, so silence longer than the timeout means it is gone or hung;
     * the send timeout bounds writes to a master that stopped reading. */
    net_set_timeouts(c->master_fd, c->timeout_ms > c->heartbeat_ms * 3 ? c->timeout_ms : c->heartbeat_ms * 3);
    if (pthread_create(&c->heartbeat, NULL, heartbeat_main, c) == 0) c->heartbeat_started = 1;
    char where[ADDR_STRLEN];
    addr_str(&c->params.master_address, where);
    PLOG_INFO(c->log_name, "registered with the master at %s as \"%s\"; waiting to be accepted", where, c->name);
    return joining_result(c, await_acceptance(c));
}

pcclResult_t pcclUpdateTopology(pcclComm_t *c) {
    if (c && pccl__initialized() && comm_role(c) == PEER_REJOINING)
        return joining_result(c, await_acceptance(c));
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if (comm_ops_outstanding(c)) return pcclPendingAsyncOps;
    unsigned ep;
    wire_msg_t v = {.type = C2M_UPDATE_TOPOLOGY}, m;
    uint16_t t[] = {M2C_ESTABLISH_P2P, M2C_TOPOLOGY_DONE};
    int rc = comm_begin(c, &ep);
    if (rc == 0) rc = comm_send(c, ep, &v);
    if (rc == 0) rc = comm_wait(c, ep, t, 2, -1, &m);
    if (rc != 0) return comm_call_result(c, rc, pcclUpdateTopologyFailed);
    int ok = 1;
    if (m.type == M2C_TOPOLOGY_DONE) {
        ok = m.u.topo_done.ok;
        if (ok) comm_set_world(c, &m.u.topo_done.world);
    } else {
        rc = run_round(c, ep, &m, &ok);
    }
    wire_msg_free(&m);
    if (rc != 0) return comm_call_result(c, rc, pcclUpdateTopologyFailed);
    return ok ? pcclSuccess : pcclUpdateTopologyFailed;
}

pcclResult_t pcclArePeersPending(const pcclComm_t *cc, bool *pending_out) {
    pcclComm_t *c = (pcclComm_t *)cc;
    if (!pending_out) return pcclInvalidArgument;
    if (c && comm_role(c) == PEER_REJOINING) {
        *pending_out = true; /* this peer itself: the caller's pcclUpdateTopology gets it accepted */
        return pcclSuccess;
    }
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    /* A vote lost with a restarted master is cast again (each try waits for the master first). */
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned ep;
        wire_msg_t v = {.type = C2M_PEERS_PENDING}, m;
        uint16_t t[] = {M2C_PEERS_PENDING};
        int rc = comm_begin(c, &ep);
        if (rc == 0) rc = comm_send(c, ep, &v);
        if (rc == 0) rc = comm_wait(c, ep, t, 1, -1, &m);
        if (rc == -PERR_RESTARTED) continue;
        if (rc != 0) return comm_lost_result(c);
        *pending_out = m.u.flag.value != 0;
        wire_msg_free(&m);
        return pcclSuccess;
    }
    return comm_lost_result(c);
}

pcclResult_t pcclAreNewPeersPending(const pcclComm_t *c, bool *out) { return pcclArePeersPending(c, out); }

/* Measures bandwidth and round trip toward each requested peer (one at a time, so this peer's
 * probes do not compete with each other) and reports the results. */
static int run_bench(pcclComm_t *c, unsigned ep, const wire_msg_t *req) {
    uint32_t n = req->u.bench_req.n;
    wire_bw_t *res = calloc(n ? n : 1, sizeof *res);
    if (!res) return -PERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const wire_peer_t *t = &req->u.bench_req.peers[i];
        bw_result_t r = {0};
        memcpy(res[i].uuid, t->uuid, 16);
        pwait_t w; /* one of the communicator's waits: a destroy or a lost master ends the probe at once */
        if (comm_wait_open(c, &w, 1) == 0) {
            if (p2p_measure(c, t, (int)req->u.bench_req.duration_ms, &w, &r) != 0)
                r.mbps = 0;
            comm_wait_close(c, &w);
        }
        res[i].mbps = r.mbps;
        res[i].rtt_us = r.mbps > 0 ? r.rtt_us : 0;
        if (res[i].mbps <= 0) PLOG_WARN(c->log_name, "bandwidth probe to a ring peer failed");
    }
    wire_msg_t out = {.type = C2M_BENCH_RESULT};
    out.u.bench_res.n = n;
    out.u.bench_res.results = res;
    int rc = comm_send(c, ep, &out);
    free(res);
    return rc;
}

pcclResult_t pcclOptimizeTopology(const pcclComm_t *cc) {
    pcclComm_t *c = (pcclComm_t *)cc;
    pcclResult_t r = comm_check_ready(c);
    if (r != pcclSuccess) return r;
    if (comm_ops_outstanding(c)) return pcclPendingAsyncOps;
    unsigned ep;
    wire_msg_t v = {.type = C2M_OPTIMIZE_TOPOLOGY};
    int rc = comm_begin(c, &ep);
    if (rc == 0) rc = comm_send(c, ep, &v);
    /* The master may ask for measurements and then for re-wiring before it answers. */
    while (rc == 0) {
        uint16_t t[] = {M2C_OPTIMIZE_DONE, M2C_BENCH_REQUEST, M2C_ESTABLISH_P2P};
        wire_msg_t m;
        if ((rc = comm_wait(c, ep, t, 3, -1, &m)) != 0) break;
        if (m.type == M2C_OPTIMIZE_DONE) {
            int ok = m.u.flag.value;
            wire_msg_free(&m);
            return ok ? pcclSuccess : pcclTopologyOptimizationFailed;
        }
        if (m.type == M2C_BENCH_REQUEST) {
            rc = run_bench(c, ep, &m);
        } else {
            wire_msg_t e = {.type = C2M_P2P_ESTABLISHED};
            e.u.flag.value = comm_establish(c, &m) == 0;
            if (e.u.flag.value) {
                comm_set_world(c, &m.u.establish.world);
                p2p_report_edges(c, ep);
            }
            rc = comm_send(c, ep, &e);
        }
        wire_msg_free(&m);
    }
    return comm_call_result(c, rc, pcclTopologyOptimizationFailed);
}

pcclResult_t pcclGetAttribute(const pcclComm_t *cc, pcclAttribute_t attribute, int *out) {
    pcclComm_t *c = (pcclComm_t *)cc;
    if (!pccl__initialized()) return pcclNotInitialized;
    if (!c || !out) return pcclInvalidArgument;
    pthread_mutex_lock(&c->mu);
    wire_world_t w = c->world;
    pthread_mutex_unlock(&c->mu);
    switch (attribute) {
    case PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE: *out = (int)w.global_world_size; return pcclSuccess;
    case PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE: *out = (int)w.group_world_size; return pcclSuccess;
    case PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS: *out = (int)w.num_groups; return pcclSuccess;
    case PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE: *out = (int)w.largest_group; return pcclSuccess;
    }
    return pcclInvalidArgument;
}
