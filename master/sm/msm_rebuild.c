/* msm_rebuild.c - see msm_rebuild.h. */
#include "sm/msm_rebuild.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static int key_cmp(uint32_t ga, const uint8_t *ua, uint32_t gb, const uint8_t *ub) {
    if (ga != gb) return ga < gb ? -1 : 1;
    return memcmp(ua, ub, 16);
}

static int cmp_key(const void *a, const void *b) {
    const struct msm_rb_key *x = a, *y = b;
    return key_cmp(x->group, x->uuid, y->group, y->uuid);
}

int msm_rb_index_build(const msm_t *m, msm_rb_index_t *ix) {
    ix->n = 0;
    ix->v = malloc((size_t)(m->npeers ? m->npeers : 1) * sizeof *ix->v);
    if (!ix->v) return -PERR_NOMEM;
    for (int i = 0; i < m->npeers; i++) {
        const msm_peer_t *p = &m->peers[i];
        if (p->resumed != MSM_RS_COLLECT) continue;
        struct msm_rb_key *k = &ix->v[ix->n++];
        k->group = p->group;
        memcpy(k->uuid, p->uuid, 16);
        k->peer = i;
    }
    qsort(ix->v, (size_t)ix->n, sizeof *ix->v, cmp_key);
    return 0;
}

void msm_rb_index_free(msm_rb_index_t *ix) {
    free(ix->v);
    ix->v = NULL;
    ix->n = 0;
}

int msm_rb_lookup(const msm_rb_index_t *ix, uint32_t group, const uint8_t uuid[16]) {
    int lo = 0, hi = ix->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = key_cmp(ix->v[mid].group, ix->v[mid].uuid, group, uuid);
        if (c == 0) return ix->v[mid].peer;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -PERR_INVALID;
}

int msm_rb_all_named_back(const msm_t *m, int *all) {
    msm_rb_index_t ix;
    *all = 0;
    int rc = msm_rb_index_build(m, &ix);
    if (rc != 0) return rc;
    int back = 1;
    for (int i = 0; i < m->npeers && back; i++) {
        const msm_peer_t *p = &m->peers[i];
        if (p->resumed != MSM_RS_COLLECT) continue;
        for (uint32_t k = 0; k < p->resume_nring && back; k++)
            back = msm_rb_lookup(&ix, p->group, p->resume_ring[k]) >= 0;
    }
    msm_rb_index_free(&ix);
    *all = back;
    return 0;
}

/* p's ring restricted to the peers back (each once), as indexes into m->peers; stamp[] marks who is in it
 * with the value mark. @return its length. */
static int filtered_ring(const msm_rb_index_t *ix, const msm_peer_t *p, int *out, int *stamp, int mark) {
    int n = 0;
    for (uint32_t k = 0; k < p->resume_nring; k++) {
        int q = msm_rb_lookup(ix, p->group, p->resume_ring[k]);
        if (q < 0 || stamp[q] == mark) continue;
        stamp[q] = mark;
        out[n++] = q;
    }
    return n;
}

typedef struct {
    uint8_t digest[16];
    int at; /* position in mem */
} vote_t;

static int cmp_vote(const void *a, const void *b) {
    const vote_t *x = a, *y = b;
    int c = memcmp(x->digest, y->digest, 16);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

int msm_rb_ring_order(const msm_t *m, const msm_rb_index_t *ix, const int *mem, int n, int *order) {
    size_t np = (size_t)(m->npeers ? m->npeers : 1);
    int *stamp = malloc(np * sizeof *stamp), *ring = malloc(np * sizeof *ring);
    vote_t *votes = malloc((size_t)(n ? n : 1) * sizeof *votes);
    if (!stamp || !ring || !votes) {
        free(stamp), free(ring), free(votes);
        return -PERR_NOMEM;
    }
    for (size_t i = 0; i < np; i++) stamp[i] = -1;
    /* Each member's filtered ring reduced to a digest: equal digests are equal rings. */
    for (int a = 0; a < n; a++) {
        int len = filtered_ring(ix, &m->peers[mem[a]], ring, stamp, a);
        crypto_generichash(votes[a].digest, 16, (const unsigned char *)ring, (size_t)len * sizeof *ring, NULL, 0);
        votes[a].at = a;
    }
    qsort(votes, (size_t)n, sizeof *votes, cmp_vote);
    int best_at = -1, best_votes = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && memcmp(votes[j].digest, votes[i].digest, 16) == 0) j++;
        /* runs are sorted by position: votes[i].at is the first member reporting this ring */
        if (j - i > best_votes || (j - i == best_votes && votes[i].at < best_at)) {
            best_votes = j - i;
            best_at = votes[i].at;
        }
        i = j;
    }
    int norder = 0;
    for (size_t i = 0; i < np; i++) stamp[i] = -1;
    if (best_at >= 0) norder = filtered_ring(ix, &m->peers[mem[best_at]], order, stamp, 0);
    for (int a = 0; a < n; a++)
        if (stamp[mem[a]] != 0) order[norder++] = mem[a];
    free(stamp), free(ring), free(votes);
    return 0;
}

static int cmp_op(const void *a, const void *b) {
    const wire_op_outcome_t *x = a, *y = b;
    if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
    return (x->op_seq > y->op_seq) - (x->op_seq < y->op_seq);
}

int msm_rb_ops_build(const msm_t *m, const int *mem, int n, msm_rb_ops_t *out) {
    memset(out, 0, sizeof *out);
    size_t total = 0;
    for (int a = 0; a < n; a++) {
        const msm_peer_t *p = &m->peers[mem[a]];
        out->all |= p->resume_ops_lost;
        total += p->resume_nops;
    }
    out->v = malloc((total ? total : 1) * sizeof *out->v);
    if (!out->v) {
        out->all = 1; /* without the list, nothing may complete */
        return -PERR_NOMEM;
    }
    for (int a = 0; a < n; a++) {
        const msm_peer_t *p = &m->peers[mem[a]];
        for (uint32_t i = 0; i < p->resume_nops; i++)
            if (!p->resume_ops[i].finished) out->v[out->n++] = p->resume_ops[i];
    }
    qsort(out->v, out->n, sizeof *out->v, cmp_op);
    return 0;
}

int msm_rb_unfinished(const msm_rb_ops_t *u, const wire_op_outcome_t *op) {
    return u->all || bsearch(op, u->v, u->n, sizeof *u->v, cmp_op) != NULL;
}

void msm_rb_ops_free(msm_rb_ops_t *u) {
    free(u->v);
    memset(u, 0, sizeof *u);
}

typedef struct {
    uint64_t rev;
    uint8_t digest[16];
    int at;
} claim_t;

static int cmp_claim(const void *a, const void *b) {
    const claim_t *x = a, *y = b;
    if (x->rev != y->rev) return x->rev < y->rev ? -1 : 1;
    int c = memcmp(x->digest, y->digest, 16);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

int msm_rb_claim(const msm_peer_t *const *peers, int n) {
    claim_t *c = malloc((size_t)(n ? n : 1) * sizeof *c);
    if (!c) return -PERR_NOMEM;
    int nc = 0;
    for (int i = 0; i < n; i++) {
        const msm_peer_t *p = peers[i];
        if (!p->resume_has_rev) continue;
        c[nc].rev = p->resume_rev;
        memcpy(c[nc].digest, p->resume_digest, 16);
        c[nc++].at = i;
    }
    qsort(c, (size_t)nc, sizeof *c, cmp_claim);
    int best = -PERR_INVALID, best_votes = 0;
    /* Ascending revisions: a later run with as many holders is a higher revision. */
    for (int i = 0; i < nc;) {
        int j = i;
        while (j < nc && c[j].rev == c[i].rev && memcmp(c[j].digest, c[i].digest, 16) == 0) j++;
        if (j - i >= best_votes) {
            best_votes = j - i;
            best = c[i].at;
        }
        i = j;
    }
    free(c);
    return best;
}

void msm_rb_digest_tensors(const wire_tensor_t *t, uint32_t n, uint8_t out[16]) {
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 16);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t fixed[18];
        size_t klen = strlen(t[i].key);
        fixed[0] = (uint8_t)klen;
        fixed[1] = t[i].dtype;
        for (int b = 0; b < 8; b++) {
            fixed[2 + b] = (uint8_t)(t[i].count >> (56 - 8 * b));
            fixed[10 + b] = (uint8_t)(t[i].hash >> (56 - 8 * b));
        }
        crypto_generichash_update(&st, fixed, sizeof fixed);
        crypto_generichash_update(&st, (const unsigned char *)t[i].key, klen);
    }
    crypto_generichash_final(&st, out, 16);
}
