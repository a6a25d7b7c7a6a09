/*
 * msm_ops.c - the operation records (see msm_ops.h): their lifecycle, the one
 * place the one-major-operation-per-peer rule is enforced (from the kinds
 * table's conflicts), the routing of votes and reports to their kind,
 * departures, the single fail path and the peer state derived from records.
 */
#include <stdlib.h>
#include <string.h>

#include "sm/msm_internal.h"

msm_op_t *msm_op_find(msm_t *m, msm_op_kind_t kind, uint32_t group, uint64_t tag) {
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op->kind == kind && op->group == group && op->tag == tag) return op;
    return NULL;
}

msm_op_t *msm_op_voting(msm_t *m, msm_op_kind_t kind, uint32_t group, uint64_t tag) {
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op->kind == kind && op->group == group && op->tag == tag && op->phase == MSM_PHASE_VOTING) return op;
    return NULL;
}

msm_op_t *msm_op_open(msm_t *m, msm_op_kind_t kind, uint32_t group, uint64_t tag) {
    msm_op_t *op = calloc(1, sizeof *op);
    if (!op) return NULL;
    op->kind = kind;
    op->group = group;
    op->tag = tag;
    op->started = m->now;
    /* Appended: operations of one scope are decided in the order they were opened (launch order). */
    msm_op_t **pp = &m->ops;
    while (*pp) pp = &(*pp)->next;
    *pp = op;
    return op;
}

msm_member_t *msm_op_member(const msm_op_t *op, uint64_t conn) {
    for (int i = 0; i < op->nmembers; i++)
        if (op->members[i].conn == conn) return &op->members[i];
    return NULL;
}

msm_member_t *msm_op_add(msm_op_t *op, uint64_t conn) {
    msm_member_t *mb = msm_op_member(op, conn);
    if (mb) return mb;
    if (op->nmembers == op->cap_members) {
        int cap = op->cap_members ? op->cap_members * 2 : 8;
        msm_member_t *a = realloc(op->members, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        op->members = a;
        op->cap_members = cap;
    }
    mb = &op->members[op->nmembers++];
    memset(mb, 0, sizeof *mb);
    mb->conn = conn;
    return mb;
}

void msm_op_remove(msm_op_t *op, uint64_t conn) {
    msm_member_t *mb = msm_op_member(op, conn);
    if (!mb) return;
    free(mb->tensors);
    size_t at = (size_t)(mb - op->members);
    memmove(mb, mb + 1, (size_t)(op->nmembers - 1 - (int)at) * sizeof *mb);
    op->nmembers--;
}

int msm_op_owed(const msm_op_t *op) {
    int n = 0;
    for (int i = 0; i < op->nmembers; i++) n += op->members[i].owes;
    return n;
}

int msm_op_all_voted(msm_t *m, const msm_op_t *op) {
    int any = 0, voted = 0;
    /* Called on every vote: fewer votes than voters is an answer in one pass, so the pass below that
     * matches each voter (quadratic in the members) runs once per operation, not once per vote. */
    for (int i = 0; i < op->nmembers; i++) voted += op->members[i].voted != 0;
    if (msm_kinds[op->kind].run_wide) {
        int voters = 0;
        for (int i = 0; i < m->npeers; i++) voters += m->peers[i].accepted != 0;
        if (voted < voters) return 0;
        for (int i = 0; i < m->npeers; i++) {
            if (!m->peers[i].accepted) continue;
            any = 1;
            const msm_member_t *mb = msm_op_member(op, m->peers[i].conn);
            if (!mb || !mb->voted) return 0;
        }
        return any;
    }
    msm_group_t *g = msm_group(m, op->group, 0);
    if (g && voted < g->ring_len) return 0;
    for (int i = 0; g && i < g->ring_len; i++) {
        any = 1;
        const msm_member_t *mb = msm_op_member(op, g->ring[i]);
        if (!mb || !mb->voted) return 0;
    }
    return any;
}

static void op_free(msm_t *m, msm_op_t *op) {
    for (msm_op_t **pp = &m->ops; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    for (int i = 0; i < op->nmembers; i++) free(op->members[i].tensors);
    free(op->members);
    free(op->prior);
    free(op->grant_ring);
    free(op);
}

void msm_op_complete(msm_t *m, msm_op_t *op) { op_free(m, op); }

void msm_op_fail(msm_t *m, msm_op_t *op, msm_fail_t why) {
    if (why != MSM_FAIL_SHUTDOWN) msm_kinds[op->kind].fail(m, op, why);
    op_free(m, op);
}

msm_op_t *msm_op_of_peer(msm_t *m, uint64_t conn, unsigned mask) {
    for (msm_op_t *op = m->ops; op; op = op->next)
        if ((mask & MSM_BIT(op->kind)) && msm_op_member(op, conn)) return op;
    return NULL;
}

/* The operation p is in that forbids voting for (kind, tag), or NULL. */
static msm_op_t *conflict_of(msm_t *m, const msm_peer_t *p, msm_op_kind_t kind, uint64_t tag) {
    for (msm_op_t *op = m->ops; op; op = op->next) {
        if (!(msm_kinds[kind].conflicts & MSM_BIT(op->kind)) || !msm_op_member(op, p->conn)) continue;
        if (op->kind == kind && op->tag != tag) continue; /* collectives of other tags may overlap */
        return op;
    }
    return NULL;
}

static void on_vote(msm_t *m, msm_peer_t *p, msm_op_kind_t kind, const wire_msg_t *msg) {
    const msm_kind_t *k = &msm_kinds[kind];
    const char *what = wire_type_name(msg->type);
    uint32_t group = k->run_wide ? MSM_RUN_WIDE : p->group;
    uint64_t tag = k->tag_of ? k->tag_of(msg) : 0;
    msm_op_t *c = conflict_of(m, p, kind, tag);
    if (c && c->kind == kind) {
        msm_kick(m, p, "duplicate %s vote", what);
        return;
    }
    if (c) {
        msm_kick(m, p, "%s while this peer is in a %s operation", what, msm_kinds[c->kind].name);
        return;
    }
    if (!k->run_wide && !msm_group(m, p->group, 0)) {
        msm_kick(m, p, "%s from a peer without a group", what);
        return;
    }
    /* Before the lookups: a collective's check may move a grant into the operations (msm_grant.c). */
    if (k->check && k->check(m, p, msg) != 0) return;
    msm_op_t *op = msm_op_voting(m, kind, group, tag);
    msm_op_t *running = op ? NULL : msm_op_find(m, kind, group, tag);
    if (running && k->refused_while_running) {
        msm_kick(m, p, "%s while the %s operation it votes for is running", what, k->name);
        return;
    }
    if (!op) op = msm_op_open(m, kind, group, tag);
    msm_member_t *mb = op ? msm_op_add(op, p->conn) : NULL;
    if (!mb) {
        msm_kick(m, p, "master out of memory");
        return;
    }
    mb->voted = 1;
    k->on_vote(m, p, op, mb, msg);
}

void msm_ops_on_packet(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    for (int k = 0; k < MSM_OP_NKINDS; k++) {
        const msm_kind_t *kind = &msm_kinds[k];
        if (msg->type == kind->vote) {
            /* Votes are for accepted peers; reports (P2P_ESTABLISHED) may come from newcomers being wired. */
            if (!p->accepted) break;
            on_vote(m, p, (msm_op_kind_t)k, msg);
            return;
        }
        if (msg->type == kind->reports[0] || msg->type == kind->reports[1]) {
            kind->on_report(m, p, msg);
            return;
        }
    }
    if (!p->accepted) msm_kick(m, p, "%s is not allowed before the peer is accepted", wire_type_name(msg->type));
    else msm_kick(m, p, "unexpected message %s", wire_type_name(msg->type));
}

void msm_ops_on_departure(msm_t *m, uint64_t conn, int left) {
    for (msm_op_t *op = m->ops, *next; op; op = next) {
        next = op->next;
        if (!msm_op_member(op, conn)) continue;
        msm_op_remove(op, conn);
        /* A granted op's voters run their rings already: one of them lost is a failure mid-operation. One that
         * left (LEAVE) before every member voted leaves between operations, as a plain vote's voter does: the
         * grant is revoked (msm_grants_check) and the others vote again without it; nothing completed anywhere,
         * since no ring finishes before every member runs it. */
        if ((op->phase == MSM_PHASE_RUNNING || (op->granted && !left)) && msm_kinds[op->kind].departure_fails)
            op->failed = 1;
        /* A vote nobody holds any more has nobody to answer; a granted one tells its other holders first
         * (msm_grants_check, once the ring changed). */
        if (op->phase == MSM_PHASE_VOTING && op->nmembers == 0 && !op->granted) op_free(m, op);
    }
}

void msm_ops_progress(msm_t *m) {
    for (int k = 0; k < MSM_OP_NKINDS; k++) msm_kinds[k].progress(m);
}

const char *msm_ops_peer_state(const msm_t *m, uint64_t conn) {
    /* A peer is in at most one major operation (the conflicts); a pending vote may overlap it and shows
     * only on its own. */
    static const msm_op_kind_t order[] = {MSM_OP_ACCEPT, MSM_OP_OPTIMIZE, MSM_OP_SYNC, MSM_OP_COLLECTIVE,
                                          MSM_OP_PENDING};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        for (const msm_op_t *op = m->ops; op; op = op->next) {
            if (op->kind != order[k] || !msm_op_member(op, conn)) continue;
            if (op->wiring) return "establishing";
            return op->phase == MSM_PHASE_RUNNING ? msm_kinds[op->kind].state_running
                                                  : msm_kinds[op->kind].state_voting;
        }
    return NULL;
}
