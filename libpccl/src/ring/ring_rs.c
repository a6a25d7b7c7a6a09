/*
 * ring_rs.c - the ring reduce-scatter (ring.h), plain; ring_rs_quant.c is its quantized variant.
 *
 * Algorithm: the reduce-scatter phase of the bandwidth-optimal ring all-reduce (Patarasuk & Yuan, JPDC 2009).
 * The block that ends at ring position q (rank rank_of[q]'s, pccl_coll.h's split) starts at q + 1: at step k
 * (0..W-2) position pos sends its partial sum of the block of position pos - k - 1 (step 0: its own input)
 * and receives the predecessor's partial of the block of pos - k - 2, reduces it with its own input and
 * forwards it at step k + 1 as the bytes arrive; the last receive (its own block) is reduced into out. Every
 * element is reduced in the ring order from its block's first sender, own (op) received at each hop, whatever
 * the striping (stripe s moves slice s of every block), so the result is bit-identical for any stripe count.
 *
 * Memory: received bytes land in io->staging; partial sums in flight live in two slots per stripe (one for
 * a world of 3) of one block slice each, in the caller's work buffer (else malloc'd for the operation): the step k + 1 receive reuses the slot
 * of step k - 1 only as far as the send of step k has taken it (a flow receive room), so two slots carry
 * the stream without a step barrier. A world of 2 needs none: its only receive goes to out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring_rs.h"

#define RING_RS_MAGIC 0x52525343u /* "RRSC" */

typedef struct rs_stripe {
    const ring_rs_t *g;
    uint32_t s, ns;
    uint8_t *slots;
    size_t sfill; /* bytes of a partial element waiting in staging */
} rs_stripe_t;

/* This stripe's slice of rank r's block: element offset in src (*len elements). */
static size_t slice_of(const rs_stripe_t *x, uint32_t r, size_t *len) {
    size_t off;
    ring_slice(ring_block_len(x->g->count, x->g->world, r), x->s, x->ns, &off, len);
    return ring_rs_block_off(x->g, r) + off;
}

static const uint8_t *send_elem(ring_flow_t *f, uint32_t k, size_t *len) {
    const rs_stripe_t *x = f->ctx;
    size_t at = slice_of(x, ring_rs_rank(x->g, k + 1), len);
    *len *= x->g->esz;
    return k == 0 ? x->g->src + at * x->g->esz : x->slots + (k - 1) % 2 * x->g->slot_bytes;
}

static size_t recv_len(ring_flow_t *f, uint32_t k) {
    const rs_stripe_t *x = f->ctx;
    size_t len;
    slice_of(x, ring_rs_rank(x->g, k + 2), &len);
    return len * x->g->esz;
}

/* A slot is reused by the receive two steps later: only as far as the send in between has taken it. */
static size_t recv_room(const ring_flow_t *f, uint32_t k) {
    const rs_stripe_t *x = f->ctx;
    if (k < 2 || k + 2 == x->g->world || f->tx.k > k - 1) return SIZE_MAX;
    if (f->tx.k < k - 1 || f->tx.hdr_done < RING_HDR) return 0;
    return f->tx.off - f->rdone - x->sfill;
}

/* Receives into staging and reduces the whole elements: own input (op) received, into the slot or out. */
static ssize_t recv_reduce(ring_flow_t *f, uint32_t k, size_t len, size_t room) {
    rs_stripe_t *x = f->ctx;
    const ring_rs_t *g = x->g;
    ring_io_t *io = f->io;
    size_t want = len - f->rdone - x->sfill, el;
    if (want > io->staging_size - x->sfill) want = io->staging_size - x->sfill;
    if (want > room) want = room;
    ssize_t n = ring_recv(io, io->staging + x->sfill, want);
    if (n <= 0) return n;
    size_t have = x->sfill + (size_t)n, whole = have / g->esz * g->esz;
    uint32_t r = ring_rs_rank(g, k + 2);
    size_t at = slice_of(x, r, &el) * g->esz;
    const uint8_t *own = g->src + at + f->rdone;
    uint8_t *dst = k + 2 == g->world ? g->out + at - ring_rs_block_off(g, r) * g->esz + f->rdone
                                     : x->slots + k % 2 * g->slot_bytes + f->rdone;
    if (dst == own)
        pccl_reduce_into(dst, io->staging, whole / g->esz, g->dt, g->op);
    else
        pccl_reduce_to(dst, own, io->staging, whole / g->esz, g->dt, g->op);
    f->rdone += whole;
    x->sfill = have - whole;
    if (x->sfill) memmove(io->staging, io->staging + whole, x->sfill);
    return n;
}

static int rs_stripe(ring_io_t *io, void *arg) {
    const ring_rs_t *g = arg;
    rs_stripe_t x = {.g = g, .s = io->stripe, .ns = io->nstripes ? io->nstripes : 1};
    x.slots = g->ws ? g->ws + (size_t)x.s * g->nslots * g->slot_bytes : NULL;
    if (!io->staging || io->staging_size < g->esz) {
        snprintf(io->err, sizeof io->err, "staging of %zu bytes for elements of %zu", io->staging_size, g->esz);
        return -PERR_INVALID;
    }
    ring_flow_t f = {.io = io, .magic = RING_RS_MAGIC, .world = g->world, .op_seq = g->op_seq,
                     .nsend = g->world - 1, .nrecv = g->world - 1, .splice_below = 1, .ctx = &x,
                     .send_elem = send_elem, .send_ready = ring_flow_forward, .recv_len = recv_len, .recv = recv_reduce,
                     .recv_room = recv_room};
    int rc = ring_flow_run(&f);
    size_t len, at = slice_of(&x, ring_rank_at(g->rank_of, g->pos), &len);
    if (rc == 0 && g->op == pcclAvg)
        pccl_reduce_finalize_avg(g->out + (at - ring_rs_block_off(g, ring_rank_at(g->rank_of, g->pos))) * g->esz,
                                 len, g->dt, g->world);
    return rc;
}

/* Checks the arguments and sizes the plain ring's workspace. 0 or -PERR_<NAME> with io->err. */
static uint32_t rs_nslots(pcclQuantizationAlgorithm_t algo, uint32_t world) {
    return algo != pcclQuantNone || world < 3 ? 0 : world == 3 ? 1 : 2;
}

static size_t rs_slot_bytes(size_t count, size_t esz, uint32_t world, uint32_t nstripes) {
    return (ring_block_len(count, world, 0) / nstripes + 1) * esz;
}

size_t ring_reduce_scatter_work_bytes(size_t count, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                                      uint32_t world, uint32_t nstripes) {
    if (nstripes < 1 || world < 1) return 0;
    return (size_t)nstripes * rs_nslots(algo, world) * rs_slot_bytes(count, pccl_dtype_size(dt), world, nstripes);
}

/* Checks the arguments and places the partial-sum slots (in work when it is large enough); *owned is what to free. */
static int rs_prepare(ring_io_t *io, ring_rs_t *g, uint32_t nstripes, uint8_t *work, size_t work_bytes,
                      uint8_t **owned) {
    *owned = NULL;
    int rc = ring_check_ranks(io, g->rank_of, g->world);
    if (rc != 0) return rc;
    if (g->pos >= g->world || g->esz == 0 || nstripes < 1 || nstripes > 64) {
        snprintf(io->err, sizeof io->err, "ring position %u of %u, dtype %d, %u stripes", g->pos, g->world,
                 (int)g->dt, nstripes);
        return -PERR_INVALID;
    }
    if (g->algo != pcclQuantNone && (pccl_quant_check(g->dt, g->algo, g->qdt) != 0 || !g->wire)) {
        snprintf(io->err, sizeof io->err, "quantization of dtype %d to %d unsupported", (int)g->dt, (int)g->qdt);
        return -PERR_INVALID;
    }
    g->nslots = rs_nslots(g->algo, g->world);
    if (g->nslots == 0) return 0;
    g->slot_bytes = rs_slot_bytes(g->count, g->esz, g->world, nstripes);
    size_t need = (size_t)nstripes * g->nslots * g->slot_bytes;
    g->ws = work && work_bytes >= need ? work : (*owned = malloc(need));
    if (!g->ws) {
        snprintf(io->err, sizeof io->err, "out of memory for the partial sums");
        return -PERR_NOMEM;
    }
    return 0;
}

int ring_reduce_scatter(ring_io_t *ios, uint32_t nstripes, const void *src, void *out, size_t count,
                        pcclDataType_t dt, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                        uint8_t *wire, const uint32_t *rank_of, uint32_t pos, uint32_t world, uint64_t op_seq) {
    return ring_reduce_scatter_in(ios, nstripes, src, out, count, dt, op, algo, qdt, wire, rank_of, pos, world,
                                  op_seq, NULL, 0);
}

int ring_reduce_scatter_in(ring_io_t *ios, uint32_t nstripes, const void *src, void *out, size_t count,
                           pcclDataType_t dt, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                           uint8_t *wire, const uint32_t *rank_of, uint32_t pos, uint32_t world, uint64_t op_seq,
                           uint8_t *work, size_t work_bytes) {
    ring_rs_t g = {.src = src, .out = out, .count = count, .esz = pccl_dtype_size(dt), .dt = dt, .qdt = qdt,
                   .op = op, .algo = algo, .wire = wire, .rank_of = rank_of, .pos = pos, .world = world,
                   .op_seq = op_seq};
    for (uint32_t s = 0; s < nstripes; s++) ios[s].tx_bytes = ios[s].rx_bytes = 0;
    uint8_t *owned;
    int rc = rs_prepare(&ios[0], &g, nstripes, work, work_bytes, &owned);
    if (rc != 0) return rc;
    uint32_t me = ring_rank_at(rank_of, pos);
    const uint8_t *own = g.src + ring_rs_block_off(&g, me) * g.esz;
    g.out_in_src = own == g.out;
    if (world == 1) {
        if (!g.out_in_src) memmove(g.out, own, count * g.esz);
    } else {
        rc = ring_run_stripes(ios, nstripes, algo == pcclQuantNone ? rs_stripe : ring_rs_quant_stripe, &g, NULL);
    }
    free(owned);
    return rc;
}
