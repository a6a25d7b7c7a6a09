/*
 * ring_flow.c - one streaming ring flow over one connection pair (ring_flow.h), shared by the all-gather, the
 * reduce-scatter and the broadcast.
 *
 * As the all-reduce ring (Patarasuk & Yuan 2009, JPDC): each direction is one continuous stream with no step
 * barrier; a send element that forwards a received one goes out as far as that one has arrived (and been
 * processed), so a byte crosses each hop as soon as it can. The loop tries the sockets while bytes move and
 * sleeps in one poll (both sockets and the abort fd) only when a round moved nothing; the abort flag is checked
 * every round without a syscall. The header on every stream carries the op_seq, so a predecessor on another
 * operation is found at its first 16 bytes, even on a stream that carries no payload.
 */
#include "ring/ring_flow.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"


int ring_round(ring_io_t *io, int want_send, int want_recv, int watch_tx, int *try_io, uint64_t last_progress,
               int *can_send, int *can_recv) {
    *can_send = *can_recv = 0;
    if (io->abort_flag && atomic_load(io->abort_flag)) {
        snprintf(io->err, sizeof io->err, "aborted");
        return -PERR_CANCELLED;
    }
    struct pollfd p[3] = {{.fd = io->tx_fd, .events = (short)((want_send ? POLLOUT : 0) | (watch_tx ? POLLRDHUP : 0))},
                          {.fd = io->rx_fd, .events = want_recv ? POLLIN : 0},
                          {.fd = io->abort_fd, .events = POLLIN}};
    if (!*try_io) {
        int ready, rc = ring_wait(io, p, last_progress, &ready);
        if (rc != 0 || !ready) return rc;
        if (watch_tx && (p[0].revents & (POLLHUP | POLLRDHUP))) {
            snprintf(io->err, sizeof io->err, "successor closed the connection");
            return -PERR_IO;
        }
    } else {
        p[0].revents = want_send ? POLLOUT : 0;
        p[1].revents = want_recv ? POLLIN : 0;
    }
    *try_io = 0;
    *can_send = want_send && (p[0].revents & (POLLOUT | POLLHUP));
    *can_recv = want_recv && (p[1].revents & (POLLIN | POLLHUP));
    return 0;
}

int ring_check_ranks(ring_io_t *io, const uint32_t *rank_of, uint32_t world) {
    for (uint32_t p = 0; rank_of && p < world; p++)
        if (rank_of[p] >= world) {
            snprintf(io->err, sizeof io->err, "ring position %u has rank %u of %u", p, rank_of[p], world);
            return -PERR_INVALID;
        }
    return 0;
}

ssize_t ring_recv_header(ring_io_t *io, uint8_t *hdr, size_t *done, uint32_t magic, uint32_t world,
                         uint64_t op_seq) {
    ssize_t n = ring_recv(io, hdr + *done, RING_HDR - *done);
    if (n > 0 && (*done += (size_t)n) == RING_HDR && ring_check_header(io, hdr, magic, world, op_seq) != 0)
        return -PERR_PROTOCOL;
    return ring_recv_outcome(io, n);
}

size_t ring_flow_forward(ring_flow_t *f, uint32_t k, size_t len) {
    size_t got = k == 0 ? len : ring_flow_got(f, k - 1);
    return got < len ? got : len;
}

void ring_flow_copy_own(const ring_flow_t *f, uint8_t *dst, const uint8_t *src, size_t len, size_t *done, int all) {
    size_t sent = all ? len : f->tx.hdr_done < RING_HDR ? 0 : f->tx.k > 0 ? len : f->tx.off;
    if (sent <= *done || (sent - *done < RING_COPY_STEP && sent < len)) return;
    memcpy(dst + *done, src + *done, sent - *done);
    *done = sent;
}

size_t ring_flow_backup_recv(uint8_t *backup, const uint8_t *buf, size_t off, size_t len, size_t rdone, size_t want,
                             size_t *done) {
    if (*done <= rdone) {
        size_t end = rdone + RING_COPY_STEP < len ? rdone + RING_COPY_STEP : len;
        ring_copy_nt(backup + off + *done, buf + off + *done, end - *done);
        *done = end;
    }
    return want < *done - rdone ? want : *done - rdone;
}

/* The header, or bytes of the current receive element. @return > 0 bytes, 0 none ready, or -PERR_<NAME>. */
static ssize_t flow_recv(ring_flow_t *f) {
    ring_io_t *io = f->io;
    ssize_t n;
    if (f->rhdr_done < RING_HDR) return ring_recv_header(io, f->rhdr, &f->rhdr_done, f->magic, f->world, f->op_seq);
    size_t len = f->recv_len(f, f->rk), room = f->recv_room ? f->recv_room(f, f->rk) : SIZE_MAX;
    if (room == 0) return 0;
    n = f->recv(f, f->rk, len, room);
    if (n == -PERR_PROTOCOL) return n; /* a malformed block (io->err says so); ring_recv's failure is -1 */
    if (n > 0) io->rx_bytes += (uint64_t)n;
    if (n > 0 && f->rdone == len) {
        f->rk++;
        f->rdone = 0;
    }
    return ring_recv_outcome(io, n);
}

/* Skips empty elements: a receive one once the header is in, a send one at once. */
static void skip_empty(ring_flow_t *f) {
    while (f->rhdr_done == RING_HDR && f->rk < f->nrecv && f->recv_len(f, f->rk) == 0) f->rk++;
    size_t len;
    while (f->tx.k < f->nsend && (f->send_elem(f, f->tx.k, &len), len == 0)) f->tx.k++;
}

static int flow_loop(void *arg) {
    ring_flow_t *f = arg;
    ring_io_t *io = f->io;
    ring_tx_init(&f->tx, f->magic, f->world, f->op_seq);
    f->rhdr_done = 0;
    f->rk = 0;
    f->rdone = 0;
    uint64_t last_progress = net_now_ms();
    int try_io = 1, rc = 0;
    for (;;) {
        skip_empty(f);
        ring_tx_t *tx = &f->tx;
        int all_given = tx->hdr_done == RING_HDR && tx->k >= f->nsend;
        int recv_done = f->rhdr_done == RING_HDR && f->rk >= f->nrecv;
        if (all_given && !tx->piped && ring_tx_flushed(io) && recv_done) break;
        const uint8_t *elem = NULL;
        size_t slen = 0, ready = 0;
        if (!all_given && tx->hdr_done == RING_HDR) {
            elem = f->send_elem(f, tx->k, &slen);
            ready = f->send_ready(f, tx->k, slen);
        }
        if (!tx->piped) tx->pipe = io->tx_pipe && !tx->splice_failed && tx->k < f->splice_below ? io->tx_pipe : NULL;
        int want_send = tx->hdr_done < RING_HDR || tx->piped || (!all_given && ready > tx->off) ||
                        !ring_tx_flushed(io);
        int can_send, can_recv;
        /* The successor closing while this stream still owes it bytes (or its header) fails at once. */
        int send_open = !(all_given && !tx->piped && ring_tx_flushed(io));
        /* A receive with no room (its memory still being sent) waits for the send, not for the socket. */
        int want_recv = !recv_done && (f->rhdr_done < RING_HDR || !f->recv_room || f->recv_room(f, f->rk) > 0);
        rc = ring_round(io, want_send, want_recv, send_open, &try_io, last_progress, &can_send, &can_recv);
        if (rc != 0) break;
        if (can_send) {
            ssize_t w = ring_send_step(io, tx, elem, ready, slen);
            if (w < 0) {
                rc = (int)w;
                break;
            }
            if (w > 0) try_io = 1, last_progress = net_now_ms();
        }
        if (can_recv) {
            ssize_t n = flow_recv(f);
            if (n < 0) {
                rc = (int)n;
                break;
            }
            if (n > 0) try_io = 1, last_progress = net_now_ms();
        }
    }
    return rc;
}

int ring_flow_run(ring_flow_t *f) {
    f->io->tx_bytes = f->io->rx_bytes = 0;
    f->io->err[0] = 0;
    if (f->io->tx_pipe && f->splice_below > 0) return ring_no_sigpipe(flow_loop, f);
    return flow_loop(f);
}
