/*
 * ring_rhd_sched.c - the schedule of the recursive halving and doubling all-reduce (ring.h): who exchanges
 * with whom at each step and which blocks move, for any world size (pure arithmetic).
 *
 * Rabenseifner ("Optimization of collective reduction operations", ICCS 2004): a reduce-scatter by recursive
 * halving over p = 2^floor(log2 N) members, then an all-gather by recursive doubling with the same partners in
 * reverse. A world that is not a power of two folds first (Thakur, Rabenseifner & Gropp, "Optimization of
 * collective communication operations in MPICH", IJHPCA 2005): of the first 2r positions (r = N - p) each even
 * one hands its whole input to the odd one after it and takes the result back from it at the end, so p members
 * remain. The members that remain are numbered by virtual id: odd position i < 2r is i / 2, position i >= 2r is
 * i - r. The vector is split into p blocks (the count split of ring_block_off); virtual id v ends the
 * reduce-scatter owning block v.
 */
#include <stdint.h>

#include "ring/ring.h"

void ring_rhd_schedule(uint32_t pos, uint32_t world, ring_rhd_sched_t *s) {
    uint32_t p = 1, steps = 0;
    while (p * 2 <= world) p *= 2, steps++;
    s->world = world;
    s->pos = pos;
    s->p = p;
    s->r = world - p;
    s->steps = steps;
    if (pos < 2 * s->r) s->vid = pos % 2 ? pos / 2 : RING_RHD_FOLDED;
    else s->vid = pos - s->r;
}

uint32_t ring_rhd_pos_of(const ring_rhd_sched_t *s, uint32_t vid) { return vid < s->r ? 2 * vid + 1 : vid + s->r; }

uint32_t ring_rhd_fold_partner(const ring_rhd_sched_t *s) {
    if (s->pos >= 2 * s->r) return RING_RHD_FOLDED;
    return s->pos % 2 ? s->pos - 1 : s->pos + 1;
}

uint32_t ring_rhd_partner(const ring_rhd_sched_t *s, uint32_t k) {
    return ring_rhd_pos_of(s, s->vid ^ (s->p >> (k + 1)));
}

void ring_rhd_blocks(const ring_rhd_sched_t *s, uint32_t k, uint32_t *keep, uint32_t *give, uint32_t *len) {
    uint32_t m = s->p >> (k + 1), base = s->vid & ~(2 * m - 1);
    *len = m;
    *keep = s->vid & m ? base + m : base;
    *give = s->vid & m ? base : base + m;
}
