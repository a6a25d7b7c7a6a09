/* p2p.c - see p2p.h. */
#include "p2p.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bandwidth.h"
#include "log.h"
#include "net.h"
#include "p2p_hello.h"

#define HANDSHAKE_TIMEOUT_MS SEC_HS_TIMEOUT_MS

static void pipe_close(p2p_conn_t *k) {
    if (k->has_pipe == 1) {
        close(k->pipe[0]);
        close(k->pipe[1]);
    }
}

static void conn_free(p2p_conn_t *k) {
    if (k->fd >= 0) close(k->fd);
    sec_link_free(k->link);
    pipe_close(k);
    free(k);
}

/* Unlinks k from the table (caller holds mu) and drops the table's reference; the socket is
 * shut down so any user wakes up. */
static void unlink_only(pcclComm_t *c, p2p_conn_t *k) {
    for (p2p_conn_t **pp = &c->p2p.conns; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    k->next = NULL;
    k->dead = 1;
    shutdown(k->fd, SHUT_RDWR);
}

static void unlink_locked(pcclComm_t *c, p2p_conn_t *k) {
    unlink_only(c, k);
    if (--k->refs == 0) conn_free(k);
}

/* A pipe carries up to its capacity per vmsplice + splice pair: 1 MiB (the default unprivileged
 * maximum) keeps the calls few; the default 64 KiB still pays. A user past pipe-user-pages-soft
 * gets 2-page pipes, too small to beat send(): then no pipe (has_pipe -1, not retried). */
#define TX_PIPE_BYTES (1 << 20)
#define TX_PIPE_MIN_BYTES (64 << 10)
const int *p2p_tx_pipe(p2p_conn_t *k) {
    if (k->has_pipe == 0) {
        k->has_pipe = pipe2(k->pipe, O_CLOEXEC | O_NONBLOCK) == 0 ? 1 : -1;
        if (k->has_pipe == 1) {
            (void)fcntl(k->pipe[1], F_SETPIPE_SZ, TX_PIPE_BYTES);
            if (fcntl(k->pipe[1], F_GETPIPE_SZ) < TX_PIPE_MIN_BYTES) {
                pipe_close(k);
                k->has_pipe = -1;
            }
        }
    }
    return k->has_pipe == 1 ? k->pipe : NULL;
}

static p2p_conn_t *find_locked(pcclComm_t *c, const uint8_t uuid[16], int dir, uint32_t slot) {
    for (p2p_conn_t *k = c->p2p.conns; k; k = k->next)
        if (k->dir == dir && k->slot == slot && memcmp(k->uuid, uuid, 16) == 0) return k;
    return NULL;
}

static void insert(pcclComm_t *c, int fd, sec_link_t *link, const uint8_t uuid[16], int dir, uint32_t slot) {
    p2p_conn_t *k = calloc(1, sizeof *k);
    if (!k) {
        close(fd);
        sec_link_free(link);
        return;
    }
    k->fd = fd;
    k->link = link;
    k->refs = 1; /* the table's reference */
    k->dir = dir;
    k->slot = slot;
    k->same_host = dir == P2P_TX && net_fd_same_host(fd);
    memcpy(k->uuid, uuid, 16);
    pthread_mutex_lock(&c->p2p.mu);
    p2p_conn_t *old = find_locked(c, uuid, dir, slot);
    if (old) unlink_locked(c, old); /* the other side reconnected: its old stream is dead */
    k->next = c->p2p.conns;
    c->p2p.conns = k;
    pthread_cond_broadcast(&c->p2p.cv);
    pthread_mutex_unlock(&c->p2p.mu);
}

typedef struct accept_arg {
    pcclComm_t *comm;
    int fd;
} accept_arg_t;

/* Waits on p2p.cv for at most ms (a short slice: callers re-check their condition). */
static void timedwait_ms(pcclComm_t *c, uint64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms * 1000000);
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->p2p.cv, &c->p2p.mu, &ts);
}

/* Whether uuid is in the group the master last announced. A newcomer may connect before this
 * peer has read the ESTABLISH_P2P that names it, so the answer may wait until deadline. */
static int await_member(pcclComm_t *c, const uint8_t uuid[16], uint64_t deadline) {
    pthread_mutex_lock(&c->p2p.mu);
    for (;;) {
        for (uint32_t i = 0; i < c->p2p.npeers; i++)
            if (memcmp(c->p2p.peers[i].uuid, uuid, 16) == 0) {
                pthread_mutex_unlock(&c->p2p.mu);
                return 1;
            }
        uint64_t now = net_now_ms();
        if (now >= deadline || atomic_load(&c->shutting_down)) break;
        timedwait_ms(c, deadline - now < 20 ? deadline - now : 20);
    }
    pthread_mutex_unlock(&c->p2p.mu);
    return 0;
}

static void *handle_incoming(void *arg) {
    accept_arg_t a = *(accept_arg_t *)arg;
    free(arg);
    pcclComm_t *c = a.comm;
    uint64_t deadline = net_now_ms() + HANDSHAKE_TIMEOUT_MS;
    p2p_intro_t who;
    sec_link_t *link = NULL;
    char err[160];
    net_set_nodelay(a.fd);
    net_set_timeouts(a.fd, HANDSHAKE_TIMEOUT_MS);
    uint8_t self[16];
    comm_uuid(c, self);
    char name[24]; /* the communicator's log name changes with its uuid: this thread's own copy */
    snprintf(name, sizeof name, "peer:%02x%02x%02x%02x", self[0], self[1], self[2], self[3]);
    /* Before the master's welcome this peer has no group (and may not know yet whether the run
     * encrypts: the master's handshake says so): nobody may connect. */
    if (c->sec.keyed && !atomic_load(&c->registered)) {
        PLOG_INFO(name, "rejected p2p connection: not registered with the master yet");
        close(a.fd);
    } else if (p2p_greet(a.fd, &c->sec, self, &who, &link, err, sizeof err) != 0) {
        PLOG_INFO(name, "rejected p2p connection: %s", err);
        close(a.fd);
    } else if (c->sec.keyed && !await_member(c, who.uuid, deadline)) {
        /* Holding the key is not enough: only the group's current members may use this port. */
        PLOG_WARN(name, "rejected p2p connection from %02x%02x%02x%02x: not a member of this peer's group",
                  who.uuid[0], who.uuid[1], who.uuid[2], who.uuid[3]);
        sec_link_free(link);
        close(a.fd);
    } else if (who.kind == P2P_KIND_RING) {
        uint8_t ack = 1;
        if (link_send_all(link, a.fd, &ack, 1) == 0) {
            net_set_timeouts(a.fd, 0);
            net_set_nonblock(a.fd, 1);
            net_bound_local_rcvbuf(a.fd); /* ring data flows into this end */
            insert(c, a.fd, link, who.uuid, P2P_RX, who.slot);
        } else {
            sec_link_free(link);
            close(a.fd);
        }
    } else {
        if (who.kind == P2P_KIND_BENCH) {
            bw_serve_connection(link, a.fd, c->timeout_ms);
        } else {
            net_set_timeouts(a.fd, c->timeout_ms);
            ss_serve_connection(c, link, a.fd);
        }
        sec_link_free(link);
        close(a.fd);
    }
    atomic_fetch_sub(&c->p2p.handlers, 1);
    return NULL;
}

static void *acceptor(void *arg) {
    pcclComm_t *c = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = c->p2p.listen_fd, .events = POLLIN}, {.fd = c->p2p.wake_pipe[0], .events = POLLIN}};
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || (p[1].revents & POLLIN) || atomic_load(&c->shutting_down)) break;
        if (!(p[0].revents & POLLIN)) continue;
        int fd = accept4(c->p2p.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        accept_arg_t *a = malloc(sizeof *a);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add(&c->p2p.handlers, 1);
        if (!a) {
            atomic_fetch_sub(&c->p2p.handlers, 1);
            close(fd);
        } else {
            a->comm = c;
            a->fd = fd;
            if (pthread_create(&t, &attr, handle_incoming, a) != 0) {
                atomic_fetch_sub(&c->p2p.handlers, 1);
                close(fd);
                free(a);
            }
        }
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

int p2p_start(pcclComm_t *c) {
    c->p2p.listen_fd = net_listen_any(c->p2p_listen_port, &c->p2p.port);
    if (c->p2p.listen_fd < 0) return -1;
    if (pipe2(c->p2p.wake_pipe, O_CLOEXEC) != 0) {
        close(c->p2p.listen_fd);
        c->p2p.listen_fd = -1;
        return -1;
    }
    if (pthread_create(&c->p2p.acceptor, NULL, acceptor, c) != 0) {
        close(c->p2p.listen_fd);
        close(c->p2p.wake_pipe[0]);
        close(c->p2p.wake_pipe[1]);
        c->p2p.listen_fd = -1;
        return -1;
    }
    c->p2p.acceptor_started = 1;
    return 0;
}

void p2p_stop(pcclComm_t *c) {
    if (c->p2p.acceptor_started) {
        ssize_t w = write(c->p2p.wake_pipe[1], "x", 1);
        (void)w;
        pthread_join(c->p2p.acceptor, NULL);
        c->p2p.acceptor_started = 0;
        close(c->p2p.wake_pipe[0]);
        close(c->p2p.wake_pipe[1]);
    }
    if (c->p2p.listen_fd >= 0) close(c->p2p.listen_fd);
    c->p2p.listen_fd = -1;
    /* Handlers hold bounded socket timeouts; wait for them to leave. */
    uint64_t deadline = net_now_ms() + (uint64_t)c->timeout_ms + HANDSHAKE_TIMEOUT_MS;
    while (atomic_load(&c->p2p.handlers) > 0 && net_now_ms() < deadline) usleep(1000);
    pthread_mutex_lock(&c->p2p.mu);
    while (c->p2p.conns) unlink_locked(c, c->p2p.conns);
    free(c->p2p.peers);
    c->p2p.peers = NULL;
    c->p2p.npeers = 0;
    pthread_mutex_unlock(&c->p2p.mu);
}

/* Peers of the group sharing this peer's address (any two 127/8 addresses are one host), this
 * one included; 0 when this peer is not in the group. */
static uint32_t count_local(const pcclComm_t *c, const wire_peer_t *peers, uint32_t n) {
    const ccoip_inet_address_t *mine = NULL;
    for (uint32_t i = 0; i < n && !mine; i++)
        if (memcmp(peers[i].uuid, c->uuid, 16) == 0) mine = &peers[i].ip;
    uint32_t local = 0;
    for (uint32_t j = 0; mine && j < n; j++)
        local += addr_ip_equal(&peers[j].ip, mine) || (addr_ip_is_loopback(&peers[j].ip) && addr_ip_is_loopback(mine));
    return local;
}

void p2p_set_peers(pcclComm_t *c, const wire_peer_t *peers, uint32_t n) {
    wire_peer_t *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (n && !copy) return;
    if (n) memcpy(copy, peers, n * sizeof *copy);
    uint32_t local = count_local(c, peers, n);
    pthread_mutex_lock(&c->p2p.mu);
    free(c->p2p.peers);
    c->p2p.peers = copy;
    c->p2p.npeers = n;
    c->p2p.local_peers = local;
    for (p2p_conn_t *k = c->p2p.conns, *next; k; k = next) {
        next = k->next;
        int known = 0;
        for (uint32_t i = 0; i < n && !known; i++) known = memcmp(peers[i].uuid, k->uuid, 16) == 0;
        if (!known) unlink_locked(c, k);
    }
    pthread_cond_broadcast(&c->p2p.cv); /* acceptors waiting for a newcomer to become a member */
    pthread_mutex_unlock(&c->p2p.mu);
}

int p2p_lookup(pcclComm_t *c, const uint8_t uuid[16], wire_peer_t *out) {
    int rc = -1;
    pthread_mutex_lock(&c->p2p.mu);
    for (uint32_t i = 0; i < c->p2p.npeers; i++)
        if (memcmp(c->p2p.peers[i].uuid, uuid, 16) == 0) {
            *out = c->p2p.peers[i];
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&c->p2p.mu);
    return rc;
}

p2p_conn_t *p2p_get_tx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot, int timeout_ms,
                       const net_cancel_t *cancel) {
    pthread_mutex_lock(&c->p2p.mu);
    p2p_conn_t *k = find_locked(c, uuid, P2P_TX, slot);
    if (k) k->refs++;
    pthread_mutex_unlock(&c->p2p.mu);
    if (k) return k;

    wire_peer_t peer;
    if (p2p_lookup(c, uuid, &peer) != 0) return NULL;
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    p2p_intro_t me = {.kind = P2P_KIND_RING, .slot = slot};
    memcpy(me.uuid, c->uuid, 16);
    sec_link_t *link = NULL;
    char err[160];
    ccoip_socket_address_t to = wire_peer_addr(&peer);
    int fd = p2p_dial(&to, &c->sec, &me, uuid, timeout_ms, cancel, &link, err, sizeof err);
    if (fd < 0) {
        char where[ADDR_STRLEN];
        addr_str(&to, where);
        PLOG_WARN(c->log_name, "p2p connection to %s failed: %s", where, err);
        return NULL;
    }
    uint8_t ack = 0;
    net_set_timeouts(fd, timeout_ms);
    /* A stopped successor's kernel still completes the connect; only the ack tells, so its wait
     * must end when the caller gives up (the round it serves has ended), not only at the deadline. */
    if (net_wait_until(fd, POLLIN, deadline, cancel) != 1 || link_recv_all(link, fd, &ack, 1) != 0 ||
        (ack != 1 && (errno = EPROTO))) {
        PLOG_WARN(c->log_name, "p2p handshake with successor failed: %s",
                  errno == ECANCELED ? "cancelled" : errno == ETIMEDOUT ? "no answer in time"
                  : errno == EPROTO ? "bad answer" : "connection lost");
        sec_link_free(link);
        close(fd);
        return NULL;
    }
    net_set_timeouts(fd, 0);
    net_set_nonblock(fd, 1);
    insert(c, fd, link, uuid, P2P_TX, slot);
    pthread_mutex_lock(&c->p2p.mu);
    k = find_locked(c, uuid, P2P_TX, slot);
    if (k) k->refs++;
    pthread_mutex_unlock(&c->p2p.mu);
    return k;
}

p2p_conn_t *p2p_get_rx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot, int timeout_ms, int abort_fd) {
    uint64_t deadline = net_now_ms() + (uint64_t)timeout_ms;
    pthread_mutex_lock(&c->p2p.mu);
    p2p_conn_t *k;
    while (!(k = find_locked(c, uuid, P2P_RX, slot))) {
        uint64_t now = net_now_ms();
        if (now >= deadline || atomic_load(&c->shutting_down)) break;
        if (abort_fd >= 0) {
            struct pollfd p = {.fd = abort_fd, .events = POLLIN};
            if (poll(&p, 1, 0) > 0) break;
        }
        /* Short waits so an abort is noticed promptly without a second wake-up channel. */
        timedwait_ms(c, deadline - now < 20 ? deadline - now : 20);
    }
    if (k) k->refs++;
    pthread_mutex_unlock(&c->p2p.mu);
    return k;
}

/* A sender that may queue megabytes ahead of its receiver copies them into socket buffers that
 * have left the cache by the time a receiver on the same host reads them; capping unsent bytes
 * makes each copy happen just before its transfer. The cap costs a wake-up per refill, which
 * only pays while each local peer has a CPU to itself (bench/analysis.md, "Same-host connections"). */
void p2p_pace_tx(pcclComm_t *c, p2p_conn_t *k) {
    int want = 0;
    if (k->same_host && c->local_notsent_bytes > 0) { /* else no lock on the op's path (the default) */
        pthread_mutex_lock(&c->p2p.mu);
        uint32_t local = c->p2p.local_peers;
        pthread_mutex_unlock(&c->p2p.mu);
        if (local <= (uint32_t)c->ncpus) want = c->local_notsent_bytes;
    }
    if (want != k->notsent_cap && setsockopt(k->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &want, sizeof want) == 0)
        k->notsent_cap = want;
}

void p2p_release(pcclComm_t *c, p2p_conn_t *k, int kill) {
    if (!k) return;
    pthread_mutex_lock(&c->p2p.mu);
    int drop = 1;
    if (kill && !k->dead) {
        unlink_only(c, k);
        drop = 2; /* ours and the table's */
    }
    k->refs -= drop;
    if (k->refs == 0) conn_free(k);
    pthread_mutex_unlock(&c->p2p.mu);
}
