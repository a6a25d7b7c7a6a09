/* msm_admin.c - views of groups and in-flight operations, and the operator's kick (see msm_admin.h). */
#include "msm_admin.h"

#include <stddef.h>
#include <string.h>

#include "msm_internal.h"

int msm_group_views(const msm_t *m, msm_group_view_t *out, int max) {
    int n = 0;
    for (int i = 0; i < m->ngroups; i++) {
        const msm_group_t *g = &m->groups[i];
        if (n < max)
            out[n] = (msm_group_view_t){
                .id = g->id, .ring_len = g->ring_len, .has_revision = g->has_revision, .last_revision = g->last_revision};
        n++;
    }
    return n;
}

static void put(msm_op_view_t *out, int max, int *n, msm_op_view_t v) {
    if (*n < max) out[*n] = v;
    (*n)++;
}

/* A run-wide vote is in flight while any peer holds it; members = peers holding it. */
static void run_wide(const msm_t *m, msm_op_view_t *out, int max, int *n, const char *kind, size_t field, int running) {
    int holders = 0;
    for (int i = 0; i < m->npeers; i++) holders += *(const int *)((const char *)&m->peers[i] + field) != 0;
    if (holders || running)
        put(out, max, n, (msm_op_view_t){.kind = kind, .group = MSM_RUN_WIDE, .running = running, .members = holders});
}

int msm_op_views(const msm_t *m, msm_op_view_t *out, int max) {
    int n = 0;
    /* An optimize round re-wires through the accept machinery: report it as optimize, not as an accept round. */
    run_wide(m, out, max, &n, "update_topology", offsetof(msm_peer_t, vote_update),
             m->establishing && !m->round_optimize);
    run_wide(m, out, max, &n, "peers_pending", offsetof(msm_peer_t, vote_pending), 0);
    run_wide(m, out, max, &n, "optimize_topology", offsetof(msm_peer_t, vote_optimize),
             m->optimizing || m->round_optimize);
    for (int i = 0; i < m->ngroups; i++) {
        const msm_group_t *g = &m->groups[i];
        int syncing = 0;
        for (int j = 0; j < m->npeers; j++) syncing += m->peers[j].group == g->id && m->peers[j].ss_phase != 0;
        if (syncing || g->ss_active)
            put(out, max, &n,
                (msm_op_view_t){.kind = "shared_state_sync", .group = g->id, .running = g->ss_active, .members = syncing});
        for (const msm_coll_t *c = g->colls; c; c = c->next)
            put(out, max, &n,
                (msm_op_view_t){.kind = "collective",
                                .group = g->id,
                                .tag = c->tag,
                                .running = c->running,
                                .op_seq = c->running ? c->op_seq : 0,
                                .members = c->nvoters});
    }
    return n;
}

int msm_bw_views(const msm_t *m, msm_bw_view_t *out, int max) {
    for (int i = 0; i < m->nbw && i < max; i++)
        out[i] = (msm_bw_view_t){.from = m->bw[i].from, .to = m->bw[i].to, .mbps = m->bw[i].mbps};
    return m->nbw;
}

int msm_kick_uuid(msm_t *m, const uint8_t uuid[16], const char *reason) {
    for (int i = 0; i < m->npeers; i++)
        if (memcmp(m->peers[i].uuid, uuid, 16) == 0) {
            msm_kick(m, &m->peers[i], "%s", reason);
            return 0;
        }
    return -1;
}
