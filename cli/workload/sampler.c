/*
 * sampler.c - per-peer shuffled shards; see sampler.h.
 */
#include "sampler.h"

#include <stdlib.h>
#include <string.h>

/* splitmix64: the shuffle must be the same on every machine, so no rand(). */
static uint64_t sampler_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) by multiply-shift; the bias (< bound / 2^32) is far
 * below anything a shuffle of 60k examples could notice. */
static uint32_t sampler_below(uint64_t *state, uint32_t bound) {
    return (uint32_t)(((sampler_splitmix64(state) >> 32) * (uint64_t)bound) >> 32);
}

/* Starts epoch s->epoch: the shard in index order, then Fisher-Yates. Starting
 * from a sorted shard makes each epoch's order a function of (seed, rank,
 * epoch) alone. */
static void sampler_shuffle(mnist_sampler_t *s) {
    for (uint32_t i = 0; i < s->count; i++) s->order[i] = s->rank + i * s->world;
    uint64_t st = s->seed;
    st ^= sampler_splitmix64(&st) + (uint64_t)s->rank;
    st ^= sampler_splitmix64(&st) + s->epoch;
    for (uint32_t i = s->count; i > 1; i--) {
        const uint32_t j = sampler_below(&st, i);
        const uint32_t t = s->order[i - 1];
        s->order[i - 1] = s->order[j];
        s->order[j] = t;
    }
    s->pos = 0;
}

int mnist_sampler_init(mnist_sampler_t *s, uint32_t n, uint32_t rank, uint32_t world, uint64_t seed) {
    memset(s, 0, sizeof *s);
    if (world == 0 || rank >= world || rank >= n) return -1;
    s->count = (n - rank + world - 1) / world; /* #{i < n : i % world == rank} */
    s->order = malloc(sizeof(uint32_t) * s->count);
    if (!s->order) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    s->rank = rank;
    s->world = world;
    s->seed = seed;
    s->epoch = 0;
    sampler_shuffle(s);
    return 0;
}

void mnist_sampler_next(mnist_sampler_t *s, uint32_t *idx, size_t batch) {
    for (size_t b = 0; b < batch; b++) {
        if (s->pos == s->count) {
            s->epoch++;
            sampler_shuffle(s);
        }
        idx[b] = s->order[s->pos++];
    }
}

void mnist_sampler_free(mnist_sampler_t *s) {
    free(s->order);
    memset(s, 0, sizeof *s);
}
