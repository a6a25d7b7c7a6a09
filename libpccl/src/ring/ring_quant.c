/*
 * ring_quant.c - the quantized ring all-reduce (see ring.h).
 *
 * Same streams as ring_allreduce, but every chunk travels as quantized blocks
 * (kernels/pccl_quant.h) laid out in one wire buffer that mirrors the chunks.
 * Reduce-scatter: a received block is decoded and reduced into the caller's
 * buffer (full precision), then the partial result is re-encoded in place for
 * the successor. The last reduce-scatter hop makes this peer the chunk's
 * owner: it finalizes (avg), encodes the block once and replaces its own values
 * with the decoded ones. All-gather: blocks are decoded into the buffer and
 * forwarded byte for byte, never re-encoded, so every peer decodes the same
 * bytes and ends bit-identical (seed 003 section 5.3.1).
 *
 * A region of the wire buffer is rewritten only after its previous content
 * went out: anything received for chunk c depends causally on this peer's
 * earlier send of the same block of c.
 */
#include "ring/ring.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/base.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"

#define RINGQ_MAGIC 0x52494E51u /* "RINQ" */
#define PREQUANT_BLOCKS 8 /* own-chunk blocks encoded ahead of the first send */
/* Received bytes are decoded and re-encoded before the loop sends again: a bounded read keeps
 * that work short, so the successor is never starved for long. */
#define MAX_RECV (256u << 10)

typedef struct qlayout {
    size_t base, rem, esz, wbase, wbig; /* elements per chunk (+1 for the first rem), wire bytes of each */
    uint32_t n;
    uint32_t stripe, nstripes; /* this ring's slice of every chunk: whole blocks, so blocks match pool 1 */
    pcclDataType_t qdt;
    size_t block_bytes;
} qlayout_t;

static size_t whole_elems(const qlayout_t *l, uint32_t c) { return l->base + (c < l->rem ? 1 : 0); }
/* The blocks [*b0, *b1) of chunk c that this ring's stripe moves. */
static void q_blocks(const qlayout_t *l, uint32_t c, size_t *b0, size_t *b1) {
    size_t nb = (whole_elems(l, c) + PCCL_QBLOCK_ELEMS - 1) / PCCL_QBLOCK_ELEMS;
    size_t bb = nb / l->nstripes, br = nb % l->nstripes, s = l->stripe;
    *b0 = bb * s + (s < br ? s : br);
    *b1 = *b0 + bb + (s < br ? 1 : 0);
}
static size_t q_elems(const qlayout_t *l, uint32_t c) {
    size_t b0, b1, n = whole_elems(l, c);
    q_blocks(l, c, &b0, &b1);
    if (b0 == b1) return 0; /* a stripe beyond the chunk's blocks (b0 * QBLOCK may exceed n) */
    size_t e1 = b1 * PCCL_QBLOCK_ELEMS < n ? b1 * PCCL_QBLOCK_ELEMS : n;
    return e1 - b0 * PCCL_QBLOCK_ELEMS;
}
static size_t q_elem_off(const qlayout_t *l, uint32_t c) {
    size_t b0, b1;
    q_blocks(l, c, &b0, &b1);
    return l->base * c + (c < l->rem ? c : l->rem) + b0 * PCCL_QBLOCK_ELEMS;
}
static size_t q_wire_len(const qlayout_t *l, uint32_t c) { return pccl_quant_wire_bytes(q_elems(l, c), l->qdt); }
static size_t q_wire_off(const qlayout_t *l, uint32_t c) {
    size_t big = c < l->rem ? c : l->rem, b0, b1;
    q_blocks(l, c, &b0, &b1);
    return big * l->wbig + (c - big) * l->wbase + b0 * l->block_bytes; /* blocks before b0 are full */
}

size_t ring_quant_wire_bytes(size_t count, pcclDataType_t qdt, uint32_t world) {
    size_t base = count / world, rem = count % world;
    return rem * pccl_quant_wire_bytes(base + 1, qdt) + (world - rem) * pccl_quant_wire_bytes(base, qdt);
}

typedef struct qring {
    ring_io_t *io;
    uint8_t *buf, *wire;
    qlayout_t l;
    pcclDataType_t dt, qdt;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t algo;
    size_t block_bytes;
} qring_t;

/* Encodes the next blocks of this peer's own chunk (first element of the send stream). */
static size_t prequantize(const qring_t *q, uint32_t c, size_t done) {
    const size_t n = q_elems(&q->l, c), len = q_wire_len(&q->l, c);
    uint8_t *w = q->wire + q_wire_off(&q->l, c);
    const uint8_t *src = q->buf + q_elem_off(&q->l, c) * q->l.esz;
    for (int b = 0; b < PREQUANT_BLOCKS && done < len; b++) {
        size_t j = done / q->block_bytes, e0 = j * PCCL_QBLOCK_ELEMS;
        size_t nb = n - e0 < PCCL_QBLOCK_ELEMS ? n - e0 : PCCL_QBLOCK_ELEMS;
        pccl_quant_block(src + e0 * q->l.esz, nb, q->dt, q->algo, q->qdt, w + done);
        done += pccl_quant_wire_bytes(nb, q->qdt);
    }
    return done;
}

/* Handles every complete block of received element k (chunk c) past *proc. */
static int process(const qring_t *q, uint32_t k, uint32_t c, size_t rdone, size_t *proc) {
    const uint32_t N = q->l.n;
    const size_t n = q_elems(&q->l, c);
    uint8_t *w = q->wire + q_wire_off(&q->l, c);
    uint8_t *dst0 = q->buf + q_elem_off(&q->l, c) * q->l.esz;
    while (*proc < rdone) {
        size_t j = *proc / q->block_bytes, e0 = j * PCCL_QBLOCK_ELEMS;
        size_t nb = n - e0 < PCCL_QBLOCK_ELEMS ? n - e0 : PCCL_QBLOCK_ELEMS;
        size_t blen = pccl_quant_wire_bytes(nb, q->qdt);
        if (rdone - *proc < blen) break;
        uint8_t *blk = w + *proc, *dst = dst0 + e0 * q->l.esz;
        if (k + 1 < N) { /* reduce-scatter */
            if (pccl_dequant_reduce_block(blk, nb, q->qdt, dst, q->dt, q->op) != 0) return -PERR_PROTOCOL;
            if (k + 2 == N && q->op == pcclAvg) pccl_reduce_finalize_avg(dst, nb, q->dt, N);
            pccl_quant_block(dst, nb, q->dt, q->algo, q->qdt, blk);
            if (k + 2 == N) pccl_dequant_block(blk, nb, q->qdt, dst, q->dt); /* owner keeps what others get */
        } else if (pccl_dequant_block(blk, nb, q->qdt, dst, q->dt) != 0) {
            return -PERR_PROTOCOL;
        }
        *proc += blen;
    }
    return 0;
}

/* How far the predecessor's stream got: its header, the current element, its received and decoded bytes. */
typedef struct qrecv {
    uint8_t hdr[RING_HDR];
    size_t hdr_done;
    uint32_t k;     /* current receive element */
    size_t done;    /* bytes received of it */
    size_t proc;    /* bytes of it decoded (whole blocks) */
} qrecv_t;

static uint32_t q_chunk_of(uint32_t rank, uint32_t n, uint32_t k, uint32_t back) {
    return (uint32_t)(((int64_t)rank - (int64_t)(k % n) - back + 2 * (int64_t)n) % n);
}

/* One receive from the predecessor: the header, or encoded bytes of the current element, whose complete
 * blocks are handled at once (process). @return bytes received (> 0), 0 when none were ready, or -PERR_<NAME>
 * (io->err says why). */
static ssize_t qrecv_step(const qring_t *q, qrecv_t *r, uint32_t rank, uint64_t op_seq) {
    ring_io_t *io = q->io;
    ssize_t n;
    if (r->hdr_done < RING_HDR) {
        n = ring_recv(io, r->hdr + r->hdr_done, RING_HDR - r->hdr_done);
        if (n > 0 && (r->hdr_done += (size_t)n) == RING_HDR &&
            ring_check_header(io, r->hdr, RINGQ_MAGIC, q->l.n, op_seq) != 0)
            return -PERR_PROTOCOL;
    } else {
        uint32_t c = q_chunk_of(rank, q->l.n, r->k, 1);
        size_t clen = q_wire_len(&q->l, c), want = clen - r->done;
        if (want > MAX_RECV) want = MAX_RECV;
        n = ring_recv(io, q->wire + q_wire_off(&q->l, c) + r->done, want);
        if (n > 0) {
            io->rx_bytes += (uint64_t)n;
            r->done += (size_t)n;
            if (process(q, r->k, c, r->done, &r->proc) != 0) {
                snprintf(io->err, sizeof io->err, "malformed quantized block from predecessor");
                return -PERR_PROTOCOL;
            }
            if (r->proc == clen) {
                r->k++;
                r->done = r->proc = 0;
            }
        }
    }
    return ring_recv_outcome(io, n);
}

int ring_allreduce_quant(ring_io_t *io, void *vbuf, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                         pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt, uint8_t *wire, uint32_t rank,
                         uint32_t world, uint64_t op_seq) {
    const uint32_t N = world, total = 2 * (N - 1);
    qring_t q = {.io = io, .buf = vbuf, .wire = wire, .dt = dt, .qdt = qdt, .op = op, .algo = algo,
                 .block_bytes = pccl_quant_block_bytes(qdt)};
    q.l = (qlayout_t){.base = count / N, .rem = count % N, .esz = pccl_dtype_size(dt), .n = N,
                      .stripe = io->stripe, .nstripes = io->nstripes ? io->nstripes : 1, .qdt = qdt,
                      .block_bytes = q.block_bytes};
    q.l.wbase = pccl_quant_wire_bytes(q.l.base, qdt);
    q.l.wbig = pccl_quant_wire_bytes(q.l.base + 1, qdt);

    ring_tx_t tx;
    ring_tx_init(&tx, RINGQ_MAGIC, N, op_seq);
    qrecv_t r = {.hdr_done = 0};
    size_t own_done = 0;
    uint64_t last_progress = net_now_ms();
    int try_io = 1;
    io->tx_bytes = io->rx_bytes = 0;
    io->err[0] = 0;

#define SEND_CHUNK(k) q_chunk_of(rank, N, (k), 0)
#define RECV_CHUNK(k) q_chunk_of(rank, N, (k), 1)
    for (;;) {
        while (r.k < total && q_elems(&q.l, RECV_CHUNK(r.k)) == 0 && r.hdr_done == RING_HDR) r.k++;
        while (tx.k < total && q_elems(&q.l, SEND_CHUNK(tx.k)) == 0 && (tx.k == 0 || r.k > tx.k - 1)) tx.k++;
        /* Everything handed to the socket (or sealed: an encrypted link may still hold it). Only
         * then may the stream end, but nothing past its last element may be sent meanwhile. */
        int all_given = tx.hdr_done == RING_HDR && tx.k >= total;
        int send_done = all_given && ring_tx_flushed(io);
        int recv_done = r.hdr_done == RING_HDR && r.k >= total;
        if (send_done && recv_done) break;

        size_t ready = 0, slen = 0;
        if (!all_given && tx.hdr_done == RING_HDR) {
            slen = q_wire_len(&q.l, SEND_CHUNK(tx.k));
            if (tx.k == 0) {
                if (tx.off == own_done && own_done < slen) own_done = prequantize(&q, SEND_CHUNK(0), own_done);
                ready = own_done;
            } else if (r.k > tx.k - 1) {
                ready = slen;
            } else if (r.k == tx.k - 1) {
                ready = r.proc;
            }
        }
        int want_send = tx.hdr_done < RING_HDR || (!all_given && ready > tx.off) || !ring_tx_flushed(io);

        if (io->abort_flag && atomic_load(io->abort_flag)) {
            snprintf(io->err, sizeof io->err, "aborted");
            return -PERR_CANCELLED;
        }
        struct pollfd p[3] = {{.fd = io->tx_fd, .events = want_send ? POLLOUT : 0},
                              {.fd = io->rx_fd, .events = recv_done ? 0 : POLLIN},
                              {.fd = io->abort_fd, .events = POLLIN}};
        if (!try_io) {
            int ready, rc = ring_wait(io, p, last_progress, &ready);
            if (rc != 0) return rc;
            if (!ready) continue;
        } else {
            p[0].revents = want_send ? POLLOUT : 0;
            p[1].revents = recv_done ? 0 : POLLIN;
        }
        try_io = 0;

        if (want_send && (p[0].revents & (POLLOUT | POLLHUP))) {
            ssize_t w = ring_send_step(io, &tx, wire + q_wire_off(&q.l, SEND_CHUNK(tx.k)), ready, slen);
            if (w < 0) return (int)w;
            if (w > 0) {
                try_io = 1;
                last_progress = net_now_ms();
            }
        }

        if (!recv_done && (p[1].revents & (POLLIN | POLLHUP))) {
            ssize_t n = qrecv_step(&q, &r, rank, op_seq);
            if (n < 0) return (int)n;
            if (n > 0) {
                try_io = 1;
                last_progress = net_now_ms();
            }
        }
    }
#undef SEND_CHUNK
#undef RECV_CHUNK
    return 0;
}
