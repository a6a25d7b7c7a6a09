/* ring.c - see ring.h. */
#include "ring/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "base/base.h"
#include "pccl_kernels.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define RING_MAGIC 0x52494E47u /* "RING" */
#define MAX_IO (4u << 20)

typedef struct chunking {
    size_t base, rem, esz;
    uint32_t n;
    uint32_t stripe, nstripes; /* this ring's slice of every chunk */
} chunking_t;

void ring_copy_nt(uint8_t *dst, const uint8_t *src, size_t n) {
#if defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > n) head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16)),
                c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    _mm_sfence();
#endif
    memcpy(dst, src, n);
}

/* Chunk i's elements: where they start and how many. */
static size_t whole_off(const chunking_t *c, uint32_t i) { return c->base * i + (i < c->rem ? i : c->rem); }
static size_t whole_len(const chunking_t *c, uint32_t i) { return c->base + (i < c->rem ? 1 : 0); }
/* Byte offset and length of this ring's slice of chunk i (the whole chunk unstriped). */
static size_t chunk_off(const chunking_t *c, uint32_t i) {
    size_t n = whole_len(c, i), b = n / c->nstripes, r = n % c->nstripes, s = c->stripe;
    return (whole_off(c, i) + b * s + (s < r ? s : r)) * c->esz;
}
static size_t chunk_len(const chunking_t *c, uint32_t i) {
    size_t n = whole_len(c, i);
    return (n / c->nstripes + (c->stripe < n % c->nstripes ? 1 : 0)) * c->esz;
}

/* Polls without sleeping for up to io->spin_us, handing the core to any thread ready to run between looks (the
 * peer this ring waits for may share it), and stopping at once on the abort flag. @return poll's result: 0 when
 * nothing became ready, and the caller sleeps. */
static int spin_poll(ring_io_t *io, struct pollfd *p) {
    if (io->spin_us <= 0) return 0;
    uint64_t until = pwait_now_us() + (uint64_t)io->spin_us;
    int n;
    while ((n = poll(p, 3, 0)) == 0 && pwait_now_us() < until && !(io->abort_flag && atomic_load(io->abort_flag)))
        sched_yield();
    return n;
}

int ring_wait(ring_io_t *io, struct pollfd *p, uint64_t last_progress, int *ready) {
    *ready = 0;
    uint64_t now = net_now_ms();
    if (now - last_progress >= (uint64_t)io->timeout_ms) {
        snprintf(io->err, sizeof io->err, "no progress for %d ms", io->timeout_ms);
        return -PERR_TIMEOUT;
    }
    int n = spin_poll(io, p);
    if (n == 0) n = poll(p, 3, (int)(io->timeout_ms - (now - last_progress)));
    if (n < 0) {
        if (errno == EINTR) return 0;
        snprintf(io->err, sizeof io->err, "poll: %s", strerror(errno));
        return -PERR_IO;
    }
    if (p[2].revents) {
        snprintf(io->err, sizeof io->err, "aborted");
        return -PERR_CANCELLED;
    }
    if (n == 0) return 0;
    if ((p[0].revents | p[1].revents) & (POLLERR | POLLNVAL)) {
        snprintf(io->err, sizeof io->err, "socket error");
        return -PERR_IO;
    }
    *ready = 1;
    return 0;
}

int ring_check_header(ring_io_t *io, const uint8_t *hdr, uint32_t magic, uint32_t world, uint64_t op_seq) {
    if (wire_get_u32(hdr) == magic && wire_get_u32(hdr + 4) == world && wire_get_u64(hdr + 8) == op_seq) return 0;
    snprintf(io->err, sizeof io->err, "predecessor is on another operation (magic %08x, seq %llu; want %08x, %llu)",
             wire_get_u32(hdr), (unsigned long long)wire_get_u64(hdr + 8), magic, (unsigned long long)op_seq);
    return -PERR_PROTOCOL;
}

/* dst = own (+) rx. Out of place in one pass (own is never written). In place, with a backup, dst
 * is first saved with cache-bypassing stores in cache-sized pieces, so the reduce reads dst from
 * the cache the copy just filled. */
#define PIECE ((size_t)64 << 10)
#define OWN_STEP ((size_t)256 << 10)
static void reduce_chunk(uint8_t *backup, uint8_t *dst, const uint8_t *own, const uint8_t *rx, size_t len,
                         size_t esz, pcclDataType_t dt, pcclRedOp_t op) {
    if (own != dst) {
        pccl_reduce_to(dst, own, rx, len / esz, dt, op);
        return;
    }
    if (!backup) {
        pccl_reduce_into(dst, rx, len / esz, dt, op);
        return;
    }
    for (size_t off = 0; off < len; off += PIECE) {
        size_t n = len - off < PIECE ? len - off : PIECE; /* a multiple of esz (a power of 2) */
        ring_copy_nt(backup + off, dst + off, n);
        pccl_reduce_into(dst + off, rx + off, n / esz, dt, op);
    }
}

void ring_tx_init(ring_tx_t *t, uint32_t magic, uint32_t world, uint64_t op_seq) {
    wire_put_u32(t->hdr, magic);
    wire_put_u32(t->hdr + 4, world);
    wire_put_u64(t->hdr + 8, op_seq);
    t->hdr_done = 0;
    t->k = 0;
    t->off = 0;
    t->pipe = NULL;
    t->piped = 0;
    t->splice_failed = 0;
}

/* Moves element bytes into the pipe by reference (vmsplice: the pipe holds the caller's pages, no
 * copy) and from the pipe into the socket (splice: the socket buffer keeps the page references,
 * and the receiver copies straight out of them). This saves the copy send() makes, but the bytes
 * are read when the successor receives them, not now: the caller must not change a range it sent
 * until the successor has consumed it (ring_allreduce's causal argument). */
static ssize_t send_spliced(ring_io_t *io, ring_tx_t *t, const uint8_t *elem, size_t ready, size_t elem_len) {
    ssize_t moved = 0;
    if (!t->piped && ready > t->off) {
        size_t n = ready - t->off;
        if (n > MAX_IO) n = MAX_IO;
        struct iovec v = {(void *)(uintptr_t)(elem + t->off), n};
        ssize_t m = vmsplice(t->pipe[1], &v, 1, SPLICE_F_NONBLOCK);
        if (m < 0) {
            if (errno == EAGAIN || errno == EINTR) return 0;
            t->splice_failed = 1; /* memory vmsplice cannot take: plain sends from here on */
            t->pipe = NULL;
            return 0;
        }
        t->piped = (size_t)m;
        t->off += (size_t)m;
        if (t->off == elem_len) {
            t->k++;
            t->off = 0;
        }
        moved = m;
    }
    if (!t->piped) return moved;
    ssize_t w = splice(t->pipe[0], NULL, io->tx_fd, NULL, t->piped, SPLICE_F_NONBLOCK);
    if (w < 0) {
        if (errno == EAGAIN || errno == EINTR) return moved;
        snprintf(io->err, sizeof io->err, "send to successor: %s", strerror(errno));
        return -PERR_IO;
    }
    t->piped -= (size_t)w;
    io->tx_bytes += (uint64_t)w;
    return moved + w;
}

int ring_tx_flushed(const ring_io_t *io) { return sec_link_pending(io->tx_link) == 0; }

ssize_t ring_recv(ring_io_t *io, void *buf, size_t len) {
    return io->rx_link ? sec_link_recv(io->rx_link, io->rx_fd, buf, len) : recv(io->rx_fd, buf, len, MSG_DONTWAIT);
}

ssize_t ring_recv_outcome(ring_io_t *io, ssize_t n) {
    if (n == 0) {
        snprintf(io->err, sizeof io->err, "predecessor closed the connection");
        return -PERR_IO;
    }
    if (n > 0) return n;
    if (errno == EAGAIN || errno == EINTR) return 0;
    snprintf(io->err, sizeof io->err, "receive from predecessor: %s", strerror(errno));
    return -PERR_IO;
}

/* The rest of the header and the first ready bytes of element 0 in one send (an open link, no pipe): the
 * successor wakes once for both instead of once for a lone header. @return as ring_send_step. */
static ssize_t send_header_and_data(ring_io_t *io, ring_tx_t *t, const uint8_t *elem, size_t ready, size_t elem_len) {
    size_t len = ready - t->off < MAX_IO ? ready - t->off : MAX_IO, hlen = RING_HDR - t->hdr_done;
    struct iovec v[2] = {{t->hdr + t->hdr_done, hlen}, {(void *)(uintptr_t)(elem + t->off), len}};
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = 2};
    ssize_t w = sendmsg(io->tx_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
        if (errno == EAGAIN || errno == EINTR) return 0;
        snprintf(io->err, sizeof io->err, "send to successor: %s", strerror(errno));
        return -PERR_IO;
    }
    size_t h = (size_t)w < hlen ? (size_t)w : hlen, d = (size_t)w - h;
    t->hdr_done += h;
    if (d) {
        io->tx_bytes += d;
        t->off += d;
        if (t->off == elem_len) {
            t->k++;
            t->off = 0;
        }
    }
    return w;
}

ssize_t ring_send_step(ring_io_t *io, ring_tx_t *t, const uint8_t *elem, size_t ready, size_t elem_len) {
    if (t->pipe && t->hdr_done == RING_HDR) return send_spliced(io, t, elem, ready, elem_len);
    if (t->hdr_done < RING_HDR && !io->tx_link && !t->pipe && t->k == 0 && ready > t->off)
        return send_header_and_data(io, t, elem, ready, elem_len);
    const uint8_t *src = t->hdr_done < RING_HDR ? t->hdr + t->hdr_done : elem + t->off;
    size_t len = t->hdr_done < RING_HDR ? RING_HDR - t->hdr_done : ready - t->off;
    if (len > MAX_IO) len = MAX_IO;
    /* With a link, len 0 (everything ready is sealed) still flushes what waits. */
    ssize_t w = io->tx_link ? sec_link_send(io->tx_link, io->tx_fd, src, len)
                            : send(io->tx_fd, src, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
        if (errno == EAGAIN || errno == EINTR) return 0;
        snprintf(io->err, sizeof io->err, "send to successor: %s", strerror(errno));
        return -PERR_IO;
    }
    if (w == 0) return 0; /* a flush of sealed bytes only */
    if (t->hdr_done < RING_HDR) {
        t->hdr_done += (size_t)w;
    } else {
        io->tx_bytes += (uint64_t)w;
        t->off += (size_t)w;
        if (t->off == elem_len) {
            t->k++;
            t->off = 0;
        }
    }
    return w;
}

/* One ring over one connection pair: what it moves and how far it got. */
typedef struct ring_run {
    ring_io_t *io;
    uint8_t *buf;
    const uint8_t *src;
    uint8_t *backup; /* in place with a backup: where the ring saves what it modifies */
    size_t esz;
    uint32_t N, rank, total; /* total: stream elements per direction */
    pcclDataType_t dt;
    pcclRedOp_t op;
    uint64_t op_seq;
    chunking_t ck;
    uint8_t rhdr[RING_HDR];
    size_t rhdr_done;
    uint32_t rk;   /* current receive element */
    size_t rdone;  /* bytes processed of the current receive element */
    size_t sfill;  /* partial element bytes waiting in staging */
    size_t own_bk; /* bytes of the own chunk (first modified in the all-gather) in backup */
} ring_run_t;

static uint32_t chunk_of_send(const ring_run_t *r, uint32_t k) {
    return (uint32_t)(((int64_t)r->rank - (int64_t)(k % r->N) + 2 * (int64_t)r->N) % r->N);
}

static uint32_t chunk_of_recv(const ring_run_t *r, uint32_t k) {
    return (uint32_t)(((int64_t)r->rank - (int64_t)(k % r->N) - 1 + 2 * (int64_t)r->N) % r->N);
}

/* A receive of the reduce-scatter: into staging, whole elements reduced into buf (backed up first). */
static ssize_t recv_reduce(ring_run_t *r, uint32_t c, size_t clen) {
    ring_io_t *io = r->io;
    size_t want = clen - r->rdone - r->sfill;
    if (want > io->staging_size - r->sfill) want = io->staging_size - r->sfill;
    ssize_t n = ring_recv(io, io->staging + r->sfill, want);
    if (n > 0) {
        size_t have = r->sfill + (size_t)n, whole = have / r->esz * r->esz;
        size_t at = chunk_off(&r->ck, c) + r->rdone;
        reduce_chunk(r->backup ? r->backup + at : NULL, r->buf + at, r->src + at, io->staging, whole, r->esz, r->dt,
                     r->op);
        r->rdone += whole;
        r->sfill = have - whole;
        if (r->sfill) memmove(io->staging, io->staging + whole, r->sfill);
    }
    return n;
}

/* A receive of the all-gather: straight into buf. */
static ssize_t recv_gather(ring_run_t *r, uint32_t c, size_t clen) {
    uint8_t *dst = r->buf + chunk_off(&r->ck, c);
    size_t want = clen - r->rdone;
    if (want > MAX_IO) want = MAX_IO;
    if (r->backup && c == r->rank) {
        /* Every other chunk was backed up when the reduce-scatter reduced it. The own chunk is saved just
         * ahead of each receive, in cache-sized steps, so the receive writes lines the copy has just read. */
        if (want > OWN_STEP) want = OWN_STEP;
        if (r->rdone + want > r->own_bk) {
            ring_copy_nt(r->backup + chunk_off(&r->ck, c) + r->own_bk, dst + r->own_bk, r->rdone + want - r->own_bk);
            r->own_bk = r->rdone + want;
        }
    }
    ssize_t n = ring_recv(r->io, dst + r->rdone, want);
    if (n > 0) r->rdone += (size_t)n;
    return n;
}

/* One receive from the predecessor: the stream's header, or bytes of the current element.
 * @return bytes received (> 0), 0 when none were ready, or -PERR_<NAME> (io->err says why). */
static ssize_t recv_step(ring_run_t *r) {
    ring_io_t *io = r->io;
    if (r->rhdr_done < RING_HDR) return ring_recv_header(io, r->rhdr, &r->rhdr_done, RING_MAGIC, r->N, r->op_seq);
    uint32_t c = chunk_of_recv(r, r->rk);
    size_t clen = chunk_len(&r->ck, c);
    ssize_t n = r->rk < r->N - 1 ? recv_reduce(r, c, clen) : recv_gather(r, c, clen);
    if (n > 0) {
        io->rx_bytes += (uint64_t)n;
        if (r->rdone == clen) {
            r->rk++;
            r->rdone = 0;
        }
    }
    return ring_recv_outcome(io, n);
}

/* After a failure in place: puts back exactly what was modified, the chunks reduced so far (the current one up
 * to rdone; elements before rk are whole) and the saved part of the own chunk (all the all-gather has written
 * into it). */
static void restore_modified(const ring_run_t *r) {
    for (uint32_t k = 0; k < r->N - 1 && k <= r->rk; k++) {
        uint32_t c = chunk_of_recv(r, k);
        size_t len = k < r->rk ? chunk_len(&r->ck, c) : r->rdone;
        memcpy(r->buf + chunk_off(&r->ck, c), r->backup + chunk_off(&r->ck, c), len);
    }
    if (r->own_bk) memcpy(r->buf + chunk_off(&r->ck, r->rank), r->backup + chunk_off(&r->ck, r->rank), r->own_bk);
}

/* How many bytes of the current send element are ready (*slen: its length): element 0 is the own input (ready
 * with the header too: ring_send_step sends them together), a later one is ready as far as the element before it
 * was received. */
static size_t send_ready(const ring_run_t *r, const ring_tx_t *tx, size_t *slen) {
    *slen = 0;
    if (tx->k >= r->total || (tx->hdr_done != RING_HDR && tx->k != 0)) return 0;
    *slen = chunk_len(&r->ck, chunk_of_send(r, tx->k));
    if (tx->k == 0 || r->rk > tx->k - 1) return *slen;
    return r->rk == tx->k - 1 ? r->rdone : 0;
}

static int ring_run(ring_io_t *io, const void *vsrc, void *vbuf, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                    uint32_t rank, uint32_t world, uint64_t op_seq) {
    ring_run_t r = {.io = io, .buf = vbuf, .src = vsrc ? vsrc : vbuf, .esz = pccl_dtype_size(dt), .N = world,
                    .rank = rank, .total = 2 * (world - 1), .dt = dt, .op = op, .op_seq = op_seq};
    r.backup = r.src == r.buf ? io->backup : NULL; /* out of place nothing the caller owns needs restoring */
    r.ck = (chunking_t){count / world, count % world, r.esz, world, io->stripe, io->nstripes ? io->nstripes : 1};
    const uint32_t N = world, total = r.total;
    ring_tx_t tx;
    ring_tx_init(&tx, RING_MAGIC, N, op_seq);
    uint64_t last_progress = net_now_ms();
    int try_io = 1; /* the last round moved bytes: try again before sleeping */
    io->tx_bytes = io->rx_bytes = 0;
    io->err[0] = 0;
    int rc = 0;
    for (;;) {
        /* Skip empty chunks (count < world size). */
        while (r.rk < total && chunk_len(&r.ck, chunk_of_recv(&r, r.rk)) == 0 && r.rhdr_done == RING_HDR) r.rk++;
        while (tx.k < total && chunk_len(&r.ck, chunk_of_send(&r, tx.k)) == 0 && (tx.k == 0 || r.rk > tx.k - 1))
            tx.k++;
        /* All elements handed over; the stream ends once the pipe and an encrypted link are empty. */
        int all_given = tx.hdr_done == RING_HDR && tx.k >= total;
        int send_done = all_given && !tx.piped && ring_tx_flushed(io);
        int recv_done = r.rhdr_done == RING_HDR && r.rk >= total;
        if (send_done && recv_done) break;
        size_t slen, ready = send_ready(&r, &tx, &slen);
        int want_send =
            tx.hdr_done < RING_HDR || tx.piped || (!all_given && ready > tx.off) || !ring_tx_flushed(io);
        /* Pages may go by reference while nothing changes them before the successor has consumed
         * them. Within the op a sent range is changed only by a later receive of the same chunk,
         * which causally follows the successor's receive of it (the chunk's final value includes
         * what was sent, or is the value sent). pcclAvg is the exception: the final division
         * rewrites the all-gather's chunks while the successor may still be reading them. */
        if (!tx.piped)
            tx.pipe = io->tx_pipe && !tx.splice_failed && (op != pcclAvg || tx.k < N - 1) ? io->tx_pipe : NULL;

        /* Try the sockets first and sleep in poll only when the last round moved nothing:
         * a ring hop that keeps flowing costs no wake-ups. The abort flag is checked on every
         * round without I/O; the eventfd wakes the poll. */
        int can_send, can_recv;
        if ((rc = ring_round(io, want_send, !recv_done, 0, &try_io, last_progress, &can_send, &can_recv)) != 0) break;
        if (can_send) {
            /* Element 0 is this peer's own input; every later one was reduced or received into buf. */
            const uint8_t *from = tx.k == 0 ? r.src : r.buf;
            ssize_t w = ring_send_step(io, &tx, from + chunk_off(&r.ck, chunk_of_send(&r, tx.k)), ready, slen);
            if (w < 0) {
                rc = (int)w;
                break;
            }
            if (w > 0) {
                try_io = 1;
                last_progress = net_now_ms();
            }
        }
        if (can_recv) {
            ssize_t n = recv_step(&r);
            if (n < 0) {
                rc = (int)n;
                break;
            }
            if (n > 0) {
                try_io = 1;
                last_progress = net_now_ms();
            }
        }
    }
    if (rc != 0) {
        if (r.backup) restore_modified(&r);
        return rc;
    }
    if (op == pcclAvg) /* this ring's slices only: the other stripes divide theirs */
        for (uint32_t c = 0; c < N; c++)
            pccl_reduce_finalize_avg(r.buf + chunk_off(&r.ck, c), chunk_len(&r.ck, c) / r.esz, dt, world);
    return 0;
}

void ring_restore_stripe(const ring_io_t *io, void *buf, size_t count, size_t esz, uint32_t world) {
    chunking_t ck = {count / world, count % world, esz, world, io->stripe, io->nstripes ? io->nstripes : 1};
    for (uint32_t c = 0; c < world; c++)
        memcpy((uint8_t *)buf + chunk_off(&ck, c), io->backup + chunk_off(&ck, c), chunk_len(&ck, c));
}

/* splice() has no MSG_NOSIGNAL: into a socket whose peer is gone it raises SIGPIPE, which would
 * kill the process. A library must not change the process's handler, so SIGPIPE is blocked in this
 * thread for the ring and one raised here (not one that was pending before) is consumed. */
int ring_no_sigpipe(int (*fn)(void *), void *arg) {
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    int rc = fn(arg);
    if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        const struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

typedef struct allreduce_args {
    ring_io_t *io;
    const void *src;
    void *buf;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    uint32_t rank, world;
    uint64_t op_seq;
} allreduce_args_t;

static int allreduce_guarded(void *arg) {
    allreduce_args_t *a = arg;
    return ring_run(a->io, a->src, a->buf, a->count, a->dt, a->op, a->rank, a->world, a->op_seq);
}

int ring_allreduce(ring_io_t *io, const void *src, void *buf, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                   uint32_t rank, uint32_t world, uint64_t op_seq) {
    if (!io->tx_pipe) return ring_run(io, src, buf, count, dt, op, rank, world, op_seq);
    allreduce_args_t a = {io, src, buf, count, dt, op, rank, world, op_seq};
    return ring_no_sigpipe(allreduce_guarded, &a);
}
