/* msm_admin.c - views of groups and of the operation records in flight, and the operator's kick (see msm_admin.h). */
#include "sm/msm_admin.h"

#include <string.h>

#include "sm/msm_internal.h"

const char *msm_coll_kind_name(unsigned kind) {
    const msm_coll_kind_t *k = msm_coll_kind(kind);
    return k ? k->name : NULL;
}

int msm_group_views(const msm_t *m, msm_group_view_t *out, int max) {
    int n = 0;
    for (int i = 0; i < m->ngroups; i++) {
        const msm_group_t *g = &m->groups[i];
        if (n < max)
            out[n] = (msm_group_view_t){.id = g->id,
                                        .ring_len = g->ring_len,
                                        .has_revision = g->has_revision,
                                        .last_revision = g->last_revision,
                                        .collectives_completed = g->collectives_completed,
                                        .reduced_bytes = g->reduced_bytes};
        if (n < max) memcpy(out[n].by_kind, g->by_kind, sizeof g->by_kind);
        n++;
    }
    return n;
}

int msm_op_views(const msm_t *m, msm_op_view_t *out, int max) {
    int n = 0;
    for (const msm_op_t *op = m->ops; op; op = op->next, n++) {
        if (n >= max) continue;
        int running = op->phase == MSM_PHASE_RUNNING;
        out[n] = (msm_op_view_t){.kind = msm_kinds[op->kind].name,
                                 .group = op->group,
                                 .tag = op->tag,
                                 .collective = op->kind == MSM_OP_COLLECTIVE ? msm_coll_kind_name(op->coll_kind) : NULL,
                                 .running = running,
                                 .op_seq = running ? op->op_seq : 0,
                                 .members = op->nmembers,
                                 .started_ms = op->started};
    }
    return n;
}

static const msm_op_t *op_at(const msm_t *m, int index);

int msm_op_view_members(const msm_t *m, int index, uint64_t *conns, int max) {
    const msm_op_t *op = op_at(m, index);
    if (!op) return -PERR_INVALID;
    for (int i = 0; i < op->nmembers && i < max; i++) conns[i] = op->members[i].conn;
    return op->nmembers;
}

static const msm_op_t *op_at(const msm_t *m, int index) {
    const msm_op_t *op = m->ops;
    for (int i = 0; op && i < index; i++) op = op->next;
    return index < 0 ? NULL : op;
}

/* Appends conn to conns[max] when the op waits on it; returns the new count. */
static int add_waiting(const msm_op_t *op, uint64_t conn, uint64_t *conns, int n, int max) {
    const msm_member_t *mb = msm_op_member(op, conn);
    int waits = op->phase == MSM_PHASE_RUNNING ? mb && mb->owes : !mb || !mb->voted;
    if (!waits) return n;
    if (n < max) conns[n] = conn;
    return n + 1;
}

int msm_op_view_waiting(const msm_t *m, int index, uint64_t *conns, int max) {
    const msm_op_t *op = op_at(m, index);
    if (!op) return -PERR_INVALID;
    int n = 0;
    if (op->phase == MSM_PHASE_RUNNING) {
        for (int i = 0; i < op->nmembers; i++) n = add_waiting(op, op->members[i].conn, conns, n, max);
    } else if (msm_kinds[op->kind].run_wide) {
        for (int i = 0; i < m->npeers; i++)
            if (m->peers[i].accepted) n = add_waiting(op, m->peers[i].conn, conns, n, max);
    } else {
        const msm_group_t *g = NULL;
        for (int i = 0; i < m->ngroups && !g; i++)
            if (m->groups[i].id == op->group) g = &m->groups[i];
        for (int i = 0; g && i < g->ring_len; i++) n = add_waiting(op, g->ring[i], conns, n, max);
    }
    return n;
}

int msm_bw_views(const msm_t *m, msm_bw_view_t *out, int max) {
    for (int i = 0; i < m->nbw && i < max; i++)
        out[i] = (msm_bw_view_t){.from = m->bw[i].from, .to = m->bw[i].to, .mbps = m->bw[i].mbps,
                                   .rtt_us = m->bw[i].rtt_us};
    return m->nbw;
}

int msm_kick_uuid(msm_t *m, const uint8_t uuid[16], const char *reason) {
    for (int i = 0; i < m->npeers; i++)
        if (memcmp(m->peers[i].uuid, uuid, 16) == 0) {
            msm_kick(m, &m->peers[i], "%s", reason);
            msm_finish_leaves(m); /* the kick may have ended a leaving peer's running operation */
            return 0;
        }
    return -PERR_INVALID;
}
