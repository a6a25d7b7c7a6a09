/*
 * ring_gather.c - the ring all-gather of variable counts (ring.h).
 *
 * Algorithm: the all-gather phase of the bandwidth-optimal ring all-reduce (Patarasuk & Yuan, "Bandwidth
 * optimal all-reduce algorithms for clusters of workstations", JPDC 2009). At step k (0..W-2) ring position
 * pos sends the block of position pos - k and receives that of pos - k - 1, straight into its place in buf;
 * step k + 1 forwards the bytes of step k as they arrive (one stream per direction, no step barrier: a
 * ring_flow). Every member sends and receives the W - 1 blocks that are not its own, the least any all-gather
 * moves. Positions move the data; ranks place it: the block of position q is rank_of[q]'s, at the sum of the
 * counts of the ranks below it. Stripe s moves slice s of every block; blocks are copied unchanged, so every
 * member ends with the same bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring_flow.h"

#define RING_AG_MAGIC 0x52414747u /* "RAGG" */

typedef struct gather {
    const uint8_t *src; /* this member's block (its slice is sent first) */
    uint8_t *buf;
    const uint64_t *counts;
    const uint64_t *at; /* element offset of rank r's block in buf */
    size_t esz;
    const uint32_t *rank_of;
    uint32_t pos, world;
    uint64_t op_seq;
} gather_t;

typedef struct gather_stripe {
    const gather_t *g;
    uint32_t s, ns;
    uint8_t *own;        /* this slice of the own block's place in buf when it is sent from elsewhere, else NULL */
    const uint8_t *from; /* that slice in src */
    size_t own_len, copied;
} gather_stripe_t;

/* Byte offset in buf and length of this stripe's slice of ring position q's block. */
static size_t slice_of(const gather_stripe_t *x, uint32_t q, size_t *len) {
    uint32_t r = ring_rank_at(x->g->rank_of, q);
    size_t off;
    ring_slice(x->g->counts[r], x->s, x->ns, &off, len);
    *len *= x->g->esz;
    return (x->g->at[r] + off) * x->g->esz;
}

static const uint8_t *send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const gather_stripe_t *x = f->ctx;
    const gather_t *g = x->g;
    size_t off = slice_of(x, ring_back(g->pos, k, g->world), len);
    if (k > 0) return g->buf + off;
    return g->src + off - g->at[ring_rank_at(g->rank_of, g->pos)] * g->esz;
}

static size_t send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    gather_stripe_t *x = f->ctx;
    if (x->own) ring_flow_copy_own(f, x->own, x->from, x->own_len, &x->copied, 0);
    return ring_flow_forward(f, k, len);
}

static size_t recv_len(ring_flow_t *f, uint32_t k) {
    const gather_stripe_t *x = f->ctx;
    size_t len;
    slice_of(x, ring_back(x->g->pos, k + 1, x->g->world), &len);
    return len;
}

static ssize_t recv_into(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    const gather_stripe_t *x = f->ctx;
    size_t l, want = len - f->rdone;
    uint8_t *dst = x->g->buf + slice_of(x, ring_back(x->g->pos, k + 1, x->g->world), &l) + f->rdone;
    if (want > room) want = room;
    if (want > RING_MAX_IO) want = RING_MAX_IO;
    ssize_t n = ring_recv(f->io, dst, want);
    if (n > 0) f->rdone += (size_t)n;
    return n;
}

static int gather_stripe(ring_io_t *io, void *arg) {
    const gather_t *g = arg;
    gather_stripe_t x = {.g = g, .s = io->stripe, .ns = io->nstripes ? io->nstripes : 1};
    size_t off = slice_of(&x, g->pos, &x.own_len);
    x.own = g->buf + off;
    x.from = g->src + off - g->at[ring_rank_at(g->rank_of, g->pos)] * g->esz;
    if (x.own == x.from) x.own = NULL; /* in place: nothing to copy */
    ring_flow_t f = {.io = io, .magic = RING_AG_MAGIC, .world = g->world, .op_seq = g->op_seq, .nsend = g->world - 1,
                     .nrecv = g->world - 1, .splice_below = UINT32_MAX, .ctx = &x, .send_elem = send_elem,
                     .send_ready = send_ready, .recv_len = recv_len, .recv = recv_into};
    int rc = ring_flow_run(&f);
    /* Sent from src; its place in buf got it behind the send, and gets the rest now. */
    if (rc == 0 && x.own) ring_flow_copy_own(&f, x.own, x.from, x.own_len, &x.copied, 1);
    return rc;
}

int ring_allgather(ring_io_t *ios, uint32_t nstripes, const void *src, void *buf, const uint64_t *counts, size_t esz,
                   const uint32_t *rank_of, uint32_t pos, uint32_t world, uint64_t op_seq) {
    int rc = ring_check_ranks(&ios[0], rank_of, world);
    if (rc != 0) return rc;
    if (pos >= world) {
        snprintf(ios[0].err, sizeof ios[0].err, "ring position %u of %u", pos, world);
        return -PERR_INVALID;
    }
    uint64_t *at = malloc((size_t)world * sizeof *at);
    if (!at) {
        snprintf(ios[0].err, sizeof ios[0].err, "out of memory");
        return -PERR_NOMEM;
    }
    uint64_t total = 0;
    for (uint32_t r = 0; r < world; r++) at[r] = total, total += counts[r];
    if (!src) src = buf; /* in place: the first counts[me] elements of buf */
    uint32_t me = ring_rank_at(rank_of, pos);
    uint8_t *own = (uint8_t *)buf + at[me] * esz;
    size_t own_bytes = counts[me] * esz;
    /* In place with the block elsewhere in buf (pccl_coll.h: the first count elements): it moves to its place
     * first, since receives write where it is. */
    if (src != own && (const uint8_t *)src < (uint8_t *)buf + total * esz &&
        (const uint8_t *)src + own_bytes > (uint8_t *)buf) {
        memmove(own, src, own_bytes);
        src = own;
    }
    gather_t g = {.src = src, .buf = buf, .counts = counts, .at = at, .esz = esz, .rank_of = rank_of, .pos = pos,
                  .world = world, .op_seq = op_seq};
    for (uint32_t s = 0; s < nstripes; s++) ios[s].tx_bytes = ios[s].rx_bytes = 0;
    if (world == 1) {
        if (own != src) memcpy(own, src, own_bytes);
        rc = 0;
    } else {
        rc = ring_run_stripes(ios, nstripes, gather_stripe, &g, NULL);
    }
    free(at);
    return rc;
}
