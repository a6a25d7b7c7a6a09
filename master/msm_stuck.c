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
 */
#include <stdlib.h>

#include "log.h"
#include "msm_internal.h"

static int coll_state(msm_t *m, const msm_peer_t *p, int *voting) {
    msm_group_t *g = msm_group(m, p->group, 0);
    *voting = 0;
    if (!g) return 0;
    for (msm_coll_t *c = g->colls; c; c = c->next)
        for (int i = 0; i < c->nvoters; i++)
            if (c->voters[i] == p->conn) {
                if (c->running) return 1;
                *voting = 1;
            }
    return 0;
}

static void answer_pending(msm_t *m, msm_peer_t *p) {
    p->vote_pending = 0;
    wire_msg_t r = {.type = M2C_PEERS_PENDING};
    r.u.flag.value = 1;
    msm_send(m, p->conn, &r);
}

/* Rejects every collective of g that is still voting, and forgets it. */
static void reject_votes_of_group(msm_t *m, msm_group_t *g) {
    for (msm_coll_t **pp = &g->colls; *pp;) {
        msm_coll_t *c = *pp;
        if (c->running) {
            pp = &c->next;
            continue;
        }
        for (int i = 0; i < c->nvoters; i++) {
            wire_msg_t w = {.type = M2C_COLL_REJECT};
            w.u.reject.tag = c->tag;
            w.u.reject.reason = REJECT_CONFLICT;
            msm_send(m, c->voters[i], &w);
        }
        *pp = c->next;
        free(c->voters);
        free(c->done);
        free(c);
    }
}

/* 1 when every accepted peer (at least 2) is blocked in a vote and none can complete; then
 * *only_update_or_pending and *updaters describe the votes. */
static int votes_stuck(msm_t *m, int *only_update_or_pending, int *updaters) {
    if (m->establishing || m->optimizing) return 0;
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].ss_active) return 0;
    int accepted = 0;
    *updaters = 0;
    *only_update_or_pending = 1;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->accepted) continue;
        accepted++;
        int voting_coll, running = coll_state(m, p, &voting_coll);
        int blocked = p->vote_update || p->vote_pending || p->vote_optimize || p->ss_phase == 1 || voting_coll;
        if (running || !blocked) return 0; /* someone can still make progress */
        *updaters += p->vote_update;
        if (p->vote_optimize || p->ss_phase == 1 || voting_coll) *only_update_or_pending = 0;
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
        for (int i = 0; i < m->npeers; i++)
            if (m->peers[i].accepted && m->peers[i].vote_pending) answer_pending(m, &m->peers[i]);
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
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->accepted) continue;
        if (p->vote_update) {
            p->vote_update = 0;
            wire_msg_t d = {.type = M2C_TOPOLOGY_DONE};
            msm_world(m, p->group, &d.u.topo_done.world);
            msm_send(m, p->conn, &d);
        }
        if (p->vote_pending) answer_pending(m, p);
        if (p->vote_optimize) {
            p->vote_optimize = 0;
            wire_msg_t d = {.type = M2C_OPTIMIZE_DONE};
            msm_send(m, p->conn, &d);
        }
        if (p->ss_phase == 1) {
            p->ss_phase = 0;
            free(p->ss_tensors);
            p->ss_tensors = NULL;
            p->ss_n = 0;
            wire_msg_t d = {.type = M2C_SS_PLAN};
            d.u.ss_plan.status = SS_ABORTED;
            msm_send(m, p->conn, &d);
        }
    }
    for (int i = 0; i < m->ngroups; i++) reject_votes_of_group(m, &m->groups[i]);
}
