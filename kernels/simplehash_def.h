/*
 * simplehash_def.h - the definition of SimpleHash, shared by the CPU
 * (simplehash.c) and CUDA (simplehash_cuda.cu) implementations (internal).
 *
 * Everything that decides the hash value lives here, written once, so the
 * host and the device cannot drift apart: the constants, the per-lane step,
 * the lane fold, the tree node combine and the final mix. The two
 * implementations only differ in how they schedule this work.
 * See docs/simplehash.md for the definition in prose.
 */
#ifndef PCCL_SIMPLEHASH_DEF_H
#define PCCL_SIMPLEHASH_DEF_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define SH_HOSTDEV __host__ __device__
#else
#define SH_HOSTDEV
#endif

/* Words are read little-endian; the CPU code loads them with memcpy, which
 * only matches the definition on a little-endian host (x86, ARM LE, GPUs). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "SimpleHash CPU implementation assumes a little-endian host"
#endif

/* Leaf size: large enough that the per-leaf fold and tree cost vanish next
 * to the data pass, small enough that the tail padding is cheap. */
#define SH_BLOCK_BYTES 16384u
/* 32 lanes of 32-bit words: 8 SSE registers on the CPU, one warp on the GPU. */
#define SH_LANES 32u
#define SH_WORD_BYTES 4u
#define SH_STRIDE_BYTES (SH_LANES * SH_WORD_BYTES) /* 128: one word per lane */

/* Not part of the definition: the unit of parallel work (a complete subtree
 * of 2^SH_CHUNK_LOG2 leaves), used by both implementations. */
#define SH_CHUNK_LOG2 6u
#define SH_CHUNK_BLOCKS (1u << SH_CHUNK_LOG2)

#define SH_LANE_SEED 0x811C9DC5u         /* FNV-1a 32-bit offset basis */
#define SH_LANE_SPREAD 0x9E3779B9u       /* makes each lane's seed distinct */
#define SH_P32 0x9E3779B1u               /* odd multiplier of the lane step */
#define SH_FOLD_SEED 0xCBF29CE484222325ull /* FNV-1a 64-bit offset basis */
#define SH_P64 0x9E3779B97F4A7C15ull     /* odd multiplier of the lane fold */
#define SH_NODE_KEY 0x243F6A8885A308D3ull /* pi: keys the right child of a node */
#define SH_LEN_KEY 0x13198A2E03707344ull  /* pi, continued: keys the length */

/* Number of leaves for nbytes: an empty input still has one (empty) leaf. */
SH_HOSTDEV static inline size_t sh_num_blocks(size_t nbytes)
{
    return nbytes == 0 ? 1 : (nbytes + SH_BLOCK_BYTES - 1) / SH_BLOCK_BYTES;
}

SH_HOSTDEV static inline size_t sh_num_chunks(size_t nbytes)
{
    return (sh_num_blocks(nbytes) + SH_CHUNK_BLOCKS - 1) / SH_CHUNK_BLOCKS;
}

SH_HOSTDEV static inline uint32_t sh_lane_init(uint32_t lane)
{
    return SH_LANE_SEED ^ (lane * SH_LANE_SPREAD);
}

/* FNV-1a step (xor, multiply) plus an xorshift: the multiply only carries
 * low bits upwards, the shift brings high bits back down so that every input
 * bit reaches every state bit over a few steps. Each part is a bijection of
 * the state, so two inputs differing in one word always leave different
 * lane states. */
SH_HOSTDEV static inline uint32_t sh_lane_step(uint32_t h, uint32_t w)
{
    h = (h ^ w) * SH_P32;
    return h ^ (h >> 15);
}

/* MurmurHash3's 64-bit finalizer: a bijection with full avalanche. */
SH_HOSTDEV static inline uint64_t sh_fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return k;
}

/* Folds the 32 lane states of one block, in lane order, pairing lanes
 * (2k, 2k+1) into one 64-bit word. Injective in each lane with the others
 * fixed, so one changed lane always changes the leaf. */
SH_HOSTDEV static inline uint64_t sh_fold_lanes(const uint32_t lanes[SH_LANES])
{
    uint64_t h = SH_FOLD_SEED;
    for (uint32_t k = 0; k < SH_LANES; k += 2) {
        uint64_t v = (uint64_t)lanes[k] | ((uint64_t)lanes[k + 1] << 32);
        h = (h ^ v) * SH_P64;
        h ^= h >> 29;
    }
    return sh_fmix64(h);
}

/* Inner tree node. Not symmetric (swapped blocks hash differently) and a
 * bijection in each argument with the other fixed. */
SH_HOSTDEV static inline uint64_t sh_combine(uint64_t left, uint64_t right)
{
    return sh_fmix64(left ^ sh_fmix64(right ^ SH_NODE_KEY));
}

/* The length separates inputs that differ only by trailing zero padding. */
SH_HOSTDEV static inline uint64_t sh_finalize(uint64_t root, uint64_t nbytes)
{
    return sh_fmix64(root ^ sh_fmix64(nbytes + SH_LEN_KEY));
}

/*
 * The tree over leaves 0..n-1: pair neighbours level by level, an odd last
 * node moving up unchanged, until one node is left. This streaming form keeps
 * one pending node per level (like a binary counter) and gives the same
 * root: push nodes left to right, then finish. A node may be pushed with a
 * level > 0 when it is the root of a complete subtree of 2^level leaves that
 * starts at a multiple of 2^level; the last node may be the root of any
 * (incomplete) such subtree, pushed with level 0.
 */
typedef struct sh_tree {
    uint64_t node[64];
    uint8_t level[64];
    uint32_t depth;
} sh_tree;

SH_HOSTDEV static inline void sh_tree_init(sh_tree *t)
{
    t->depth = 0;
}

SH_HOSTDEV static inline void sh_tree_push(sh_tree *t, uint64_t v, uint32_t level)
{
    while (t->depth > 0 && t->level[t->depth - 1] == level) {
        v = sh_combine(t->node[t->depth - 1], v);
        level++;
        t->depth--;
    }
    t->node[t->depth] = v;
    t->level[t->depth] = (uint8_t)level;
    t->depth++;
}

/* Pending nodes are roots of ever smaller subtrees from bottom to top; an odd
 * one out is promoted, so they join right to left. Requires depth >= 1. */
SH_HOSTDEV static inline uint64_t sh_tree_finish(sh_tree *t)
{
    uint64_t v = t->node[t->depth - 1];
    for (uint32_t i = t->depth - 1; i > 0; i--)
        v = sh_combine(t->node[i - 1], v);
    return v;
}

#endif /* PCCL_SIMPLEHASH_DEF_H */
