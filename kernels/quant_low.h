/*
 * quant_low.h - 4-bit and 2-bit codes of pccl_quant.h's blocks (private to kernels/; format in pccl_quant.h).
 */
#ifndef PCCL_QUANT_LOW_H
#define PCCL_QUANT_LOW_H

#include "pccl.h"

#include <stddef.h>
#include <stdint.h>

/* Code bits of qdt: 4 (pcclExtUint4), 2 (pcclExtUint2), else 0. */
unsigned pccl_qlow_bits(pcclDataType_t qdt);

/* Wire bytes of one low-bit block of n (0..PCCL_QBLOCK_ELEMS) elements. */
size_t pccl_qlow_block_bytes(size_t n, unsigned bits);

/* Encodes x[0..n) (the block as doubles; non-finite values allowed) as one block at wire. */
void pccl_qlow_encode(const double *x, size_t n, pcclQuantizationAlgorithm_t algo, unsigned bits, uint8_t *wire);

/* Decodes one block of n elements into dst (type dt), or reduces it into dst with op (reduce != 0).
 * @return 0, or -PERR_PROTOCOL when the block is malformed (nothing written). */
int pccl_qlow_decode(const uint8_t *wire, size_t n, unsigned bits, void *dst, pcclDataType_t dt, int reduce,
                     pcclRedOp_t op);

/* Range of the finite values of x[0..n) folded into *lo / *hi; 1 if any value is NaN or Inf (quantize.c). */
int pccl_qscan_range(const double *x, size_t n, double *lo, double *hi);

#endif
