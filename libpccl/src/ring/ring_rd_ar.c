/*
 * ring_rd_ar.c - the all-reduce by recursive doubling (ring.h; docs/algorithms.md), plain or quantized, over one or
 * several stripes: the latency-optimal choice for the smallest payloads, log2 p exchanges of the whole vector
 * where recursive halving and doubling needs 2 log2 p of halves (Thakur, Rabenseifner & Gropp, "Optimization of
 * collective communication operations in MPICH", IJHPCA 2005, section 4.4). The schedule is rhd's
 * (ring_rhd_sched.c): the same fold, virtual ids and partners, so the same connections serve both.
 *
 * Bit-identical results: at every step both partners compute op(lower's partial, upper's partial), the member
 * with the lower virtual id giving the left operand, so both hold the same bits afterwards (by induction, every
 * member of a group of 2^(k+1) does after step k), NaN payloads and signed zeros included. Quantized, each member
 * encodes its partial once per step and replaces it with the decoded values before it combines, so both
 * partners combine the same decoded operands; the result returns to a folded member unencoded.
 *
 * A step sends this member's partial while it combines the partner's into it, so a range is combined only once
 * its bytes have left (copied into the socket or sealed): the receive takes no more than the send has passed.
 * Both partners send at once, so neither waits on the other for long (each one's sent bytes bound the other's
 * received ones).
 */
#include <stdio.h>
#include <string.h>

#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring_flow.h"
#include "ring/ring_qlayout.h"

#define RD_MAGIC 0x52440000u /* "RD" + the phase */

enum { RD_COMBINE, RD_COPY }; /* what a receive does with the partner's values */

typedef struct rd_run {
    ring_io_t *io;
    const ring_rhd_ar_t *a;
    size_t esz, off, n; /* this stripe's slice: first element, element count */
    uint8_t *own;       /* the slice in the caller's buffer */
    int quant;
    qlayout_t l;                /* quantized: the vector as one chunk, this stripe's whole blocks */
    uint8_t *wtx, *wrx;         /* quantized: the two halves of the wire buffer (sent, received) */
    size_t wlen;                /* quantized: encoded bytes of the slice */
    ring_rhd_sched_t s;
    uint64_t tx_bytes, rx_bytes;
} rd_run_t;

typedef struct rd_xfer {
    rd_run_t *r;
    int mode, lower, encode; /* lower: this member's values are the left operand; encode: both ways encoded */
    int send, recv;          /* this member sends its values, receives the partner's */
    size_t enc_done;         /* quantized: bytes of the slice encoded (and decoded back into own when combining) */
    size_t got, proc;        /* quantized: received bytes, of them decoded and combined */
    size_t sfill;            /* plain: bytes of a partial element in staging */
    const uint8_t *base;     /* element 0 of the values this member sends: src at its first exchange out of place,
                              * else the caller's buffer (the partial result) */
} rd_xfer_t;

/* This stripe's slice of the values the member sends. */
static const uint8_t *from_of(const rd_xfer_t *x) { return x->base + x->r->off * x->r->esz; }

/* Bytes of send element 0 its send has consumed (copied into the socket or sealed). */
static size_t sent_bytes(const ring_flow_t *f, size_t len) {
    return f->tx.hdr_done < RING_HDR ? 0 : f->tx.k > 0 ? len : f->tx.off;
}

static const uint8_t *x_send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const rd_xfer_t *x = f->ctx;
    (void)k;
    if (x->encode) {
        *len = x->r->wlen;
        return x->r->wtx;
    }
    *len = x->r->n * x->r->esz;
    return from_of(x);
}

/* The quantization block of the slice whose encoding starts at byte p: its first element (*e0) and its length. */
static size_t block_at(const rd_run_t *r, size_t p, size_t *e0) {
    *e0 = p / r->l.block_bytes * PCCL_QBLOCK_ELEMS;
    return r->n - *e0 < PCCL_QBLOCK_ELEMS ? r->n - *e0 : PCCL_QBLOCK_ELEMS;
}

/* Quantized sends are encoded as they go; a member that combines replaces its values with the decoded ones right
 * behind the encoding (what the partner will decode). */
static size_t x_send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    rd_xfer_t *x = f->ctx;
    const rd_run_t *r = x->r;
    const ring_ar_args_t *ar = &r->a->ar;
    (void)k;
    if (!x->encode) return len;
    if (f->tx.off >= x->enc_done && x->enc_done < len) {
        size_t p = x->enc_done, e0;
        x->enc_done = ring_q_prequantize(&r->l, 0, x->base, ar->dt, ar->algo, ar->wire, x->enc_done);
        for (size_t nb; x->recv && p < x->enc_done; p += pccl_quant_wire_bytes(nb, r->l.qdt)) {
            nb = block_at(r, p, &e0);
            pccl_dequant_block(r->wtx + p, nb, r->l.qdt, r->own + e0 * r->esz, ar->dt); /* its own encoding */
        }
    }
    return x->enc_done;
}

static size_t x_recv_len(ring_flow_t *f, uint32_t k) {
    const rd_xfer_t *x = f->ctx;
    (void)k;
    return x->encode ? x->r->wlen : x->r->n * x->r->esz;
}

/* How much may arrive now: a combine takes no byte past what its own send has consumed (quantized: encoded and
 * decoded back), and plain bytes go through staging. */
static size_t x_recv_room(const ring_flow_t *f, uint32_t k) {
    const rd_xfer_t *x = f->ctx;
    const rd_run_t *r = x->r;
    (void)k;
    if (x->mode == RD_COPY) return SIZE_MAX;
    if (x->encode) return !x->send ? SIZE_MAX : x->enc_done > x->got ? x->enc_done - x->got : 0;
    size_t free_ = r->io->staging_size - x->sfill;
    if (!x->send || from_of(x) != r->own) return free_; /* sent values that never change */
    size_t sent = sent_bytes(f, r->n * r->esz), have = f->rdone + x->sfill;
    size_t room = sent > have ? sent - have : 0;
    return room < free_ ? room : free_;
}

/* Elements [e0, e0 + cnt) of the slice: own = op(lower, upper) of this member's values (quantized and sending: own,
 * already decoded; else the slice it sends, or would) and the partner's at rx (rx may be overwritten). */
static void combine(const rd_xfer_t *x, size_t e0, uint8_t *rx, size_t cnt) {
    const ring_ar_args_t *ar = &x->r->a->ar;
    uint8_t *own = x->r->own + e0 * x->r->esz;
    const uint8_t *mine = x->encode && x->send ? own : from_of(x) + e0 * x->r->esz;
    if (mine != own) { /* out of place at the first exchange: one pass, the input is never written */
        if (x->lower) pccl_reduce_to(own, mine, rx, cnt, ar->dt, ar->op);
        else pccl_reduce_to(own, rx, mine, cnt, ar->dt, ar->op);
        return;
    }
    if (x->lower) {
        pccl_reduce_into(own, rx, cnt, ar->dt, ar->op);
        return;
    }
    pccl_reduce_into(rx, own, cnt, ar->dt, ar->op); /* the partner's values are the left operand */
    memcpy(own, rx, cnt * x->r->esz);
}

/* Quantized: the partner's encoded values, each block decoded into staging and combined once it is whole. */
static ssize_t x_recv_quant(ring_flow_t *f, rd_xfer_t *x, size_t len, size_t room) {
    const rd_run_t *r = x->r;
    size_t want = len - x->got, e0;
    if (want > room) want = room;
    ssize_t n = ring_recv(f->io, r->wrx + x->got, want);
    if (n <= 0) return n;
    x->got += (size_t)n;
    f->rdone = x->got;
    for (size_t nb, blen; x->proc < x->got; x->proc += blen) {
        nb = block_at(r, x->proc, &e0);
        blen = pccl_quant_wire_bytes(nb, r->l.qdt);
        if (x->got - x->proc < blen) break;
        if (pccl_dequant_block(r->wrx + x->proc, nb, r->l.qdt, f->io->staging, r->a->ar.dt) != 0) {
            snprintf(f->io->err, sizeof f->io->err, "malformed quantized block from a partner");
            return -PERR_PROTOCOL;
        }
        combine(x, e0, f->io->staging, nb);
    }
    return n;
}

/* Receives the partner's values: copied into place, or combined through staging as whole elements arrive. */
static ssize_t x_recv(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    rd_xfer_t *x = f->ctx;
    const rd_run_t *r = x->r;
    ring_io_t *io = f->io;
    (void)k;
    if (x->encode) return x_recv_quant(f, x, len, room);
    size_t want = len - f->rdone - x->sfill;
    if (want > room) want = room;
    if (x->mode == RD_COPY) {
        if (want > RING_MAX_IO) want = RING_MAX_IO;
        ssize_t n = ring_recv(io, r->own + f->rdone, want);
        if (n > 0) f->rdone += (size_t)n;
        return n;
    }
    ssize_t n = ring_recv(io, io->staging + x->sfill, want);
    if (n <= 0) return n;
    size_t have = x->sfill + (size_t)n, whole = have / r->esz * r->esz;
    combine(x, f->rdone / r->esz, io->staging, whole / r->esz);
    f->rdone += whole;
    x->sfill = have - whole;
    if (x->sfill) memmove(io->staging, io->staging + whole, x->sfill);
    return n;
}

/* Phase `phase` with the member at ring position peer: send this member's values (send), receive the partner's
 * (recv; mode RD_COMBINE or RD_COPY), encoded when `encode`. */
static int exchange(rd_run_t *r, uint32_t phase, uint32_t peer, int send, int recv, rd_xfer_t x) {
    ring_io_t *io = r->io;
    int rc = r->a->link(r->a->link_ctx, io, peer);
    if (rc != 0) return rc;
    x.r = r;
    x.send = send, x.recv = recv;
    ring_flow_t f = {.io = io, .magic = RD_MAGIC + phase, .world = r->s.world, .op_seq = r->a->ar.op_seq,
                     .nsend = (uint32_t)send, .nrecv = (uint32_t)recv, .ctx = &x, .send_elem = x_send_elem,
                     .send_ready = x_send_ready, .recv_len = x_recv_len, .recv = x_recv, .recv_room = x_recv_room};
    rc = ring_flow_run(&f);
    r->tx_bytes += io->tx_bytes;
    r->rx_bytes += io->rx_bytes;
    return rc;
}

/* One stripe: the fold (the even member's values to the odd one, which combines them), log2 p exchanges of the
 * whole slice with the partners of ring_rhd_partner, pcclAvg's division, the unfold (the result back, unencoded). */
static int rd_stripe(ring_io_t *io, void *arg) {
    const ring_rhd_ar_t *a = arg;
    rd_run_t r = {.io = io, .a = a, .esz = pccl_dtype_size(a->ar.dt), .quant = a->ar.algo != pcclQuantNone};
    ring_rhd_schedule(a->ar.pos, a->ar.world, &r.s);
    if (r.quant) {
        r.l = ring_qlayout(io, a->ar.count, 1, a->ar.dt, a->ar.qdt);
        r.off = q_elem_off(&r.l, 0), r.n = q_elems(&r.l, 0), r.wlen = q_wire_len(&r.l, 0);
        r.wtx = a->ar.wire + q_wire_off(&r.l, 0);
        r.wrx = r.wtx + ring_quant_wire_bytes(a->ar.count, a->ar.qdt, 1);
    } else {
        ring_slice(a->ar.count, io->stripe, io->nstripes ? io->nstripes : 1, &r.off, &r.n);
    }
    r.own = (uint8_t *)a->ar.buf + r.off * r.esz;
    io->tx_pipe = NULL;
    const ring_rhd_sched_t *s = &r.s;
    uint32_t fold = ring_rhd_fold_partner(s);
    int folded = s->vid == RING_RHD_FOLDED, rc = 0;
    /* Out of place the first exchange reads src and writes the partial result to buf; then buf holds it. */
    const uint8_t *base = a->ar.src ? a->ar.src : a->ar.buf;
    if (fold != RING_RHD_FOLDED) { /* the even (folded) member is the lower one */
        rc = exchange(&r, 0, fold, folded, !folded,
                      (rd_xfer_t){.mode = RD_COMBINE, .encode = r.quant, .lower = 0, .base = base});
        base = a->ar.buf;
    }
    for (uint32_t k = 0; rc == 0 && !folded && k < s->steps; k++) {
        uint32_t peer = ring_rhd_partner(s, k);
        ring_rhd_sched_t ps;
        ring_rhd_schedule(peer, s->world, &ps);
        rc = exchange(&r, 1 + k, peer, 1, 1,
                      (rd_xfer_t){.mode = RD_COMBINE, .encode = r.quant, .lower = s->vid < ps.vid, .base = base});
        base = a->ar.buf;
    }
    if (rc == 0 && !folded && a->ar.op == pcclAvg) pccl_reduce_finalize_avg(r.own, r.n, a->ar.dt, s->world);
    if (rc == 0 && fold != RING_RHD_FOLDED)
        rc = exchange(&r, 1 + s->steps, fold, !folded, folded, (rd_xfer_t){.mode = RD_COPY, .base = a->ar.buf});
    io->tx_bytes = r.tx_bytes;
    io->rx_bytes = r.rx_bytes;
    return rc;
}

size_t ring_rd_quant_wire_bytes(size_t count, pcclDataType_t qdt) { return 2 * ring_quant_wire_bytes(count, qdt, 1); }

int ring_allreduce_rd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_ar_t *a) {
    size_t esz = pccl_dtype_size(a->ar.dt);
    int quant = a->ar.algo != pcclQuantNone;
    ios[0].tx_bytes = ios[0].rx_bytes = 0;
    ios[0].err[0] = 0;
    size_t need = quant ? PCCL_QBLOCK_ELEMS * esz : esz; /* staging: a decoded block, or one element */
    int bad = a->ar.pos >= a->ar.world || a->ar.world < 2 || esz == 0 || nstripes < 1 ||
              (quant && (!a->ar.wire || pccl_quant_check(a->ar.dt, a->ar.algo, a->ar.qdt) != 0));
    for (uint32_t i = 0; !bad && i < nstripes; i++) bad = !ios[i].staging || ios[i].staging_size < need;
    if (bad) {
        snprintf(ios[0].err, sizeof ios[0].err, "position %u of %u, dtype %d, %u stripes, staging of %zu bytes",
                 a->ar.pos, a->ar.world, (int)a->ar.dt, nstripes, ios[0].staging_size);
        return -PERR_INVALID;
    }
    if (nstripes == 1) return rd_stripe(ios, (void *)a);
    return ring_run_stripes_shut(ios, nstripes, rd_stripe, (void *)a, a->shut, a->link_ctx, NULL);
}
