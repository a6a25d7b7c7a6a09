/*
 * p2p_punch.c - the fallback of every p2p dial (docs/nat.md): a direct dial that fails (or a peer the master
 * could not reach) becomes a RENDEZVOUS request; the master answers both sides with a punch: each side dials
 * the other's observed address from its p2p port at the same moment (TCP simultaneous open), retrying within
 * P2P_PUNCH_WINDOW_MS. Where the other side's dial reached this side's listener instead (no simultaneous
 * open: one side's connect came first), the acceptor hands that connection to the dialer that waits for it
 * (p2p_punch_claim), and the target side hands its connection to the acceptor as if it had been accepted, so
 * the dialer's greeting (keyed proof, encryption) runs end to end either way. A punch that fails is reported
 * to the master, which answers with a relay where the run has one: both sides then connect to it with the
 * token the master minted (relay_dial) and the target's side is handed to the acceptor in the same way.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/p2p.h"
#include "p2p/relay_client.h"

#define P2P_PUNCH_WINDOW_MS 4000
#define P2P_PUNCH_TRY_MS 1000     /* one connect attempt of the window: its SYN stays out for a WAN round trip */
#define P2P_DIRECT_MS 3000        /* the direct dial's share when a rendezvous could follow (a NAT drops SYNs) */
#define P2P_PUNCHERS_MAX 8        /* target halves at once; more are dropped (the dialer's window ends) */
#define P2P_RDV_ANSWER_MS 5000    /* the master's answer to a RENDEZVOUS */

typedef struct p2p_rdv {
    uint32_t req;
    uint8_t target[16];
    int answered; /* 1: mode, addr, delay_ms, reason are the master's */
    uint8_t mode;
    uint8_t token[32]; /* relay: the pair's */
    ccoip_socket_address_t addr;
    uint32_t delay_ms;
    uint8_t index; /* punch: the pair's punch index (addr already has it added) */
    char reason[256];
    int claimed_fd; /* the target's dial that reached our listener (-1: none) */
    struct p2p_rdv *next;
} p2p_rdv_t;

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Dials `to` from this peer's p2p port + index until it connects, the window ends, the connection turns out
 * to exist already (EADDRNOTAVAIL: the other side's dial reached our listener) or stop says so. */
static int punch_dial(pcclComm_t *c, const ccoip_socket_address_t *to, uint8_t index, uint64_t until,
                      const net_cancel_t *cancel, int (*stop)(pcclComm_t *, void *), void *arg) {
    int fd = -PERR_TIMEOUT;
    uint32_t from = (uint32_t)c->p2p.port + index;
    if (from > 65535 || to->port == 0) return -PERR_IO; /* no such port: the relay's turn */
    while (net_now_ms() < until && !atomic_load(&c->shutting_down) && !(stop && stop(c, arg))) {
        uint64_t left = until - net_now_ms();
        fd = net_connect_from(to, (uint16_t)from, (int)(left < P2P_PUNCH_TRY_MS ? left : P2P_PUNCH_TRY_MS) + 1, cancel);
        if (fd >= 0 || fd == -PERR_CANCELLED) return fd;
        if (errno == EADDRNOTAVAIL || errno == EADDRINUSE) return -PERR_BUSY;
        if (fd == -PERR_IO) sleep_ms(20); /* refused or unreachable: the other side's mapping may not exist yet */
    }
    return fd < 0 ? fd : -PERR_TIMEOUT;
}

typedef struct target_arg {
    pcclComm_t *c;
    ccoip_socket_address_t to;
    uint32_t delay_ms;
    uint8_t mode, index, token[32], peer[16];
} target_arg_t;

/* Gives the acceptor fd, made for peer by a rendezvous (how: WIRE_EDGE_PUNCHED or _RELAYED). */
static void hand_over(pcclComm_t *c, int fd, int how, const uint8_t peer[16]) {
    pthread_mutex_lock(&c->p2p.mu);
    int room = c->p2p.nhanded < (int)(sizeof c->p2p.handed / sizeof c->p2p.handed[0]);
    if (room) {
        c->p2p.handed[c->p2p.nhanded].fd = fd;
        c->p2p.handed[c->p2p.nhanded].how = how;
        memcpy(c->p2p.handed[c->p2p.nhanded++].uuid, peer, 16);
    }
    pthread_mutex_unlock(&c->p2p.mu);
    if (!room) close(fd);
    else if (write(c->p2p.wake_pipe[1], "h", 1) != 1) PLOG_WARN(c->log_name, "cannot wake the acceptor");
}

/* The target's half: dial the dialer at the agreed moment (punch) or meet it at the relay, and hand the
 * connection to the acceptor. */
static void *target_main(void *arg) {
    target_arg_t t = *(target_arg_t *)arg;
    free(arg);
    pcclComm_t *c = t.c;
    int fd = -PERR_FAILED, how = t.mode == WIRE_RDV_RELAY ? WIRE_EDGE_RELAYED : WIRE_EDGE_PUNCHED;
    pwait_t w; /* one of the communicator's waits: a leave or destroy ends the half at once */
    if (comm_wait_open(c, &w, 1) == 0) {
        net_cancel_t cancel = {.wait = &w};
        if (t.mode == WIRE_RDV_RELAY) {
            char err[160];
            fd = relay_dial(&t.to, t.token, RELAY_ROLE_TARGET, c->connect_timeout_ms, &cancel, err, sizeof err);
            if (fd < 0) PLOG_WARN(c->log_name, "relay: %s", err);
        } else {
            sleep_ms((int)(t.delay_ms > 2000 ? 2000 : t.delay_ms));
            fd = punch_dial(c, &t.to, t.index, net_now_ms() + P2P_PUNCH_WINDOW_MS, &cancel, NULL, NULL);
        }
        comm_wait_close(c, &w);
    }
    if (fd >= 0) hand_over(c, fd, how, t.peer);
    atomic_fetch_sub(&c->p2p.punchers, 1);
    return NULL;
}

/* The address a rendezvous answer names: for a punch, the other side's observed port plus the pair's punch
 * index (docs/nat.md "Several connections per pair"); 0 where that is no port. */
static ccoip_socket_address_t rdv_addr(const wire_msg_t *msg) {
    uint32_t port = msg->u.rdv.port + (msg->u.rdv.mode == WIRE_RDV_PUNCH ? msg->u.rdv.index : 0);
    return (ccoip_socket_address_t){.inet = msg->u.rdv.ip, .port = (uint16_t)(port > 65535 ? 0 : port)};
}

static void start_target(pcclComm_t *c, const wire_msg_t *msg) {
    char where[ADDR_STRLEN];
    ccoip_socket_address_t to = rdv_addr(msg);
    addr_str(&to, where);
    if (atomic_fetch_add(&c->p2p.punchers, 1) >= P2P_PUNCHERS_MAX) {
        atomic_fetch_sub(&c->p2p.punchers, 1);
        PLOG_WARN(c->log_name, "rendezvous at %s dropped: %d in progress", where, P2P_PUNCHERS_MAX);
        return;
    }
    target_arg_t *t = malloc(sizeof *t);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (t) {
        *t = (target_arg_t){
            .c = c, .to = to, .delay_ms = msg->u.rdv.delay_ms, .mode = msg->u.rdv.mode, .index = msg->u.rdv.index};
        memcpy(t->token, msg->u.rdv.token, 32);
        memcpy(t->peer, msg->u.rdv.peer, 16);
    }
    if (!t || pthread_create(&th, &attr, target_main, t) != 0) {
        free(t);
        atomic_fetch_sub(&c->p2p.punchers, 1);
        PLOG_WARN(c->log_name, "rendezvous at %s dropped: cannot start a thread", where);
    } else {
        PLOG_INFO(c->log_name, "%s %s (punch index %u) for a peer that cannot dial us",
                  msg->u.rdv.mode == WIRE_RDV_RELAY ? "meeting at the relay" : "punching to", where, msg->u.rdv.index);
    }
    pthread_attr_destroy(&attr);
}

int p2p_route_rendezvous(pcclComm_t *c, wire_msg_t *msg) {
    if (msg->type != M2C_RENDEZVOUS) return 0;
    if (msg->u.rdv.role == WIRE_RDV_TARGET) {
        if (msg->u.rdv.mode != WIRE_RDV_REFUSED && msg->u.rdv.has_ip) start_target(c, msg);
        wire_msg_free(msg);
        return 1;
    }
    pthread_mutex_lock(&c->p2p.mu);
    for (p2p_rdv_t *r = c->p2p.rdvs; r; r = r->next) {
        if (r->req != msg->u.rdv.req || r->answered) continue;
        r->answered = 1;
        r->mode = msg->u.rdv.has_ip || msg->u.rdv.mode == WIRE_RDV_REFUSED ? msg->u.rdv.mode : WIRE_RDV_REFUSED;
        r->addr = rdv_addr(msg);
        r->index = msg->u.rdv.index;
        r->delay_ms = msg->u.rdv.delay_ms > 2000 ? 2000 : msg->u.rdv.delay_ms;
        memcpy(r->token, msg->u.rdv.token, 32);
        snprintf(r->reason, sizeof r->reason, "%s", msg->u.rdv.reason);
    }
    pthread_cond_broadcast(&c->p2p.cv);
    pthread_mutex_unlock(&c->p2p.mu);
    wire_msg_free(msg);
    return 1;
}

int p2p_punch_claim(pcclComm_t *c, const ccoip_socket_address_t *from, int fd) {
    int taken = 0;
    pthread_mutex_lock(&c->p2p.mu);
    for (p2p_rdv_t *r = c->p2p.rdvs; r && !taken; r = r->next) {
        if (!r->answered || r->mode != WIRE_RDV_PUNCH || r->claimed_fd >= 0 || r->addr.port != from->port ||
            !addr_ip_equal(&r->addr.inet, &from->inet))
            continue;
        r->claimed_fd = fd;
        taken = 1;
    }
    if (taken) pthread_cond_broadcast(&c->p2p.cv);
    pthread_mutex_unlock(&c->p2p.mu);
    return taken;
}

static void rdv_unlink(pcclComm_t *c, p2p_rdv_t *r) {
    pthread_mutex_lock(&c->p2p.mu);
    for (p2p_rdv_t **pp = &c->p2p.rdvs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&c->p2p.mu);
    if (r->claimed_fd >= 0) close(r->claimed_fd);
    free(r);
}

/* Waits (p2p.mu held) until what(r) holds, the deadline passes or cancel fires. @return 0, -PERR_TIMEOUT,
 * -PERR_CANCELLED. */
static int wait_locked(pcclComm_t *c, p2p_rdv_t *r, int (*what)(const p2p_rdv_t *), uint64_t deadline,
                       const net_cancel_t *cancel) {
    while (!what(r)) {
        if (atomic_load(&c->shutting_down) || (cancel && cancel->wait && pwait_result(cancel->wait)))
            return -PERR_CANCELLED;
        uint64_t now = net_now_ms();
        if (now >= deadline) return -PERR_TIMEOUT;
        /* a cancel is seen within a slice; p2p.cv runs on net_now_ms's clock (pwait_cond_init) */
        pwait_cond_sleep(&c->p2p.cv, &c->p2p.mu, deadline - now < 20 ? deadline : now + 20);
    }
    return 0;
}

static int is_answered(const p2p_rdv_t *r) { return r->answered; }
static int is_claimed(const p2p_rdv_t *r) { return r->claimed_fd >= 0; }
static int claimed_stop(pcclComm_t *c, void *arg) {
    pthread_mutex_lock(&c->p2p.mu);
    int done = is_claimed(arg);
    pthread_mutex_unlock(&c->p2p.mu);
    return done;
}

/* Asks the master for a rendezvous with r's target (punch_failed: the punch it proposed failed) and waits for
 * its answer. @return 0 (punch or relay), or -PERR_<NAME> with err. */
static int ask(pcclComm_t *c, p2p_rdv_t *r, int punch_failed, uint64_t deadline, const net_cancel_t *cancel,
               char *err, size_t errlen) {
    unsigned epoch;
    wire_msg_t q = {.type = C2M_RENDEZVOUS};
    pthread_mutex_lock(&c->p2p.mu);
    r->req = ++c->p2p.rdv_next;
    r->answered = 0;
    pthread_mutex_unlock(&c->p2p.mu);
    q.u.rdv_req.req = r->req;
    q.u.rdv_req.punch_failed = (uint8_t)punch_failed;
    memcpy(q.u.rdv_req.target, r->target, 16);
    /* While the master is re-established (a rebuilt ring's wiring) nobody reads its answers: no rendezvous. */
    int rc = comm_state(c) == PEER_MASTER_DOWN ? -PERR_UNAVAILABLE : comm_begin(c, &epoch);
    if (rc == 0) rc = comm_send(c, epoch, &q);
    if (rc != 0) {
        snprintf(err, errlen, "rendezvous: the master cannot be asked");
        return rc;
    }
    uint64_t until = net_now_ms() + P2P_RDV_ANSWER_MS;
    pthread_mutex_lock(&c->p2p.mu);
    rc = wait_locked(c, r, is_answered, until < deadline ? until : deadline, cancel);
    pthread_mutex_unlock(&c->p2p.mu);
    if (rc != 0) snprintf(err, errlen, "rendezvous: %s", rc == -PERR_CANCELLED ? "cancelled" : "no answer in time");
    else if (r->mode != WIRE_RDV_PUNCH && r->mode != WIRE_RDV_RELAY) {
        snprintf(err, errlen, "rendezvous refused by the master: %s", r->reason);
        rc = -PERR_REFUSED;
    }
    return rc;
}

/* The dialer's side of a punch the master proposed in r: a connected fd, or -PERR_<NAME>. */
static int punch_as_dialer(pcclComm_t *c, p2p_rdv_t *r, uint64_t deadline, const net_cancel_t *cancel) {
    sleep_ms((int)r->delay_ms);
    uint64_t until = net_now_ms() + P2P_PUNCH_WINDOW_MS;
    int fd = punch_dial(c, &r->addr, r->index, until < deadline ? until : deadline, cancel, claimed_stop, r);
    if (fd >= 0 || fd == -PERR_CANCELLED) return fd;
    pthread_mutex_lock(&c->p2p.mu); /* the target's dial may have reached our listener */
    int rc = wait_locked(c, r, is_claimed, fd == -PERR_BUSY ? net_now_ms() + 1000 : net_now_ms(), cancel);
    if (rc == 0) {
        fd = r->claimed_fd;
        r->claimed_fd = -1;
    }
    pthread_mutex_unlock(&c->p2p.mu);
    return fd;
}

/* The dialer's half of a rendezvous with peer: a punch, and when it fails a relay if the master has one.
 * @return a connected blocking fd (*how PUNCHED or RELAYED), or -PERR_<NAME> with err. */
static int rendezvous(pcclComm_t *c, const uint8_t peer[16], uint64_t deadline, const net_cancel_t *cancel,
                      int *how, char *err, size_t errlen) {
    p2p_rdv_t *r = calloc(1, sizeof *r);
    if (!r) return -PERR_NOMEM;
    r->claimed_fd = -1;
    memcpy(r->target, peer, 16);
    pthread_mutex_lock(&c->p2p.mu);
    r->next = c->p2p.rdvs;
    c->p2p.rdvs = r;
    pthread_mutex_unlock(&c->p2p.mu);
    int fd = ask(c, r, 0, deadline, cancel, err, errlen);
    if (fd == 0 && r->mode == WIRE_RDV_PUNCH) {
        fd = punch_as_dialer(c, r, deadline, cancel);
        *how = WIRE_EDGE_PUNCHED;
        if (fd < 0 && fd != -PERR_CANCELLED) {
            char where[ADDR_STRLEN];
            addr_str(&r->addr, where);
            PLOG_WARN(c->log_name, "punch to %s (punch index %u) made no connection; asking for a relay", where,
                      r->index);
            snprintf(err, errlen, "punch: no connection");
            fd = ask(c, r, 1, deadline, cancel, err, errlen); /* a relay, where the run has one */
            if (fd < 0) fd = fd == -PERR_REFUSED ? -PERR_IO : fd;
        }
        if (fd == -PERR_CANCELLED) snprintf(err, errlen, "punch: cancelled");
    }
    if (fd == 0 && r->mode == WIRE_RDV_RELAY) {
        uint64_t now = net_now_ms();
        *how = WIRE_EDGE_RELAYED;
        fd = relay_dial(&r->addr, r->token, RELAY_ROLE_DIALER, now < deadline ? (int)(deadline - now) : 1, cancel,
                        err, errlen);
    }
    rdv_unlink(c, r);
    if (fd >= 0) { /* a claimed one comes from the acceptor as it was accepted */
        net_set_nonblock(fd, 0);
        net_set_nodelay(fd);
    }
    return fd;
}

int p2p_dial_peer(pcclComm_t *c, const wire_peer_t *peer, const p2p_intro_t *me, int timeout_ms,
                  const net_cancel_t *cancel, sec_link_t **link, int *how, char *err, size_t errlen) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    ccoip_socket_address_t to = wire_peer_addr(peer);
    *how = WIRE_EDGE_DIRECT;
    int fd = -PERR_IO;
    if (peer->reach != WIRE_REACH_NO || !peer->has_obs) {
        int direct_ms = peer->has_obs && timeout_ms > 2 * P2P_DIRECT_MS ? P2P_DIRECT_MS : timeout_ms;
        fd = p2p_dial(&to, &c->sec, me, peer->uuid, direct_ms, cancel, link, err, errlen);
        /* Only a failed connect goes on: a refused handshake or a cancel is the answer. */
        if (fd >= 0 || fd == -PERR_CANCELLED || fd == -PERR_REFUSED || !peer->has_obs)
            return fd;
    }
    char why[160];
    snprintf(why, sizeof why, "%s", peer->reach == WIRE_REACH_NO ? "the master could not reach it" : err);
    fd = rendezvous(c, peer->uuid, deadline, cancel, how, err, errlen);
    if (fd < 0) {
        char tail[160];
        snprintf(tail, sizeof tail, "%s", err);
        snprintf(err, errlen, "direct: %s; %s", why, tail);
        return fd;
    }
    return p2p_introduce(fd, &c->sec, me, peer->uuid, deadline, cancel, link, err, errlen);
}

typedef struct bench_to {
    pcclComm_t *c;
    const wire_peer_t *peer;
} bench_to_t;

static int bench_dial(void *ctx, const p2p_intro_t *me, int timeout_ms, const net_cancel_t *cancel, sec_link_t **link,
                      char *err, size_t errlen) {
    bench_to_t *t = ctx;
    int how;
    return p2p_dial_peer(t->c, t->peer, me, timeout_ms, cancel, link, &how, err, errlen);
}

int p2p_measure(pcclComm_t *c, const wire_peer_t *peer, int duration_ms, pwait_t *w, bw_result_t *out) {
    bench_to_t t = {.c = c, .peer = peer};
    return bw_measure_via(bench_dial, &t, c->uuid, BW_CLIENT_SENDS, duration_ms, 1, c->timeout_ms, w, out);
}
