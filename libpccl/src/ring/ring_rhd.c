/*
 * ring_rhd.c - the reduce-scatter by recursive halving, the all-gathers by recursive doubling and the broadcast
 * along a binomial tree (ring.h; the schedule in ring_rhd_sched.c, the all-reduce in ring_rhd_ar.c).
 *
 * Each step is one exchange with one partner over the connection pair the caller's link gives: a ring flow
 * (ring_flow.c) of one send element and one receive element, so sending, receiving and reducing overlap within
 * the step and an abort or a silent partner ends it as it ends a ring. Every stream opens with the 16-byte
 * header whose magic names the step, so a partner on another step or operation is found at once.
 *
 * Determinism: each element's final value is reduced at exactly one member (the owner of its block after the
 * reduce-scatter, along the schedule's fixed tree: at each step the kept half is own (op) received) and then
 * copied unchanged to every other member, so all members end bit-identical.
 */
#include <stdio.h>
#include <string.h>

#include "pccl_kernels.h"
#include "ring/ring_flow.h"

#define RING_RHD_MAGIC 0x52484400u /* "RHD" + the step's index */
#define RING_RHD_AG_PHASE 0x80u    /* the all-gather's steps: their own magics */
#define RING_RHD_AG_FOLD 0xA0u     /* the all-gather's fold (an even member's block in) and unfold (all out) */
#define RING_RHD_BC_PHASE 0xC0u    /* the tree broadcast's edges, by their distance's bit */

/* One exchange: send `send` (send_len bytes), receive recv_len bytes into recv (reduced into it when reduce). */
typedef struct rhd_xfer {
    const uint8_t *send;
    size_t send_len;
    uint8_t *recv;
    size_t recv_len;
    int reduce;
    const uint8_t *own; /* with reduce: recv = own (op) received (NULL: recv itself is own) */
    pcclDataType_t dt;
    pcclRedOp_t op;
    size_t esz;
    size_t sfill; /* bytes of a partial element waiting in staging */
} rhd_xfer_t;

static const uint8_t *x_send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const rhd_xfer_t *x = f->ctx;
    (void)k;
    *len = x->send_len;
    return x->send;
}

static size_t x_send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    (void)f, (void)k;
    return len;
}

static size_t x_recv_len(ring_flow_t *f, uint32_t k) {
    (void)k;
    return ((const rhd_xfer_t *)f->ctx)->recv_len;
}

/* Receives into recv, or through staging and reduced (own (op) received) as whole elements arrive. */
static ssize_t x_recv(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    rhd_xfer_t *x = f->ctx;
    ring_io_t *io = f->io;
    (void)k;
    size_t want = len - f->rdone - x->sfill;
    if (want > room) want = room;
    if (!x->reduce) {
        if (want > RING_MAX_IO) want = RING_MAX_IO;
        ssize_t n = ring_recv(io, x->recv + f->rdone, want);
        if (n > 0) f->rdone += (size_t)n;
        return n;
    }
    if (want > io->staging_size - x->sfill) want = io->staging_size - x->sfill;
    ssize_t n = ring_recv(io, io->staging + x->sfill, want);
    if (n <= 0) return n;
    size_t have = x->sfill + (size_t)n, whole = have / x->esz * x->esz;
    if (x->own && x->own != x->recv)
        pccl_reduce_to(x->recv + f->rdone, x->own + f->rdone, io->staging, whole / x->esz, x->dt, x->op);
    else
        pccl_reduce_into(x->recv + f->rdone, io->staging, whole / x->esz, x->dt, x->op);
    f->rdone += whole;
    x->sfill = have - whole;
    if (x->sfill) memmove(io->staging, io->staging + whole, x->sfill);
    return n;
}

typedef struct rhd_run {
    ring_io_t *io;
    const uint8_t *src; /* reduce-scatter: the input, never written (but for out, when out is its block in it) */
    uint8_t *out, *work; /* reduce-scatter: the member's block, the partial sums of the steps between */
    ring_rhd_link_fn link;
    void *link_ctx;
    uint8_t *buf;
    size_t count, esz;
    pcclDataType_t dt;
    pcclRedOp_t op;
    uint64_t op_seq;
    const uint64_t *counts; /* all-gather: elements of each block (else the count split over p blocks) */
    ring_rhd_sched_t s;
    uint64_t tx_bytes, rx_bytes;
} rhd_run_t;

/* Byte offset of block b of the schedule's p blocks. */
static size_t pos_off(const rhd_run_t *r, uint32_t pos) {
    if (!r->counts) return ring_block_off(r->count, r->s.world, pos) * r->esz;
    size_t off = 0;
    for (uint32_t i = 0; i < pos; i++) off += r->counts[i];
    return off * r->esz;
}
/* Byte offset of virtual block b (b = p: the end): the blocks of the positions of virtual id b (two for a folded
 * pair), which are adjacent; in a power-of-two world block b is position b's. */
static size_t blk(const rhd_run_t *r, uint32_t b) { return pos_off(r, b < r->s.r ? 2 * b : b + r->s.r); }

/* Step `phase` of the operation with the member at ring position peer. */
static int exchange(rhd_run_t *r, uint32_t phase, uint32_t peer, rhd_xfer_t *x) {
    ring_io_t *io = r->io;
    int rc = r->link(r->link_ctx, io, peer);
    if (rc != 0) return rc;
    x->dt = r->dt, x->op = r->op, x->esz = r->esz, x->sfill = 0;
    ring_flow_t f = {.io = io, .magic = RING_RHD_MAGIC + phase, .world = r->s.world, .op_seq = r->op_seq,
                     .nsend = 1, .nrecv = 1, .ctx = x, .send_elem = x_send_elem, .send_ready = x_send_ready,
                     .recv_len = x_recv_len, .recv = x_recv};
    rc = ring_flow_run(&f);
    r->tx_bytes += io->tx_bytes;
    r->rx_bytes += io->rx_bytes;
    return rc;
}

/* The reduce-scatter of a power-of-two world: the all-reduce's halving steps, own operands from src at the first
 * step and from work after it, the last step's sum into out (block pos). */
static int rs_halving(rhd_run_t *r) {
    const ring_rhd_sched_t *s = &r->s;
    uint32_t keep0, give, len;
    ring_rhd_blocks(s, 0, &keep0, &give, &len);
    size_t base = blk(r, keep0);
    for (uint32_t k = 0; k < s->steps; k++) {
        uint32_t keep;
        ring_rhd_blocks(s, k, &keep, &give, &len);
        const uint8_t *from = k == 0 ? r->src : r->work - base;
        uint8_t *to = k + 1 == s->steps ? r->out - blk(r, keep) : r->work - base;
        rhd_xfer_t x = {.send = from + blk(r, give), .send_len = blk(r, give + len) - blk(r, give),
                        .recv = to + blk(r, keep), .recv_len = blk(r, keep + len) - blk(r, keep), .reduce = 1,
                        .own = from + blk(r, keep)};
        int rc = exchange(r, 1 + k, ring_rhd_partner(s, k), &x);
        if (rc != 0) return rc;
    }
    if (r->op == pcclAvg) pccl_reduce_finalize_avg(r->out, (blk(r, s->vid + 1) - blk(r, s->vid)) / r->esz, r->dt, s->world);
    return 0;
}

size_t ring_reduce_scatter_rhd_work_bytes(size_t count, pcclDataType_t dt, uint32_t pos, uint32_t world) {
    ring_rhd_sched_t s;
    uint32_t keep, give, len;
    ring_rhd_schedule(pos, world, &s);
    if (s.steps < 2 || s.r) return 0;
    ring_rhd_blocks(&s, 0, &keep, &give, &len);
    return (ring_block_off(count, s.p, keep + len) - ring_block_off(count, s.p, keep)) * pccl_dtype_size(dt);
}

int ring_reduce_scatter_rhd(ring_io_t *io, ring_rhd_link_fn link, void *link_ctx, const void *src, void *out,
                            size_t count, pcclDataType_t dt, pcclRedOp_t op, uint8_t *work, size_t work_bytes,
                            uint32_t pos, uint32_t world, uint64_t op_seq) {
    rhd_run_t r = {.io = io, .link = link, .link_ctx = link_ctx, .src = src, .out = out, .work = work,
                   .count = count, .esz = pccl_dtype_size(dt), .dt = dt, .op = op, .op_seq = op_seq};
    io->tx_bytes = io->rx_bytes = 0;
    io->err[0] = 0;
    ring_rhd_schedule(pos < world ? pos : 0, world, &r.s);
    if (pos >= world || world < 2 || r.s.r || r.esz == 0 || !io->staging || io->staging_size < r.esz ||
        work_bytes < ring_reduce_scatter_rhd_work_bytes(count, dt, pos, world)) {
        snprintf(io->err, sizeof io->err, "position %u of %u (a power of two), dtype %d, staging of %zu bytes, "
                 "work of %zu", pos, world, (int)dt, io->staging_size, work_bytes);
        return -PERR_INVALID;
    }
    io->tx_pipe = NULL;
    int rc = rs_halving(&r);
    io->tx_bytes = r.tx_bytes;
    io->rx_bytes = r.rx_bytes;
    return rc;
}

/* The all-gather of a power-of-two world: the all-reduce's doubling steps over blocks of counts[b] elements. */
static int ag_doubling(rhd_run_t *r) {
    const ring_rhd_sched_t *s = &r->s;
    for (uint32_t j = 0; j < s->steps; j++) {
        uint32_t k = s->steps - 1 - j, keep, give, len;
        ring_rhd_blocks(s, k, &keep, &give, &len);
        rhd_xfer_t x = {.send = r->buf + blk(r, keep), .send_len = blk(r, keep + len) - blk(r, keep),
                        .recv = r->buf + blk(r, give), .recv_len = blk(r, give + len) - blk(r, give)};
        int rc = exchange(r, RING_RHD_AG_PHASE + j, ring_rhd_partner(s, k), &x);
        if (rc != 0) return rc;
    }
    return 0;
}

int ring_allgather_rhd(ring_io_t *io, ring_rhd_link_fn link, void *link_ctx, const void *src, void *buf,
                       const uint64_t *counts, size_t esz, uint32_t pos, uint32_t world, uint64_t op_seq) {
    rhd_run_t r = {.io = io, .link = link, .link_ctx = link_ctx, .buf = buf, .esz = esz, .op_seq = op_seq,
                   .counts = counts};
    io->tx_bytes = io->rx_bytes = 0;
    io->err[0] = 0;
    ring_rhd_schedule(pos < world ? pos : 0, world, &r.s);
    if (pos >= world || world < 2 || esz == 0 || !counts) {
        snprintf(io->err, sizeof io->err, "position %u of %u, element of %zu bytes", pos, world, esz);
        return -PERR_INVALID;
    }
    io->tx_pipe = NULL;
    uint8_t *place = r.buf + pos_off(&r, pos);
    if (!src) src = buf;
    if (src != place) memmove(place, src, counts[pos] * esz);
    uint32_t fold = ring_rhd_fold_partner(&r.s);
    int folded = r.s.vid == RING_RHD_FOLDED, rc = 0;
    if (fold != RING_RHD_FOLDED) { /* the even member's block to the odd one, which doubles for both */
        uint32_t even = folded ? pos : fold;
        rhd_xfer_t x = {.send = r.buf + pos_off(&r, even), .send_len = folded ? counts[even] * esz : 0,
                        .recv = r.buf + pos_off(&r, even), .recv_len = folded ? 0 : counts[even] * esz};
        rc = exchange(&r, RING_RHD_AG_FOLD, fold, &x);
    }
    if (rc == 0 && !folded) rc = ag_doubling(&r);
    if (rc == 0 && fold != RING_RHD_FOLDED) { /* every block back to the even member */
        size_t all = pos_off(&r, world);
        rhd_xfer_t x = {.send = r.buf, .send_len = folded ? 0 : all, .recv = r.buf, .recv_len = folded ? all : 0};
        rc = exchange(&r, RING_RHD_AG_FOLD + 1, fold, &x);
    }
    io->tx_bytes = r.tx_bytes;
    io->rx_bytes = r.rx_bytes;
    return rc;
}

/* The bit index of power of two m. */
static uint32_t log2_of(uint32_t m) { return (uint32_t)__builtin_ctz(m); }

uint32_t ring_bcast_tree_partners(uint32_t root, uint32_t pos, uint32_t world, uint32_t *out) {
    uint32_t rel = (pos + world - root) % world, n = 0, m = 1;
    if (rel > 0) {
        uint32_t hb = 1u << (31 - __builtin_clz(rel));
        out[n++] = (root + rel - hb) % world;
        m = hb * 2;
    }
    for (; rel + m < world && m; m *= 2) out[n++] = (root + rel + m) % world;
    return n;
}

int ring_broadcast_tree(ring_io_t *io, ring_rhd_link_fn link, void *link_ctx, const void *src, void *buf,
                        size_t bytes, uint32_t root, uint32_t pos, uint32_t world, uint64_t op_seq) {
    rhd_run_t r = {.io = io, .link = link, .link_ctx = link_ctx, .buf = buf, .esz = 1, .op_seq = op_seq};
    io->tx_bytes = io->rx_bytes = 0;
    io->err[0] = 0;
    if (pos >= world || root >= world || world < 2) {
        snprintf(io->err, sizeof io->err, "position %u, root %u of %u", pos, root, world);
        return -PERR_INVALID;
    }
    r.s.world = world;
    io->tx_pipe = NULL;
    uint32_t partners[33], n = ring_bcast_tree_partners(root, pos, world, partners), rel = (pos + world - root) % world;
    if (rel == 0 && src && src != buf) memcpy(buf, src, bytes);
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        uint32_t d = (partners[i] + world - pos) % world; /* a child's distance, or world minus the parent's */
        int from_parent = rel > 0 && i == 0;
        uint32_t m = from_parent ? world - d : d;
        rhd_xfer_t x = {.send = r.buf, .send_len = from_parent ? 0 : bytes, .recv = r.buf,
                        .recv_len = from_parent ? bytes : 0};
        rc = exchange(&r, RING_RHD_BC_PHASE + log2_of(m), partners[i], &x);
    }
    io->tx_bytes = r.tx_bytes;
    io->rx_bytes = r.rx_bytes;
    return rc;
}
