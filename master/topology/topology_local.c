/*
 * topology_local.c - local search moves of the heuristic, all of which keep
 * every ring segment's direction (costs are asymmetric; 2-opt would reverse
 * a segment and change its cost):
 *   - segment insertion, the one direction-preserving 3-opt reconnection:
 *     cut three edges, ring = A B C  ->  A C B. It includes or-opt (moving
 *     a short segment elsewhere) and moving a single peer;
 *   - node swap (a 4-edge exchange the move above cannot express);
 *   - kick for the iterated search: three consecutive segments X Y Z are
 *     rewritten Z Y X, a 4-edge change the descent cannot undo in one move
 *     (a random segment insertion would just be reverted).
 * The descent uses "don't look bits": only cuts next to edges that just
 * changed are rescanned, so one kick + descent costs O(k K n) for k dirty
 * peers and K candidates instead of O(n^3).
 */
#include "topology/topology_search.h"

#include <math.h>
#include <string.h>

#define TOPO_KICK_MAX_SEG 50 /* longest segment a kick moves */

void topo_tour_eval(const topo_search_t *s, topo_tour_t *r) {
    int n = s->n;
    r->bad = 0;
    r->sum = 0;
    for (int p = 0; p < n; p++) {
        int a = r->t[p], b = r->t[(p + 1) % n];
        r->bad += TOPO_BAD(s, a, b);
        r->sum += TOPO_W(s, a, b);
    }
}

void topo_tour_set(const topo_search_t *s, topo_tour_t *r, const int *order) {
    memcpy(r->t, order, (size_t)s->n * sizeof *order);
    for (int p = 0; p < s->n; p++) r->pos[r->t[p]] = p;
    topo_tour_eval(s, r);
}

void topo_tour_copy(const topo_search_t *s, topo_tour_t *dst, const topo_tour_t *src) {
    memcpy(dst->t, src->t, (size_t)s->n * sizeof *dst->t);
    memcpy(dst->pos, src->pos, (size_t)s->n * sizeof *dst->pos);
    dst->bad = src->bad;
    dst->sum = src->sum;
}

void topo_mark(topo_search_t *s, int peer) {
    if (s->queued[peer]) return;
    s->queued[peer] = 1;
    s->stack[s->top++] = peer;
}

void topo_mark_all(topo_search_t *s, const topo_tour_t *r) {
    for (int p = s->n - 1; p >= 0; p--) topo_mark(s, r->t[p]);
}

/* Segment insertion for cuts at positions i, j, k (any order): with the cuts
 * sorted x < y < z, t[x+1..y] and t[y+1..z] trade places. */
void topo_apply_insert(topo_search_t *s, topo_tour_t *r, int i, int j, int k) {
    int x = i, y = j, z = k, sw;
    if (x > y) sw = x, x = y, y = sw;
    if (y > z) sw = y, y = z, z = sw;
    if (x > y) sw = x, x = y, y = sw;
    int len1 = y - x, len2 = z - y;
    memcpy(s->tmp, r->t + x + 1, (size_t)len1 * sizeof *s->tmp);
    memmove(r->t + x + 1, r->t + y + 1, (size_t)len2 * sizeof *s->tmp);
    memcpy(r->t + x + 1 + len2, s->tmp, (size_t)len1 * sizeof *s->tmp);
    for (int p = x + 1; p <= z; p++) r->pos[r->t[p]] = p;
}

/* Tries segment insertions whose first cut is the edge leaving position i:
 * cut i (a -> a1), cut j (b -> b1), cut k (cc -> cc1) in ring order, new
 * edges a -> b1, cc -> a1, b -> cc1. b1 runs over a's candidates. Applies
 * the first improving one and returns 1. */
static int topo_try_insert(topo_search_t *s, topo_tour_t *r, int i) {
    int n = s->n, K = s->K;
    const int *t = r->t, *pos = r->pos;
    int a = t[i], a1 = t[(i + 1) % n];
    int bad_a = TOPO_BAD(s, a, a1);
    double w_a = TOPO_W(s, a, a1);
    for (int ci = 0; ci < K; ci++) {
        int b1 = s->cand[(size_t)a * K + ci];
        int dj = (pos[b1] - 1 - i + 2 * n) % n;
        if (dj < 1 || dj > n - 2) continue;
        int j = (i + dj) % n, b = t[j];
        int db0 = TOPO_BAD(s, a, b1) - bad_a - TOPO_BAD(s, b, b1);
        double ds0 = TOPO_W(s, a, b1) - w_a - TOPO_W(s, b, b1);
        for (int dk = dj + 1; dk < n; dk++) {
            int k = (i + dk) % n, cc = t[k], cc1 = t[(k + 1) % n];
            int db = db0 + TOPO_BAD(s, cc, a1) + TOPO_BAD(s, b, cc1) - TOPO_BAD(s, cc, cc1);
            double ds = ds0 + TOPO_W(s, cc, a1) + TOPO_W(s, b, cc1) - TOPO_W(s, cc, cc1);
            if (!topo_improves(s, db, ds)) continue;
            topo_apply_insert(s, r, i, j, k);
            r->bad += db;
            r->sum += ds;
            topo_mark(s, a);
            topo_mark(s, b);
            topo_mark(s, cc);
            return 1;
        }
    }
    return 0;
}

/* Tries swapping the peer at position p with any peer not next to it. */
static int topo_try_swap(topo_search_t *s, topo_tour_t *r, int p) {
    int n = s->n;
    int *t = r->t;
    int x = t[p], pp = t[(p + n - 1) % n], pn = t[(p + 1) % n];
    for (int dq = 2; dq <= n - 2; dq++) {
        int q = (p + dq) % n;
        int y = t[q], qp = t[(q + n - 1) % n], qn = t[(q + 1) % n];
        int db = TOPO_BAD(s, pp, y) + TOPO_BAD(s, y, pn) + TOPO_BAD(s, qp, x) + TOPO_BAD(s, x, qn) -
                 TOPO_BAD(s, pp, x) - TOPO_BAD(s, x, pn) - TOPO_BAD(s, qp, y) - TOPO_BAD(s, y, qn);
        double ds = TOPO_W(s, pp, y) + TOPO_W(s, y, pn) + TOPO_W(s, qp, x) + TOPO_W(s, x, qn) -
                    TOPO_W(s, pp, x) - TOPO_W(s, x, pn) - TOPO_W(s, qp, y) - TOPO_W(s, y, qn);
        if (!topo_improves(s, db, ds)) continue;
        t[p] = y;
        t[q] = x;
        r->pos[y] = p;
        r->pos[x] = q;
        r->bad += db;
        r->sum += ds;
        topo_mark(s, pp);
        topo_mark(s, qp);
        topo_mark(s, x);
        topo_mark(s, y);
        return 1;
    }
    return 0;
}

/* Descends until no dirty peer has an improving move (or the context stops). */
void topo_descend(topo_search_t *s, topo_tour_t *r) {
    int n = s->n;
    s->eps = 1e-13 * fabs(r->sum);
    while (s->top > 0) {
        if (topo_should_stop(s->c)) break;
        int a = s->stack[--s->top];
        s->queued[a] = 0;
        int i = r->pos[a];
        if (topo_try_insert(s, r, i) || topo_try_swap(s, r, i) || topo_try_swap(s, r, (i + 1) % n))
            topo_mark(s, a);
    }
    while (s->top > 0) s->queued[s->stack[--s->top]] = 0;
    topo_tour_eval(s, r); /* drop the rounding drift of incremental updates */
}

/* Rewrites three consecutive random segments X Y Z as Z Y X. */
void topo_kick(topo_search_t *s, topo_tour_t *r) {
    int n = s->n;
    int lmax = (n - 1) / 3 < TOPO_KICK_MAX_SEG ? (n - 1) / 3 : TOPO_KICK_MAX_SEG;
    if (lmax < 1) return;
    int l1 = 1 + topo_rand_below(s->c, lmax), l2 = 1 + topo_rand_below(s->c, lmax);
    int l3 = 1 + topo_rand_below(s->c, lmax), p = topo_rand_below(s->c, n);
    int len = l1 + l2 + l3, w = 0;
    for (int q = l1 + l2; q < len; q++) s->tmp[w++] = r->t[(p + 1 + q) % n];
    for (int q = l1; q < l1 + l2; q++) s->tmp[w++] = r->t[(p + 1 + q) % n];
    for (int q = 0; q < l1; q++) s->tmp[w++] = r->t[(p + 1 + q) % n];
    for (int q = 0; q < len; q++) {
        int at = (p + 1 + q) % n;
        r->t[at] = s->tmp[q];
        r->pos[s->tmp[q]] = at;
    }
    /* tails of the four new edges */
    topo_mark(s, r->t[p]);
    topo_mark(s, r->t[(p + l3) % n]);
    topo_mark(s, r->t[(p + l3 + l2) % n]);
    topo_mark(s, r->t[(p + len) % n]);
    topo_tour_eval(s, r);
}

