/*
 * cuda_copy.cu - the few CUDA runtime calls the C parts of pccl need (shared
 * state staging, `pccl hash-tensor --device cuda`), so that C files never
 * include CUDA headers and compile the same with and without CUDA.
 * Every call is synchronous: callers reuse their host staging buffer at once.
 */
#include <cuda_runtime.h>

#include <stddef.h>

extern "C" {
#include "pccl_kernels.h"
#include "base/err.h"
#include "base/log.h"
}

#define CC_INTERNAL __attribute__((visibility("hidden")))

static int cc_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    PLOG_ERROR("kernels", "CUDA %s: %s", what, cudaGetErrorString(err));
    (void)cudaGetLastError(); /* clear a non-sticky error so later calls are not blamed */
    return -PERR_FAILED;
}

extern "C" CC_INTERNAL int pccl_cuda_alloc(void **dptr, size_t nbytes)
{
    return cc_check(cudaMalloc(dptr, nbytes ? nbytes : 1), "cudaMalloc");
}

extern "C" CC_INTERNAL void pccl_cuda_free(void *dptr)
{
    if (dptr)
        (void)cc_check(cudaFree(dptr), "cudaFree");
}

extern "C" CC_INTERNAL int pccl_cuda_copy_h2d(void *dst, const void *src, size_t nbytes)
{
    return cc_check(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice), "cudaMemcpy host->device");
}

extern "C" CC_INTERNAL int pccl_cuda_copy_d2h(void *dst, const void *src, size_t nbytes)
{
    return cc_check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost), "cudaMemcpy device->host");
}

extern "C" CC_INTERNAL void *pccl_cuda_host_alloc(size_t nbytes)
{
    void *p = NULL;
    /* Pinned memory makes the staging copies DMA directly; fall back to pageable if it is refused. */
    if (cudaMallocHost(&p, nbytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" CC_INTERNAL void pccl_cuda_host_free(void *p)
{
    if (p)
        (void)cudaFreeHost(p);
}
