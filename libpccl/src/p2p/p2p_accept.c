/*
 * p2p_accept.c - the p2p port's acceptor: one thread runs a poll loop over the
 * listener and every connection still in its hello (open run) or handshake
 * (keyed run), so an incoming connection costs a descriptor and a few hundred
 * bytes, not a thread. Connections in that phase are strangers (gate.h):
 * capped per source address and in total (past the total, the busiest
 * address's oldest is closed), and closed when their 5 s deadline passes. A
 * greeted connection is used only if its uuid is a member of this peer's group
 * as the master last announced it (and, in an open run, comes from that
 * member's address): ring streams are then registered (a stream from a member
 * replaces its own older one), shared-state requests and bandwidth probes are
 * handed to at most P2P_SERVERS_MAX threads at once (more wait for one).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "p2p/bandwidth.h"
#include "base/base.h"
#include "p2p/p2p.h"
#include "p2p/p2p_hello.h"

#define PENDING_MAX 64   /* connections in their hello or handshake at once */
#define PENDING_PER_ADDR 48
#define ACCEPT_BATCH 64  /* accepts per round of the loop, so pending ones are read in between */

typedef struct pending {
    uint64_t id;
    int fd;
    ccoip_inet_address_t ip; /* where it connected from */
    uint64_t deadline;
    p2p_greeting_t greeting;
    int greeted; /* who and link valid: waiting for the master to name it a member */
    int queued;  /* a member's request waiting for a free server thread */
    p2p_intro_t who;
    sec_link_t *link;
    int how; /* WIRE_EDGE_PUNCHED or _RELAYED: handed over by a rendezvous' target half ... */
    uint8_t expect[16]; /* ... for this peer: its greeting must name it (a relayed one comes from the relay) */
} pending_t;

typedef struct acceptor {
    pcclComm_t *c;
    gate_t gate;
    pending_t *p[PENDING_MAX];
    size_t n;
    uint64_t next_id;
    char name[24];
    uint64_t refused, logged; /* connections closed before use; how many of them were logged */
} acceptor_t;

/* Logs the first few refusals one by one and then only every 1000th: a flood must not fill the log.
 * Refusals of outsiders (not members) are warnings; failed greetings happen in a healthy run too. */
static void log_refusal(acceptor_t *a, int warn, const char *why) {
    a->refused++;
    if (a->refused > 8 && a->refused % 1000 != 0) return;
    if (warn) PLOG_WARN(a->name, "rejected p2p connection (%llu so far): %s", (unsigned long long)a->refused, why);
    else PLOG_INFO(a->name, "rejected p2p connection (%llu so far): %s", (unsigned long long)a->refused, why);
}

static void refuse(acceptor_t *a, size_t i, int warn, const char *why) {
    pending_t *p = a->p[i];
    log_refusal(a, warn, why);
    gate_remove(&a->gate, p->id);
    p2p_greeting_free(&p->greeting);
    sec_link_free(p->link);
    close(p->fd);
    free(p);
    a->p[i] = a->p[--a->n];
}

static long find_pending(const acceptor_t *a, uint64_t id) {
    for (size_t i = 0; i < a->n; i++)
        if (a->p[i]->id == id) return (long)i;
    return -1;
}

/* A connection from the listener (how WIRE_EDGE_DIRECT, expect NULL) or made by a rendezvous' target half for
 * peer `expect` (PUNCHED, RELAYED). */
static void take_new(acceptor_t *a, int fd, int how, const uint8_t *expect) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    ccoip_socket_address_t from = {0};
    if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0 || addr_from_sockaddr((struct sockaddr *)&sa, &from) != 0)
        memset(&from, 0, sizeof from);
    if (how == WIRE_EDGE_DIRECT && from.port && p2p_punch_claim(a->c, &from, fd)) return;
    uint32_t addr = gate_key_of(&from.inet);
    uint64_t evict, id = ++a->next_id;
    pending_t *p = calloc(1, sizeof *p);
    uint8_t self[16];
    comm_uuid(a->c, self);
    /* Before the master's welcome this peer has no group (and may not know yet whether the run
     * encrypts: the master's handshake says so): nobody may connect. */
    int early = a->c->sec.keyed && comm_state(a->c) < PEER_REGISTERED;
    if (!p || early || gate_admit(&a->gate, id, addr, net_now_ms(), &evict) != 0 ||
        p2p_greeting_start(&p->greeting, &a->c->sec, self) != 0) {
        if (p) gate_remove(&a->gate, id);
        log_refusal(a, !early, early ? "not registered with the master yet" : "too many connections in their hello");
        free(p);
        close(fd);
        return;
    }
    long v = evict ? find_pending(a, evict) : -1;
    if (v >= 0) refuse(a, (size_t)v, 1, "evicted: too many connections in their hello");
    p->id = id;
    p->fd = fd;
    p->ip = from.inet;
    p->how = how;
    if (expect) memcpy(p->expect, expect, 16);
    p->deadline = net_now_ms() + SEC_HS_TIMEOUT_MS;
    net_set_nonblock(fd, 1);
    net_set_nodelay(fd);
    a->p[a->n++] = p;
}

/* 1: who is a member of this peer's group (in an open run, at the address the master saw); 0: not
 * (yet: a newcomer may connect before this peer read the ESTABLISH_P2P that names it). */
static int is_member(pcclComm_t *c, const pending_t *p) {
    int ok = 0;
    pthread_mutex_lock(&c->p2p.mu);
    for (uint32_t i = 0; i < c->p2p.npeers && !ok; i++) {
        const wire_peer_t *m = &c->p2p.peers[i];
        if (memcmp(m->uuid, p->who.uuid, 16) != 0) continue;
        /* A keyed connection proved the key with the uuid inside the handshake. An open one can only
         * be tied to the member's address (any two loopback addresses are one host). */
        ok = c->sec.keyed || addr_ip_equal(&m->ip, &p->ip) || (m->has_obs && addr_ip_equal(&m->obs_ip, &p->ip)) ||
             (addr_ip_is_loopback(&m->ip) && addr_ip_is_loopback(&p->ip)) ||
             (p->how != WIRE_EDGE_DIRECT && memcmp(p->expect, p->who.uuid, 16) == 0);
    }
    pthread_mutex_unlock(&c->p2p.mu);
    return ok;
}

typedef struct serve_arg {
    pcclComm_t *c;
    int fd, kind;
    sec_link_t *link;
} serve_arg_t;

static void *serve_main(void *arg) {
    serve_arg_t s = *(serve_arg_t *)arg;
    free(arg);
    pwait_t w; /* a leave or destroy ends a probe served at once */
    if (s.kind == P2P_KIND_BENCH && comm_wait_open(s.c, &w, 1) == 0) {
        bw_serve_connection(s.link, s.fd, s.c->timeout_ms, P2P_BENCH_MAX_MS, 0, &w);
        comm_wait_close(s.c, &w);
    } else if (s.kind != P2P_KIND_BENCH) {
        net_set_timeouts(s.fd, s.c->timeout_ms);
        s.c->p2p.serve_ss(s.c, s.link, s.fd);
    }
    sec_link_free(s.link);
    close(s.fd);
    atomic_fetch_sub(&s.c->p2p.handlers, 1);
    return NULL;
}

/* Uses a greeted member's connection; the pending record goes, unless every server thread is busy:
 * then it waits for one (1) as long as its requester waits for an answer (the peer timeout). */
static int dispatch(acceptor_t *a, size_t i) {
    pending_t *p = a->p[i];
    pcclComm_t *c = a->c;
    if (p->who.kind == P2P_KIND_RING) {
        if (p->who.slot >= P2P_SLOTS_MAX) {
            refuse(a, i, 1, "ring slot out of range");
            return 0;
        }
        uint8_t ack = 1;
        net_set_nonblock(p->fd, 0);
        net_set_timeouts(p->fd, SEC_HS_TIMEOUT_MS);
        if (link_send_all(p->link, p->fd, &ack, 1) != 0) {
            refuse(a, i, 0, "ring stream closed before its ack");
            return 0;
        }
        net_set_timeouts(p->fd, 0);
        net_set_nonblock(p->fd, 1);
        p2p_insert(c, p->fd, p->link, p->who.uuid, P2P_RX, p->who.slot, p->how);
    } else {
        serve_arg_t *s = malloc(sizeof *s);
        pthread_t t;
        pthread_attr_t attr;
        if (!s) {
            refuse(a, i, 1, "out of memory");
            return 0;
        }
        if (atomic_fetch_add(&c->p2p.handlers, 1) >= P2P_SERVERS_MAX) {
            atomic_fetch_sub(&c->p2p.handlers, 1);
            free(s);
            if (!p->queued) p->deadline = net_now_ms() + (uint64_t)(c->timeout_ms > 0 ? c->timeout_ms : 0);
            p->queued = 1;
            return 1;
        }
        net_set_nonblock(p->fd, 0);
        *s = (serve_arg_t){.c = c, .fd = p->fd, .kind = p->who.kind, .link = p->link};
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, serve_main, s);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            atomic_fetch_sub(&c->p2p.handlers, 1);
            free(s);
            refuse(a, i, 1, "cannot start a thread");
            return 0;
        }
    }
    gate_remove(&a->gate, p->id); /* the fd and link now belong to the table or the server */
    p2p_greeting_free(&p->greeting);
    free(p);
    a->p[i] = a->p[--a->n];
    return 0;
}

/* Reads what arrived on pending i; may greet it, use it or refuse it. */
static void step(acceptor_t *a, size_t i) {
    pending_t *p = a->p[i];
    char err[160];
    int greeted;
    if (p2p_greeting_step(&p->greeting, p->fd, &p->who, &p->link, &greeted, err, sizeof err) != 0)
        refuse(a, i, 0, err);
    else if (greeted) p->greeted = 1;
}

/* Refuses pending i at its deadline (or at shutdown): no hello, or no member. */
static void refuse_late(acceptor_t *a, size_t i) {
    const pending_t *p = a->p[i];
    char why[96];
    if (p->queued)
        snprintf(why, sizeof why, "busy: %d transfers and probes served, none ended in time", P2P_SERVERS_MAX);
    else if (p->greeted)
        snprintf(why, sizeof why, "%02x%02x%02x%02x is not a member of this peer's group (at that address)",
                 p->who.uuid[0], p->who.uuid[1], p->who.uuid[2], p->who.uuid[3]);
    else
        snprintf(why, sizeof why, "no hello within %d ms", SEC_HS_TIMEOUT_MS);
    refuse(a, i, p->greeted, why);
}

/* Refuses pendings past their deadline and uses greeted members; the poll timeout until the next
 * thing to check (-1: none). */
static int sweep(acceptor_t *a) {
    uint64_t now = net_now_ms();
    int timeout = -1;
    for (size_t i = a->n; i-- > 0;) {
        pending_t *p = a->p[i];
        if (p->greeted && is_member(a->c, p) && dispatch(a, i) == 0) continue;
        if (now >= p->deadline) {
            refuse_late(a, i);
            continue;
        }
        /* A greeted one is not polled (a request may follow its hello): see here whether it left. */
        uint8_t b;
        if (p->greeted && !p->queued && recv(p->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
            char why[96];
            snprintf(why, sizeof why, "%02x%02x%02x%02x is not a member of this peer's group, and left",
                     p->who.uuid[0], p->who.uuid[1], p->who.uuid[2], p->who.uuid[3]);
            refuse(a, i, 1, why);
            continue;
        }
        /* A greeted one waits for the master's announcement: look again soon. */
        int t = p->greeted ? 20 : (int)(p->deadline - now);
        if (timeout < 0 || t < timeout) timeout = t;
    }
    return timeout;
}

/* Reads the wake pipe: 1 when it says stop ('x'); else takes the connections punches handed over ('h'). */
static int take_handed(acceptor_t *a) {
    pcclComm_t *c = a->c;
    char b[16];
    ssize_t n = read(c->p2p.wake_pipe[0], b, sizeof b);
    if (n <= 0 || memchr(b, 'x', (size_t)n)) return 1;
    __typeof__(c->p2p.handed[0]) h[8];
    int k = 0;
    pthread_mutex_lock(&c->p2p.mu);
    while (c->p2p.nhanded) h[k++] = c->p2p.handed[--c->p2p.nhanded];
    pthread_mutex_unlock(&c->p2p.mu);
    while (k--) take_new(a, h[k].fd, h[k].how, h[k].uuid);
    return 0;
}

static void *acceptor_main(void *arg) {
    pcclComm_t *c = arg;
    acceptor_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->c = c;
    const gate_limits_t lim = {.per_addr = PENDING_PER_ADDR, .total = PENDING_MAX, .bytes_per_addr = (size_t)-1,
                               .bytes_total = (size_t)-1, .deadline_ms = SEC_HS_TIMEOUT_MS};
    gate_init(&a->gate, &lim);
    net_set_nonblock(c->p2p.listen_fd, 1); /* a batch of accepts ends when none is left */
    struct pollfd pf[2 + PENDING_MAX];
    uint64_t pause_until = 0; /* out of descriptors: the listener stays readable, so stop polling it a while */
    for (;;) {
        int timeout = sweep(a);
        uint64_t now = net_now_ms();
        int paused = now < pause_until;
        if (paused && (timeout < 0 || timeout > (int)(pause_until - now))) timeout = (int)(pause_until - now);
        uint8_t self[16];
        comm_uuid(c, self); /* the master's welcome may set it while neighbours already connect */
        snprintf(a->name, sizeof a->name, "peer:%02x%02x%02x%02x", self[0], self[1], self[2], self[3]);
        pf[0] = (struct pollfd){.fd = c->p2p.listen_fd, .events = paused ? 0 : POLLIN};
        pf[1] = (struct pollfd){.fd = c->p2p.wake_pipe[0], .events = POLLIN};
        size_t n = a->n;
        for (size_t i = 0; i < n; i++)
            pf[2 + i] = (struct pollfd){.fd = a->p[i]->fd, .events = a->p[i]->greeted ? 0 : POLLIN};
        int r = poll(pf, 2 + n, timeout);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || ((pf[1].revents & POLLIN) && take_handed(a)) || atomic_load(&c->shutting_down)) break;
        /* Pending ones first (their indices are those of the poll set), then new ones. */
        for (size_t i = n; i-- > 0;)
            if (i < a->n && pf[2 + i].revents && !a->p[i]->greeted && a->p[i]->fd == pf[2 + i].fd) step(a, i);
        for (int k = 0; k < ACCEPT_BATCH && (pf[0].revents & POLLIN); k++) {
            int fd = accept4(c->p2p.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
                /* Out of descriptors: a stranger gives its own back (the busiest address's oldest),
                 * so the queue keeps moving; with none to give, wait a moment. */
                uint64_t id;
                long v = gate_evict_one(&a->gate, &id) == 0 ? find_pending(a, id) : -1;
                if (v >= 0) {
                    refuse(a, (size_t)v, 1, "evicted: out of descriptors");
                    continue;
                }
                pause_until = net_now_ms() + 100;
            } else if (fd < 0 && (errno == ENOBUFS || errno == ENOMEM)) {
                pause_until = net_now_ms() + 100;
            }
            if (fd < 0) break;
            take_new(a, fd, WIRE_EDGE_DIRECT, NULL);
        }
    }
    while (a->n) refuse_late(a, a->n - 1);
    gate_free(&a->gate);
    free(a);
    return NULL;
}

int p2p_acceptor_start(pcclComm_t *c) {
    return pthread_create(&c->p2p.acceptor, NULL, acceptor_main, c) == 0 ? 0 : -PERR_FAILED;
}
