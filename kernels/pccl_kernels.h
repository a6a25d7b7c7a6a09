/*
 * pccl_kernels.h - element-wise reduce kernels and SimpleHash (internal).
 *
 * Owns: the arithmetic of every reduce op on every pcclDataType_t, and the
 * SimpleHash content hash. No state, no I/O, thread-safe.
 * The CPU versions use OpenMP; CUDA versions exist when PCCL_HAS_CUDA is defined.
 */
#ifndef PCCL_KERNELS_H
#define PCCL_KERNELS_H

#include "pccl.h"

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/** Size in bytes of one element of dt; 0 for an invalid or reserved dt. */
size_t pccl_dtype_size(pcclDataType_t dt);

/** Lower-case name ("float", "bfloat16", ...) or "invalid". */
const char *pccl_dtype_name(pcclDataType_t dt);

/** Parses a dtype name as printed by pccl_dtype_name; returns false if unknown. */
bool pccl_dtype_parse(const char *name, pcclDataType_t *out);

/**
 * dst[i] = op(dst[i], src[i]) for i < count. pcclAvg accumulates as a sum
 * (see pccl_reduce_finalize_avg). float16/bfloat16 are computed in float32
 * and rounded to nearest-even once per element. dst and src must not overlap.
 * @return 0, or -PERR_INVALID (base/err.h) for an invalid dt/op (nothing written).
 */
int pccl_reduce_into(void *dst, const void *src, size_t count, pcclDataType_t dt, pcclRedOp_t op);

/**
 * dst[i] = op(a[i], b[i]) for i < count: the same bits as copying a into dst
 * and then pccl_reduce_into(dst, b), in one pass (the out-of-place ring's
 * reduce). dst, a and b must not overlap; a == NULL is pccl_reduce_into(dst, b).
 * @return 0, or -PERR_INVALID for an invalid dt/op (nothing written).
 */
int pccl_reduce_to(void *dst, const void *a, const void *b, size_t count, pcclDataType_t dt, pcclRedOp_t op);

/**
 * buf[i] /= world_size for i < count (integers: truncating division;
 * float16/bfloat16: in float32, rounded once). @return 0, or -PERR_INVALID for an
 * invalid dt or a world size of 0.
 */
int pccl_reduce_finalize_avg(void *buf, size_t count, pcclDataType_t dt, uint32_t world_size);

/**
 * SimpleHash of nbytes bytes at data (host memory). The value depends only on
 * the bytes, not on alignment or the number of threads. See docs/simplehash.md.
 */
uint64_t pccl_simplehash(const void *data, size_t nbytes);

/** Same as pccl_simplehash but single-threaded (reference; for tests and benches). */
uint64_t pccl_simplehash_serial(const void *data, size_t nbytes);

#ifdef PCCL_HAS_CUDA
/**
 * SimpleHash of nbytes bytes of device memory; equal to pccl_simplehash of the
 * same bytes. @return 0; -PERR_FAILED on a CUDA error; -PERR_INVALID (hash_out
 * NULL, or more bytes than the grid takes); -PERR_NOMEM (each logged).
 */
int pccl_simplehash_cuda(const void *device_data, size_t nbytes, uint64_t *hash_out);

/** True if a CUDA device is usable in this process. */
bool pccl_cuda_available(void);
#endif

/* IEEE binary16 / bfloat16 <-> binary32, round to nearest even. */
float pccl_half_to_float(uint16_t h);
uint16_t pccl_float_to_half(float f);
float pccl_bf16_to_float(uint16_t h);
uint16_t pccl_float_to_bf16(float f);


#ifdef PCCL_HAS_CUDA
/* Synchronous CUDA runtime helpers (kernels/cuda_copy.cu) for C callers.
 * @return 0, or -PERR_FAILED on a CUDA error (logged). */
int pccl_cuda_alloc(void **dptr, size_t nbytes);
void pccl_cuda_free(void *dptr);
int pccl_cuda_copy_h2d(void *dst, const void *src, size_t nbytes);
int pccl_cuda_copy_d2h(void *dst, const void *src, size_t nbytes);
/** Pinned host memory, or NULL if it cannot be had (use malloc then). */
void *pccl_cuda_host_alloc(size_t nbytes);
void pccl_cuda_host_free(void *p);
#endif

#endif /* PCCL_KERNELS_H */
