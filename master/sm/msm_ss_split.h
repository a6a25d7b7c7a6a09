/*
 * msm_ss_split.h - how one outdated peer's fetch is spread over the peers that
 * hold the elected content (pure: sizes and weights in, ranges out).
 *
 * A tensor of at least split_min bytes is cut into one range per source that
 * holds it, sized in proportion to the sources' weights (their measured
 * bandwidth toward the receiver, or equal), so every source works on it at
 * once and they finish together. A smaller tensor goes whole to the holder that
 * would finish its assigned bytes first (load / weight). Ranges come out in
 * fetch order and, per tensor, by ascending offset with no gap.
 */
#ifndef PCCL_MSM_SS_SPLIT_H
#define PCCL_MSM_SS_SPLIT_H

#include <stdint.h>

#include "base/base.h"

/* Range boundaries inside a split tensor fall on multiples of this (the last range takes the rest). */
#define MSM_SS_ALIGN 4096u
/* Tensors smaller than this travel whole from one source. */
#define MSM_SS_SPLIT_MIN ((uint64_t)4 << 20)

typedef struct msm_ss_item {
    uint64_t bytes;
    uint32_t holders; /* bit s: source s holds the announced bytes of this tensor; at least one */
} msm_ss_item_t;

/* Splits items[0..n) over nsrc (1..WIRE_MAX_SS_SOURCES) sources of weights w[s] > 0 into out, which has
 * room for n * nsrc ranges. @return the number of ranges, or -PERR_INVALID when nsrc is out of range or an item
 * has no holder among them. */
int msm_ss_split(const msm_ss_item_t *items, uint32_t n, const double *w, int nsrc, uint64_t split_min,
                 wire_ss_range_t *out);

#endif
