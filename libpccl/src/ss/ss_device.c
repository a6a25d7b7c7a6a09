/*
 * ss_device.c - see ss_device.h. Every socket call is bounded by the
 * SO_SNDTIMEO/SO_RCVTIMEO the caller set on fd, so a silent peer ends a
 * transfer instead of hanging it.
 */
#include "ss/ss_device.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "pccl_kernels.h"

size_t ss_tensor_bytes(const pcclTensorInfo_t *t) { return t->count * pccl_dtype_size(t->datatype); }

const pcclTensorInfo_t *ss_find_tensor(const pcclSharedState_t *s, const char *key) {
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->infos[i].name, key) == 0) return &s->infos[i];
    return NULL;
}

int ss_device_check(const pcclTensorInfo_t *t) {
    if (t->device_type == pcclDeviceCpu) return 0;
#ifdef PCCL_HAS_CUDA
    if (t->device_type == pcclDeviceCuda) {
        if (pccl_cuda_available()) return 0;
        PLOG_ERROR("pccl", "shared-state tensor '%s' is a CUDA tensor but no CUDA device is usable", t->name);
        return -PERR_INVALID;
    }
#else
    if (t->device_type == pcclDeviceCuda) {
        PLOG_ERROR("pccl", "shared-state tensor '%s' is a CUDA tensor but this pccl was built without CUDA", t->name);
        return -PERR_INVALID;
    }
#endif
    PLOG_ERROR("pccl", "shared-state tensor '%s': unknown device type %d", t->name, (int)t->device_type);
    return -PERR_INVALID;
}

int ss_hash(const pcclTensorInfo_t *t, uint64_t *out) {
#ifdef PCCL_HAS_CUDA
    if (t->device_type == pcclDeviceCuda)
        return pccl_simplehash_cuda(t->data, ss_tensor_bytes(t), out) == 0 ? 0 : -PERR_FAILED;
#endif
    *out = pccl_simplehash(t->data, ss_tensor_bytes(t));
    return 0;
}

#ifdef PCCL_HAS_CUDA
static int staging_get(ss_staging_t *stg) {
    if (stg->buf) return 0;
    stg->buf = pccl_cuda_host_alloc(SS_CHUNK);
    stg->pinned = stg->buf != NULL;
    if (!stg->buf) stg->buf = malloc(SS_CHUNK); /* pageable is slower but works */
    return stg->buf ? 0 : -PERR_NOMEM;
}
#endif

void ss_staging_free(ss_staging_t *stg) {
#ifdef PCCL_HAS_CUDA
    if (stg->pinned) pccl_cuda_host_free(stg->buf);
    else free(stg->buf);
#else
    free(stg->buf);
#endif
    stg->buf = NULL;
    stg->pinned = 0;
}

int ss_send_tensor(sec_link_t *link, int fd, const pcclTensorInfo_t *t, ss_staging_t *stg, atomic_uint_fast64_t *tx) {
    return ss_send_range(link, fd, t, 0, ss_tensor_bytes(t), stg, tx);
}

int ss_send_range(sec_link_t *link, int fd, const pcclTensorInfo_t *t, size_t off, size_t len, ss_staging_t *stg,
                  atomic_uint_fast64_t *tx) {
    const uint8_t *p = (const uint8_t *)t->data + off;
    size_t left = len;
#ifdef PCCL_HAS_CUDA
    int staged = t->device_type == pcclDeviceCuda;
    if (staged && staging_get(stg) != 0) return -PERR_NOMEM;
#else
    (void)stg;
#endif
    while (left) {
        size_t n = left < SS_CHUNK ? left : SS_CHUNK;
        const void *src = p;
#ifdef PCCL_HAS_CUDA
        if (staged) {
            if (pccl_cuda_copy_d2h(stg->buf, p, n) != 0) return -PERR_FAILED;
            src = stg->buf;
        }
#endif
        int rc = link_send_all(link, fd, src, n);
        if (rc != 0) return rc;
        if (tx) atomic_fetch_add(tx, n);
        p += n;
        left -= n;
    }
    return 0;
}

int ss_recv_bytes(sec_link_t *link, int fd, void *buf, size_t n) {
    /* Bounded reads, so each one is covered by the timeout. */
    for (uint8_t *p = buf; n;) {
        size_t k = n < SS_CHUNK ? n : SS_CHUNK;
        int rc = link_recv_all(link, fd, p, k);
        if (rc != 0) return rc;
        p += k;
        n -= k;
    }
    return 0;
}

int ss_land(const pcclTensorInfo_t *t, const void *src) {
    size_t n = ss_tensor_bytes(t);
    if (!n) return 0;
#ifdef PCCL_HAS_CUDA
    if (t->device_type == pcclDeviceCuda) return pccl_cuda_copy_h2d(t->data, src, n) == 0 ? 0 : -PERR_FAILED;
#endif
    memcpy(t->data, src, n);
    return 0;
}
