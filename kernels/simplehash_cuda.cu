/*
 * simplehash_cuda.cu - SimpleHash of device memory.
 *
 * Same value as pccl_simplehash: every value-defining step comes from
 * simplehash_def.h. Two kernels: in the first, one warp hashes one leaf
 * (16 KiB), lane t of the warp being SimpleHash lane t, so the warp reads
 * each 128-byte stride in one coalesced access and every leaf of the buffer
 * is in flight at once; the 32 lane states of a leaf meet in shared memory
 * and one thread folds them in lane order. In the second, one thread joins
 * the 64 leaves of one chunk in index order. The host joins the chunk roots
 * with the same tree code as the CPU version. No atomics and no order that
 * depends on scheduling, hence deterministic.
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

extern "C" {
#include "pccl_kernels.h"
#include "base/err.h"
#include "base/log.h"
}
#include "simplehash_def.h"

/* Internal like the rest of the library (its C files use -fvisibility=hidden). */
#define SH_INTERNAL __attribute__((visibility("hidden")))

#define SH_CUDA_WARPS 8u
#define SH_CUDA_THREADS (SH_CUDA_WARPS * 32u)
#define SH_ROOT_THREADS 128u

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

/* One warp per leaf: leaves[i] = fold of leaf i's 32 lane states. */
__global__ void __launch_bounds__(SH_CUDA_THREADS)
sh_leaf_kernel(const unsigned char *data, size_t nbytes, size_t nblocks, uint64_t *leaves)
{
    __shared__ uint32_t lanes[SH_CUDA_WARPS][SH_LANES];

    const uint32_t warp = threadIdx.x / 32u;
    const uint32_t lane = threadIdx.x % 32u;
    const size_t b = (size_t)blockIdx.x * SH_CUDA_WARPS + warp;
    if (b >= nblocks)
        return; /* whole warps leave together: no barrier below spans warps */
    const bool aligned = ((uintptr_t)data & 3u) == 0; /* leaf offsets are multiples of 16 KiB */
    const size_t off = b * (size_t)SH_BLOCK_BYTES;
    const size_t len = nbytes - off < SH_BLOCK_BYTES ? nbytes - off : SH_BLOCK_BYTES;
    const unsigned char *leaf = data + off;
    uint32_t h = sh_lane_init(lane);
    if (aligned && len == SH_BLOCK_BYTES) {
        /* Full leaf: no bounds checks, so the unrolled loads issue back to back. */
        const uint32_t *w = reinterpret_cast<const uint32_t *>(leaf) + lane;
#pragma unroll 16
        for (uint32_t s = 0; s < SH_BLOCK_BYTES / SH_STRIDE_BYTES; s++)
            h = sh_lane_step(h, __ldg(w + s * SH_LANES));
    } else {
        const size_t nstrides = (len + SH_STRIDE_BYTES - 1) / SH_STRIDE_BYTES;
        for (size_t s = 0; s < nstrides; s++)
            h = sh_lane_step(h, sh_load_word(leaf, s * SH_STRIDE_BYTES + lane * SH_WORD_BYTES, len, aligned));
    }
    lanes[warp][lane] = h;
    __syncwarp();
    if (lane == 0)
        leaves[b] = sh_fold_lanes(lanes[warp]);
}

/* One thread per chunk: roots[c] = tree over leaves [64c, 64c + 64). */
__global__ void __launch_bounds__(SH_ROOT_THREADS)
sh_root_kernel(const uint64_t *leaves, size_t nblocks, size_t nchunks, uint64_t *roots)
{
    const size_t c = (size_t)blockIdx.x * SH_ROOT_THREADS + threadIdx.x;
    if (c >= nchunks)
        return;
    const size_t first = c * SH_CHUNK_BLOCKS;
    const size_t nb = nblocks - first < SH_CHUNK_BLOCKS ? nblocks - first : SH_CHUNK_BLOCKS;
    sh_tree t;
    sh_tree_init(&t);
    for (size_t b = 0; b < nb; b++)
        sh_tree_push(&t, leaves[first + b], 0);
    roots[c] = sh_tree_finish(&t);
}

static int sh_cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    PLOG_ERROR("kernels", "SimpleHash CUDA: %s: %s", what, cudaGetErrorString(err));
    return -PERR_FAILED;
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
        return -PERR_INVALID;
    const size_t nchunks = sh_num_chunks(nbytes);
    const size_t nblocks = sh_num_blocks(nbytes);
    if (nblocks / SH_CUDA_WARPS >= 0x7FFFFFFFu) {
        PLOG_ERROR("kernels", "SimpleHash CUDA: %zu bytes exceed the grid limit", nbytes);
        return -PERR_INVALID;
    }

    /* Scratch: one word per leaf, then one per chunk. Stream-ordered
     * allocation comes from the device's pool, so repeated hashes do not pay
     * for cudaMalloc's synchronization. */
    uint64_t *d_scratch = NULL;
    uint64_t *h_roots = (uint64_t *)malloc(nchunks * sizeof(uint64_t));
    if (!h_roots) {
        PLOG_ERROR("kernels", "SimpleHash CUDA: out of host memory");
        return -PERR_NOMEM;
    }
    int rc = sh_cuda_check(cudaMallocAsync((void **)&d_scratch, (nblocks + nchunks) * sizeof(uint64_t), 0),
                           "cudaMallocAsync");
    uint64_t *d_roots = NULL;
    if (rc == 0) {
        d_roots = d_scratch + nblocks;
        /* An empty input never reads data (one empty leaf), so a NULL
         * device pointer is fine then. */
        size_t grid = (nblocks + SH_CUDA_WARPS - 1) / SH_CUDA_WARPS;
        sh_leaf_kernel<<<(unsigned)grid, SH_CUDA_THREADS>>>((const unsigned char *)device_data, nbytes, nblocks,
                                                            d_scratch);
        size_t rgrid = (nchunks + SH_ROOT_THREADS - 1) / SH_ROOT_THREADS;
        sh_root_kernel<<<(unsigned)rgrid, SH_ROOT_THREADS>>>(d_scratch, nblocks, nchunks, d_roots);
        rc = sh_cuda_check(cudaGetLastError(), "kernel launch");
    }
    if (rc == 0)
        rc = sh_cuda_check(cudaMemcpy(h_roots, d_roots, nchunks * sizeof(uint64_t), cudaMemcpyDeviceToHost),
                           "cudaMemcpy");
    if (d_scratch)
        (void)sh_cuda_check(cudaFreeAsync(d_scratch, 0), "cudaFreeAsync");

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
