/*
 * pccl_compress.h - 4-bit and 2-bit block quantization of the all-reduce and the reduce-scatter (an extension:
 * pccl.h keeps PCCL 1.0's names, values and layouts, tests/unit/test_abi.c).
 *
 * pcclExtUint4 and pcclExtUint2 are extra values for quantization_options.quantized_datatype only (never a
 * buffer's datatype), with algorithm pcclQuantMinMax or pcclQuantZeroPointScale and a float, double, float16
 * or bfloat16 source, in pcclAllReduce / pcclAllReduceAsync and the reduce-scatter of pccl_coll.h:
 *
 *     desc.quantization_options = (pcclQuantizationOptions_t){.quantized_datatype = pcclExtUint4,
 *                                                             .algorithm = pcclQuantMinMax};
 *
 * Every peer of an operation must pass the same options (the master rejects a mismatch with the reason, and
 * the operation fails with pcclInvalidUsage on every peer); every peer ends with the same bits.
 *
 * Values travel in groups of 128 elements, each with its own float32 base and step (8 bytes) and packed codes
 * (two per byte for 4 bits, four per byte for 2 bits): 4.5 and 2.5 bits per element on the wire. Rounding is
 * to the nearest code (no randomness). Error of one encode + decode, per element, with lo/hi the group's
 * finite extremes and amax = max|x| over it:
 *
 *   min-max:    <= (hi - lo) / 30 (4 bits), <= (hi - lo) / 6 (2 bits)
 *   zero-point: <= amax / 14 (4 bits), <= amax / 2 (2 bits: codes -amax, 0, +amax); 0 stays exactly 0
 *
 * plus the rounding of the parameters to float32 and of the result to the source type. NaN, +Inf and -Inf
 * are carried exactly; a group holding one spends three codes on them, leaving 13 codes (4 bits) or one code
 * (2 bits: every finite value of that group becomes the midpoint of its finite values). Format,
 * bounds over a ring and sources: docs/quantization.md.
 */
#ifndef PCCL_COMPRESS_H
#define PCCL_COMPRESS_H

#include "pccl.h"

/** 4-bit codes, two per byte (quantization_options.quantized_datatype only). */
#define pcclExtUint4 ((pcclDataType_t)64)
/** 2-bit codes, four per byte (quantization_options.quantized_datatype only). */
#define pcclExtUint2 ((pcclDataType_t)65)

#endif
