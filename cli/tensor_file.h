/*
 * tensor_file.h - locating tensors in .npy, .safetensors and raw files for
 * `pccl hash-tensor`. Parsers work on an in-memory (mapped) buffer and never
 * read past its length; every failure comes with a one-line reason.
 */
#ifndef PCCL_TENSOR_FILE_H
#define PCCL_TENSOR_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "pccl.h"

#define TF_MAX_DIMS 16
#define TF_MAX_NAME 256

typedef struct tf_tensor {
    char name[TF_MAX_NAME];
    pcclDataType_t dtype;
    int ndim;                     /* -1 for raw data (no shape) */
    uint64_t shape[TF_MAX_DIMS];
    uint64_t offset;              /* of the first byte, from the start of the file */
    uint64_t nbytes;
} tf_tensor_t;

/* Canonical dtype name ("float32", "bfloat16", ...), NULL for an unknown value. */
const char *tf_dtype_name(pcclDataType_t dt);
/* Accepts canonical names and common aliases (f32, float, fp16, bf16, u8, ...); 0 on success. */
int tf_dtype_parse(const char *s, pcclDataType_t *out);

/* One tensor of an npy file (format 1.0, 2.0, 3.0; little-endian or byte-order-free dtypes; C order). */
int tf_parse_npy(const uint8_t *buf, size_t len, tf_tensor_t *out, char *err, size_t errlen);

/* Every tensor of a safetensors file, in header order; *out is malloc'ed (free it). */
int tf_parse_safetensors(const uint8_t *buf, size_t len, tf_tensor_t **out, size_t *n, char *err, size_t errlen);

/* A raw range: count elements of dt from byte offset (count < 0: up to the end of the file, which must
 * then hold whole elements). */
int tf_raw_range(size_t len, pcclDataType_t dt, uint64_t offset, int64_t count, tf_tensor_t *out, char *err,
                 size_t errlen);

/* Maps a file read-only (empty files give a NULL map of length 0); 0 on success. */
int tf_map(const char *path, const uint8_t **buf, size_t *len, char *err, size_t errlen);
void tf_unmap(const uint8_t *buf, size_t len);

#endif
