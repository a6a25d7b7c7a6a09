/*
 * ring_qlayout.h - where the quantized rings put each chunk's encoded blocks (private to ring/).
 *
 * The wire buffer mirrors the chunks (chunk c of count/n elements, +1 for the first count%n, as pccl_coll.h
 * splits blocks): chunk c's blocks of PCCL_QBLOCK_ELEMS elements lie at its place, every block full but the
 * chunk's last. A stripe moves a contiguous run of whole blocks of every chunk, so every stripe count encodes
 * exactly the blocks of one ring.
 */
#ifndef PCCL_RING_QLAYOUT_H
#define PCCL_RING_QLAYOUT_H

#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring.h"

typedef struct qlayout {
    size_t base, rem, esz, wbase, wbig; /* elements per chunk (+1 for the first rem), wire bytes of each */
    uint32_t n;
    uint32_t stripe, nstripes; /* this ring's slice of every chunk: whole blocks, so blocks match pool 1 */
    pcclDataType_t qdt;
    size_t block_bytes;
} qlayout_t;

static inline size_t whole_elems(const qlayout_t *l, uint32_t c) { return l->base + (c < l->rem ? 1 : 0); }
/* The blocks [*b0, *b1) of chunk c that this ring's stripe moves. */
static inline void q_blocks(const qlayout_t *l, uint32_t c, size_t *b0, size_t *b1) {
    size_t nb = (whole_elems(l, c) + PCCL_QBLOCK_ELEMS - 1) / PCCL_QBLOCK_ELEMS;
    size_t bb = nb / l->nstripes, br = nb % l->nstripes, s = l->stripe;
    *b0 = bb * s + (s < br ? s : br);
    *b1 = *b0 + bb + (s < br ? 1 : 0);
}
static inline size_t q_elems(const qlayout_t *l, uint32_t c) {
    size_t b0, b1, n = whole_elems(l, c);
    q_blocks(l, c, &b0, &b1);
    if (b0 == b1) return 0; /* a stripe beyond the chunk's blocks (b0 * QBLOCK may exceed n) */
    size_t e1 = b1 * PCCL_QBLOCK_ELEMS < n ? b1 * PCCL_QBLOCK_ELEMS : n;
    return e1 - b0 * PCCL_QBLOCK_ELEMS;
}
static inline size_t q_elem_off(const qlayout_t *l, uint32_t c) {
    size_t b0, b1;
    q_blocks(l, c, &b0, &b1);
    return l->base * c + (c < l->rem ? c : l->rem) + b0 * PCCL_QBLOCK_ELEMS;
}
static inline size_t q_wire_len(const qlayout_t *l, uint32_t c) { return pccl_quant_wire_bytes(q_elems(l, c), l->qdt); }
static inline size_t q_wire_off(const qlayout_t *l, uint32_t c) {
    size_t big = c < l->rem ? c : l->rem, b0, b1;
    q_blocks(l, c, &b0, &b1);
    return big * l->wbig + (c - big) * l->wbase + b0 * l->block_bytes; /* blocks before b0 are full */
}

/* The layout of count elements of dt over n chunks as qdt blocks, for io's stripe. */
static inline qlayout_t ring_qlayout(const ring_io_t *io, size_t count, uint32_t n, pcclDataType_t dt,
                                     pcclDataType_t qdt) {
    qlayout_t l = {.base = count / n, .rem = count % n, .esz = pccl_dtype_size(dt), .n = n, .stripe = io->stripe,
                   .nstripes = io->nstripes ? io->nstripes : 1, .qdt = qdt, .block_bytes = pccl_quant_block_bytes(qdt)};
    l.wbase = pccl_quant_wire_bytes(l.base, qdt);
    l.wbig = pccl_quant_wire_bytes(l.base + 1, qdt);
    return l;
}

/* Encodes the next blocks of chunk c (elems: element 0 of the whole buffer) into its place in wire, from
 * byte done of the chunk's encoding; returns how far the encoding got. */
size_t ring_q_prequantize(const qlayout_t *l, uint32_t c, const uint8_t *elems, pcclDataType_t dt,
                          pcclQuantizationAlgorithm_t algo, uint8_t *wire, size_t done);

#endif
