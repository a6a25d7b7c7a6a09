/*
 * simplehash_cuda.cu - SimpleHash of device memory.
 *
 * Same value as pccl_simplehash: every value-defining step comes from
 * simplehash_def.h. One thread block hashes one chunk (64 leaves = 1 MiB):
 * each warp takes whole leaves, lane t of the warp being SimpleHash lane t,
 * so a warp reads each 128-byte stride in one coalesced access. The 32 lane
 * states of a leaf meet in shared memory and one thread folds them in lane
 * order; one thread then joins the chunk's leaves in index order. The host
 * joins the chunk roots with the same tree code as the CPU version. No
 * atomics and no order that depends on scheduling, hence deterministic.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

extern "C" {
#include "pccl_kernels.h"
#include "log.h"
}
#include "simplehash_def.h"

/* Internal like the rest of the library (its C files use -fvisibility=hidden). */
#define SH_INTERNAL __attribute__((visibility("hidden")))

#define SH_CUDA_WARPS 8u
#define SH_CUDA_THREADS (SH_CUDA_WARPS * 32u)

static_assert(SH_LANES == 32u, "one warp lane per SimpleHash lane");

/* Word `pos` (a multiple of 4) of a leaf of len bytes, zero past the end.
 * aligned: the leaf starts on a 4-byte boundary, so a 32-bit load is legal. */
__device__ __forceinline__ uint32_t sh_load_word(const unsigned char *leaf, size_t pos, size_t len,
                                                 bool aligned)
{
    if (aligned && pos + 4 <= len)
        return __ldg(reinterpret_cast<const uint32_t *>(leaf + pos));
    uint32_t w = 0;
    for (uint32_t k = 0; k < 4; k++)
        if (pos + k < len)
            w |= (uint32_t)__ldg(leaf + pos + k) << (8 * k); /* little-endian word */
    return w;
}

__global__ void __launch_bounds__(SH_CUDA_THREADS)
sh_chunk_kernel(const unsigned char *data, size_t nbytes, uint64_t *roots)
{
    __shared__ uint32_t lanes[SH_CUDA_WARPS][SH_LANES];
    __shared__ uint64_t leaves[SH_CHUNK_BLOCKS];

    const size_t nblocks = sh_num_blocks(nbytes);
    const size_t first = (size_t)blockIdx.x * SH_CHUNK_BLOCKS;
    const uint32_t nb = (uint32_t)(nblocks - first < SH_CHUNK_BLOCKS ? nblocks - first : SH_CHUNK_BLOCKS);
    const uint32_t warp = threadIdx.x / 32u;
    const uint32_t lane = threadIdx.x % 32u;
    const bool aligned = ((uintptr_t)data & 3u) == 0; /* leaf offsets are multiples of 16 KiB */

    for (uint32_t b = warp; b < nb; b += SH_CUDA_WARPS) {
        const size_t off = (first + b) * (size_t)SH_BLOCK_BYTES;
        const size_t len = nbytes - off < SH_BLOCK_BYTES ? nbytes - off : SH_BLOCK_BYTES;
        const unsigned char *leaf = data + off;
        const size_t nstrides = (len + SH_STRIDE_BYTES - 1) / SH_STRIDE_BYTES;
        uint32_t h = sh_lane_init(lane);
#pragma unroll 8
        for (size_t s = 0; s < nstrides; s++)
            h = sh_lane_step(h, sh_load_word(leaf, s * SH_STRIDE_BYTES + lane * SH_WORD_BYTES, len, aligned));
        lanes[warp][lane] = h;
        __syncwarp();
        if (lane == 0)
            leaves[b] = sh_fold_lanes(lanes[warp]);
        __syncwarp(); /* lanes[warp] is reused by this warp's next leaf */
    }
    __syncthreads();

    if (threadIdx.x == 0) {
        sh_tree t;
        sh_tree_init(&t);
        for (uint32_t b = 0; b < nb; b++)
            sh_tree_push(&t, leaves[b], 0);
        roots[blockIdx.x] = sh_tree_finish(&t);
    }
}

static int sh_cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    PLOG_ERROR("kernels", "SimpleHash CUDA: %s: %s", what, cudaGetErrorString(err));
    return -1;
}

extern "C" SH_INTERNAL bool pccl_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no device" error */
        return false;
    }
    return n > 0;
}

extern "C" SH_INTERNAL int pccl_simplehash_cuda(const void *device_data, size_t nbytes, uint64_t *hash_out)
{
    if (!hash_out)
        return -1;
    const size_t nchunks = sh_num_chunks(nbytes);
    const size_t nblocks = sh_num_blocks(nbytes);
    if (nchunks > 0x7FFFFFFFu) {
        PLOG_ERROR("kernels", "SimpleHash CUDA: %zu bytes exceed the grid limit", nbytes);
        return -1;
    }

    uint64_t *d_roots = NULL;
    uint64_t *h_roots = (uint64_t *)malloc(nchunks * sizeof(uint64_t));
    if (!h_roots) {
        PLOG_ERROR("kernels", "SimpleHash CUDA: out of host memory");
        return -1;
    }
    int rc = sh_cuda_check(cudaMalloc((void **)&d_roots, nchunks * sizeof(uint64_t)), "cudaMalloc");
    if (rc == 0) {
        /* An empty input never reads data (one empty leaf), so a NULL
         * device pointer is fine then. */
        sh_chunk_kernel<<<(unsigned)nchunks, SH_CUDA_THREADS>>>((const unsigned char *)device_data, nbytes,
                                                                d_roots);
        rc = sh_cuda_check(cudaGetLastError(), "kernel launch");
    }
    if (rc == 0)
        rc = sh_cuda_check(cudaMemcpy(h_roots, d_roots, nchunks * sizeof(uint64_t), cudaMemcpyDeviceToHost),
                           "cudaMemcpy");
    if (d_roots)
        (void)sh_cuda_check(cudaFree(d_roots), "cudaFree");

    if (rc == 0) {
        sh_tree t;
        sh_tree_init(&t);
        for (size_t c = 0; c < nchunks; c++) {
            /* Complete chunks are level-6 subtrees; only the last can be partial. */
            bool complete = (c + 1) * SH_CHUNK_BLOCKS <= nblocks;
            sh_tree_push(&t, h_roots[c], complete ? SH_CHUNK_LOG2 : 0);
        }
        *hash_out = sh_finalize(sh_tree_finish(&t), nbytes);
    }
    free(h_roots);
    return rc;
}
