/*
 * simplehash.c - SimpleHash on the CPU: serial and OpenMP versions.
 *
 * The value is defined in simplehash_def.h / docs/simplehash.md. The serial
 * version streams leaves through the tree one by one; the parallel version
 * hashes complete 64-leaf subtrees ("chunks") on all threads and joins their
 * roots in index order, which by construction of the tree is the same value.
 */
#include "pccl_kernels.h"
#include "simplehash_def.h"

#include <omp.h>
#include <string.h>

/* Chunk roots gathered per parallel region: bounds the stack array and keeps
 * the join of roots interleaved with hashing for very large inputs. */
#define SH_ROOT_BATCH 256u

/* Below this many chunks (1 MiB each) a parallel region costs more than it saves. */
#define SH_PARALLEL_MIN_CHUNKS 2u

/* Runs all lanes over one 128-byte stride. Written as a plain loop over the
 * lane array so the compiler keeps the 32 lanes in 8 SIMD registers. */
static inline void sh_stride(uint32_t lanes[SH_LANES], const unsigned char *p)
{
    for (uint32_t l = 0; l < SH_LANES; l++) {
        uint32_t w;
        memcpy(&w, p + (size_t)l * SH_WORD_BYTES, sizeof w); /* no alignment assumption */
        lanes[l] = sh_lane_step(lanes[l], w);
    }
}

/* Leaf hash of one block of n <= SH_BLOCK_BYTES bytes; the last partial
 * stride is zero-padded to a full stride. */
static uint64_t sh_block_hash(const unsigned char *p, size_t n)
{
    uint32_t lanes[SH_LANES];
    for (uint32_t l = 0; l < SH_LANES; l++)
        lanes[l] = sh_lane_init(l);

    size_t full = n / SH_STRIDE_BYTES;
    for (size_t s = 0; s < full; s++)
        sh_stride(lanes, p + s * SH_STRIDE_BYTES);

    size_t rest = n % SH_STRIDE_BYTES;
    if (rest) {
        unsigned char pad[SH_STRIDE_BYTES] = {0};
        memcpy(pad, p + full * SH_STRIDE_BYTES, rest);
        sh_stride(lanes, pad);
    }
    return sh_fold_lanes(lanes);
}

static uint64_t sh_leaf(const unsigned char *data, size_t nbytes, size_t block)
{
    if (nbytes == 0) /* the one empty leaf; data may be NULL, so no pointer math */
        return sh_block_hash(data, 0);
    size_t off = block * SH_BLOCK_BYTES;
    size_t n = nbytes - off < SH_BLOCK_BYTES ? nbytes - off : SH_BLOCK_BYTES;
    return sh_block_hash(data + off, n);
}

/* Root of the subtree over the leaves of chunk c (fewer than 64 for the last). */
static uint64_t sh_chunk_root(const unsigned char *data, size_t nbytes, size_t c)
{
    size_t nblocks = sh_num_blocks(nbytes);
    size_t first = c * SH_CHUNK_BLOCKS;
    size_t end = first + SH_CHUNK_BLOCKS < nblocks ? first + SH_CHUNK_BLOCKS : nblocks;
    sh_tree t;
    sh_tree_init(&t);
    for (size_t b = first; b < end; b++)
        sh_tree_push(&t, sh_leaf(data, nbytes, b), 0);
    return sh_tree_finish(&t);
}

uint64_t pccl_simplehash_serial(const void *data, size_t nbytes)
{
    const unsigned char *p = data;
    size_t nblocks = sh_num_blocks(nbytes);
    sh_tree t;
    sh_tree_init(&t);
    for (size_t b = 0; b < nblocks; b++)
        sh_tree_push(&t, sh_leaf(p, nbytes, b), 0);
    return sh_finalize(sh_tree_finish(&t), nbytes);
}

uint64_t pccl_simplehash(const void *data, size_t nbytes)
{
    const unsigned char *p = data;
    size_t nchunks = sh_num_chunks(nbytes);
    if (nchunks < SH_PARALLEL_MIN_CHUNKS || omp_get_max_threads() < 2 || omp_in_parallel())
        return pccl_simplehash_serial(data, nbytes);

    size_t nblocks = sh_num_blocks(nbytes);
    sh_tree t;
    sh_tree_init(&t);
    uint64_t roots[SH_ROOT_BATCH];
    for (size_t base = 0; base < nchunks; base += SH_ROOT_BATCH) {
        size_t cnt = nchunks - base < SH_ROOT_BATCH ? nchunks - base : SH_ROOT_BATCH;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < cnt; i++)
            roots[i] = sh_chunk_root(p, nbytes, base + i);
        for (size_t i = 0; i < cnt; i++) {
            /* A complete chunk is a level-6 subtree; only the very last chunk
             * can be incomplete and is pushed as a plain final node. */
            int complete = (base + i + 1) * SH_CHUNK_BLOCKS <= nblocks;
            sh_tree_push(&t, roots[i], complete ? SH_CHUNK_LOG2 : 0);
        }
    }
    return sh_finalize(sh_tree_finish(&t), nbytes);
}
