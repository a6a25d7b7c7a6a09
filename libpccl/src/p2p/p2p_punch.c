/*
 * p2p_punch.c - the fallback of every p2p dial (docs/nat.md): a direct dial that fails (or a peer the master
 * could not reach) becomes a RENDEZVOUS request; the master answers both sides with a punch: each side dials
 * the other's observed address from its p2p port at the same moment (TCP simultaneous open), retrying within
 * P2P_PUNCH_WINDOW_MS. Where the other side's dial reached this side's listener instead (no simultaneous
 * open: one side's connect came first), the acceptor hands that connection to the dialer that waits for it
 * (p2p_punch_claim), and the target side hands its connection to the acceptor as if it had been accepted, so
 * the dialer's greeting (keyed proof, encryption) runs end to end either way.
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

#define P2P_PUNCH_WINDOW_MS 3000
#define P2P_PUNCH_TRY_MS 250      /* one connect attempt of the window */
#define P2P_PUNCHERS_MAX 8        /* target halves at once; more are dropped (the dialer's window ends) */
#define P2P_RDV_ANSWER_MS 5000    /* the master's answer to a RENDEZVOUS */

typedef struct p2p_rdv {
    uint32_t req;
    uint8_t target[16];
    int answered; /* 1: mode, addr, delay_ms, reason are the master's */
    uint8_t mode;
    ccoip_socket_address_t addr;
    uint32_t delay_ms;
    char reason[256];
    int claimed_fd; /* the target's dial that reached our listener (-1: none) */
    struct p2p_rdv *next;
} p2p_rdv_t;

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Dials `to` from this peer's p2p port until it connects, the window ends, the connection turns out to
 * exist already (EADDRNOTAVAIL: the other side's dial reached our listener) or stop says so. */
static int punch_dial(pcclComm_t *c, const ccoip_socket_address_t *to, uint64_t until, const net_cancel_t *cancel,
                      int (*stop)(pcclComm_t *, void *), void *arg) {
    int fd = -PERR_TIMEOUT;
    while (net_now_ms() < until && !atomic_load(&c->shutting_down) && !(stop && stop(c, arg))) {
        uint64_t left = until - net_now_ms();
        fd = net_connect_from(to, c->p2p.port, (int)(left < P2P_PUNCH_TRY_MS ? left : P2P_PUNCH_TRY_MS) + 1, cancel);
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
} target_arg_t;

/* The target's half: dial the dialer at the agreed moment and hand the connection to the acceptor. */
static void *target_main(void *arg) {
    target_arg_t t = *(target_arg_t *)arg;
    free(arg);
    pcclComm_t *c = t.c;
    sleep_ms((int)(t.delay_ms > 2000 ? 2000 : t.delay_ms));
    int fd = punch_dial(c, &t.to, net_now_ms() + P2P_PUNCH_WINDOW_MS, NULL, NULL, NULL);
    if (fd >= 0) {
        pthread_mutex_lock(&c->p2p.mu);
        int room = c->p2p.nhanded < (int)(sizeof c->p2p.handed / sizeof c->p2p.handed[0]);
        if (room) c->p2p.handed[c->p2p.nhanded++] = fd;
        pthread_mutex_unlock(&c->p2p.mu);
        if (!room) close(fd);
        else if (write(c->p2p.wake_pipe[1], "h", 1) != 1) PLOG_WARN(c->log_name, "cannot wake the acceptor");
    }
    atomic_fetch_sub(&c->p2p.punchers, 1);
    return NULL;
}

static void start_target(pcclComm_t *c, const wire_msg_t *msg) {
    char where[ADDR_STRLEN];
    ccoip_socket_address_t to = {.inet = msg->u.rdv.ip, .port = msg->u.rdv.port};
    addr_str(&to, where);
    if (atomic_fetch_add(&c->p2p.punchers, 1) >= P2P_PUNCHERS_MAX) {
        atomic_fetch_sub(&c->p2p.punchers, 1);
        PLOG_WARN(c->log_name, "punch to %s dropped: %d punches in progress", where, P2P_PUNCHERS_MAX);
        return;
    }
    target_arg_t *t = malloc(sizeof *t);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (t) *t = (target_arg_t){.c = c, .to = to, .delay_ms = msg->u.rdv.delay_ms};
    if (!t || pthread_create(&th, &attr, target_main, t) != 0) {
        free(t);
        atomic_fetch_sub(&c->p2p.punchers, 1);
        PLOG_WARN(c->log_name, "punch to %s dropped: cannot start a thread", where);
    } else {
        PLOG_INFO(c->log_name, "punching to %s for a peer that cannot dial us", where);
    }
    pthread_attr_destroy(&attr);
}

int p2p_route_rendezvous(pcclComm_t *c, wire_msg_t *msg) {
    if (msg->type != M2C_RENDEZVOUS) return 0;
    if (msg->u.rdv.role == WIRE_RDV_TARGET) {
        if (msg->u.rdv.mode == WIRE_RDV_PUNCH && msg->u.rdv.has_ip) start_target(c, msg);
        wire_msg_free(msg);
        return 1;
    }
    pthread_mutex_lock(&c->p2p.mu);
    for (p2p_rdv_t *r = c->p2p.rdvs; r; r = r->next) {
        if (r->req != msg->u.rdv.req || r->answered) continue;
        r->answered = 1;
        r->mode = msg->u.rdv.has_ip || msg->u.rdv.mode == WIRE_RDV_REFUSED ? msg->u.rdv.mode : WIRE_RDV_REFUSED;
        r->addr = (ccoip_socket_address_t){.inet = msg->u.rdv.ip, .port = msg->u.rdv.port};
        r->delay_ms = msg->u.rdv.delay_ms > 2000 ? 2000 : msg->u.rdv.delay_ms;
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
        uint64_t step = deadline - now < 20 ? deadline - now : 20; /* a cancel is seen within a slice */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)step * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&c->p2p.cv, &c->p2p.mu, &ts);
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

/* Asks the master for a rendezvous with peer and waits for its answer. @return 0, or -PERR_<NAME> with err. */
static int ask(pcclComm_t *c, p2p_rdv_t *r, uint64_t deadline, const net_cancel_t *cancel, char *err,
               size_t errlen) {
    unsigned epoch;
    wire_msg_t q = {.type = C2M_RENDEZVOUS};
    q.u.rdv_req.req = r->req;
    memcpy(q.u.rdv_req.target, r->target, 16);
    int rc = comm_begin(c, &epoch);
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
    else if (r->mode != WIRE_RDV_PUNCH) {
        snprintf(err, errlen, "rendezvous refused by the master: %s", r->reason);
        rc = -PERR_REFUSED;
    }
    return rc;
}

/* The dialer's half: a connected fd to peer through a punch, or -PERR_<NAME> with err. */
static int punch(pcclComm_t *c, const uint8_t peer[16], uint64_t deadline, const net_cancel_t *cancel, char *err,
                 size_t errlen) {
    p2p_rdv_t *r = calloc(1, sizeof *r);
    if (!r) return -PERR_NOMEM;
    r->claimed_fd = -1;
    memcpy(r->target, peer, 16);
    pthread_mutex_lock(&c->p2p.mu);
    r->req = ++c->p2p.rdv_next;
    r->next = c->p2p.rdvs;
    c->p2p.rdvs = r;
    pthread_mutex_unlock(&c->p2p.mu);
    int fd = ask(c, r, deadline, cancel, err, errlen);
    if (fd == 0) {
        sleep_ms((int)r->delay_ms);
        uint64_t until = net_now_ms() + P2P_PUNCH_WINDOW_MS;
        fd = punch_dial(c, &r->addr, until < deadline ? until : deadline, cancel, claimed_stop, r);
        if (fd < 0 && fd != -PERR_CANCELLED) {
            pthread_mutex_lock(&c->p2p.mu); /* the target's dial may have reached our listener */
            int rc = wait_locked(c, r, is_claimed, fd == -PERR_BUSY ? net_now_ms() + 1000 : net_now_ms(), cancel);
            if (rc == 0) {
                fd = r->claimed_fd;
                r->claimed_fd = -1;
            }
            pthread_mutex_unlock(&c->p2p.mu);
        }
        if (fd < 0) snprintf(err, errlen, "punch: %s", fd == -PERR_CANCELLED ? "cancelled" : "no connection");
        else net_set_nonblock(fd, 0);
    }
    rdv_unlink(c, r);
    return fd;
}

int p2p_dial_peer(pcclComm_t *c, const wire_peer_t *peer, const p2p_intro_t *me, int timeout_ms,
                  const net_cancel_t *cancel, sec_link_t **link, int *how, char *err, size_t errlen) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    ccoip_socket_address_t to = wire_peer_addr(peer);
    *how = WIRE_EDGE_DIRECT;
    int fd = -PERR_IO;
    if (peer->reach != WIRE_REACH_NO || !peer->has_obs) {
        fd = p2p_dial(&to, &c->sec, me, peer->uuid, timeout_ms, cancel, link, err, errlen);
        /* Only a failed connect goes on: a refused handshake or a cancel is the answer. */
        if (fd >= 0 || fd == -PERR_CANCELLED || fd == -PERR_REFUSED || !peer->has_obs)
            return fd;
    }
    char why[160];
    snprintf(why, sizeof why, "%s", peer->reach == WIRE_REACH_NO ? "the master could not reach it" : err);
    fd = punch(c, peer->uuid, deadline, cancel, err, errlen);
    if (fd < 0) {
        char tail[160];
        snprintf(tail, sizeof tail, "%s", err);
        snprintf(err, errlen, "direct: %s; %s", why, tail);
        return fd;
    }
    *how = WIRE_EDGE_PUNCHED;
    return p2p_introduce(fd, &c->sec, me, peer->uuid, deadline, cancel, link, err, errlen);
}
