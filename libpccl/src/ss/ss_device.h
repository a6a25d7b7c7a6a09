/*
 * ss_device.h - the device-dependent steps of a shared-state sync: hashing a
 * tensor, streaming it over a socket in bounded chunks, and copying received
 * bytes into it. CPU tensors are sent from the user's memory directly; CUDA
 * tensors (only with PCCL_HAS_CUDA) pass through one host staging buffer of
 * SS_CHUNK bytes per connection. A receiver reads into host memory of its own
 * and lands the bytes in the tensor only after checking them (shared_state.c).
 */
#ifndef PCCL_SS_DEVICE_H
#define PCCL_SS_DEVICE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pccl.h"
#include "sec/sec.h"

/* Largest single write/read; also the staging buffer size. */
#define SS_CHUNK ((size_t)4 << 20)

typedef struct ss_staging {
    void *buf;
    int pinned;
} ss_staging_t;

size_t ss_tensor_bytes(const pcclTensorInfo_t *t);
/* The tensor of s named key, or NULL. */
const pcclTensorInfo_t *ss_find_tensor(const pcclSharedState_t *s, const char *key);
/* 0 if this build and machine can sync the tensor's device type; otherwise logs why and returns -PERR_INVALID. */
int ss_device_check(const pcclTensorInfo_t *t);
/* SimpleHash of the tensor's bytes wherever they live. @return 0, or -PERR_FAILED (the CUDA hash failed). */
int ss_hash(const pcclTensorInfo_t *t, uint64_t *out);
/* Sends the tensor's bytes, adding each chunk to *tx once written. link: the AEAD stream when the run
 * encrypts, else NULL (also below). @return 0, link_send_all's code, -PERR_NOMEM (no staging buffer) or
 * -PERR_FAILED (the copy from the device). */
int ss_send_tensor(sec_link_t *link, int fd, const pcclTensorInfo_t *t, ss_staging_t *stg, atomic_uint_fast64_t *tx);
/* The same for bytes [off, off + len) of the tensor, which the caller checked lie inside it. */
int ss_send_range(sec_link_t *link, int fd, const pcclTensorInfo_t *t, size_t off, size_t len, ss_staging_t *stg,
                  atomic_uint_fast64_t *tx);
/* Receives exactly n bytes into host memory buf, in bounded reads. @return 0, or link_recv_all's code. */
int ss_recv_bytes(sec_link_t *link, int fd, void *buf, size_t n);
/* Copies the tensor's bytes from host memory src into the tensor, wherever it lives.
 * @return 0, or -PERR_FAILED (the copy to the device). */
int ss_land(const pcclTensorInfo_t *t, const void *src);
void ss_staging_free(ss_staging_t *stg);

#endif
