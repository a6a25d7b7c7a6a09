/*
 * ring_flow.h - the pieces the ring collectives share inside ring/ (private to the folder).
 *
 * A flow is one ring stream pair over one connection pair: a send stream of elements to the successor and a
 * receive stream from the predecessor, each opened by the 16-byte header (magic, world size, op_seq). The
 * collective says what the elements are (callbacks); the flow drives both sockets and the abort fd from one
 * poll loop, forwards bytes as soon as the collective says they are ready, and ends when both streams are
 * done. ring_flow_run serves the all-gather, the reduce-scatter and the broadcast; the all-reduce rings
 * (ring.c, ring_quant.c) keep their own loops, tuned for in-place restore, and share ring_round with it.
 */
#ifndef PCCL_RING_FLOW_H
#define PCCL_RING_FLOW_H

#include "ring/ring.h"

/* Elements in one read or send call at most. */
#define RING_MAX_IO (4u << 20)

/* Slice s of ns of a range of n items (stripes split every block this way): *off from the range's start. */
static inline void ring_slice(size_t n, uint32_t s, uint32_t ns, size_t *off, size_t *len) {
    size_t b = n / ns, r = n % ns;
    *off = b * s + (s < r ? s : r);
    *len = b + (s < r ? 1 : 0);
}

/* The element-count split of pccl_coll.h and the all-reduce: block i of n blocks over count items. */
static inline size_t ring_block_off(size_t count, uint32_t n, uint32_t i) {
    size_t base = count / n, rem = count % n;
    return base * i + (i < rem ? i : rem);
}
static inline size_t ring_block_len(size_t count, uint32_t n, uint32_t i) {
    return count / n + (i < count % n ? 1 : 0);
}

/* Ring position p - d (mod n), for d <= 2 n. */
static inline uint32_t ring_back(uint32_t p, uint32_t d, uint32_t n) {
    return (uint32_t)(((int64_t)p - (int64_t)d + 2 * (int64_t)n) % n);
}

/* Runs fn(&ios[s], arg) for every stripe s (stripe 0 on the calling thread, the others on threads of their own;
 * ios[s].stripe/nstripes set here). A failing stripe shuts every stripe's sockets down so that the siblings and
 * the neighbours fail at once. rcs (n entries, may be NULL) receives each stripe's result. @return the first
 * real failure (its reason copied into ios[0].err) or 0; ios[0].tx_bytes/rx_bytes become the sums. */
int ring_run_stripes(ring_io_t *ios, uint32_t n, int (*fn)(ring_io_t *io, void *arg), void *arg, int *rcs);
/* As ring_run_stripes, but a failure calls shut(shut_ctx) to shut every stripe's connections down (stripes
 * whose connections change during the run: recursive halving and doubling). */
int ring_run_stripes_shut(ring_io_t *ios, uint32_t n, int (*fn)(ring_io_t *io, void *arg), void *arg,
                          void (*shut)(void *ctx), void *shut_ctx, int *rcs);

typedef struct ring_flow ring_flow_t;
struct ring_flow {
    ring_io_t *io;
    uint32_t magic, world;
    uint64_t op_seq;
    uint32_t nsend, nrecv; /* elements of the send and receive streams (0: the header only) */
    uint32_t splice_below; /* send elements below this may go through io->tx_pipe (their bytes never change) */
    void *ctx;             /* the collective's per-stripe state */
    /* Send element k (< nsend): its first byte and *len (0: nothing to send, skipped). */
    const uint8_t *(*send_elem)(ring_flow_t *f, uint32_t k, size_t *len);
    /* Bytes of send element k (len in all) ready to go; may prepare more of them (encoding). */
    size_t (*send_ready)(ring_flow_t *f, uint32_t k, size_t len);
    /* Byte length of receive element k (< nrecv; 0: skipped). */
    size_t (*recv_len)(ring_flow_t *f, uint32_t k);
    /* Receives more of element k (len bytes; rdone of them processed) as ring_recv does (n, 0 with errno, -1),
     * processing what it can and advancing rdone; at most room bytes (room > 0). */
    ssize_t (*recv)(ring_flow_t *f, uint32_t k, size_t len, size_t room);
    /* Optional: how many bytes element k may take now (memory that a send still reads); NULL: no limit. */
    size_t (*recv_room)(const ring_flow_t *f, uint32_t k);
    /* state */
    ring_tx_t tx;
    uint8_t rhdr[RING_HDR];
    size_t rhdr_done;
    uint32_t rk;  /* current receive element */
    size_t rdone; /* processed bytes of it: what a forwarding send may read */
};

/* Runs the flow to its end (SIGPIPE guarded when it may splice). @return 0 or -PERR_<NAME> (io->err). */
int ring_flow_run(ring_flow_t *f);
/* Processed bytes of receive element j (SIZE_MAX once it is complete): what a send forwarding it may send. */
static inline size_t ring_flow_got(const ring_flow_t *f, uint32_t j) {
    return f->rk > j ? SIZE_MAX : f->rk == j ? f->rdone : 0;
}
/* send_ready of a ring that forwards: element 0 is the member's own input (all ready), element k > 0 goes out
 * as far as receive element k - 1 has been processed. */
size_t ring_flow_forward(ring_flow_t *f, uint32_t k, size_t len);
/* An out-of-place member's own input (send element 0: len bytes at src) reaches its place dst in the output
 * right behind its send, in steps of RING_COPY_STEP bytes (all: the rest, once the flow ended): the bytes the
 * send just read are in the cache, and the copy overlaps the successor's receive instead of following the
 * whole transfer. *done: the bytes copied so far. */
#define RING_COPY_STEP ((size_t)256 << 10)
void ring_flow_copy_own(const ring_flow_t *f, uint8_t *dst, const uint8_t *src, size_t len, size_t *done, int all);
/* In place with a backup (ring_io_t.backup: buf's bytes at the same offsets), a receiving member saves the bytes
 * of buf just before it first receives into them, so the copy overlaps the transfer instead of a pass over buf
 * before it. For a receive of up to want bytes at rdone into a range of len bytes at off in buf: saves the next
 * RING_COPY_STEP of the range when the saved bytes run out (read into the cache just before the receive writes
 * them) and returns how many of want may be received now, so the copy and the receive alternate in cache-sized
 * steps. *done: the bytes of the range saved so far. */
size_t ring_flow_backup_recv(uint8_t *backup, const uint8_t *buf, size_t off, size_t len, size_t rdone, size_t want,
                             size_t *done);
/* 0 if every rank_of entry names a rank below world (NULL: the identity); else -PERR_INVALID with io->err. */
int ring_check_ranks(ring_io_t *io, const uint32_t *rank_of, uint32_t world);
static inline uint32_t ring_rank_at(const uint32_t *rank_of, uint32_t p) { return rank_of ? rank_of[p] : p; }

#endif
