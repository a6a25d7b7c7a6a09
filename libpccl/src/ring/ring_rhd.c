/*
 * ring_rhd.c - the reduce-scatter by recursive halving, the all-gathers by recursive doubling and the broadcast
 * along a binomial tree (ring.h; the schedule in ring_rhd_sched.c, the all-reduce in ring_rhd_ar.c), each over
 * one or several stripes.
 *
 * Each step is one exchange with one partner over the connection pair the caller's link gives: a ring flow
 * (ring_flow.c) whose elements are the blocks of the step's range (one element for the whole range when there is
 * one stripe: its blocks are adjacent), so sending, receiving and reducing overlap within the step and an abort
 * or a silent partner ends it as it ends a ring. Every stream opens with the 16-byte header whose magic names the
 * step, so a partner on another step or operation is found at once. Stripe s moves slice s of every block
 * (ring_slice), so every element takes the same path whatever the stripe count.
 *
 * Determinism: each element's final value is reduced at exactly one member (the owner of its block after the
 * reduce-scatter, along the schedule's fixed tree: the fold is own (op) received, and at each step the kept half
 * is own (op) received) and then copied unchanged to every other member, so all members end bit-identical.
 */
#include <stdio.h>
#include <string.h>

#include "pccl_kernels.h"
#include "ring/ring_flow.h"

#define RING_RHD_MAGIC 0x52484400u /* "RHD" + the step's index */
#define RING_RHD_RS_UNFOLD 0x40u   /* the reduce-scatter's unfold (its fold is step 0) */
#define RING_RHD_AG_PHASE 0x80u    /* the all-gather's steps: their own magics */
#define RING_RHD_AG_FOLD 0xA0u     /* the all-gather's fold (an even member's block in) and unfold (all out) */
#define RING_RHD_BC_PHASE 0xC0u    /* the tree broadcast's edges, by their distance's bit */

typedef struct rhd_run rhd_run_t;
struct rhd_run {
    ring_io_t *io; /* this stripe's (NULL in the template every stripe copies) */
    const ring_rhd_net_t *net;
    const uint8_t *src; /* reduce-scatter: the input, never written (but for out, when out is its block in it) */
    uint8_t *out, *work; /* reduce-scatter: the member's block, the partial sums of the steps between */
    uint8_t *buf;
    size_t count, esz;
    pcclDataType_t dt;
    pcclRedOp_t op;
    const uint64_t *counts; /* all-gather: elements of each block (else the count split over world blocks) */
    uint32_t root;
    int (*body)(rhd_run_t *r);
    ring_rhd_sched_t s;
    uint64_t tx_bytes, rx_bytes;
};

/* Byte offset of position pos's block (pos = world: the end). */
static size_t pos_off(const rhd_run_t *r, uint32_t pos) {
    if (!r->counts) return ring_block_off(r->count, r->s.world, pos) * r->esz;
    size_t off = 0;
    for (uint32_t i = 0; i < pos; i++) off += r->counts[i];
    return off * r->esz;
}
/* Byte offset of virtual block b (b = p: the end): the blocks of the positions of virtual id b (two for a folded
 * pair), which are adjacent; in a power-of-two world block b is position b's. */
static size_t blk(const rhd_run_t *r, uint32_t b) { return pos_off(r, b < r->s.r ? 2 * b : b + r->s.r); }

/* This stripe's slice of virtual block b, in bytes from the vector's start. */
static void slice(const rhd_run_t *r, uint32_t b, size_t *off, size_t *len) {
    size_t lo = blk(r, b), o, n;
    ring_slice((blk(r, b + 1) - lo) / r->esz, r->io->stripe, r->io->nstripes ? r->io->nstripes : 1, &o, &n);
    *off = lo + o * r->esz;
    *len = n * r->esz;
}

/* One exchange: blocks [sb, sb + ns) of send out, [rb, rb + nr) of recv in (reduced into it when reduce: recv =
 * own (op) received, own NULL: recv itself), offsets from the vector's start; with clip every element cut to
 * bytes [lo, hi). One element per block slice, or one for the whole range when unstriped. */
typedef struct rhd_xfer {
    rhd_run_t *r;
    const uint8_t *send, *own;
    uint8_t *recv;
    uint32_t sb, ns, rb, nr;
    size_t lo, hi;
    int clip, reduce, merged;
    size_t sfill; /* bytes of a partial element waiting in staging */
} rhd_xfer_t;

/* Element k of the range of n blocks from b: its offset and length in bytes. */
static size_t elem(const rhd_xfer_t *x, uint32_t b, uint32_t n, uint32_t k, size_t *len) {
    size_t off, end;
    if (x->merged) {
        off = blk(x->r, b), end = blk(x->r, b + n);
    } else {
        slice(x->r, b + k, &off, &end);
        end += off;
    }
    if (x->clip && off < x->lo) off = x->lo;
    if (x->clip && end > x->hi) end = x->hi;
    *len = end > off ? end - off : 0;
    return off;
}

static const uint8_t *x_send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const rhd_xfer_t *x = f->ctx;
    return x->send + elem(x, x->sb, x->ns, k, len);
}

static size_t x_send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    (void)f, (void)k;
    return len;
}

static size_t x_recv_len(ring_flow_t *f, uint32_t k) {
    const rhd_xfer_t *x = f->ctx;
    size_t len;
    elem(x, x->rb, x->nr, k, &len);
    return len;
}

/* Receives into recv, or through staging and reduced (own (op) received) as whole elements arrive. */
static ssize_t x_recv(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    rhd_xfer_t *x = f->ctx;
    ring_io_t *io = f->io;
    size_t at = elem(x, x->rb, x->nr, k, &(size_t){0}), want = len - f->rdone - x->sfill;
    if (want > room) want = room;
    if (!x->reduce) {
        if (want > RING_MAX_IO) want = RING_MAX_IO;
        ssize_t n = ring_recv(io, x->recv + at + f->rdone, want);
        if (n > 0) f->rdone += (size_t)n;
        return n;
    }
    const rhd_run_t *r = x->r;
    if (want > io->staging_size - x->sfill) want = io->staging_size - x->sfill;
    ssize_t n = ring_recv(io, io->staging + x->sfill, want);
    if (n <= 0) return n;
    size_t have = x->sfill + (size_t)n, whole = have / r->esz * r->esz;
    uint8_t *dst = x->recv + at + f->rdone;
    if (x->own && x->own != x->recv)
        pccl_reduce_to(dst, x->own + at + f->rdone, io->staging, whole / r->esz, r->dt, r->op);
    else
        pccl_reduce_into(dst, io->staging, whole / r->esz, r->dt, r->op);
    f->rdone += whole;
    x->sfill = have - whole;
    if (x->sfill) memmove(io->staging, io->staging + whole, x->sfill);
    return n;
}

/* Step `phase` of the operation with the member at ring position peer. */
static int exchange(rhd_run_t *r, uint32_t phase, uint32_t peer, rhd_xfer_t x) {
    ring_io_t *io = r->io;
    int rc = r->net->link(r->net->ctx, io, peer);
    if (rc != 0) return rc;
    x.r = r;
    x.merged = io->nstripes <= 1;
    ring_flow_t f = {.io = io, .magic = RING_RHD_MAGIC + phase, .world = r->s.world, .op_seq = r->net->op_seq,
                     .nsend = x.merged ? x.ns > 0 : x.ns, .nrecv = x.merged ? x.nr > 0 : x.nr, .ctx = &x,
                     .send_elem = x_send_elem, .send_ready = x_send_ready, .recv_len = x_recv_len, .recv = x_recv};
    rc = ring_flow_run(&f);
    r->tx_bytes += io->tx_bytes;
    r->rx_bytes += io->rx_bytes;
    return rc;
}

/* Runs r->body on every stripe (one copy of the template r each). */
static int stripe_main(ring_io_t *io, void *arg) {
    rhd_run_t r = *(const rhd_run_t *)arg;
    r.io = io;
    io->tx_pipe = NULL;
    int rc = r.body(&r);
    io->tx_bytes = r.tx_bytes;
    io->rx_bytes = r.rx_bytes;
    return rc;
}

static int run_striped(ring_io_t *ios, uint32_t nstripes, rhd_run_t *t) {
    if (nstripes > 1) return ring_run_stripes_shut(ios, nstripes, stripe_main, t, t->net->shut, t->net->ctx, NULL);
    ios[0].stripe = 0;
    ios[0].nstripes = 1;
    return stripe_main(ios, t);
}

/* 0, or -PERR_INVALID with ios[0].err set, for the arguments every rhd collective shares. */
static int check_net(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *n, int staged, size_t esz) {
    int bad = !n || !n->link || n->pos >= n->world || n->world < 2 || nstripes < 1 || esz == 0 ||
              (nstripes > 1 && !n->shut);
    for (uint32_t i = 0; !bad && staged && i < nstripes; i++) bad = !ios[i].staging || ios[i].staging_size < esz;
    ios[0].tx_bytes = ios[0].rx_bytes = 0;
    ios[0].err[0] = 0;
    if (!bad) return 0;
    snprintf(ios[0].err, sizeof ios[0].err, "position %u of %u, %u stripes, element of %zu bytes, staging of %zu",
             n ? n->pos : 0, n ? n->world : 0, nstripes, esz, ios[0].staging_size);
    return -PERR_INVALID;
}

/* The reduce-scatter's halving steps: own operands from src at the first step (from work after the fold), then
 * from work; the last step's sum into out (block pos), or into work for a folded pair's odd member (its block
 * covers both members'). work holds the vector's bytes from wbase on. */
static int rs_halving(rhd_run_t *r, int odd, size_t wbase) {
    const ring_rhd_sched_t *s = &r->s;
    for (uint32_t k = 0; k < s->steps; k++) {
        uint32_t keep, give, len;
        ring_rhd_blocks(s, k, &keep, &give, &len);
        const uint8_t *from = k == 0 && !odd ? r->src : r->work - wbase;
        uint8_t *to = k + 1 == s->steps && !odd ? r->out - blk(r, keep) : r->work - wbase;
        rhd_xfer_t x = {.send = from, .sb = give, .ns = len, .recv = to, .rb = keep, .nr = len, .reduce = 1,
                        .own = from};
        int rc = exchange(r, 1 + k, ring_rhd_partner(s, k), x);
        if (rc != 0) return rc;
    }
    return 0;
}

/* One stripe of the reduce-scatter: the fold (an even member's input into the odd one's work), the halving, the
 * owner's average, the unfold (the even member's part of the pair's block back to it). */
static int rs_body(rhd_run_t *r) {
    const ring_rhd_sched_t *s = &r->s;
    uint32_t fold = ring_rhd_fold_partner(s), pos = s->pos, keep0, give, len;
    int folded = s->vid == RING_RHD_FOLDED, odd = fold != RING_RHD_FOLDED && !folded, rc = 0;
    size_t wbase = 0, off, n;
    if (!folded && !odd) ring_rhd_blocks(s, 0, &keep0, &give, &len), wbase = blk(r, keep0);
    if (fold != RING_RHD_FOLDED) /* the even member's whole input, reduced into the odd one's own */
        rc = exchange(r, 0, fold, (rhd_xfer_t){.send = r->src, .ns = folded ? s->p : 0, .recv = r->work,
                                               .nr = odd ? s->p : 0, .reduce = 1, .own = r->src});
    if (rc == 0 && !folded) rc = rs_halving(r, odd, wbase);
    if (rc != 0) return rc;
    uint32_t v = folded ? pos / 2 : s->vid, even = pos & ~1u;
    slice(r, v, &off, &n);
    uint8_t *mine = odd ? r->work - wbase : r->out - pos_off(r, pos);
    if (!folded && r->op == pcclAvg) pccl_reduce_finalize_avg(mine + off, n / r->esz, r->dt, s->world);
    if (fold == RING_RHD_FOLDED) return 0;
    if (odd) { /* its own part of the pair's block to out */
        size_t lo = off > pos_off(r, pos) ? off : pos_off(r, pos), hi = off + n < pos_off(r, pos + 1) ? off + n
                                                                                                 : pos_off(r, pos + 1);
        if (hi > lo) memcpy(r->out + (lo - pos_off(r, pos)), r->work - wbase + lo, hi - lo);
    }
    rhd_xfer_t x = {.send = r->work - wbase, .sb = v, .ns = odd, .recv = r->out - pos_off(r, even), .rb = v,
                    .nr = folded, .clip = 1, .lo = pos_off(r, even), .hi = pos_off(r, even + 1)};
    return exchange(r, RING_RHD_RS_UNFOLD, fold, x);
}

size_t ring_reduce_scatter_rhd_work_bytes(size_t count, pcclDataType_t dt, uint32_t pos, uint32_t world) {
    rhd_run_t r = {.count = count, .esz = pccl_dtype_size(dt)};
    uint32_t keep, give, len;
    ring_rhd_schedule(pos < world ? pos : 0, world ? world : 1, &r.s);
    if (r.s.vid == RING_RHD_FOLDED) return 0;
    if (ring_rhd_fold_partner(&r.s) != RING_RHD_FOLDED) return count * r.esz; /* the odd member: the whole vector */
    if (r.s.steps < 2) return 0;
    ring_rhd_blocks(&r.s, 0, &keep, &give, &len);
    return blk(&r, keep + len) - blk(&r, keep);
}

int ring_reduce_scatter_rhd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *net, const void *src, void *out,
                            size_t count, pcclDataType_t dt, pcclRedOp_t op, uint8_t *work, size_t work_bytes) {
    rhd_run_t t = {.net = net, .src = src, .out = out, .work = work, .count = count, .esz = pccl_dtype_size(dt),
                   .dt = dt, .op = op, .body = rs_body};
    int rc = check_net(ios, nstripes, net, 1, t.esz);
    if (rc != 0) return rc;
    if (work_bytes < ring_reduce_scatter_rhd_work_bytes(count, dt, net->pos, net->world)) {
        snprintf(ios[0].err, sizeof ios[0].err, "work of %zu bytes at position %u of %u", work_bytes, net->pos,
                 net->world);
        return -PERR_INVALID;
    }
    /* Blocks of no elements need no partial sums, but the steps still address work by offsets: never from NULL. */
    static uint8_t no_work[16];
    if (!t.work) t.work = no_work;
    ring_rhd_schedule(net->pos, net->world, &t.s);
    return run_striped(ios, nstripes, &t);
}

/* One stripe of the all-gather: the fold (an even member's block to the odd one, which doubles for both), the
 * doubling steps over the virtual blocks, the unfold (every block back to the even member). */
static int ag_body(rhd_run_t *r) {
    const ring_rhd_sched_t *s = &r->s;
    uint32_t fold = ring_rhd_fold_partner(s), pos = s->pos, even = pos & ~1u;
    int folded = s->vid == RING_RHD_FOLDED, rc = 0;
    if (fold != RING_RHD_FOLDED) {
        rhd_xfer_t x = {.send = r->buf, .sb = pos / 2, .ns = folded, .recv = r->buf, .rb = pos / 2, .nr = !folded,
                        .clip = 1, .lo = pos_off(r, even), .hi = pos_off(r, even + 1)};
        rc = exchange(r, RING_RHD_AG_FOLD, fold, x);
    }
    for (uint32_t j = 0; rc == 0 && !folded && j < s->steps; j++) {
        uint32_t k = s->steps - 1 - j, keep, give, len;
        ring_rhd_blocks(s, k, &keep, &give, &len);
        rhd_xfer_t x = {.send = r->buf, .sb = keep, .ns = len, .recv = r->buf, .rb = give, .nr = len};
        rc = exchange(r, RING_RHD_AG_PHASE + j, ring_rhd_partner(s, k), x);
    }
    if (rc == 0 && fold != RING_RHD_FOLDED) {
        rhd_xfer_t x = {.send = r->buf, .ns = folded ? 0 : s->p, .recv = r->buf, .nr = folded ? s->p : 0};
        rc = exchange(r, RING_RHD_AG_FOLD + 1, fold, x);
    }
    return rc;
}

int ring_allgather_rhd(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *net, const void *src, void *buf,
                       const uint64_t *counts, size_t esz) {
    rhd_run_t t = {.net = net, .buf = buf, .esz = esz, .counts = counts, .body = ag_body};
    int rc = check_net(ios, nstripes, net, 0, esz);
    if (rc == 0 && !counts) rc = -PERR_INVALID, snprintf(ios[0].err, sizeof ios[0].err, "no counts");
    if (rc != 0) return rc;
    ring_rhd_schedule(net->pos, net->world, &t.s);
    uint8_t *place = t.buf + pos_off(&t, net->pos);
    if (!src) src = buf;
    if (src != place) memmove(place, src, counts[net->pos] * esz);
    return run_striped(ios, nstripes, &t);
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

/* One stripe of the tree broadcast: the bytes are one block (counts of one entry), the stripe moves its slice. */
static int bc_body(rhd_run_t *r) {
    uint32_t world = r->s.world, pos = r->net->pos, partners[33];
    uint32_t n = ring_bcast_tree_partners(r->root, pos, world, partners), rel = (pos + world - r->root) % world;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        uint32_t d = (partners[i] + world - pos) % world; /* a child's distance, or world minus the parent's */
        int from_parent = rel > 0 && i == 0;
        uint32_t m = from_parent ? world - d : d;
        rhd_xfer_t x = {.send = r->buf, .ns = !from_parent, .recv = r->buf, .nr = from_parent};
        rc = exchange(r, RING_RHD_BC_PHASE + log2_of(m), partners[i], x);
    }
    return rc;
}

int ring_broadcast_tree(ring_io_t *ios, uint32_t nstripes, const ring_rhd_net_t *net, const void *src, void *buf,
                        size_t bytes, uint32_t root) {
    uint64_t one = bytes;
    rhd_run_t t = {.net = net, .buf = buf, .esz = 1, .counts = &one, .root = root, .body = bc_body};
    int rc = check_net(ios, nstripes, net, 0, 1);
    if (rc == 0 && root >= net->world)
        rc = -PERR_INVALID, snprintf(ios[0].err, sizeof ios[0].err, "root %u of %u", root, net->world);
    if (rc != 0) return rc;
    t.s.world = net->world; /* no fold: block 0 is the whole buffer */
    if (net->pos == root && src && src != buf) memcpy(buf, src, bytes);
    return run_striped(ios, nstripes, &t);
}
