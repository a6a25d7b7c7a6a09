/*
 * topology_repair.c - the bottleneck phase's bad-edge repair move.
 *
 * Why it exists: with peers in two clusters (two data centres), the ring
 * must leave cluster A from exactly the peer u that has the good link to
 * cluster B and enter B at exactly that link's head v. Changing the current
 * crossing a -> b into u -> v needs both endpoints to change at once; any
 * single 3-opt move changes one and only trades one bad edge for another,
 * so the descent stalls and misses the bottleneck bound on clustered
 * matrices (bench/topology.md, "Solver quality").
 *
 * The move, for a bad edge a -> b at ring position i and a good edge u -> v
 * with u before a and v after b:
 *     ... u [S1 = u+1 .. a] [S2 = b .. v-1] v ...   becomes   ... u v ...
 * and S1 and S2 are each re-inserted at their cheapest place in the rest of
 * the ring (two different places). It removes up to 5 edges and adds 5,
 * keeping every segment's direction. O(n^3) per bad edge (fewer pairs for
 * n > 128, see below), so it only runs on bad edges, in the bottleneck phase.
 */
#include "topology/topology_search.h"

#include <string.h>

#define TOPO_REPAIR_ALL_PAIRS_N 128 /* up to this n every (u, v) pair is tried */

/* Cost of one edge under the threshold. */
typedef struct {
    int bad;
    double w;
} topo_pen_t;

static topo_pen_t topo_pen(const topo_search_t *s, int a, int b) {
    return (topo_pen_t){TOPO_BAD(s, a, b), TOPO_W(s, a, b)};
}

static topo_pen_t topo_pen_add(topo_pen_t x, topo_pen_t y) { return (topo_pen_t){x.bad + y.bad, x.w + y.w}; }
static topo_pen_t topo_pen_sub(topo_pen_t x, topo_pen_t y) { return (topo_pen_t){x.bad - y.bad, x.w - y.w}; }
static int topo_pen_less(topo_pen_t x, topo_pen_t y) { return x.bad < y.bad || (x.bad == y.bad && x.w < y.w); }

/* The two cheapest edges (offsets o -> o+1 from position i, o in [lo, hi))
 * to insert segment f .. l into. o == -1 when there is none. */
typedef struct {
    int o1, o2;
    topo_pen_t c1, c2;
} topo_slots_t;

static topo_slots_t topo_best_slots(const topo_search_t *s, const int *t, int i, int lo, int hi, int f, int l) {
    int n = s->n;
    topo_slots_t sl = {-1, -1, {0, 0}, {0, 0}};
    for (int o = lo; o < hi; o++) {
        int c = t[(i + o) % n], c1 = t[(i + o + 1) % n];
        topo_pen_t x = topo_pen_sub(topo_pen_add(topo_pen(s, c, f), topo_pen(s, l, c1)), topo_pen(s, c, c1));
        if (sl.o1 < 0 || topo_pen_less(x, sl.c1)) {
            sl.o2 = sl.o1;
            sl.c2 = sl.c1;
            sl.o1 = o;
            sl.c1 = x;
        } else if (sl.o2 < 0 || topo_pen_less(x, sl.c2)) {
            sl.o2 = o;
            sl.c2 = x;
        }
    }
    return sl;
}

/* Places for both segments: distinct slots, cheapest combination.
 * Returns 0 when only one slot exists. */
static int topo_pick_two(const topo_slots_t *s1, const topo_slots_t *s2, int *o1, int *o2, topo_pen_t *cost) {
    if (s1->o1 != s2->o1) {
        *o1 = s1->o1, *o2 = s2->o1;
        *cost = topo_pen_add(s1->c1, s2->c1);
        return 1;
    }
    int can_a = s1->o2 >= 0, can_b = s2->o2 >= 0; /* a: S1 takes its 2nd; b: S2 does */
    if (!can_a && !can_b) return 0;
    topo_pen_t a = can_a ? topo_pen_add(s1->c2, s2->c1) : (topo_pen_t){0, 0};
    topo_pen_t b = can_b ? topo_pen_add(s1->c1, s2->c2) : (topo_pen_t){0, 0};
    if (can_a && (!can_b || topo_pen_less(a, b))) {
        *o1 = s1->o2, *o2 = s2->o1, *cost = a;
    } else {
        *o1 = s1->o1, *o2 = s2->o2, *cost = b;
    }
    return 1;
}

/* Offsets are relative to position i of the bad edge a -> b: a at 0, b at 1,
 * u at n - du (du = 0: u is a, S1 empty), v at dv (dv = 1: v is b, S2 empty).
 * The rest of the ring runs from offset dv to n - du. */
static int topo_try_repair(topo_search_t *s, topo_tour_t *r, int i) {
    int n = s->n, *t = r->t;
#define TOPO_AT(o) t[(i + (o)) % n]
    int a = TOPO_AT(0), b = TOPO_AT(1);
    topo_pen_t ab = topo_pen(s, a, b);
    for (int du = 0; du <= n - 3; du++) {
        if (topo_should_stop(s->c)) return 0;
        int u = TOPO_AT(n - du), u1 = TOPO_AT(n - du + 1);
        topo_pen_t removed_u = du > 0 ? topo_pen_add(ab, topo_pen(s, u, u1)) : ab;
        for (int dv = 1; du + dv <= n - 1; dv++) {
            int v = TOPO_AT(dv), p = TOPO_AT(dv - 1);
            if ((du == 0 && dv == 1) || TOPO_BAD(s, u, v)) continue;
            /* Large n: only pairs where neither endpoint alone could be fixed
             * (a -> v and u -> b both bad), which is the case this move is
             * for; keeps a call near O(n^2) plus O(n) per surviving pair. */
            if (n > TOPO_REPAIR_ALL_PAIRS_N && (!TOPO_BAD(s, a, v) || !TOPO_BAD(s, u, b))) continue;
            if (topo_should_stop(s->c)) return 0; /* each pair costs O(n) */
            topo_pen_t d = topo_pen_sub(topo_pen(s, u, v), removed_u);
            if (dv > 1) d = topo_pen_sub(d, topo_pen(s, p, v));
            int o1 = -1, o2 = -1;
            topo_slots_t s1 = {-1, -1, {0, 0}, {0, 0}}, s2 = s1;
            topo_pen_t ins;
            if (du > 0) s1 = topo_best_slots(s, t, i, dv, n - du, u1, a);
            if (dv > 1) s2 = topo_best_slots(s, t, i, dv, n - du, b, p);
            if (du > 0 && dv > 1) {
                if (!topo_pick_two(&s1, &s2, &o1, &o2, &ins)) continue;
            } else if (du > 0) {
                o1 = s1.o1, ins = s1.c1;
            } else {
                o2 = s2.o1, ins = s2.c1;
            }
            d = topo_pen_add(d, ins);
            if (!topo_improves(s, d.bad, d.w)) continue;

            /* Rebuild: the rest v .. u, with S1 after offset o1 and S2 after o2. */
            int w = 0, c1 = o1 >= 0 ? TOPO_AT(o1) : -1, c2 = o2 >= 0 ? TOPO_AT(o2) : -1;
            for (int o = dv; o <= n - du; o++) {
                s->tmp[w++] = TOPO_AT(o);
                if (o == o1)
                    for (int q = n - du + 1; q <= n; q++) s->tmp[w++] = TOPO_AT(q);
                if (o == o2)
                    for (int q = 1; q < dv; q++) s->tmp[w++] = TOPO_AT(q);
            }
            memcpy(t, s->tmp, (size_t)n * sizeof *t);
            for (int q = 0; q < n; q++) r->pos[t[q]] = q;
            topo_mark(s, u);
            topo_mark(s, a);
            topo_mark(s, p);
            if (c1 >= 0) topo_mark(s, c1);
            if (c2 >= 0) topo_mark(s, c2);
            topo_tour_eval(s, r);
            return 1;
        }
    }
    return 0;
#undef TOPO_AT
}

void topo_repair(topo_search_t *s, topo_tour_t *r) {
    int n = s->n, progress = 1;
    while (progress && r->bad > 0 && !topo_should_stop(s->c)) {
        progress = 0;
        for (int p = 0; p < n && !progress; p++)
            if (TOPO_BAD(s, r->t[p], r->t[(p + 1) % n]) && topo_try_repair(s, r, p)) {
                topo_descend(s, r);
                progress = 1;
            }
    }
}
