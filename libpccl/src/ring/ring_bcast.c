/*
 * ring_bcast.c - the pipelined chain broadcast along the ring (ring.h).
 *
 * Algorithm: a pipelined chain along the ring order (the linear pipeline broadcast; NCCL's ring broadcast is
 * the same chain). The ring is cut
 * before every holder: each holder streams its bytes to the members after it up to the next holder, and a
 * member that does not hold forwards every byte as it arrives, so every link carries the data at most once
 * and the time is that of one transfer plus a hop of latency per member, not one send after another. With
 * several holders (shared sources) the segments run side by side. A holder whose successor holds sends no
 * payload on that edge, but every edge still carries the header, so a stale stream is found everywhere.
 * Stripe s moves slice s of the bytes. In place with a backup, a member that does not hold saves each range of
 * buf just before it receives into it (ring_flow_backup_recv) and, on failure, puts back what it saved.
 */
#include <stdio.h>
#include <string.h>

#include "ring/ring_flow.h"

#define RING_BC_MAGIC 0x52424353u /* "RBCS" */
#define BK_STRIPES 64 /* ring_run_stripes' most */

typedef struct bcast {
    const uint8_t *src;
    uint8_t *buf;
    size_t bytes;
    int holds;
    uint64_t op_seq;
    uint32_t world, succ_holds;
    uint8_t *backup; /* a receiving member in place: where buf's bytes are saved before they are received into */
    size_t *saved;   /* bytes of each stripe's slice saved there */
} bcast_t;

typedef struct bcast_stripe {
    const bcast_t *g;
    size_t off, len; /* this stripe's slice */
    size_t copied;   /* an out-of-place holder: bytes of the slice copied from src to buf */
    size_t *saved;   /* with a backup: bytes of the slice saved (g->saved[stripe]) */
} bcast_stripe_t;

static const uint8_t *send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const bcast_stripe_t *x = f->ctx;
    (void)k;
    *len = x->len;
    return (x->g->holds ? x->g->src : x->g->buf) + x->off;
}

static size_t send_ready(ring_flow_t *f, uint32_t k, size_t len) {
    bcast_stripe_t *x = f->ctx;
    const bcast_t *g = x->g;
    if (g->holds && g->src != g->buf) ring_flow_copy_own(f, g->buf + x->off, g->src + x->off, x->len, &x->copied, 0);
    size_t got = g->holds ? len : ring_flow_got(f, k);
    return got < len ? got : len;
}

static size_t recv_len(ring_flow_t *f, uint32_t k) {
    (void)k;
    return ((const bcast_stripe_t *)f->ctx)->len;
}

static ssize_t recv_into(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    const bcast_stripe_t *x = f->ctx;
    const bcast_t *g = x->g;
    size_t want = len - f->rdone;
    (void)k;
    if (want > room) want = room;
    if (want > RING_MAX_IO) want = RING_MAX_IO;
    if (g->backup) want = ring_flow_backup_recv(g->backup, g->buf, x->off, x->len, f->rdone, want, x->saved);
    ssize_t n = ring_recv(f->io, x->g->buf + x->off + f->rdone, want);
    if (n > 0) f->rdone += (size_t)n;
    return n;
}

static int bcast_stripe(ring_io_t *io, void *arg) {
    const bcast_t *g = arg;
    bcast_stripe_t x = {.g = g, .saved = &g->saved[io->stripe]};
    ring_slice(g->bytes, io->stripe, io->nstripes ? io->nstripes : 1, &x.off, &x.len);
    ring_flow_t f = {.io = io, .magic = RING_BC_MAGIC, .world = g->world, .op_seq = g->op_seq,
                     .nsend = g->succ_holds ? 0 : 1, .nrecv = g->holds ? 0 : 1, .splice_below = UINT32_MAX,
                     .ctx = &x, .send_elem = send_elem, .send_ready = send_ready, .recv_len = recv_len,
                     .recv = recv_into};
    int rc = ring_flow_run(&f);
    if (rc == 0 && g->holds && g->src != g->buf)
        ring_flow_copy_own(&f, g->buf + x.off, g->src + x.off, x.len, &x.copied, 1);
    return rc;
}

int ring_broadcast(ring_io_t *ios, uint32_t nstripes, const void *src, void *buf, size_t bytes,
                   const uint8_t *holds, uint32_t pos, uint32_t world, uint64_t op_seq) {
    for (uint32_t s = 0; s < nstripes; s++) ios[s].tx_bytes = ios[s].rx_bytes = 0;
    uint32_t holders = 0;
    for (uint32_t p = 0; p < world; p++) holders += holds[p] != 0;
    if (pos >= world || holders == 0) {
        snprintf(ios[0].err, sizeof ios[0].err, "ring position %u of %u, %u holders", pos, world, holders);
        return -PERR_INVALID;
    }
    size_t saved[BK_STRIPES] = {0};
    bcast_t g = {.src = holds[pos] && src ? src : buf, .buf = buf, .bytes = bytes, .holds = holds[pos] != 0,
                 .op_seq = op_seq, .world = world, .succ_holds = holds[(pos + 1) % world] != 0, .saved = saved};
    if (world == 1) {
        if (g.src != g.buf) memmove(g.buf, g.src, bytes);
        return 0;
    }
    if (!g.holds && nstripes <= BK_STRIPES) g.backup = ios[0].backup;
    int rc = ring_run_stripes(ios, nstripes, bcast_stripe, &g, NULL);
    for (uint32_t s = 0; rc != 0 && g.backup && s < nstripes; s++) {
        size_t off, len;
        ring_slice(bytes, s, nstripes, &off, &len);
        memcpy(g.buf + off, g.backup + off, saved[s]);
    }
    return rc;
}
