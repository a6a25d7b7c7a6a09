/*
 * msm_deadline.c - no peer can stall the run: every vote and every owed
 * report has a deadline (checked on each tick).
 *  - Votes: an operation still voting vote_timeout after it opened kicks the
 *    peers of its scope that have not voted (a hung process whose heartbeat
 *    thread lives, or a member that stopped calling the library); the others'
 *    operation then completes or fails through the departure path.
 *  - Reports of a running sync or collective: once one member reported, the
 *    others have vote_timeout to report too (a ring ends at about the same
 *    time on every member; a transfer's own length is not limited).
 *  - Wiring rounds: a peer that owes a P2P_ESTABLISHED report longer than
 *    wiring_timeout after its ESTABLISH_P2P is kicked. Honest peers answer
 *    within their connect timeout (PCCL_CONNECT_TIMEOUT_MS, default 10 s).
 *    A newcomer that still owes a report of an earlier round is left out of
 *    later rounds until it answers (msm_topology.c), so a newcomer that never
 *    wires fails at most one round of the members.
 */
#include <stdlib.h>

#include "base/base.h"
#include "sm/msm_internal.h"

/* Whether conn is expected to vote for op: the accepted peers (run-wide kinds) or the group's ring. */
static int expected_voter(const msm_op_t *op, const msm_peer_t *p) {
    if (!p->accepted) return 0;
    return msm_kinds[op->kind].run_wide || p->group == op->group;
}

/* Appends to *late (capacity m->npeers) the conns op is waiting on past their deadline. */
static int late_of(msm_t *m, msm_op_t *op, uint64_t *late, int n) {
    if (op->phase == MSM_PHASE_VOTING) {
        if (!m->vote_timeout || m->now - op->started < m->vote_timeout) return n;
        for (int i = 0; i < m->npeers && n < m->npeers; i++) {
            const msm_member_t *mb = msm_op_member(op, m->peers[i].conn);
            if (expected_voter(op, &m->peers[i]) && !(mb && mb->voted)) late[n++] = m->peers[i].conn;
        }
        return n;
    }
    if (op->wiring) return n; /* per peer: wiring_since */
    int reported = 0, owing = 0;
    for (int i = 0; i < op->nmembers; i++) {
        owing += op->members[i].owes != 0;
        reported += op->members[i].owes == 0;
    }
    if (!reported || !owing || !m->vote_timeout) {
        op->first_report = 0;
        return n;
    }
    if (!op->first_report) op->first_report = m->now;
    if (m->now - op->first_report < m->vote_timeout) return n;
    for (int i = 0; i < op->nmembers && n < m->npeers; i++)
        if (op->members[i].owes) late[n++] = op->members[i].conn;
    return n;
}

void msm_check_deadlines(msm_t *m) {
    if (!m->npeers) return;
    uint64_t *late = calloc((size_t)m->npeers, sizeof *late);
    const char **why = calloc((size_t)m->npeers, sizeof *why);
    if (!late || !why) {
        free(late);
        free(why);
        return;
    }
    int n = 0;
    for (msm_op_t *op = m->ops; op; op = op->next) {
        int before = n;
        n = late_of(m, op, late, n);
        for (int i = before; i < n; i++) why[i] = msm_kinds[op->kind].name;
    }
    for (int i = 0; i < m->npeers && n < m->npeers; i++) {
        const msm_peer_t *p = &m->peers[i];
        if (m->wiring_timeout && p->wiring_owed && m->now - p->wiring_since >= m->wiring_timeout) {
            why[n] = NULL;
            late[n++] = p->conn;
        }
    }
    /* Kicking changes the peers and the operations: look each one up again. */
    for (int i = 0; i < n; i++) {
        msm_peer_t *p = msm_find(m, late[i]);
        if (!p) continue;
        if (why[i])
            msm_kick(m, p, "did not vote or report in the %s operation within %llu ms (vote timeout)", why[i],
                     (unsigned long long)m->vote_timeout);
        else
            msm_kick(m, p, "did not report its ring wiring within %llu ms", (unsigned long long)m->wiring_timeout);
    }
    free(late);
    free(why);
}
