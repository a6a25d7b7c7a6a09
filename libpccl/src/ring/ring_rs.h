/*
 * ring_rs.h - what the plain and the quantized reduce-scatter share (private to ring/; see ring_rs.c).
 */
#ifndef PCCL_RING_RS_H
#define PCCL_RING_RS_H

#include "ring/ring_flow.h"

typedef struct ring_rs {
    const uint8_t *src; /* count elements, never written */
    uint8_t *out;       /* the block of rank rank_of[pos] */
    int out_in_src;     /* out is that block's place in src (in place) */
    uint8_t *ws;        /* plain: nslots slots of slot_bytes per stripe for the partial sums in flight */
    size_t slot_bytes;
    uint32_t nslots;
    size_t count, esz;
    pcclDataType_t dt, qdt;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t algo;
    uint8_t *wire; /* quantized: ring_quant_wire_bytes(count, qdt, world) */
    const uint32_t *rank_of;
    uint32_t pos, world;
    uint64_t op_seq;
} ring_rs_t;

/* The rank whose block ring position pos - d holds at its step, and that block's element offset. */
static inline uint32_t ring_rs_rank(const ring_rs_t *g, uint32_t d) {
    return ring_rank_at(g->rank_of, ring_back(g->pos, d, g->world));
}
static inline size_t ring_rs_block_off(const ring_rs_t *g, uint32_t r) {
    return ring_block_off(g->count, g->world, r);
}

/* One stripe of the quantized reduce-scatter (ring_rs_quant.c); arg is the ring_rs_t. */
int ring_rs_quant_stripe(ring_io_t *io, void *arg);

#endif
