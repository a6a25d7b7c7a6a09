/*
 * topology_search.h - state shared by the heuristic's files:
 * topology_local.c (moves, descent, kick), topology_repair.c (bad-edge
 * repair) and topology_search.c (phases, iterated search, construction).
 * Private to the topology solver.
 */
#ifndef PCCL_TOPOLOGY_SEARCH_H
#define PCCL_TOPOLOGY_SEARCH_H

#include "topology/topology_internal.h"

/* A ring being improved. Costs are under the search's threshold thr: an
 * edge with bw < thr is "bad"; a ring costs (bad, sum), lexicographically. */
typedef struct topo_tour {
    int *t;   /* t[p] = peer at ring position p */
    int *pos; /* pos[peer] = its position */
    int bad;  /* edges below the threshold */
    double sum;
} topo_tour_t;

typedef struct topo_search {
    topo_ctx_t *c;
    int n;
    const double *bw;
    double *w;       /* n*n per-edge time 1/bw; unreachable edges get a large finite stand-in */
    int *cand;       /* n*K successors per peer, best bandwidth first */
    int K;
    double thr;      /* current target bottleneck */
    double eps;      /* least sum decrease that counts as an improvement */
    int *tmp;        /* n scratch */
    int *stack;      /* n dirty peers (don't-look bits cleared) */
    char *queued;    /* n flags: peer is on the stack */
    int top;
    /* best ring under the true lexicographic objective */
    int *best;
    double best_b, best_time;
} topo_search_t;

#define TOPO_BW(s, a, b) ((s)->bw[(size_t)(a) * (s)->n + (b)])
#define TOPO_BAD(s, a, b) (TOPO_BW(s, a, b) < (s)->thr)
#define TOPO_W(s, a, b) ((s)->w[(size_t)(a) * (s)->n + (b)])

/* True when a change (db bad edges, ds sum) improves a ring. */
static inline int topo_improves(const topo_search_t *s, int db, double ds) {
    return db < 0 || (db == 0 && ds < -s->eps);
}

void topo_tour_eval(const topo_search_t *s, topo_tour_t *r);
void topo_tour_set(const topo_search_t *s, topo_tour_t *r, const int *order);
void topo_tour_copy(const topo_search_t *s, topo_tour_t *dst, const topo_tour_t *src);
/* Clears the don't-look bit of peer (its outgoing edge changed). */
void topo_mark(topo_search_t *s, int peer);
void topo_mark_all(topo_search_t *s, const topo_tour_t *r);
/* Segment insertion for cuts at positions i, j, k (any order). */
void topo_apply_insert(topo_search_t *s, topo_tour_t *r, int i, int j, int k);
/* Descends with segment insertion and node swap until no marked peer has an
 * improving move or the context stops; recomputes r's cost at the end. */
void topo_descend(topo_search_t *s, topo_tour_t *r);
/* Random 4-edge perturbation; marks the peers it touched. */
void topo_kick(topo_search_t *s, topo_tour_t *r);
/* Repairs bad edges with a two-segment move until none can be repaired. */
void topo_repair(topo_search_t *s, topo_tour_t *r);

#endif
