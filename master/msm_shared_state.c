/*
 * msm_shared_state.c - shared-state sync consensus of one peer group.
 *
 * When every accepted peer of the group voted (SYNC_SHARED_STATE with its
 * revision, strategy and per-tensor hashes) the master
 *  1. fixes the target revision: the highest offered, at most previous + 1
 *     (any value on the group's first sync: resume from a checkpoint); a peer
 *     ahead of the target is refused, a peer behind it is outdated;
 *  2. elects the popular content among up-to-date peers that may send
 *     (not RECEIVE_ONLY; agreeing SEND_ONLY peers win, disagreeing ones
 *     get SS_CONFLICT and are kicked);
 *  3. sends each peer its plan: which tensors to fetch and from whom.
 * Peers fetch p2p and report SS_DIST_DONE; when all did, SS_DONE ends the sync,
 * with one outcome for all: ok only if every member's fetches succeeded.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msm_internal.h"
#include "pccl.h"

/* Tensors of a and b have the same layout (keys, dtypes, counts, in order). */
static int same_layout(const msm_peer_t *a, const msm_peer_t *b) {
    if (a->ss_n != b->ss_n) return 0;
    for (uint32_t i = 0; i < a->ss_n; i++) {
        const wire_tensor_t *x = &a->ss_tensors[i], *y = &b->ss_tensors[i];
        if (strcmp(x->key, y->key) || x->dtype != y->dtype || x->count != y->count) return 0;
    }
    return 1;
}

/* Same content for popularity: layout, and hashes of tensors that must be equal. */
static int same_content(const msm_peer_t *a, const msm_peer_t *b) {
    if (!same_layout(a, b)) return 0;
    for (uint32_t i = 0; i < a->ss_n; i++) {
        const wire_tensor_t *x = &a->ss_tensors[i], *y = &b->ss_tensors[i];
        if (!x->allow_inequality && x->hash != y->hash) return 0;
    }
    return 1;
}

static void send_plan(msm_t *m, msm_peer_t *p, uint8_t status, uint64_t revision, const msm_peer_t *src,
                      wire_tensor_t *fetch, uint32_t nfetch) {
    wire_msg_t w = {.type = M2C_SS_PLAN};
    w.u.ss_plan.status = status;
    w.u.ss_plan.revision = revision;
    if (src) {
        memcpy(w.u.ss_plan.source.uuid, src->uuid, 16);
        memcpy(w.u.ss_plan.source.ip, src->ip, 4);
        w.u.ss_plan.source.port = src->p2p_port;
    }
    w.u.ss_plan.n = nfetch;
    w.u.ss_plan.fetch = fetch;
    msm_send(m, p->conn, &w);
}

static void reset_peer(msm_peer_t *p) {
    p->ss_phase = 0;
    p->ss_dist_ok = 0;
    free(p->ss_tensors);
    p->ss_tensors = NULL;
    p->ss_n = 0;
}

/* Indices into m->peers of the group's accepted members, in ring order. */
static int group_members(msm_t *m, msm_group_t *g, int *idx) {
    int n = 0;
    for (int r = 0; r < g->ring_len; r++)
        for (int i = 0; i < m->npeers; i++)
            if (m->peers[i].conn == g->ring[r] && m->peers[i].accepted) idx[n++] = i;
    return n;
}

static int is_recv_only(const msm_peer_t *p) { return p->ss_strategy == PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY; }
static int is_send_only(const msm_peer_t *p) { return p->ss_strategy == PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY; }

/* Target revision: the highest offered by a peer whose content may count (RECEIVE_ONLY peers declare
 * their state wrong, so their revision must not pull the group forward), capped at previous + 1.
 * Nobody may roll the group back: if every offer is older than the group's revision, no peer has the
 * state (*rollback). Offering the group's current revision again is allowed (a step was discarded). */
static uint64_t pick_target(msm_t *m, msm_group_t *g, const int *idx, int n, int *rollback) {
    uint64_t target = 0;
    int any_sender = 0;
    for (int k = 0; k < n; k++) any_sender |= !is_recv_only(&m->peers[idx[k]]);
    for (int k = 0; k < n; k++) {
        const msm_peer_t *p = &m->peers[idx[k]];
        if ((!any_sender || !is_recv_only(p)) && p->ss_revision > target) target = p->ss_revision;
    }
    *rollback = 0;
    if (g->has_revision) {
        if (target > g->last_revision + 1) target = g->last_revision + 1;
        if (target < g->last_revision) {
            target = g->last_revision;
            *rollback = 1;
        }
    }
    return target;
}

/* May this member provide content at target? excluded[k] marks send-only peers in conflict. */
static int may_send(const msm_peer_t *p, uint64_t target, int excluded) {
    return !excluded && p->ss_revision == target && !is_recv_only(p);
}

/*
 * Popular content (index into m->peers, or -1), per seed 002:
 *  - SEND_ONLY peers at the target that all agree decide: their content is chosen even if fewer peers
 *    hold it. If they disagree, every one of them is in conflict (marked in conflict[], kicked later)
 *    and the remaining senders elect among themselves.
 *  - otherwise the content held by most ENFORCE_POPULAR/SEND_ONLY peers at the target wins (ties: the
 *    first in ring order). RECEIVE_ONLY content never counts.
 */
static int elect(msm_t *m, const int *idx, int n, uint64_t target, int *conflict) {
    int first_so = -1, so_agree = 1;
    for (int k = 0; k < n; k++) {
        const msm_peer_t *a = &m->peers[idx[k]];
        if (!is_send_only(a) || a->ss_revision != target) continue;
        if (first_so < 0) first_so = k;
        else if (!same_content(a, &m->peers[idx[first_so]])) so_agree = 0;
    }
    if (first_so >= 0 && so_agree) return idx[first_so];
    if (first_so >= 0)
        for (int k = 0; k < n; k++)
            conflict[k] = is_send_only(&m->peers[idx[k]]) && m->peers[idx[k]].ss_revision == target;
    int best = -1, best_votes = 0;
    for (int k = 0; k < n; k++) {
        const msm_peer_t *a = &m->peers[idx[k]];
        if (!may_send(a, target, conflict[k])) continue;
        int votes = 0;
        for (int j = 0; j < n; j++)
            votes += may_send(&m->peers[idx[j]], target, conflict[j]) && same_content(a, &m->peers[idx[j]]);
        if (votes > best_votes) {
            best = idx[k];
            best_votes = votes;
        }
    }
    return best;
}

static void elect_and_plan(msm_t *m, msm_group_t *g, int *idx, int n) {
    int rollback;
    uint64_t target = pick_target(m, g, idx, n, &rollback);
    int conflict[n];
    memset(conflict, 0, sizeof conflict);
    int best = rollback ? -1 : elect(m, idx, n, target, conflict);
    uint64_t kick[n];
    int nkick = 0;

    int rr = 0; /* round-robin over sources */
    for (int k = 0; k < n; k++) {
        msm_peer_t *p = &m->peers[idx[k]];
        if (p->ss_revision > target && !p->outdated) {
            PLOG_WARN("master", "peer conn=%llu offered revision %llu, group %u expects %llu",
                      (unsigned long long)p->conn, (unsigned long long)p->ss_revision, g->id,
                      (unsigned long long)target);
            send_plan(m, p, SS_REVISION_REFUSED, target, NULL, NULL, 0);
            reset_peer(p);
            continue;
        }
        if (conflict[k]) {
            /* The error first, so the peer's call returns a reason; then the kick the seed demands. */
            send_plan(m, p, SS_CONFLICT, target, NULL, NULL, 0);
            reset_peer(p);
            kick[nkick++] = p->conn;
            continue;
        }
        if (best < 0) {
            send_plan(m, p, SS_NO_STATE, target, NULL, NULL, 0);
            reset_peer(p);
            continue;
        }
        msm_peer_t *pop = &m->peers[best];
        if (!same_layout(p, pop)) {
            send_plan(m, p, SS_LAYOUT_MISMATCH, target, NULL, NULL, 0);
            reset_peer(p);
            continue;
        }
        /* SEND_ONLY never receives: an outdated one or one holding other content fails instead. */
        if (is_send_only(p) && (p->ss_revision != target || !same_content(p, pop))) {
            send_plan(m, p, SS_CONFLICT, target, NULL, NULL, 0);
            reset_peer(p);
            continue;
        }
        int outdated = p->ss_revision < target || is_recv_only(p);
        /* Source: a peer with the popular content that is allowed to send. */
        msm_peer_t *src = NULL;
        for (int tries = 0; tries < n && !src; tries++) {
            int j = (rr + tries) % n;
            msm_peer_t *c = &m->peers[idx[j]];
            if (c != p && may_send(c, target, conflict[j]) && same_content(c, pop)) {
                src = c;
                rr = (j + 1) % n;
            }
        }
        wire_tensor_t *fetch = calloc(p->ss_n ? p->ss_n : 1, sizeof *fetch);
        uint32_t nf = 0;
        if (src && fetch && !is_send_only(p)) {
            for (uint32_t t = 0; t < p->ss_n; t++) {
                const wire_tensor_t *mine = &p->ss_tensors[t], *theirs = &src->ss_tensors[t];
                if (mine->hash == theirs->hash) continue;
                if (mine->allow_inequality && !outdated) continue;
                fetch[nf++] = *theirs;
            }
        }
        send_plan(m, p, SS_OK, target, nf ? src : NULL, fetch, nf);
        free(fetch);
        p->ss_phase = 2;
    }
    g->ss_active = 1;
    g->ss_target = target;
    /* Kicks last: a kick removes the peer record (shifting m->peers) and re-evaluates the group. */
    for (int k = 0; k < nkick; k++) {
        msm_peer_t *p = msm_find(m, kick[k]);
        if (p) msm_kick(m, p, "SEND_ONLY shared state differs from another SEND_ONLY peer's");
    }
}

static void maybe_finish(msm_t *m, msm_group_t *g) {
    int idx[m->npeers + 1];
    int n = group_members(m, g, idx);
    for (int k = 0; k < n; k++)
        if (m->peers[idx[k]].ss_phase == 2) return;
    /* One outcome for the whole group, as for a collective (COMPLETE/ABORT): if any member's fetch
     * failed (e.g. its source left mid-transfer), every member's sync fails. A member told "ok"
     * would go on to its next operation (an all-reduce) while the failed one retries the sync: the
     * group would be out of lockstep and stuck until the conflict is broken. */
    int completed = 0, all_ok = 1;
    for (int k = 0; k < n; k++)
        if (m->peers[idx[k]].ss_phase == 3 && !m->peers[idx[k]].ss_dist_ok) all_ok = 0;
    for (int k = 0; k < n; k++) {
        msm_peer_t *p = &m->peers[idx[k]];
        if (p->ss_phase != 3) continue;
        completed += p->ss_dist_ok;
        wire_msg_t d = {.type = M2C_SS_DONE};
        d.u.flag.value = (uint8_t)all_ok;
        msm_send(m, p->conn, &d);
        p->ss_revision = g->ss_target;
        p->outdated = 0;
        reset_peer(p);
    }
    g->ss_active = 0;
    if (completed) {
        g->has_revision = 1;
        g->last_revision = g->ss_target;
        m->stats.syncs_completed++;
    }
    msm_ss_reevaluate(m, g); /* votes that arrived during the distribution */
}

void msm_ss_reevaluate(msm_t *m, msm_group_t *g) {
    int idx[m->npeers + 1];
    int n = group_members(m, g, idx);
    if (g->ss_active) {
        maybe_finish(m, g);
        return;
    }
    if (n == 0) return;
    for (int k = 0; k < n; k++)
        if (m->peers[idx[k]].ss_phase != 1) return;
    elect_and_plan(m, g, idx, n);
    /* Every member got a plan; those with nothing to do still report DIST_DONE. */
    maybe_finish(m, g);
}

void msm_ss_on_vote(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    if (p->ss_phase) {
        msm_kick(m, p, "SYNC_SHARED_STATE while a sync of this peer is in progress");
        return;
    }
    if (p->vote_update || p->vote_optimize || msm_peer_in_running_coll(m, p)) {
        msm_kick(m, p, "SYNC_SHARED_STATE while another operation of this peer is in progress");
        return;
    }
    if (msg->u.sync.strategy > PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY) {
        msm_kick(m, p, "unknown shared-state strategy %u", msg->u.sync.strategy);
        return;
    }
    msm_group_t *g = msm_group(m, p->group, 0);
    if (!g) {
        msm_kick(m, p, "SYNC_SHARED_STATE from a peer without a group");
        return;
    }
    /* A vote arriving while the group still distributes (e.g. a refused peer retrying) waits for the next round. */
    p->ss_phase = 1;
    p->ss_strategy = msg->u.sync.strategy;
    p->ss_revision = msg->u.sync.revision;
    p->ss_n = msg->u.sync.n;
    p->ss_tensors = NULL;
    if (p->ss_n) {
        p->ss_tensors = malloc(p->ss_n * sizeof(wire_tensor_t));
        if (!p->ss_tensors) {
            msm_kick(m, p, "master out of memory");
            return;
        }
        memcpy(p->ss_tensors, msg->u.sync.tensors, p->ss_n * sizeof(wire_tensor_t));
    }
    msm_ss_reevaluate(m, g);
}

void msm_ss_on_dist_done(msm_t *m, msm_peer_t *p, int ok) {
    if (p->ss_phase != 2) {
        msm_kick(m, p, "SS_DIST_DONE outside of a shared-state distribution");
        return;
    }
    p->ss_phase = 3;
    p->ss_dist_ok = ok != 0;
    msm_group_t *g = msm_group(m, p->group, 0);
    if (g) maybe_finish(m, g);
}
