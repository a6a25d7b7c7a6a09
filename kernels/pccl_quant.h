/*
 * pccl_quant.h - block quantization for the quantized ring all-reduce (internal).
 *
 * Values travel in blocks of at most PCCL_QBLOCK_ELEMS elements. A block on
 * the wire is a 24-byte header followed by one code per element:
 *
 *   f64 base | f64 step | u32 off | u8 flags | 3 zero bytes | codes...
 *
 * (little-endian). An integer code q (uint8, int8 stored as q - 128, uint16)
 * stands for base + (q - off) * step, computed in double and rounded once to
 * the source type; with flag PCCL_QFLAG_SPECIALS codes 0, 1, 2 stand for NaN,
 * +Inf and -Inf. A float16 code h stands for half_to_float(h) * step.
 *
 * Algorithms (both pick their parameters from the block's finite values):
 * - pcclQuantMinMax: base = min, the codes off.. cover [min, max] evenly.
 *   Error per element <= step / 2 with step = (max - min) / (codes - 1).
 * - pcclQuantZeroPointScale: symmetric around a zero point, so 0 is exact:
 *   step = max|x| / m, off = codes / 2, m = codes left on the smaller side.
 *   Error per element <= step / 2. To float16: step is the power of two that
 *   brings max|x| into half range (1 if it fits), relative error <= 2^-11.
 * Add one rounding to the source type (0.5 ulp) to every bound above.
 * Non-finite inputs are carried exactly (specials); a block holding any
 * spends 3 codes on them (uint8: 253 codes left for finite values).
 *
 * 4-bit and 2-bit codes (pcclExtUint4, pcclExtUint2 of pccl_compress.h) use a finer grain: a block is a
 * 4-byte prefix (u8 algorithm: 1 min-max, 2 zero-point; u8 bits; 2 zero bytes) and groups of
 * PCCL_QLOW_GROUP elements (the last may be shorter), each
 *
 *   f32 base | f32 step (sign bit: the group holds specials) | codes packed LSB first...
 *
 * A code q stands for base + (q - off) * step (double, rounded once); off is the lowest finite code
 * (0, or 3 with specials) for min-max, max(2^bits / 2, lowest finite code) for zero-point (base 0). With
 * specials codes 0, 1, 2 stand for NaN, +Inf, -Inf; 2 bits then leave one code (step 0): the midpoint of
 * the finite values, for both algorithms (so a zero-point base is 0 except there). Parameters are float32 (base rounded down, step up), so double values beyond float32's
 * range count as its largest. Error per element <= step / 2 as above, with 2^bits codes.
 *
 * Dequantization depends only on the block's bytes, so every peer that
 * decodes the same bytes gets the same bits (seed 003 section 5.3.1).
 */
#ifndef PCCL_QUANT_H
#define PCCL_QUANT_H

#include "pccl.h"

#include <stddef.h>
#include <stdint.h>

#define PCCL_QBLOCK_ELEMS 8192u
#define PCCL_QHDR_BYTES 24u
#define PCCL_QFLAG_SPECIALS 1u
#define PCCL_QLOW_GROUP 128u /* elements per group of 4- and 2-bit codes */

/**
 * 0 if values of src can be quantized to qdt by algo: src is float, double,
 * float16 or bfloat16; qdt is uint8, int8, uint16, pcclExtUint4, pcclExtUint2 (both algorithms) or
 * float16 (pcclQuantZeroPointScale only); -PERR_INVALID (base/err.h) otherwise.
 */
int pccl_quant_check(pcclDataType_t src, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt);

/**
 * Parses the command line's spelling: "none", or ALGO:TYPE with ALGO minmax, zero-point-scale or zps and
 * TYPE uint8, int8, uint16, float16, uint4 or uint2 (a combination pccl_quant_check accepts for float).
 * @return 0 (*q set), or -PERR_INVALID (*q unchanged).
 */
int pccl_quant_parse(const char *spec, pcclQuantizationOptions_t *q);

/** Wire bytes of n elements quantized to qdt (headers included). */
size_t pccl_quant_wire_bytes(size_t n, pcclDataType_t qdt);

/** Wire bytes of one full block (header + PCCL_QBLOCK_ELEMS codes). */
size_t pccl_quant_block_bytes(pcclDataType_t qdt);

/**
 * Encodes n (1..PCCL_QBLOCK_ELEMS) elements of src (type dt) as one block at
 * wire (pccl_quant_wire_bytes(n, qdt) bytes). Arguments must pass pccl_quant_check.
 */
void pccl_quant_block(const void *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                      pcclDataType_t qdt, uint8_t *wire);

/**
 * Decodes one block of n elements into dst (type dt).
 * @return 0, or -PERR_PROTOCOL if the header is malformed (unknown flags,
 *         non-zero reserved bytes, off above 65535; low bits: an unknown algorithm or
 *         width, a non-finite parameter, zero-point with a non-zero base, non-zero
 *         padding bits; nothing written).
 */
int pccl_dequant_block(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt);

/**
 * dst[i] = op(dst[i], decoded[i]) for one block of n elements, with the
 * arithmetic of pccl_reduce_into (pcclAvg accumulates as a sum).
 * @return 0, or -PERR_PROTOCOL if the header is malformed (nothing written).
 */
int pccl_dequant_reduce_block(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt,
                              pcclRedOp_t op);

/** Encodes n elements as consecutive blocks (convenience for tests and benches). */
void pccl_quantize(const void *src, size_t n, pcclDataType_t dt, pcclQuantizationAlgorithm_t algo,
                   pcclDataType_t qdt, uint8_t *wire);
/** Decodes n elements written by pccl_quantize. @return 0, or -PERR_PROTOCOL on a malformed header. */
int pccl_dequantize(const uint8_t *wire, size_t n, pcclDataType_t qdt, void *dst, pcclDataType_t dt);

#endif
