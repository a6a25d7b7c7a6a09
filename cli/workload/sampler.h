/*
 * sampler.h - deterministic per-peer mini-batch sampler for the MNIST sets.
 *
 * Peer `rank` of `world` owns the examples i with i % world == rank (world 1:
 * all of them) and walks them in epochs, each a fresh Fisher-Yates shuffle
 * seeded by (seed, rank, epoch). Peers therefore see disjoint data, as DiLoCo
 * workers on their own shards do, and a run is reproducible from its seed.
 */
#ifndef PCCL_WORKLOAD_SAMPLER_H
#define PCCL_WORKLOAD_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct mnist_sampler {
    uint32_t *order; /* this shard's example indices, in the current epoch's order */
    uint32_t count;  /* examples in the shard */
    uint32_t pos;    /* next position in order */
    uint32_t rank;
    uint32_t world;
    uint64_t seed;
    uint64_t epoch;  /* epochs started so far (the first is epoch 0) */
} mnist_sampler_t;

/* n: examples in the set; rank < world. Returns 0, or -1 on bad arguments
 * (empty shard) or OOM. */
int mnist_sampler_init(mnist_sampler_t *s, uint32_t n, uint32_t rank, uint32_t world, uint64_t seed);

/* Fills idx[0..batch) with the next example indices, starting a new shuffled
 * epoch whenever the shard is exhausted (a batch may span two epochs). */
void mnist_sampler_next(mnist_sampler_t *s, uint32_t *idx, size_t batch);

void mnist_sampler_free(mnist_sampler_t *s);

#endif
