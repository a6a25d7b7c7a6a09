/*
 * ring_rs_quant.c - the quantized ring reduce-scatter (ring.h; the ring is ring_rs.c's).
 *
 * As the quantized all-reduce's reduce-scatter (ring_quant.c): blocks travel as pccl_quant.h blocks laid out
 * in the wire buffer as the chunks are (ring_qlayout.h, chunk r = rank r's block). Step 0 encodes this
 * member's input of the first block it sends; at every later hop a received block is decoded and reduced
 * in dt into a copy of the own input (own (op) decoded), re-encoded in place and forwarded as whole blocks
 * are ready. The last hop reduces into out, which keeps full precision: the owner does not encode its
 * block. Stripes move whole blocks, so every stripe count encodes the same blocks and gives the same bits.
 * A region of the wire buffer is written once per operation (each block crosses a member at most once), so
 * what was forwarded is never rewritten.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring_qlayout.h"
#include "ring/ring_rs.h"

#define RING_RSQ_MAGIC 0x52525351u /* "RRSQ" */
/* Received bytes are decoded and re-encoded before the loop sends again: a bounded read keeps that short. */
#define MAX_RECV (256u << 10)

typedef struct rsq_stripe {
    const ring_rs_t *g;
    qlayout_t l;
    uint8_t *tmp;    /* one block of dt: own input (op) decoded, before it is encoded again */
    size_t own_done; /* bytes of the first send element encoded so far */
    uint32_t rk;     /* the receive element `got` counts */
    size_t got;      /* bytes of it received (whole blocks of them are processed: f->rdone) */
} rsq_stripe_t;

static const uint8_t *send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const rsq_stripe_t *x = f->ctx;
    uint32_t r = ring_rs_rank(x->g, k + 1);
    *len = q_wire_len(&x->l, r);
    return x->g->wire + q_wire_off(&x->l, r);
}

static size_t send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    rsq_stripe_t *x = f->ctx;
    const ring_rs_t *g = x->g;
    if (k > 0) return ring_flow_forward(f, k, len);
    if (f->tx.off == x->own_done && x->own_done < len)
        x->own_done = ring_q_prequantize(&x->l, ring_rs_rank(g, 1), g->src, g->dt, g->algo, g->wire, x->own_done);
    return x->own_done;
}

static size_t recv_len(ring_flow_t *f, uint32_t k) {
    const rsq_stripe_t *x = f->ctx;
    return q_wire_len(&x->l, ring_rs_rank(x->g, k + 2));
}

/* Decodes and reduces every complete block of receive element k (rank r's block) past f->rdone. */
static int process(ring_flow_t *f, rsq_stripe_t *x, uint32_t k, uint32_t r) {
    const ring_rs_t *g = x->g;
    const size_t n = q_elems(&x->l, r), e_at = q_elem_off(&x->l, r), esz = g->esz;
    uint8_t *w = g->wire + q_wire_off(&x->l, r);
    const int last = k + 2 == g->world;
    while (f->rdone < x->got) {
        size_t e0 = f->rdone / x->l.block_bytes * PCCL_QBLOCK_ELEMS;
        size_t nb = n - e0 < PCCL_QBLOCK_ELEMS ? n - e0 : PCCL_QBLOCK_ELEMS, blen = pccl_quant_wire_bytes(nb, g->qdt);
        if (x->got - f->rdone < blen) break;
        uint8_t *blk = w + f->rdone;
        const uint8_t *own = g->src + (e_at + e0) * esz;
        uint8_t *dst = last ? g->out + (e_at + e0 - ring_rs_block_off(g, r)) * esz : x->tmp;
        if (dst != own) memcpy(dst, own, nb * esz);
        if (pccl_dequant_reduce_block(blk, nb, g->qdt, dst, g->dt, g->op) != 0) {
            snprintf(f->io->err, sizeof f->io->err, "malformed quantized block from predecessor");
            return -PERR_PROTOCOL;
        }
        if (!last) pccl_quant_block(dst, nb, g->dt, g->algo, g->qdt, blk);
        f->rdone += blen;
    }
    return 0;
}

static ssize_t recv_blocks(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    rsq_stripe_t *x = f->ctx;
    if (x->rk != k) x->rk = k, x->got = 0;
    uint32_t r = ring_rs_rank(x->g, k + 2);
    size_t want = len - x->got;
    if (want > MAX_RECV) want = MAX_RECV;
    if (want > room) want = room;
    ssize_t n = ring_recv(f->io, x->g->wire + q_wire_off(&x->l, r) + x->got, want);
    if (n > 0) {
        x->got += (size_t)n;
        if (process(f, x, k, r) != 0) return -PERR_PROTOCOL;
    }
    return n;
}

int ring_rs_quant_stripe(ring_io_t *io, void *arg) {
    const ring_rs_t *g = arg;
    rsq_stripe_t x = {.g = g, .l = ring_qlayout(io, g->count, g->world, g->dt, g->qdt)};
    const size_t tmp_bytes = (size_t)PCCL_QBLOCK_ELEMS * g->esz;
    uint8_t *own_tmp = NULL;
    if (io->staging && io->staging_size >= tmp_bytes) {
        x.tmp = io->staging;
    } else if (!(x.tmp = own_tmp = malloc(tmp_bytes))) {
        snprintf(io->err, sizeof io->err, "out of memory");
        return -PERR_NOMEM;
    }
    ring_flow_t f = {.io = io, .magic = RING_RSQ_MAGIC, .world = g->world, .op_seq = g->op_seq,
                     .nsend = g->world - 1, .nrecv = g->world - 1, .splice_below = 0, .ctx = &x,
                     .send_elem = send_elem, .send_ready = send_ready, .recv_len = recv_len, .recv = recv_blocks};
    int rc = ring_flow_run(&f);
    uint32_t me = ring_rank_at(g->rank_of, g->pos);
    if (rc == 0 && g->op == pcclAvg)
        pccl_reduce_finalize_avg(g->out + (q_elem_off(&x.l, me) - ring_rs_block_off(g, me)) * g->esz,
                                 q_elems(&x.l, me), g->dt, g->world);
    free(own_tmp);
    return rc;
}
