/* op_grant.c - collectives the master pre-commenced with the verdict of their tag's previous operation
 * (docs/protocol.md "Pipelined collectives"; op_record.h). A grant is valid for one operation of its tag,
 * from the master connection that sent it, when this member votes exactly what it voted in the operation
 * that earned it; the ring, world and members are that operation's. Guarded by comm->mu. */
#include "op/op_record.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

struct op_grant {
    uint64_t tag, op_seq, slots;
    unsigned epoch;
    wire_msg_t vote;     /* the COLL_INIT this member sent for the operation that earned it */
    wire_msg_t commence; /* that operation's COMMENCE: ring, world, kind, root, members */
    struct op_grant *next;
};

static void grant_free(struct op_grant *g) {
    wire_msg_free(&g->commence);
    free(g);
}

/* Unlinks and returns the grant of tag, or NULL. */
static struct op_grant *take(pcclComm_t *c, uint64_t tag) {
    for (struct op_grant **pp = &c->grants; *pp; pp = &(*pp)->next)
        if ((*pp)->tag == tag) {
            struct op_grant *g = *pp;
            *pp = g->next;
            return g;
        }
    return NULL;
}

/* A deep copy of a COMMENCE (its ring and members). 0 or -PERR_NOMEM. */
static int copy_commence(wire_msg_t *dst, const wire_msg_t *src) {
    uint32_t n = src->u.commence.n;
    *dst = *src;
    dst->u.commence.ring = malloc((size_t)n * 16 + 1);
    dst->u.commence.members = malloc((size_t)n * sizeof *dst->u.commence.members + 1);
    if (!dst->u.commence.ring || !dst->u.commence.members) {
        wire_msg_free(dst);
        return -PERR_NOMEM;
    }
    memcpy(dst->u.commence.ring, src->u.commence.ring, (size_t)n * 16);
    memcpy(dst->u.commence.members, src->u.commence.members, (size_t)n * sizeof *dst->u.commence.members);
    return 0;
}

void op_grant_store_locked(pccl_op_t *o, const wire_msg_t *complete) {
    pcclComm_t *c = o->comm;
    const __typeof__(complete->u.coll) *cc = &complete->u.coll;
    if (!cc->next_seq || !cc->slots || !o->got_commence) return;
    struct op_grant *old = take(c, cc->next_tag), *g = calloc(1, sizeof *g);
    if (old) grant_free(old);
    if (!g) return;
    if (copy_commence(&g->commence, &o->commence) != 0) {
        free(g);
        return;
    }
    g->tag = cc->next_tag;
    g->op_seq = cc->next_seq;
    g->slots = cc->slots;
    g->epoch = o->epoch;
    g->vote = o->vote;
    g->vote.u.coll_init.tag = cc->next_tag;
    g->vote.u.coll_init.grant_seq = 0;
    g->commence.u.commence.tag = cc->next_tag;
    g->commence.u.commence.op_seq = cc->next_seq;
    g->commence.u.commence.slots = cc->slots;
    g->next = c->grants;
    c->grants = g;
}

static int same_vote(const wire_msg_t *a, const wire_msg_t *b) {
    const __typeof__(a->u.coll_init) *x = &a->u.coll_init, *y = &b->u.coll_init;
    return x->tag == y->tag && x->count == y->count && x->dtype == y->dtype && x->op == y->op &&
           x->quant_algo == y->quant_algo && x->quant_dtype == y->quant_dtype && x->kind == y->kind &&
           x->flags == y->flags && x->rank_key == y->rank_key && x->capacity == y->capacity &&
           x->max_world == y->max_world && x->hash == y->hash && x->algo == y->algo;
}

int op_grant_take_locked(pccl_op_t *o, const wire_msg_t *vote) {
    struct op_grant *g = take(o->comm, o->tag);
    if (!g) return 0;
    int fits = g->epoch == o->epoch && same_vote(&g->vote, vote);
    if (fits) {
        o->commence = g->commence;
        o->op_seq = g->op_seq;
        o->got_commence = 1;
        o->pipelined = 1;
        free(g);
    } else {
        grant_free(g); /* the plain vote revokes it at the master */
    }
    return fits;
}

void op_grant_revoke_locked(pcclComm_t *c, const wire_msg_t *revoke) {
    struct op_grant *g = take(c, revoke->u.coll.tag);
    if (g && g->op_seq != revoke->u.coll.op_seq) { /* another grant of the tag: keep it */
        g->next = c->grants;
        c->grants = g;
    } else if (g) {
        grant_free(g);
    }
}

void op_grants_clear(pcclComm_t *c) {
    pthread_mutex_lock(&c->mu);
    while (c->grants) {
        struct op_grant *g = c->grants;
        c->grants = g->next;
        grant_free(g);
    }
    pthread_mutex_unlock(&c->mu);
}
