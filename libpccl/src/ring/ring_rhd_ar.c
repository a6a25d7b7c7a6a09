/*
 * ring_rhd_ar.c - the all-reduce by recursive halving and doubling (ring.h; its schedule in ring_rhd_sched.c),
 * plain or quantized, over one or several stripes.
 *
 * The vector is split into the schedule's p blocks; a stripe moves its slice of every block (the plain one a
 * contiguous element slice, the quantized one a run of whole quantization blocks: ring_qlayout.h with p chunks),
 * so every element is reduced by the same members in the same order whatever the stripe count. Each step is a
 * ring flow (ring_flow.c) with one partner whose elements are the blocks of the step's range.
 *
 * Quantized: a sender encodes its partial sums of the blocks it gives as it sends them, the receiver decodes
 * and reduces them into its own (in the source type). After the last halving step the owner of block v divides
 * (avg), encodes it once into the wire buffer and replaces its own values with the decoded ones; the all-gather
 * and the unfold forward those encoded bytes unchanged and every member decodes them. So every member decodes
 * the owner's bytes with the same code and ends bit-identical, as in the quantized ring.
 */
#include <stdio.h>
#include <string.h>

#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring_flow.h"
#include "ring/ring_qlayout.h"

#define RHD_AR_MAGIC 0x52484100u /* "RHA" + the phase */
#define RHD_AR_MAX_RECV (256u << 10) /* decoded before the loop sends again */

enum { SEND_BUF, SEND_ENCODE, SEND_WIRE };
enum { RECV_COPY, RECV_REDUCE, RECV_DECODE, RECV_DECODE_REDUCE };

typedef struct ar_run {
    ring_io_t *io;
    const ring_rhd_ar_t *a;
    uint8_t *buf;
    size_t esz;
    int quant;
    qlayout_t l; /* quantized: the p blocks as chunks, this stripe's whole-block slices */
    ring_rhd_sched_t s;
    uint64_t tx_bytes, rx_bytes;
} ar_run_t;

/* This stripe's slice of block b: its first element and its element count. */
static size_t b_off(const ar_run_t *r, uint32_t b) {
    if (r->quant) return q_elem_off(&r->l, b);
    size_t off, len, n = ring_block_len(r->a->ar.count, r->s.p, b);
    ring_slice(n, r->io->stripe, r->io->nstripes ? r->io->nstripes : 1, &off, &len);
    return ring_block_off(r->a->ar.count, r->s.p, b) + off;
}
static size_t b_elems(const ar_run_t *r, uint32_t b) {
    if (r->quant) return q_elems(&r->l, b);
    size_t off, len;
    ring_slice(ring_block_len(r->a->ar.count, r->s.p, b), r->io->stripe, r->io->nstripes ? r->io->nstripes : 1, &off,
               &len);
    return len;
}

/* One exchange: blocks [sb, sb + ns) out, [rb, rb + nr) in; merged (plain, one stripe: the blocks of a range are
 * adjacent), each range is one element, else one element per block. */
typedef struct ar_xfer {
    ar_run_t *r;
    uint32_t sb, ns, rb, nr;
    int send_mode, recv_mode, merged;
    uint32_t enc_k, rcv_k;
    size_t enc_done, got, sfill;
} ar_xfer_t;

/* Bytes of element k of a range of n blocks from b. */
static size_t elem_bytes(const ar_xfer_t *x, uint32_t b, uint32_t n, uint32_t k) {
    const ar_run_t *r = x->r;
    if (!x->merged) return b_elems(r, b + k) * r->esz;
    return (b_off(r, b + n - 1) + b_elems(r, b + n - 1) - b_off(r, b)) * r->esz;
}

static const uint8_t *x_send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const ar_xfer_t *x = f->ctx;
    const ar_run_t *r = x->r;
    uint32_t b = x->sb + k;
    if (!r->quant) {
        *len = elem_bytes(x, x->sb, x->ns, k);
        return r->buf + b_off(r, b) * r->esz;
    }
    *len = q_wire_len(&r->l, b);
    return r->a->ar.wire + q_wire_off(&r->l, b);
}

static size_t x_send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    ar_xfer_t *x = f->ctx;
    const ar_run_t *r = x->r;
    if (x->send_mode != SEND_ENCODE) return len;
    if (x->enc_k != k) x->enc_k = k, x->enc_done = 0;
    if (f->tx.off >= x->enc_done && x->enc_done < len)
        x->enc_done = ring_q_prequantize(&r->l, x->sb + k, r->buf, r->a->ar.dt, r->a->ar.algo, r->a->ar.wire, x->enc_done);
    return x->enc_done;
}

static size_t x_recv_len(ring_flow_t *f, uint32_t k) {
    const ar_xfer_t *x = f->ctx;
    return x->r->quant ? q_wire_len(&x->r->l, x->rb + k) : elem_bytes(x, x->rb, x->nr, k);
}

/* Decodes (and reduces) the whole quantization blocks of block b's received bytes past *proc. */
static int decode(const ar_run_t *r, uint32_t b, int reduce, size_t got, size_t *proc) {
    const size_t n = q_elems(&r->l, b);
    const uint8_t *w = r->a->ar.wire + q_wire_off(&r->l, b);
    uint8_t *dst0 = r->buf + q_elem_off(&r->l, b) * r->esz;
    while (*proc < got) {
        size_t e0 = *proc / r->l.block_bytes * PCCL_QBLOCK_ELEMS;
        size_t nb = n - e0 < PCCL_QBLOCK_ELEMS ? n - e0 : PCCL_QBLOCK_ELEMS, blen = pccl_quant_wire_bytes(nb, r->l.qdt);
        if (got - *proc < blen) break;
        int rc = reduce ? pccl_dequant_reduce_block(w + *proc, nb, r->l.qdt, dst0 + e0 * r->esz, r->a->ar.dt, r->a->ar.op)
                        : pccl_dequant_block(w + *proc, nb, r->l.qdt, dst0 + e0 * r->esz, r->a->ar.dt);
        if (rc != 0) {
            snprintf(r->io->err, sizeof r->io->err, "malformed quantized block from a partner");
            return -PERR_PROTOCOL;
        }
        *proc += blen;
    }
    return 0;
}

static ssize_t x_recv_quant(ring_flow_t *f, ar_xfer_t *x, uint32_t k, size_t len, size_t room) {
    const ar_run_t *r = x->r;
    if (x->rcv_k != k) x->rcv_k = k, x->got = 0;
    size_t want = len - x->got;
    if (want > room) want = room;
    if (want > RHD_AR_MAX_RECV) want = RHD_AR_MAX_RECV;
    ssize_t n = ring_recv(f->io, r->a->ar.wire + q_wire_off(&r->l, x->rb + k) + x->got, want);
    if (n <= 0) return n;
    x->got += (size_t)n;
    if (decode(r, x->rb + k, x->recv_mode == RECV_DECODE_REDUCE, x->got, &f->rdone) != 0) return -PERR_PROTOCOL;
    return n;
}

/* Receives block rb + k: copied, reduced through staging as whole elements arrive, or decoded (and reduced). */
static ssize_t x_recv(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    ar_xfer_t *x = f->ctx;
    const ar_run_t *r = x->r;
    ring_io_t *io = f->io;
    if (r->quant) return x_recv_quant(f, x, k, len, room);
    uint8_t *dst = r->buf + b_off(r, x->rb + k) * r->esz;
    size_t want = len - f->rdone - x->sfill;
    if (want > room) want = room;
    if (x->recv_mode == RECV_COPY) {
        if (want > RING_MAX_IO) want = RING_MAX_IO;
        ssize_t n = ring_recv(io, dst + f->rdone, want);
        if (n > 0) f->rdone += (size_t)n;
        return n;
    }
    if (want > io->staging_size - x->sfill) want = io->staging_size - x->sfill;
    ssize_t n = ring_recv(io, io->staging + x->sfill, want);
    if (n <= 0) return n;
    size_t have = x->sfill + (size_t)n, whole = have / r->esz * r->esz;
    pccl_reduce_into(dst + f->rdone, io->staging, whole / r->esz, r->a->ar.dt, r->a->ar.op);
    f->rdone += whole;
    x->sfill = have - whole;
    if (x->sfill) memmove(io->staging, io->staging + whole, x->sfill);
    return n;
}

/* Phase `phase` with the member at ring position peer: blocks [sb, sb + ns) out, [rb, rb + nr) in. */
static int exchange(ar_run_t *r, uint32_t phase, uint32_t peer, ar_xfer_t x) {
    ring_io_t *io = r->io;
    const ring_rhd_ar_t *a = r->a;
    int rc = a->link(a->link_ctx, io, peer);
    if (rc != 0) return rc;
    x.r = r;
    x.enc_k = x.rcv_k = UINT32_MAX;
    if (!r->quant) x.send_mode = SEND_BUF, x.recv_mode = x.recv_mode == RECV_DECODE ? RECV_COPY : RECV_REDUCE;
    x.merged = !r->quant && io->nstripes <= 1;
    ring_flow_t f = {.io = io, .magic = RHD_AR_MAGIC + phase, .world = r->s.world, .op_seq = a->ar.op_seq,
                     .nsend = x.merged ? x.ns > 0 : x.ns, .nrecv = x.merged ? x.nr > 0 : x.nr, .ctx = &x, .send_elem = x_send_elem, .send_ready = x_send_ready,
                     .recv_len = x_recv_len, .recv = x_recv};
    rc = ring_flow_run(&f);
    r->tx_bytes += io->tx_bytes;
    r->rx_bytes += io->rx_bytes;
    return rc;
}

/* The owner of block v after the halving: avg divided; quantized, encoded once and its own values replaced by
 * the decoded ones (what every other member will decode). */
static int own_block(ar_run_t *r, uint32_t v) {
    const ring_rhd_ar_t *a = r->a;
    size_t n = b_elems(r, v);
    if (a->ar.op == pcclAvg) pccl_reduce_finalize_avg(r->buf + b_off(r, v) * r->esz, n, a->ar.dt, r->s.world);
    if (!r->quant) return 0;
    size_t len = q_wire_len(&r->l, v), done = 0, proc = 0;
    while (done < len) done = ring_q_prequantize(&r->l, v, r->buf, a->ar.dt, a->ar.algo, a->ar.wire, done);
    return decode(r, v, 0, len, &proc);
}

/* Reduce-scatter by recursive halving (phases 1..steps), the owner's block, all-gather by recursive doubling. */
static int halving_doubling(ar_run_t *r) {
    const ring_rhd_sched_t *s = &r->s;
    uint32_t keep, give, len;
    for (uint32_t k = 0; k < s->steps; k++) {
        ring_rhd_blocks(s, k, &keep, &give, &len);
        ar_xfer_t x = {.sb = give, .ns = len, .rb = keep, .nr = len, .send_mode = SEND_ENCODE,
                       .recv_mode = RECV_DECODE_REDUCE};
        int rc = exchange(r, 1 + k, ring_rhd_partner(s, k), x);
        if (rc != 0) return rc;
    }
    int rc = own_block(r, s->vid);
    for (uint32_t j = 0; rc == 0 && j < s->steps; j++) {
        uint32_t k = s->steps - 1 - j;
        ring_rhd_blocks(s, k, &keep, &give, &len);
        ar_xfer_t x = {.sb = keep, .ns = len, .rb = give, .nr = len, .send_mode = SEND_WIRE, .recv_mode = RECV_DECODE};
        rc = exchange(r, 1 + s->steps + j, ring_rhd_partner(s, k), x);
    }
    return rc;
}

/* One stripe: the fold (the even member's whole input to the odd one), halving and doubling, the unfold (the
 * result, as the owners encoded it, back to the even member). */
static int ar_stripe(ring_io_t *io, void *arg) {
    const ring_rhd_ar_t *a = arg;
    ar_run_t r = {.io = io, .a = a, .buf = a->ar.buf, .esz = pccl_dtype_size(a->ar.dt), .quant = a->ar.algo != pcclQuantNone};
    ring_rhd_schedule(a->ar.pos, a->ar.world, &r.s);
    if (r.quant) r.l = ring_qlayout(io, a->ar.count, r.s.p, a->ar.dt, a->ar.qdt);
    io->tx_pipe = NULL;
    const ring_rhd_sched_t *s = &r.s;
    uint32_t fold = ring_rhd_fold_partner(s), p = s->p;
    int folded = s->vid == RING_RHD_FOLDED, rc = 0;
    if (fold != RING_RHD_FOLDED) {
        ar_xfer_t x = {.ns = folded ? p : 0, .nr = folded ? 0 : p, .send_mode = SEND_ENCODE,
                       .recv_mode = RECV_DECODE_REDUCE};
        rc = exchange(&r, 0, fold, x);
    }
    if (rc == 0 && !folded) rc = halving_doubling(&r);
    if (rc == 0 && fold != RING_RHD_FOLDED) {
        ar_xfer_t x = {.ns = folded ? 0 : p, .nr = folded ? p : 0, .send_mode = SEND_WIRE, .recv_mode = RECV_DECODE};
        rc = exchange(&r, 1 + 2 * s->steps, fold, x);
    }
    io->tx_bytes = r.tx_bytes;
    io->rx_bytes = r.rx_bytes;
    return rc;
}

size_t ring_rhd_quant_wire_bytes(size_t count, pcclDataType_t qdt, uint32_t world) {
    ring_rhd_sched_t s;
    ring_rhd_schedule(0, world ? world : 1, &s);
    return ring_quant_wire_bytes(count, qdt, s.p);
}

int ring_allreduce_rhd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_ar_t *a) {
    size_t esz = pccl_dtype_size(a->ar.dt);
    int quant = a->ar.algo != pcclQuantNone;
    ios[0].tx_bytes = ios[0].rx_bytes = 0;
    ios[0].err[0] = 0;
    int bad = a->ar.pos >= a->ar.world || a->ar.world < 2 || esz == 0 || nstripes < 1 ||
              (quant && (!a->ar.wire || pccl_quant_check(a->ar.dt, a->ar.algo, a->ar.qdt) != 0));
    for (uint32_t i = 0; !bad && i < nstripes; i++)
        bad = !quant && (!ios[i].staging || ios[i].staging_size < esz);
    if (bad) {
        snprintf(ios[0].err, sizeof ios[0].err, "position %u of %u, dtype %d, %u stripes, staging of %zu bytes",
                 a->ar.pos, a->ar.world, (int)a->ar.dt, nstripes, ios[0].staging_size);
        return -PERR_INVALID;
    }
    if (a->ar.src && a->ar.src != a->ar.buf) memcpy(a->ar.buf, a->ar.src, a->ar.count * esz);
    if (nstripes == 1) return ar_stripe(ios, (void *)a);
    return ring_run_stripes_shut(ios, nstripes, ar_stripe, (void *)a, a->shut, a->link_ctx, NULL);
}
