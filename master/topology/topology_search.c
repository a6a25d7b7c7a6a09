/*
 * topology_search.c - heuristic ring order for n above the exact limit.
 *
 * The lexicographic objective is handled with a threshold: for a target
 * bottleneck T, an edge with bw < T is "bad" and a ring costs
 * (number of bad edges, sum of per-edge time), compared lexicographically.
 * A ring with no bad edge has bottleneck >= T.
 *   Phase 1 raises T by binary search between the best ring found and the
 *   proven bound (trying the bound first: on typical matrices it is
 *   reachable). Each probe: descent, bad-edge repair, then iterated local
 *   search until no bad edge is left, its time slice ends, or it stalls.
 *   Phase 2 spends the remaining time lowering the sum at T = best
 *   bottleneck with iterated local search.
 * The best ring under the true objective is tracked throughout, so a
 * cancel or deadline at any point returns the best found so far.
 */
#include "topology/topology_search.h"
#include "topology/topology_solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_FULL_CAND_N 100 /* up to this n every peer is a candidate successor */
#define TOPO_CAND_K 24       /* candidates per peer above it */

/* <0 when (bad_a, sum_a) is better than (bad_b, sum_b) under the threshold. */
static int topo_pen_cmp(const topo_tour_t *a, const topo_tour_t *b) {
    if (a->bad != b->bad) return a->bad < b->bad ? -1 : 1;
    double tol = 1e-12 * fmax(fabs(a->sum), fabs(b->sum));
    if (a->sum < b->sum - tol) return -1;
    if (a->sum > b->sum + tol) return 1;
    return 0;
}

/* Keeps r when it beats the best ring under the real objective. */
static void topo_note_best(topo_search_t *s, const topo_tour_t *r) {
    double b = topo_ring_bottleneck(s->bw, s->n, r->t), t = topo_ring_time(s->bw, s->n, r->t);
    if (topo_compare_values(b, t, s->best_b, s->best_time) < 0) {
        memcpy(s->best, r->t, (size_t)s->n * sizeof *s->best);
        s->best_b = b;
        s->best_time = t;
    }
}

/* Iterated local search from cur (a local optimum): kick a copy, descend,
 * keep it when not worse. Ends at `until`, on a context stop, or after
 * `patience` kicks in a row without improvement (0: no such limit).
 * bottleneck_phase: also repair bad edges after each descent, compare by
 * the bad-edge count only, and stop as soon as cur has no bad edge. */
static void topo_ils(topo_search_t *s, topo_tour_t *cur, topo_tour_t *trial, double until, long patience,
                     int bottleneck_phase) {
    long idle = 0;
    while (!topo_check_stop(s->c) && topo_now_s() < until) {
        if (bottleneck_phase && cur->bad == 0) break;
        topo_tour_copy(s, trial, cur);
        topo_kick(s, trial);
        topo_descend(s, trial);
        if (bottleneck_phase) topo_repair(s, trial);
        topo_note_best(s, trial);
        /* Bottleneck phase: only the bad-edge count matters, and walking the
         * plateau of equal counts (whatever the sum) is what finds the way
         * down; requiring the sum not to grow traps the walk in one basin. */
        int cmp = bottleneck_phase ? (trial->bad > cur->bad) - (trial->bad < cur->bad) : topo_pen_cmp(trial, cur);
        idle = cmp < 0 ? 0 : idle + 1;
        if (cmp <= 0) {
            topo_tour_t sw = *cur;
            *cur = *trial;
            *trial = sw;
        }
        if (patience > 0 && idle >= patience) break;
    }
}

typedef struct {
    double *w;
    int *ints;
    char *queued;
} topo_alloc_t;

/* Moves the K highest-bandwidth successors of a to the front of row[0..m),
 * best first: quickselect then insertion sort, O(m + K^2) per peer. */
static void topo_top_k(const topo_search_t *s, int a, int *row, int m, int K) {
    const double *r = s->bw + (size_t)a * s->n;
    int lo = 0, hi = m; /* the K-th best lies in row[lo..hi) */
    while (hi - lo > 1 && K < hi && K > lo) {
        double pivot = r[row[lo + (hi - lo) / 2]];
        int lt = lo, i = lo, gt = hi; /* [lo,lt) > pivot, [lt,i) == pivot, [gt,hi) < pivot */
        while (i < gt) {
            int x = row[i];
            if (r[x] > pivot) {
                row[i++] = row[lt];
                row[lt++] = x;
            } else if (r[x] < pivot) {
                row[i] = row[--gt];
                row[gt] = x;
            } else {
                i++;
            }
        }
        if (K <= lt) hi = lt;
        else if (K >= gt) lo = gt;
        else break;
    }
    for (int k = 1; k < K; k++) {
        int x = row[k], q = k;
        for (; q > 0 && r[row[q - 1]] < r[x]; q--) row[q] = row[q - 1];
        row[q] = x;
    }
}

static int topo_search_init(topo_search_t *s, topo_ctx_t *c, topo_alloc_t *al) {
    int n = c->n;
    memset(s, 0, sizeof *s);
    s->c = c;
    s->n = n;
    s->bw = c->bw;
    s->K = n - 1 <= TOPO_FULL_CAND_N ? n - 1 : TOPO_CAND_K;
    size_t nn = (size_t)n * n;
    al->w = malloc(nn * sizeof *al->w);
    /* cand, tmp, stack, best, and two tours (t + pos each) */
    al->ints = malloc(((size_t)n * s->K + 7 * (size_t)n) * sizeof *al->ints);
    al->queued = calloc((size_t)n, 1);
    if (!al->w || !al->ints || !al->queued) return -PERR_NOMEM;
    s->w = al->w;
    s->cand = al->ints;
    s->tmp = s->cand + (size_t)n * s->K;
    s->stack = s->tmp + n;
    s->best = s->stack + n;
    s->queued = al->queued;
    /* Unreachable edges only ever count as bad; their stand-in time is large
     * but finite so that sums stay comparable. */
    double min_pos = INFINITY;
    for (size_t e = 0; e < nn; e++)
        if (c->bw[e] > 0 && c->bw[e] < min_pos && e % ((size_t)n + 1) != 0) min_pos = c->bw[e];
    double unreachable = 1e3 / min_pos;
    for (size_t e = 0; e < nn; e++) s->w[e] = c->bw[e] > 0 ? 1.0 / c->bw[e] : unreachable;
    for (int a = 0; a < n; a++) {
        int *row = s->tmp, m = 0;
        for (int b = 0; b < n; b++)
            if (b != a) row[m++] = b;
        topo_top_k(s, a, row, m, s->K);
        memcpy(s->cand + (size_t)a * s->K, row, (size_t)s->K * sizeof *row);
    }
    return 0;
}

int topo_search(topo_ctx_t *c, double bound, int iterate, int *order) {
    int n = c->n;
    if (n < 3) return 0; /* one ring only */
    topo_search_t s;
    topo_alloc_t al = {0};
    topo_values_t vs = {0};
    int rc = 0;
    if (topo_search_init(&s, c, &al) != 0) {
        rc = -PERR_NOMEM;
        goto out;
    }
    int *spare = s.best + n;
    topo_tour_t cur = {spare, spare + n, 0, 0}, trial = {spare + 2 * n, spare + 3 * n, 0, 0};
    memcpy(s.best, order, (size_t)n * sizeof *order);
    s.best_b = topo_ring_bottleneck(c->bw, n, order);
    s.best_time = topo_ring_time(c->bw, n, order);
    if (n < 4) iterate = 0; /* kicks need room for three segments */

    /* Phase 1: raise the bottleneck over the edge values in (best, bound].
     * Half of the remaining time at most, each probe taking half of what is
     * left of that. */
    double start = topo_now_s();
    double phase_end = c->deadline_s > 0 ? start + 0.5 * (c->deadline_s - start) : start;
    long patience = 200 + 20L * n;
    if (topo_values_collect(&vs, c->bw, n, s.best_b, bound) != 0) rc = -PERR_NOMEM; /* then no phase 1 */
    int handoff = 0;
    for (int first = 1; vs.m > 0; first = 0) {
        topo_set_slice(c, 0);
        if (topo_check_stop(c)) break;
        double now = topo_now_s(), slice_end = iterate ? now + 0.5 * (phase_end - now) : 0;
        topo_set_slice(c, slice_end);
        /* The bound first: on typical matrices it is reachable. */
        s.thr = first ? topo_values_max(&vs) : topo_values_median(&vs);
        /* A probe cut short by its time slice hands its ring to the next,
         * lower probe, so its work is not lost (large n); one that stalled
         * restarts from the best ring, away from where it got stuck. */
        if (handoff) topo_tour_eval(&s, &cur);
        else topo_tour_set(&s, &cur, s.best);
        topo_mark_all(&s, &cur);
        topo_descend(&s, &cur);
        topo_repair(&s, &cur);
        topo_note_best(&s, &cur);
        if (cur.bad > 0 && iterate) topo_ils(&s, &cur, &trial, slice_end, patience, 1);
        handoff = cur.bad > 0 && c->slice_over;
        if (cur.bad > 0) topo_values_keep_below(&vs, s.thr);
        topo_values_keep_above(&vs, s.best_b);
    }
    topo_set_slice(c, 0);

    /* Phase 2: lower the total time at the best bottleneck found. */
    if (s.best_b > 0 && !topo_check_stop(c)) {
        s.thr = s.best_b;
        topo_tour_set(&s, &cur, s.best);
        topo_mark_all(&s, &cur);
        topo_descend(&s, &cur);
        topo_note_best(&s, &cur);
        if (iterate) topo_ils(&s, &cur, &trial, c->deadline_s, 0, 0);
    }
    memcpy(order, s.best, (size_t)n * sizeof *order);
out:
    topo_values_free(&vs);
    free(al.w);
    free(al.ints);
    free(al.queued);
    return rc;
}
void topo_construct(topo_ctx_t *c, int max_starts, int *order, int *scratch) {
    int n = c->n;
    const double *bw = c->bw;
    char *used = malloc((size_t)n);
    if (!used) return; /* order keeps its current ring */
    /* Each start costs n^2: keep the total near 2^23 steps (a few ms) for big n. */
    long affordable = (1L << 23) / ((long)n * n);
    int starts = n < max_starts ? n : max_starts;
    if (starts > affordable) starts = affordable < 1 ? 1 : (int)affordable;
    double best_b = topo_ring_bottleneck(bw, n, order), best_t = topo_ring_time(bw, n, order);
    for (int si = 0; si < starts; si++) {
        if (si > 0 && topo_check_stop(c)) break; /* one start is O(n^2): read the clock each time */
        memset(used, 0, (size_t)n);
        int v = (int)((long)si * n / starts);
        scratch[0] = v;
        used[v] = 1;
        for (int k = 1; k < n; k++) {
            int next = -1;
            for (int u = 0; u < n; u++)
                if (!used[u] && (next < 0 || bw[(size_t)v * n + u] > bw[(size_t)v * n + next])) next = u;
            scratch[k] = v = next;
            used[v] = 1;
        }
        double b = topo_ring_bottleneck(bw, n, scratch), t = topo_ring_time(bw, n, scratch);
        if (topo_compare_values(b, t, best_b, best_t) < 0) {
            memcpy(order, scratch, (size_t)n * sizeof *order);
            best_b = b;
            best_t = t;
        }
    }
    free(used);
}
