/*
 * pccl_topk.h - per-chunk top-k selection, 2/4-bit quantization and packing of the sparse all-reduce
 * (internal; docs/sparse.md). No state, no I/O, thread-safe; float and double only.
 *
 * The input is split into chunks of PCCL_TOPK_CHUNK elements (the last may be shorter). A chunk of len elements
 * keeps k = ceil(fraction * len) of them (at least 1): those of largest magnitude, ties going to the lowest
 * index. Its record, at offset c * (bytes of a full chunk) in the body:
 *   bits 0: k 12-bit offsets in the chunk (packed LSB first, padded to a byte), then k values in their own type;
 *   bits 2, 4: lo and hi (the smallest and largest kept magnitude, in the type), the k offsets, then k codes of
 *   `bits` bits: the sign in the top bit, below it q of 2^(bits-1) levels; the value is +-(lo + q * step), step =
 *   (hi - lo) / (levels - 1), q = 0 exactly lo and the top level exactly hi.
 * Values are stored in the host's byte order (little-endian on every supported host).
 * Non-finite values are not part of any chunk's selection: they are taken out first (exceptions: 8-byte
 * little-endian index, then the value) and count as 0 in their chunk.
 */
#ifndef PCCL_TOPK_H
#define PCCL_TOPK_H

#include <stddef.h>
#include <stdint.h>

#define PCCL_TOPK_CHUNK 4096u
#define PCCL_TOPK_IDX_BITS 12

typedef struct pccl_topk_cfg {
    uint64_t count;  /* elements of the tensor */
    int is_double;   /* 0: float, 1: double */
    int bits;        /* 0, 2 or 4 */
    double fraction; /* in (0, 1] */
} pccl_topk_cfg_t;

/* Values a chunk of len elements keeps: ceil(fraction * len), clamped to [1, len]. */
uint32_t pccl_topk_k(uint32_t len, double fraction);
/* Bytes of the record of a chunk of len elements. */
size_t pccl_topk_chunk_bytes(const pccl_topk_cfg_t *c, uint32_t len);
/* Bytes of the body (every chunk's record); values kept in all (kept may be NULL). */
size_t pccl_topk_body_bytes(const pccl_topk_cfg_t *c, uint64_t *kept);
/* Bytes of one exception (index and value). */
size_t pccl_topk_exc_bytes(const pccl_topk_cfg_t *c);

/* acc = in + res element-wise (res may be NULL: zero). Returns the number of non-finite values of acc. */
uint64_t pccl_topk_accumulate(const pccl_topk_cfg_t *c, void *acc, const void *in, const void *res);
/* Moves acc's non-finite values into exc (nonfinite * pccl_topk_exc_bytes, ascending index) and sets them to 0 in
 * acc. */
void pccl_topk_take_nonfinite(const pccl_topk_cfg_t *c, void *acc, uint8_t *exc);
/* Selects, quantizes and writes every chunk's record to body (pccl_topk_body_bytes, finite acc) and turns acc into
 * the residual: acc minus what was sent (exactly 0 where sent unquantized). */
void pccl_topk_encode(const pccl_topk_cfg_t *c, void *acc, uint8_t *body);
/* Checks a received pack's body and its nexc exceptions before anything is added: every offset of the last chunk
 * inside the tensor, every exception's index below count. 0 or -PERR_PROTOCOL. */
int pccl_topk_check(const pccl_topk_cfg_t *c, const uint8_t *body, const uint8_t *exc, uint64_t nexc);
/* out[i] += value for every (i, value) of a checked body, chunk by chunk. */
void pccl_topk_decode_add(const pccl_topk_cfg_t *c, const uint8_t *body, void *out);
/* out[idx] += value for the n checked exceptions of exc, in order. */
void pccl_topk_exc_add(const pccl_topk_cfg_t *c, const uint8_t *exc, uint64_t n, void *out);

#endif
