/*
 * msm_collective.c - per-tag collective consensus of one peer group.
 *
 * VOTE_INITIATE: every accepted member sends COLL_INIT(tag, kind, parameters).
 * When all did, the parameters are cross-checked by the table of collective
 * kinds (msm_coll_kinds.c; a mismatch rejects the call on every peer, with the
 * reason, instead of corrupting data), a free connection-pool slot is assigned
 * (ops beyond the pool wait for a slot), and COMMENCE carries the ring, the
 * kind, the root and each ring position's rank, count and whether it holds the
 * data.
 * An op may get several free slots, one stripe each (ring_stripe.c; stripes_for).
 * PERFORM: members run the ring and report COLL_DONE. All ok -> COMPLETE;
 * any failure or departure -> ABORT to all members at once (their buffers are
 * restored and they may retry).
 * PIPELINED (msm_grant.c): COMPLETE may pre-commence the tag's next operation;
 * its members vote under that grant and need no COMMENCE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "pccl_coll.h"
#include "sm/msm_algo.h"
#include "sm/msm_internal.h"

uint64_t msm_coll_tag_of(const wire_msg_t *vote) { return vote->u.coll_init.tag; }

static uint32_t group_pool(msm_t *m, msm_group_t *g) {
    uint32_t pool = 64;
    for (int i = 0; i < g->ring_len; i++) {
        msm_peer_t *p = msm_find(m, g->ring[i]);
        if (p && p->pool < pool) pool = p->pool;
    }
    return pool ? pool : 1;
}

/* The slots of the pool (bit i = slot i) that no running or granted collective of the group holds. */
static uint64_t free_slots(msm_t *m, msm_group_t *g) {
    uint32_t pool = group_pool(m, g);
    uint64_t all = pool >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << pool) - 1, used = msm_grant_slots(m, g->id);
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op->kind == MSM_OP_COLLECTIVE && op->group == g->id) used |= op->slots; /* running, granted or unpipelined */
    return all & ~used;
}

/* Whether every peer of g's ring is on one host (one address, or loopback). */
static int ring_local(msm_t *m, msm_group_t *g) {
    const ccoip_inet_address_t *first = NULL;
    for (int i = 0; i < g->ring_len; i++) {
        msm_peer_t *p = msm_find(m, g->ring[i]);
        if (!p || addr_ip_is_loopback(&p->ip)) continue;
        if (first && !addr_ip_equal(first, &p->ip)) return 0;
        first = &p->ip;
    }
    return 1;
}

/* How many stripes c gets out of `nfree` free slots: all of them for an op alone, an equal share
 * when other collectives of the group are voting (they will want slots too), at most one per
 * stripe_min_bytes of its data, and one on a ring within one host unless stripe_local. */
static uint32_t stripes_for(msm_t *m, msm_group_t *g, const msm_op_t *c, uint32_t nfree) {
    uint32_t others = 0;
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op != c && op->kind == MSM_OP_COLLECTIVE && op->group == g->id && op->phase == MSM_PHASE_VOTING &&
            !op->granted)
            others++;
    uint64_t k = nfree / (others + 1);
    uint64_t by_size = c->payload_bytes / m->stripe_min_bytes;
    if (k > by_size) k = by_size;
    if (!m->stripe_local && ring_local(m, g)) k = 1;
    return k ? (uint32_t)k : 1;
}

static void send_coll(msm_t *m, uint64_t conn, uint16_t type, const msm_op_t *c, int ok) {
    wire_msg_t w = {.type = type};
    w.u.coll.tag = c->tag;
    w.u.coll.op_seq = c->op_seq;
    w.u.coll.ok = (uint8_t)ok;
    msm_send(m, conn, &w);
}

/* The votes of c's members in g's ring order, their conns and uuids and their names for a rejection's reason. */
typedef struct ring_votes {
    int n;
    msm_coll_vote_t *v;
    uint64_t *conns;
    uint8_t (*ring)[16];
    const char **names;
    char (*buf)[WIRE_NAME_MAX + 16];
} ring_votes_t;

static void ring_votes_free(ring_votes_t *rv) {
    free(rv->v);
    free(rv->conns);
    free(rv->ring);
    free(rv->names);
    free(rv->buf);
}

/* A member in a rejection's reason: the name it announced, else its uuid's first 8 hex digits. */
static void short_name(const msm_peer_t *p, char out[WIRE_NAME_MAX + 16]) {
    const uint8_t *u = p->uuid;
    if (p->name[0]) snprintf(out, WIRE_NAME_MAX + 16, "%s", p->name);
    else snprintf(out, WIRE_NAME_MAX + 16, "peer %02x%02x%02x%02x", u[0], u[1], u[2], u[3]);
}

/* @return 0, or -PERR_NOMEM (rv freed). */
static int ring_votes(msm_t *m, msm_group_t *g, msm_op_t *c, ring_votes_t *rv) {
    size_t cap = (size_t)g->ring_len + 1;
    *rv = (ring_votes_t){.v = calloc(cap, sizeof *rv->v), .conns = calloc(cap, sizeof *rv->conns),
                         .ring = calloc(cap, 16), .names = calloc(cap, sizeof *rv->names),
                         .buf = calloc(cap, sizeof *rv->buf)};
    if (!rv->v || !rv->conns || !rv->ring || !rv->names || !rv->buf) {
        ring_votes_free(rv);
        return -PERR_NOMEM;
    }
    for (int i = 0; i < g->ring_len; i++) {
        msm_peer_t *p = msm_find(m, g->ring[i]);
        msm_member_t *mb = msm_op_member(c, g->ring[i]);
        if (!p || !mb) continue;
        rv->v[rv->n] = mb->coll;
        rv->conns[rv->n] = p->conn;
        memcpy(rv->ring[rv->n], p->uuid, 16);
        short_name(p, rv->buf[rv->n]);
        rv->names[rv->n] = rv->buf[rv->n];
        rv->n++;
    }
    return 0;
}

/* Cross-checks c's votes (msm_coll_kinds.c). @return 0, or -PERR_INVALID with the reason in c->detail. */
static int check(msm_t *m, msm_group_t *g, msm_op_t *c) {
    ring_votes_t rv;
    int rc = ring_votes(m, g, c, &rv);
    if (rc == 0) {
        rc = msm_coll_check(rv.v, rv.names, rv.n, c->detail);
        ring_votes_free(&rv);
    }
    if (rc == -PERR_NOMEM) snprintf(c->detail, sizeof c->detail, "master out of memory");
    return rc ? -PERR_INVALID : 0;
}

/* COMMENCE's kind, root and members from the plan of the votes rv (members: caller frees). @return 0, or
 * -PERR_NOMEM. */
static int fill_members(const ring_votes_t *rv, wire_msg_t *w) {
    wire_coll_member_t *mem = calloc((size_t)rv->n + 1, sizeof *mem);
    int rc = mem ? msm_coll_plan(rv->v, rv->n, &w->u.commence.root, mem) : -PERR_NOMEM;
    if (rc) free(mem);
    else w->u.commence.members = mem;
    w->u.commence.kind = rv->n ? rv->v[0].kind : 0;
    return rc;
}

/* The algorithm every member of the votes rv runs, COMMENCE w's members filled (msm_algo.h). */
static uint8_t choose_algo(msm_t *m, const ring_votes_t *rv, const wire_msg_t *w, uint64_t payload_bytes) {
    int by_position = 1;
    uint32_t holders = 0;
    for (int i = 0; i < rv->n; i++) {
        by_position &= w->u.commence.members[i].rank == (uint32_t)i;
        holders += w->u.commence.members[i].holds != 0;
    }
    int has = msm_algo_has(rv->v[0].kind, rv->v[0].quant_algo != 0, by_position, holders, (uint32_t)rv->n);
    return msm_algo_for(m, has, rv->v[0].kind, rv->v[0].algo, payload_bytes, rv->conns, (uint32_t)rv->n);
}

typedef enum { END_COMPLETED, END_ABORTED, END_REJECTED } coll_end_t;
static void count_end(msm_t *m, const msm_op_t *c, coll_end_t end);
static void complete(msm_t *m, msm_group_t *g, msm_op_t *c);

/* A barrier is complete once every member voted: its COMMENCE tells each member so, and no member reports
 * back (one master round trip). */
static void end_barrier(msm_t *m, msm_group_t *g, msm_op_t *c) {
    PLOG_DEBUG("master", "group %u tag %llu completed: barrier, op %llu", g->id, (unsigned long long)c->tag,
               (unsigned long long)c->op_seq);
    count_end(m, c, END_COMPLETED);
    g->collectives_completed++;
    msm_op_complete(m, c);
}

static int commence(msm_t *m, msm_group_t *g, msm_op_t *c) {
    ring_votes_t rv;
    if (ring_votes(m, g, c, &rv) != 0) return 0;
    c->payload_bytes = msm_coll_payload_bytes(rv.v, rv.n);
    wire_msg_t w = {.type = M2C_COLL_COMMENCE};
    if (fill_members(&rv, &w) != 0) {
        ring_votes_free(&rv);
        return 0;
    }
    w.u.commence.algo = c->algo = choose_algo(m, &rv, &w, c->payload_bytes);
    int barrier = c->coll_kind == pcclExtCollBarrier;
    /* Slots an unused grant holds go to an operation that needs them (the grant is revoked). A barrier moves
     * nothing and ends at its COMMENCE: it names slot 0 (the field is never 0) and reserves none. */
    uint64_t avail = barrier ? 1 : free_slots(m, g) | c->slots, slots = 0; /* an unpipelined op's own slots */
    uint32_t could = (uint32_t)__builtin_popcountll(avail | msm_grant_slots(m, g->id));
    uint32_t want = barrier ? 1 : could ? stripes_for(m, g, c, could) : 1, k = 0; /* ring and rhd stripe alike */
    while ((uint32_t)__builtin_popcountll(avail) < want && msm_grant_revoke_oldest(m, g->id))
        avail = free_slots(m, g) | c->slots;
    if (!avail) { /* all connections busy: wait for one */
        free(w.u.commence.members);
        ring_votes_free(&rv);
        return 0;
    }
    for (uint32_t i = 0; i < 64 && k < want; i++)
        if (avail >> i & 1) slots |= (uint64_t)1 << i, k++;
    for (int i = 0; i < g->ring_len; i++) {
        msm_member_t *mb = msm_op_member(c, g->ring[i]);
        if (mb) mb->owes = 1;
    }
    c->phase = MSM_PHASE_RUNNING;
    c->slots = slots;
    c->op_seq = ++m->next_op_seq;
    w.u.commence.tag = c->tag;
    w.u.commence.op_seq = c->op_seq;
    w.u.commence.slots = slots;
    msm_world(m, g->id, &w.u.commence.world);
    w.u.commence.n = (uint32_t)rv.n;
    w.u.commence.ring = rv.ring;
    for (int i = 0; i < c->nmembers; i++) msm_send(m, c->members[i].conn, &w);
    PLOG_DEBUG("master", "group %u tag %llu commenced: %s, op %llu, slots %#llx, %d peers, %s", g->id,
               (unsigned long long)c->tag, msm_coll_kind_name(c->coll_kind), (unsigned long long)c->op_seq,
               (unsigned long long)slots, rv.n, msm_algo_name(w.u.commence.algo));
    free(w.u.commence.members);
    ring_votes_free(&rv);
    if (barrier) end_barrier(m, g, c);
    return 1;
}

/* Decides every voting collective of g whose vote is complete, in launch order. */
static void evaluate(msm_t *m, msm_group_t *g) {
    int progress = 1;
    while (progress) {
        progress = 0;
        for (msm_op_t *c = m->ops; c; c = c->next) {
            if (c->kind != MSM_OP_COLLECTIVE || c->group != g->id || c->phase != MSM_PHASE_VOTING) continue;
            if (!msm_op_all_voted(m, c)) continue;
            if (c->granted) { /* every member voted under the grant: its ring runs everywhere */
                c->phase = MSM_PHASE_RUNNING;
                PLOG_DEBUG("master", "group %u tag %llu commenced: %s, op %llu, slots %#llx, %d peers (granted)", g->id,
                           (unsigned long long)c->tag, msm_coll_kind_name(c->coll_kind), (unsigned long long)c->op_seq,
                           (unsigned long long)c->slots, c->nmembers);
                if (!msm_op_owed(c)) complete(m, g, c);
            } else if (g->ring_len < 2) {
                msm_op_fail(m, c, MSM_FAIL_TOO_FEW);
            } else if (check(m, g, c) != 0) {
                PLOG_WARN("master", "group %u tag %llu rejected: %s", g->id, (unsigned long long)c->tag, c->detail);
                msm_op_fail(m, c, MSM_FAIL_MISMATCH);
            } else if (!commence(m, g, c)) {
                continue;
            }
            progress = 1;
            break;
        }
    }
}

msm_coll_vote_t msm_coll_vote_of(const wire_msg_t *vote) {
    const __typeof__(vote->u.coll_init) *ci = &vote->u.coll_init;
    return (msm_coll_vote_t){.kind = ci->kind,
                                 .flags = ci->flags,
                                 .dtype = ci->dtype,
                                 .op = ci->op,
                                 .quant_algo = ci->quant_algo,
                                 .quant_dtype = ci->quant_dtype,
                                 .max_world = ci->max_world,
                                 .count = ci->count,
                                 .rank_key = ci->rank_key,
                                 .capacity = ci->capacity,
                                 .hash = ci->hash,
                                 .algo = ci->algo};
}

int msm_coll_vote_equal(const msm_coll_vote_t *a, const msm_coll_vote_t *b) {
    return a->kind == b->kind && a->flags == b->flags && a->dtype == b->dtype && a->op == b->op &&
           a->quant_algo == b->quant_algo && a->quant_dtype == b->quant_dtype && a->max_world == b->max_world &&
           a->count == b->count && a->rank_key == b->rank_key && a->capacity == b->capacity && a->hash == b->hash &&
           a->algo == b->algo;
}

void msm_coll_on_init(msm_t *m, msm_peer_t *p, msm_op_t *c, msm_member_t *mb, const wire_msg_t *vote) {
    mb->coll = msm_coll_vote_of(vote);
    if (c->nmembers == 1) c->coll_kind = vote->u.coll_init.kind;
    if (c->granted && vote->u.coll_init.grant_seq) {
        mb->pipelined = 1;
        mb->owes = 1; /* its ring runs: it reports like a member of a commenced operation */
    } else if (c->granted) {
        msm_grant_unpipeline(m, c, "a plain vote"); /* everyone votes plainly */
    }
    evaluate(m, msm_group(m, p->group, 0));
}

/* Counts c's end by kind in the master's and its group's stats (an unknown kind only in the totals). */
static void count_end(msm_t *m, const msm_op_t *c, coll_end_t end) {
    msm_group_t *g = msm_group(m, c->group, 0);
    msm_coll_stats_t *s[2] = {NULL, NULL};
    if (c->coll_kind < MSM_COLL_NKINDS) {
        s[0] = &m->stats.by_kind[c->coll_kind];
        s[1] = g ? &g->by_kind[c->coll_kind] : NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (!s[i]) continue;
        if (end == END_COMPLETED) s[i]->completed++, s[i]->bytes += c->payload_bytes;
        else if (end == END_ABORTED) s[i]->aborted++;
        else s[i]->rejected++;
    }
    if (end == END_COMPLETED && c->algo < MSM_ALGO_SLOTS) m->stats.by_algo[c->algo]++;
    if (end == END_COMPLETED) m->stats.collectives_completed++;
    else if (end == END_ABORTED) m->stats.collectives_aborted++;
    else m->stats.collectives_rejected++;
}

static void complete(msm_t *m, msm_group_t *g, msm_op_t *c) {
    wire_msg_t w = {.type = M2C_COLL_COMPLETE};
    w.u.coll.tag = c->tag;
    w.u.coll.op_seq = c->op_seq;
    w.u.coll.ok = 1;
    msm_grant_issue(m, g, c, &w);
    for (int i = 0; i < c->nmembers; i++) msm_send(m, c->members[i].conn, &w);
    PLOG_DEBUG("master", "group %u tag %llu completed: op %llu", g->id, (unsigned long long)c->tag,
               (unsigned long long)c->op_seq);
    count_end(m, c, END_COMPLETED);
    g->collectives_completed++;
    if (msm_coll_kind(c->coll_kind) && (msm_coll_kind(c->coll_kind)->equal & MSM_EQ_REDUCE))
        g->reduced_bytes += c->payload_bytes;
    msm_reports_forget_group(m, g->id); /* the ring worked: old unreachability reports are stale */
    msm_op_complete(m, c);
}

void msm_coll_on_done(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    msm_group_t *g = msm_group(m, p->group, 0);
    msm_op_t *c = g ? msm_op_find(m, MSM_OP_COLLECTIVE, g->id, msg->u.coll.tag) : NULL;
    /* A DONE for an operation that was already aborted or revoked is a normal race: ignore it. */
    if (!c || !c->op_seq || c->op_seq != msg->u.coll.op_seq || (c->phase != MSM_PHASE_RUNNING && !c->granted)) return;
    msm_member_t *mb = msm_op_member(c, p->conn);
    if (!mb) {
        msm_kick(m, p, "COLL_DONE for tag %llu from a non-member", (unsigned long long)c->tag);
        return;
    }
    if (c->phase == MSM_PHASE_VOTING) { /* granted, not every member voted yet */
        if (msg->u.coll.ok) {
            mb->owes = 0;
            return;
        }
        /* A ring under a grant fails when a member has not started it yet (still computing) as well as on a
         * broken link: the members vote again and the plain vote waits for everyone. */
        if (!msm_grant_unpipeline(m, c, "a ring failed before every member voted")) evaluate(m, g);
        return;
    }
    if (!msg->u.coll.ok) {
        char name[MSM_NAME_MAX];
        PLOG_INFO("master", "group %u tag %llu failed on %s: aborting", g->id, (unsigned long long)c->tag,
                  msm_peer_name(p, name));
        msm_op_fail(m, c, MSM_FAIL_LOST);
    } else {
        mb->owes = 0;
        if (msm_op_owed(c)) return;
        complete(m, g, c);
    }
    evaluate(m, g); /* a slot became free */
}

/* After departures: a running collective that lost a member aborts; votes may now be complete. */
void msm_coll_progress(msm_t *m) {
    msm_grants_check(m);
    for (;;) {
        msm_op_t *c = m->ops;
        while (c && !(c->kind == MSM_OP_COLLECTIVE && c->phase == MSM_PHASE_RUNNING && (c->failed || !c->nmembers)))
            c = c->next;
        if (!c) break;
        PLOG_INFO("master", "group %u tag %llu: a member left mid-operation, aborting", c->group,
                  (unsigned long long)c->tag);
        msm_op_fail(m, c, MSM_FAIL_LOST);
    }
    for (int i = 0; i < m->ngroups; i++) evaluate(m, &m->groups[i]);
}

/* Voting: REJECT with the reason; running: ABORT to every (remaining) member at once. */
void msm_coll_fail(msm_t *m, msm_op_t *c, msm_fail_t why) {
    msm_grant_notify_idle(m, c);
    if (c->phase == MSM_PHASE_RUNNING) {
        for (int i = 0; i < c->nmembers; i++) send_coll(m, c->members[i].conn, M2C_COLL_ABORT, c, 0);
        count_end(m, c, END_ABORTED);
        return;
    }
    uint8_t reason = why == MSM_FAIL_MISMATCH ? REJECT_PARAM_MISMATCH
                     : why == MSM_FAIL_TOO_FEW ? REJECT_TOO_FEW_PEERS
                                               : REJECT_CONFLICT;
    const char *detail = why == MSM_FAIL_MISMATCH ? c->detail
                         : why == MSM_FAIL_TOO_FEW ? "fewer than two peers in the group"
                                                   : "peers called different operations";
    count_end(m, c, END_REJECTED);
    for (int i = 0; i < c->nmembers; i++) {
        wire_msg_t w = {.type = M2C_COLL_REJECT};
        w.u.reject.tag = c->tag;
        w.u.reject.reason = reason;
        snprintf(w.u.reject.detail, sizeof w.u.reject.detail, "%s", detail);
        msm_send(m, c->members[i].conn, &w);
    }
}
