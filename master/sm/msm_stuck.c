/*
 * msm_stuck.c - breaks votes that can never complete.
 *
 * Every consensus needs all peers of its scope to make the same call. If
 * every accepted peer is blocked in some vote and none of those votes can
 * complete (they would have completed on the last packet), the peers disagree
 * on the next operation — e.g. one calls pcclUpdateTopology while another
 * asks pcclArePeersPending, or one syncs while another all-reduces — and
 * would wait for each other forever. Checked on every tick:
 *  - only update-topology and are-peers-pending votes: the pending voters are
 *    told "pending" so they go on to update the topology with the others;
 *  - any other mix: every blocked vote fails (update topology / optimize:
 *    failed; sync and collectives: rejected as a conflict, pcclInvalidUsage),
 *    with a logged reason, so no call blocks without bound. Only once the
 *    state has held for MSM_STUCK_GRACE_MS: concurrent async all-reduces vote
 *    from worker threads in any order, so for a moment each peer may wait on
 *    a tag another peer has not voted for yet; a real disagreement lasts.
 * Votes are failed through msm_op_fail, so each kind answers as it always does.
 */
#include "base/base.h"
#include "sm/msm_internal.h"

/* 1 when every accepted peer (at least 2) is blocked in a vote and none can complete; then
 * *only_update_or_pending and *updaters describe the votes. */
static int votes_stuck(msm_t *m, int *only_update_or_pending, int *updaters) {
    for (const msm_op_t *op = m->ops; op; op = op->next)
        if (op->phase == MSM_PHASE_RUNNING) return 0; /* someone can still make progress */
    int accepted = 0;
    *updaters = 0;
    *only_update_or_pending = 1;
    const unsigned others = MSM_BIT(MSM_OP_OPTIMIZE) | MSM_BIT(MSM_OP_SYNC) | MSM_BIT(MSM_OP_COLLECTIVE);
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->accepted) continue;
        accepted++;
        if (!msm_op_of_peer(m, p->conn, ~0u)) return 0;
        *updaters += msm_op_of_peer(m, p->conn, MSM_BIT(MSM_OP_ACCEPT)) != NULL;
        if (msm_op_of_peer(m, p->conn, others)) *only_update_or_pending = 0;
    }
    return accepted >= 2;
}

void msm_check_stuck(msm_t *m) {
    int only_update_or_pending, updaters;
    if (!votes_stuck(m, &only_update_or_pending, &updaters)) {
        m->stuck_seen = 0;
        return;
    }
    if (only_update_or_pending && updaters) {
        m->stuck_seen = 0;
        msm_op_t *pending = msm_op_find(m, MSM_OP_PENDING, MSM_RUN_WIDE, 0);
        if (pending) msm_op_fail(m, pending, MSM_FAIL_CONFLICT);
        return;
    }
    if (!m->stuck_seen) {
        m->stuck_seen = 1;
        m->stuck_since = m->now;
    }
    if (m->now - m->stuck_since < MSM_STUCK_GRACE_MS) return;
    m->stuck_seen = 0;
    PLOG_WARN("master", "peers disagree on the next operation (accept/pending/optimize/sync/all-reduce votes that "
                        "can never complete): failing all of them");
    while (m->ops) msm_op_fail(m, m->ops, MSM_FAIL_CONFLICT);
}
