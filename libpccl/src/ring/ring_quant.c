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
#include "ring/ring_flow.h"
#include "ring/ring_qlayout.h"

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

size_t ring_q_prequantize(const qlayout_t *l, uint32_t c, const uint8_t *elems, pcclDataType_t dt,
                          pcclQuantizationAlgorithm_t algo, uint8_t *wire, size_t done) {
    const size_t n = q_elems(l, c), len = q_wire_len(l, c);
    uint8_t *w = wire + q_wire_off(l, c);
    const uint8_t *src = elems + q_elem_off(l, c) * l->esz;
    for (int b = 0; b < PREQUANT_BLOCKS && done < len; b++) {
        size_t j = done / l->block_bytes, e0 = j * PCCL_QBLOCK_ELEMS;
        size_t nb = n - e0 < PCCL_QBLOCK_ELEMS ? n - e0 : PCCL_QBLOCK_ELEMS;
        pccl_quant_block(src + e0 * l->esz, nb, dt, algo, l->qdt, w + done);
        done += pccl_quant_wire_bytes(nb, l->qdt);
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
    if (r->hdr_done < RING_HDR) return ring_recv_header(io, r->hdr, &r->hdr_done, RINGQ_MAGIC, q->l.n, op_seq);
    uint32_t c = q_chunk_of(rank, q->l.n, r->k, 1);
    size_t clen = q_wire_len(&q->l, c), want = clen - r->done;
    if (want > MAX_RECV) want = MAX_RECV;
    ssize_t n = ring_recv(io, q->wire + q_wire_off(&q->l, c) + r->done, want);
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
    return ring_recv_outcome(io, n);
}

int ring_allreduce_quant(ring_io_t *io, void *vbuf, size_t count, pcclDataType_t dt, pcclRedOp_t op,
                         pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt, uint8_t *wire, uint32_t rank,
                         uint32_t world, uint64_t op_seq) {
    const uint32_t N = world, total = 2 * (N - 1);
    qring_t q = {.io = io, .buf = vbuf, .wire = wire, .dt = dt, .qdt = qdt, .op = op, .algo = algo,
                 .block_bytes = pccl_quant_block_bytes(qdt)};
    q.l = ring_qlayout(io, count, N, dt, qdt);

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
                if (tx.off == own_done && own_done < slen) own_done = ring_q_prequantize(&q.l, SEND_CHUNK(0), q.buf, dt, algo, wire, own_done);
                ready = own_done;
            } else if (r.k > tx.k - 1) {
                ready = slen;
            } else if (r.k == tx.k - 1) {
                ready = r.proc;
            }
        }
        int want_send = tx.hdr_done < RING_HDR || (!all_given && ready > tx.off) || !ring_tx_flushed(io);

        int can_send, can_recv, rc = ring_round(io, want_send, !recv_done, &try_io, last_progress, &can_send,
                                                &can_recv);
        if (rc != 0) return rc;
        if (can_send) {
            ssize_t w = ring_send_step(io, &tx, wire + q_wire_off(&q.l, SEND_CHUNK(tx.k)), ready, slen);
            if (w < 0) return (int)w;
            if (w > 0) {
                try_io = 1;
                last_progress = net_now_ms();
            }
        }

        if (can_recv) {
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
