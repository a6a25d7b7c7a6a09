/*
 * msm_grant.c - pipelined collectives: the verdict of an operation pre-commences the next one of its tag
 * (docs/protocol.md "Pipelined collectives").
 *
 * COMPLETE carries a grant: an op_seq and the same slots for the next operation of a tag (the same tag, or
 * the next one when the group's collectives run one at a time with tags counting up), valid for the ring,
 * world and votes of the operation that completed. A member whose next call of that tag votes exactly what
 * it voted last time runs its ring at once and sends COLL_INIT with the grant's op_seq: no COMMENCE. The
 * master still receives every vote: the first one moves the grant into m->ops as a granted collective that
 * votes like any other (deadlines, the stuck-vote breaker); once every member voted under the grant it runs
 * and ends by the usual verdict; the loss of a member that voted under it aborts it. Anything else (a holder leaving before it voted, or a voter leaving by LEAVE before every member voted, included) voids the grant (COLL_REVOKE to every holder: a member
 * running under it stops, restores its buffer and votes again without it; the others drop their streams on
 * its slots, which a member running under it may have written): another vote for the tag, a changed ring
 * or world, a failed ring before every member voted, a shortage of slots for another operation.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "pccl_coll.h"
#include "sm/msm_internal.h"

/* Kinds whose ring cannot finish on any member before every member started it, so that a restarted master's
 * rebuild (which hears only from members that started) settles a pipelined operation as it does a commenced
 * one: every member's data passes every other member. A broadcast's chain and the barrier finish early. */
static int grantable(const msm_op_t *c) {
    return c->payload_bytes > 0 && (c->coll_kind == pcclExtCollAllReduce || c->coll_kind == pcclExtCollAllGather ||
                                    c->coll_kind == pcclExtCollAllGatherV || c->coll_kind == pcclExtCollReduceScatter);
}

static msm_op_t *find_grant(msm_t *m, uint32_t group, uint64_t tag) {
    for (msm_op_t *gr = m->grants; gr; gr = gr->next)
        if (gr->group == group && gr->tag == tag) return gr;
    return NULL;
}

/* Whether another operation or grant of the group has this tag (self excepted). */
static int tag_busy(msm_t *m, uint32_t group, uint64_t tag, const msm_op_t *self) {
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op != self && op->kind == MSM_OP_COLLECTIVE && op->group == group && op->tag == tag) return 1;
    return find_grant(m, group, tag) != NULL;
}

/* The tag the next operation will have: c's, unless c ran alone in its group and its tag is one more than
 * the previous one's (callers that count tags up, one operation at a time). */
static uint64_t next_tag(msm_t *m, msm_group_t *g, const msm_op_t *c) {
    int alone = 1;
    for (msm_op_t *op = m->ops; op && alone; op = op->next)
        if (op != c && op->kind == MSM_OP_COLLECTIVE && op->group == g->id) alone = 0;
    uint64_t t = c->tag;
    if (alone && g->has_last_tag && c->tag == g->last_tag + 1 && c->tag != UINT64_MAX) t = c->tag + 1;
    g->last_tag = c->tag;
    g->has_last_tag = 1;
    return t;
}

void msm_grant_issue(msm_t *m, msm_group_t *g, const msm_op_t *c, wire_msg_t *complete) {
    uint64_t t = next_tag(m, g, c);
    if (!grantable(c) || tag_busy(m, g->id, t, c) || g->ring_len < 2) return;
    msm_op_t *gr = calloc(1, sizeof *gr);
    if (!gr) return;
    gr->prior = calloc((size_t)c->nmembers, sizeof *gr->prior);
    gr->grant_ring = calloc((size_t)g->ring_len, sizeof *gr->grant_ring);
    if (!gr->prior || !gr->grant_ring) {
        free(gr->prior);
        free(gr->grant_ring);
        free(gr);
        return;
    }
    for (int i = 0; i < c->nmembers; i++) gr->prior[i] = (msm_prior_t){c->members[i].conn, c->members[i].coll};
    gr->nprior = c->nmembers;
    memcpy(gr->grant_ring, g->ring, (size_t)g->ring_len * sizeof *gr->grant_ring);
    gr->grant_ring_len = g->ring_len;
    msm_world(m, g->id, &gr->grant_world);
    gr->kind = MSM_OP_COLLECTIVE;
    gr->group = g->id;
    gr->tag = t;
    gr->granted = 1;
    gr->op_seq = ++m->next_op_seq;
    gr->slots = c->slots;
    gr->coll_kind = c->coll_kind;
    gr->payload_bytes = c->payload_bytes;
    gr->algo = c->algo;
    msm_op_t **pp = &m->grants;
    while (*pp) pp = &(*pp)->next;
    *pp = gr;
    complete->u.coll.next_tag = t;
    complete->u.coll.next_seq = gr->op_seq;
    complete->u.coll.slots = gr->slots;
}

/* COLL_REVOKE to the grant's holders still connected (only_idle: those that did not vote under it). */
static void revoke_to(msm_t *m, const msm_op_t *gr, int only_idle) {
    wire_msg_t w = {.type = M2C_COLL_REVOKE};
    w.u.coll.tag = gr->tag;
    w.u.coll.op_seq = gr->op_seq;
    w.u.coll.slots = gr->slots;
    for (int i = 0; i < gr->nprior; i++) {
        uint64_t conn = gr->prior[i].conn;
        if ((only_idle && msm_op_member(gr, conn)) || !msm_find(m, conn)) continue;
        msm_send(m, conn, &w);
    }
}

static void drop_grant_data(msm_op_t *gr) {
    free(gr->prior);
    free(gr->grant_ring);
    gr->prior = NULL;
    gr->grant_ring = NULL;
    gr->nprior = gr->grant_ring_len = 0;
}

static void revoke_grant(msm_t *m, msm_op_t *gr) {
    for (msm_op_t **pp = &m->grants; *pp; pp = &(*pp)->next)
        if (*pp == gr) {
            *pp = gr->next;
            break;
        }
    PLOG_DEBUG("master", "group %u tag %llu: grant of op %llu revoked", gr->group, (unsigned long long)gr->tag,
               (unsigned long long)gr->op_seq);
    revoke_to(m, gr, 0);
    drop_grant_data(gr);
    free(gr);
}

void msm_grants_free(msm_t *m) {
    while (m->grants) {
        msm_op_t *gr = m->grants;
        m->grants = gr->next;
        drop_grant_data(gr);
        free(gr);
    }
}

int msm_grant_revoke_oldest(msm_t *m, uint32_t group) {
    for (msm_op_t *gr = m->grants; gr; gr = gr->next)
        if (gr->group == group) {
            revoke_grant(m, gr);
            return 1;
        }
    return 0;
}

uint64_t msm_grant_slots(const msm_t *m, uint32_t group) {
    uint64_t s = 0;
    for (const msm_op_t *gr = m->grants; gr; gr = gr->next)
        if (gr->group == group) s |= gr->slots;
    return s;
}

int msm_grant_unpipeline(msm_t *m, msm_op_t *c, const char *why) {
    PLOG_INFO("master", "group %u tag %llu: grant of op %llu revoked (%s); its members vote again", c->group,
              (unsigned long long)c->tag, (unsigned long long)c->op_seq, why);
    revoke_to(m, c, 0);
    for (int i = c->nmembers - 1; i >= 0; i--)
        if (c->members[i].pipelined) msm_op_remove(c, c->members[i].conn);
    drop_grant_data(c);
    c->granted = 0;
    c->op_seq = 0;
    /* c keeps its slots until it commences again (on them) or ends: a member that ran under the grant closes
     * its streams on them as it stops, and another op there would otherwise race those closes. */
    if (c->nmembers) return 0;
    msm_op_complete(m, c); /* nobody's vote is left to answer */
    return 1;
}

void msm_grant_notify_idle(msm_t *m, const msm_op_t *c) {
    if (c->granted) revoke_to(m, c, 1);
}

/* Whether the group's ring and the world are those the grant was made for. */
static int snapshot_holds(msm_t *m, const msm_op_t *gr) {
    msm_group_t *g = msm_group(m, gr->group, 0);
    if (!g || g->ring_len != gr->grant_ring_len ||
        memcmp(g->ring, gr->grant_ring, (size_t)g->ring_len * sizeof *g->ring) != 0)
        return 0;
    wire_world_t w;
    msm_world(m, g->id, &w);
    return memcmp(&w, &gr->grant_world, sizeof w) == 0;
}

/* Whether conn may vote under gr with vote v: a holder voting what it voted last time, same ring and world. */
static int fits(msm_t *m, const msm_op_t *gr, uint64_t conn, const msm_coll_vote_t *v) {
    for (int i = 0; i < gr->nprior; i++)
        if (gr->prior[i].conn == conn) return msm_coll_vote_equal(&gr->prior[i].coll, v) && snapshot_holds(m, gr);
    return 0;
}

void msm_grants_check(msm_t *m) {
    for (msm_op_t *gr = m->grants, *next; gr; gr = next) {
        next = gr->next;
        if (!snapshot_holds(m, gr)) revoke_grant(m, gr);
    }
    for (msm_op_t *c = m->ops; c;) {
        if (c->kind == MSM_OP_COLLECTIVE && c->granted && c->phase == MSM_PHASE_VOTING && !snapshot_holds(m, c)) {
            /* Its members run their rings already (a granted op's votes are all under the grant): a voter lost
             * is a failure in the middle of a collective and aborts it, as in a commenced one; the idle holders'
             * grants go. A holder that leaves before it voted, or a voter that leaves (LEAVE) before every member
             * voted, leaves between operations, as a plain vote goes on without a peer that left: the voters
             * stop, restore and vote again without it. */
            if (c->nmembers && c->failed) {
                PLOG_INFO("master", "group %u tag %llu: a member left op %llu run under a grant, aborting", c->group,
                          (unsigned long long)c->tag, (unsigned long long)c->op_seq);
                c->phase = MSM_PHASE_RUNNING;
                msm_op_fail(m, c, MSM_FAIL_LOST);
            } else {
                msm_grant_unpipeline(m, c, c->nmembers ? "a holder left" : "the ring changed");
            }
            c = m->ops; /* the list lost c: rescan */
            continue;
        }
        c = c->next;
    }
}

int msm_coll_check_init(msm_t *m, msm_peer_t *p, const wire_msg_t *vote) {
    uint64_t tag = vote->u.coll_init.tag, seq = vote->u.coll_init.grant_seq;
    msm_op_t *gr = find_grant(m, p->group, tag);
    if (!seq) { /* a plain vote for a tag with a grant: nobody may run under it any more */
        if (gr) revoke_grant(m, gr);
        return 0;
    }
    msm_coll_vote_t v = msm_coll_vote_of(vote);
    if (gr && gr->op_seq == seq) {
        if (!fits(m, gr, p->conn, &v)) {
            revoke_grant(m, gr);
            return -PERR_REFUSED;
        }
        for (msm_op_t **pp = &m->grants; *pp; pp = &(*pp)->next)
            if (*pp == gr) {
                *pp = gr->next;
                break;
            }
        gr->next = NULL;
        gr->started = m->now;
        msm_op_t **pp = &m->ops;
        while (*pp) pp = &(*pp)->next;
        *pp = gr;
        return 0;
    }
    msm_op_t *c = msm_op_voting(m, MSM_OP_COLLECTIVE, p->group, tag);
    if (c && c->granted && c->op_seq == seq) {
        if (fits(m, c, p->conn, &v)) return 0;
        if (!msm_grant_unpipeline(m, c, "a vote that does not fit it")) msm_coll_progress(m);
        return -PERR_REFUSED;
    }
    /* A grant revoked since this vote left: its COLL_REVOKE reaches the peer, which votes again. */
    if (seq <= m->next_op_seq) return -PERR_REFUSED;
    msm_kick(m, p, "COLL_INIT for tag %llu under op %llu, which this master never granted", (unsigned long long)tag,
             (unsigned long long)seq);
    return -PERR_REFUSED;
}
