/* p2p.c - see p2p.h. */
#include "p2p/p2p.h"

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

#include "base/base.h"
#include "p2p/p2p_hello.h"

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

void p2p_insert(pcclComm_t *c, int fd, sec_link_t *link, const uint8_t uuid[16], int dir, uint32_t slot, int how) {
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
    k->how = how;
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

void p2p_wake(pcclComm_t *c) {
    pthread_mutex_lock(&c->p2p.mu);
    pthread_cond_broadcast(&c->p2p.cv);
    pthread_mutex_unlock(&c->p2p.mu);
}

int p2p_start(pcclComm_t *c) {
    c->p2p.listen_fd = net_listen_any(c->p2p_listen_port, &c->p2p.port);
    if (c->p2p.listen_fd < 0) return -PERR_IO;
    if (pipe2(c->p2p.wake_pipe, O_CLOEXEC) != 0) {
        close(c->p2p.listen_fd);
        c->p2p.listen_fd = -1;
        return -PERR_FAILED;
    }
    if (p2p_acceptor_start(c) != 0) {
        close(c->p2p.listen_fd);
        close(c->p2p.wake_pipe[0]);
        close(c->p2p.wake_pipe[1]);
        c->p2p.listen_fd = -1;
        return -PERR_FAILED;
    }
    c->p2p.acceptor_started = 1;
    return 0;
}

void p2p_stop(pcclComm_t *c) {
    /* A rendezvous' target half hands its connection over through the wake pipe: it ends (its window, the
     * relay's timeout) before the pipe closes. */
    uint64_t until = net_now_ms() + (uint64_t)c->connect_timeout_ms + HANDSHAKE_TIMEOUT_MS;
    while (atomic_load(&c->p2p.punchers) > 0 && net_now_ms() < until) usleep(1000);
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
    while (c->p2p.nhanded) close(c->p2p.handed[--c->p2p.nhanded].fd);
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
    int rc = -PERR_INVALID;
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

/* The stream of (uuid, dir, slot) unless its other end has closed it (caller holds mu): a connection closed
 * between two ops (its peer dropped it after a failure, or a revoked pipelined op that wrote into it) leaves the
 * table here, so an op never sends into a dead socket or reads what an op it is not part of left behind. */
static p2p_conn_t *find_live_locked(pcclComm_t *c, const uint8_t uuid[16], int dir, uint32_t slot) {
    p2p_conn_t *k = find_locked(c, uuid, dir, slot);
    if (!k) return NULL;
    struct pollfd pfd = {.fd = k->fd, .events = POLLRDHUP};
    if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        unlink_locked(c, k);
        return NULL;
    }
    return k;
}

p2p_conn_t *p2p_find_tx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot) {
    pthread_mutex_lock(&c->p2p.mu);
    p2p_conn_t *k = find_live_locked(c, uuid, P2P_TX, slot);
    if (k) k->refs++;
    pthread_mutex_unlock(&c->p2p.mu);
    return k;
}

p2p_conn_t *p2p_get_tx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot, int timeout_ms, const pwait_t *w) {
    net_cancel_t cancel_w = {.wait = w}, *cancel = w ? &cancel_w : NULL;
    p2p_conn_t *k = p2p_find_tx(c, uuid, slot);
    if (k) return k;

    wire_peer_t peer;
    if (p2p_lookup(c, uuid, &peer) != 0) return NULL;
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    p2p_intro_t me = {.kind = P2P_KIND_RING, .slot = slot};
    memcpy(me.uuid, c->uuid, 16);
    sec_link_t *link = NULL;
    char err[320];
    ccoip_socket_address_t to = wire_peer_addr(&peer);
    int how;
    int fd = p2p_dial_peer(c, &peer, &me, timeout_ms, cancel, &link, &how, err, sizeof err);
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
    int rc = net_wait_until(fd, POLLIN, deadline, cancel);
    if (rc == 0) rc = link_recv_all(link, fd, &ack, 1);
    if (rc == 0 && ack != 1) rc = -PERR_PROTOCOL;
    if (rc != 0) {
        PLOG_WARN(c->log_name, "p2p handshake with successor failed: %s",
                  rc == -PERR_CANCELLED ? "cancelled" : rc == -PERR_TIMEOUT ? "no answer in time"
                  : rc == -PERR_PROTOCOL ? "bad answer" : "connection lost");
        sec_link_free(link);
        close(fd);
        return NULL;
    }
    net_set_timeouts(fd, 0);
    net_set_nonblock(fd, 1);
    p2p_insert(c, fd, link, uuid, P2P_TX, slot, how);
    pthread_mutex_lock(&c->p2p.mu);
    k = find_locked(c, uuid, P2P_TX, slot);
    if (k) k->refs++;
    pthread_mutex_unlock(&c->p2p.mu);
    return k;
}

p2p_conn_t *p2p_get_rx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot, int timeout_ms, const pwait_t *w) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
    pthread_mutex_lock(&c->p2p.mu);
    p2p_conn_t *k;
    /* Woken by each new connection and by p2p_wake after w is cancelled. */
    while (!(k = find_live_locked(c, uuid, P2P_RX, slot)) && !atomic_load(&c->shutting_down) && !(w && pwait_result(w)) &&
           pwait_cond_sleep(&c->p2p.cv, &c->p2p.mu, deadline) == 0) {
    }
    if (k) k->refs++;
    pthread_mutex_unlock(&c->p2p.mu);
    return k;
}

static uint64_t local_peer_count(pcclComm_t *c) {
    pthread_mutex_lock(&c->p2p.mu);
    uint64_t local = c->p2p.local_peers;
    pthread_mutex_unlock(&c->p2p.mu);
    return local;
}

int p2p_local_peers_fit(pcclComm_t *c) { return comm_local_peers_fit(c); }

long p2p_splice_min(pcclComm_t *c, int same_host, int how) {
    if (c->zerocopy_min_bytes < 0) return -1;
    if (c->zerocopy_every_edge || !same_host) return c->zerocopy_min_bytes;
    uint64_t local = local_peer_count(c);
    if (local > (uint64_t)c->ncpus) return -1;
    long min = c->zerocopy_min_bytes;
    if ((uint64_t)c->ncpus >= 2 * local && min > P2P_SPLICE_SPARE_MIN_BYTES) min = P2P_SPLICE_SPARE_MIN_BYTES;
    if (how == P2P_SPLICE_ONE_WAY && min > P2P_SPLICE_ONE_WAY_MIN_BYTES) min = P2P_SPLICE_ONE_WAY_MIN_BYTES;
    return min;
}

int p2p_splices(pcclComm_t *c, const p2p_conn_t *tx, size_t bytes, int how) {
    if (tx->link || how == P2P_SPLICE_NEVER) return 0;
    long min = p2p_splice_min(c, tx->same_host, how);
    return min >= 0 && bytes >= (size_t)min;
}

/* A spliced send leaves the sender's pages in the receiver's queue, and an autotuned window lets
 * megabytes of them wait there and go cold, so spliced same-host streams get a bounded window.
 * Copied sends ran faster autotuned, and where the local peers
 * outnumber the CPUs a receiver waits for a core while its sender goes on, so a small window would
 * stall the sender (bench/analysis.md, "Same-host connections"). Only same-host streams are bounded
 * (net_bound_local_rcvbuf), so the same-host threshold applies. */
void p2p_bound_rx(pcclComm_t *c, p2p_conn_t *rx, size_t bytes, int how) {
    if (rx->rcv_bound || rx->link || !p2p_local_peers_fit(c)) return;
    long min = p2p_splice_min(c, 1, how);
    if (min < 0 || bytes < (size_t)min) return;
    rx->rcv_bound = net_bound_local_rcvbuf(rx->fd) ? 1 : -1;
}

/* A sender that may queue megabytes ahead of its receiver copies them into socket buffers that
 * have left the cache by the time a receiver on the same host reads them; capping unsent bytes
 * makes each copy happen just before its transfer, with more local peers than CPUs too
 * (bench/analysis.md, "Same-host connections"). */
void p2p_pace_tx(pcclComm_t *c, p2p_conn_t *k) {
    int want = k->same_host && c->local_notsent_bytes > 0 ? c->local_notsent_bytes : 0;
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

void p2p_report_edges(pcclComm_t *c, unsigned epoch) {
    wire_edge_t e[64];
    uint32_t n = 0;
    pthread_mutex_lock(&c->p2p.mu);
    for (p2p_conn_t *k = c->p2p.conns; k; k = k->next) {
        uint32_t i = 0;
        while (i < n && memcmp(e[i].uuid, k->uuid, 16) != 0) i++;
        if (i == n && n == sizeof e / sizeof e[0]) continue;
        if (i == n) {
            memcpy(e[n].uuid, k->uuid, 16);
            e[n++].kind = (uint8_t)k->how;
        } else if (k->how > e[i].kind) {
            e[i].kind = (uint8_t)k->how; /* a peer's edge is as indirect as its least direct connection */
        }
    }
    pthread_mutex_unlock(&c->p2p.mu);
    wire_msg_t m = {.type = C2M_EDGES};
    m.u.edges.n = n;
    m.u.edges.e = e;
    (void)comm_send(c, epoch, &m);
}
