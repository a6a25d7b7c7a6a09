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
 * Peers fetch p2p and report SS_DIST_DONE; when all did, SS_DONE ends the sync
 * with each member's own outcome: a failed fetch fails only that member's sync.
 * The offers live in the operation's members; a member whose plan is not OK
 * leaves the operation, and its next vote opens the group's next sync, which
 * waits for the running one to end.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/msm_internal.h"
#include "sm/msm_ss_split.h"
#include "pccl.h"
#include "pccl_kernels.h"

/* Tensors of a and b have the same layout (keys, dtypes, counts, in order). */
static int same_layout(const msm_member_t *a, const msm_member_t *b) {
    if (a->ntensors != b->ntensors) return 0;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const wire_tensor_t *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->key, y->key) || x->dtype != y->dtype || x->count != y->count) return 0;
    }
    return 1;
}

/* Same content for popularity: layout, and hashes of tensors that must be equal. */
static int same_content(const msm_member_t *a, const msm_member_t *b) {
    if (!same_layout(a, b)) return 0;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const wire_tensor_t *x = &a->tensors[i], *y = &b->tensors[i];
        if (!x->allow_inequality && x->hash != y->hash) return 0;
    }
    return 1;
}

/* A plan with nothing to fetch (or a refusal). */
static void send_status(msm_t *m, uint64_t conn, uint8_t status, uint64_t revision) {
    wire_msg_t w = {.type = M2C_SS_PLAN};
    w.u.ss_plan.status = status;
    w.u.ss_plan.revision = revision;
    msm_send(m, conn, &w);
}

/* Weight of each source for receiver `to`: its measured bandwidth toward it; a source not measured gets the
 * mean of those measured, and with no measurement at all every source weighs the same. */
static void source_weights(const msm_t *m, msm_member_t **src, int nsrc, uint64_t to, double *w) {
    double sum = 0;
    int known = 0;
    for (int s = 0; s < nsrc; s++) {
        w[s] = msm_bw_get(m, src[s]->conn, to);
        if (w[s] > 0) {
            sum += w[s];
            known++;
        }
    }
    for (int s = 0; s < nsrc; s++)
        if (!(w[s] > 0)) w[s] = known ? sum / known : 1.0;
}

/* Sends p its plan (@return 0, or -PERR_NOMEM with nothing sent): the tensors that differ from the primary source src[0]'s (which announces their
 * hashes), each tensor's holders among src (sources whose hash equals the announced one: an
 * allow_content_inequality tensor may differ between them) and the ranges each source sends. */
static int send_fetch_plan(msm_t *m, const msm_member_t *p, uint64_t revision, msm_member_t **src, int nsrc,
                           int outdated) {
    wire_msg_t w = {.type = M2C_SS_PLAN};
    w.u.ss_plan.status = SS_OK;
    w.u.ss_plan.revision = revision;
    uint32_t cap = p->ntensors ? p->ntensors : 1;
    wire_tensor_t *fetch = calloc(cap, sizeof *fetch);
    uint32_t *holders = calloc(cap, sizeof *holders);
    msm_ss_item_t *items = calloc(cap, sizeof *items);
    wire_ss_range_t *ranges = calloc((size_t)cap * (nsrc ? nsrc : 1), sizeof *ranges);
    double wt[WIRE_MAX_SS_SOURCES];
    uint32_t nf = 0;
    if (!fetch || !holders || !items || !ranges) { /* a plan without its tensors would "succeed" the sync */
        free(fetch);
        free(holders);
        free(items);
        free(ranges);
        return -PERR_NOMEM;
    }
    if (nsrc) {
        for (uint32_t t = 0; t < p->ntensors; t++) {
            const wire_tensor_t *mine = &p->tensors[t], *theirs = &src[0]->tensors[t];
            if (mine->hash == theirs->hash) continue;
            if (mine->allow_inequality && !outdated) continue;
            holders[nf] = 0;
            for (int s = 0; s < nsrc; s++)
                if (src[s]->tensors[t].hash == theirs->hash) holders[nf] |= 1u << s;
            items[nf] = (msm_ss_item_t){.bytes = theirs->count * pccl_dtype_size(theirs->dtype), .holders = holders[nf]};
            fetch[nf++] = *theirs;
        }
    }
    if (nf) {
        source_weights(m, src, nsrc, p->conn, wt);
        int nr = msm_ss_split(items, nf, wt, nsrc, MSM_SS_SPLIT_MIN, ranges);
        w.u.ss_plan.nsrc = (uint8_t)nsrc;
        const msm_peer_t *to = msm_find(m, p->conn);
        for (int s = 0; s < nsrc; s++) {
            const msm_peer_t *peer = msm_find(m, src[s]->conn);
            if (peer && to) w.u.ss_plan.sources[s] = msm_dial_entry(to, peer);
        }
        w.u.ss_plan.n = nf;
        w.u.ss_plan.fetch = fetch;
        w.u.ss_plan.holders = holders;
        w.u.ss_plan.nranges = nr > 0 ? (uint32_t)nr : 0;
        w.u.ss_plan.ranges = ranges;
    }
    msm_send(m, p->conn, &w);
    free(fetch);
    free(holders);
    free(items);
    free(ranges);
    return 0;
}

/* The operation's members in ring order. */
static int members_in_ring_order(msm_t *m, msm_op_t *op, msm_member_t **mem) {
    msm_group_t *g = msm_group(m, op->group, 0);
    int n = 0;
    for (int r = 0; g && r < g->ring_len; r++) {
        msm_member_t *mb = msm_op_member(op, g->ring[r]);
        if (mb) mem[n++] = mb;
    }
    return n;
}

static int is_recv_only(const msm_member_t *p) { return p->strategy == PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY; }
static int is_send_only(const msm_member_t *p) { return p->strategy == PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY; }

/* Target revision: the highest offered by a peer whose content may count (RECEIVE_ONLY peers declare
 * their state wrong, so their revision must not pull the group forward), capped at previous + 1.
 * Nobody may roll the group back: if every offer is older than the group's revision, no peer has the
 * state (*rollback). Offering the group's current revision again is allowed (a step was discarded). */
static uint64_t pick_target(msm_group_t *g, msm_member_t **mem, int n, int *rollback) {
    uint64_t target = 0;
    int any_sender = 0;
    for (int k = 0; k < n; k++) any_sender |= !is_recv_only(mem[k]);
    for (int k = 0; k < n; k++)
        if ((!any_sender || !is_recv_only(mem[k])) && mem[k]->revision > target) target = mem[k]->revision;
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

/* May this member provide content at target? excluded marks send-only peers in conflict. */
static int may_send(const msm_member_t *p, uint64_t target, int excluded) {
    return !excluded && p->revision == target && !is_recv_only(p);
}

/*
 * Popular content (index into mem, or -1), per seed 002:
 *  - SEND_ONLY peers at the target that all agree decide: their content is chosen even if fewer peers
 *    hold it. If they disagree, every one of them is in conflict (marked in conflict[], kicked later)
 *    and the remaining senders elect among themselves.
 *  - otherwise the content held by most ENFORCE_POPULAR/SEND_ONLY peers at the target wins (ties: the
 *    first in ring order). RECEIVE_ONLY content never counts.
 */
static int elect(msm_member_t **mem, int n, uint64_t target, int *conflict) {
    int first_so = -1, so_agree = 1;
    for (int k = 0; k < n; k++) {
        if (!is_send_only(mem[k]) || mem[k]->revision != target) continue;
        if (first_so < 0) first_so = k;
        else if (!same_content(mem[k], mem[first_so])) so_agree = 0;
    }
    if (first_so >= 0 && so_agree) return first_so;
    if (first_so >= 0)
        for (int k = 0; k < n; k++) conflict[k] = is_send_only(mem[k]) && mem[k]->revision == target;
    int best = -1, best_votes = 0;
    for (int k = 0; k < n; k++) {
        if (!may_send(mem[k], target, conflict[k])) continue;
        int votes = 0;
        for (int j = 0; j < n; j++)
            votes += may_send(mem[j], target, conflict[j]) && same_content(mem[k], mem[j]);
        if (votes > best_votes) {
            best = k;
            best_votes = votes;
        }
    }
    return best;
}

/* The plan status of mem[k] other than OK (or SS_OK). */
/* outdated: the member resumed out of step with its rebuilt group (msm_resume.c) and receives even if ahead. */
static uint8_t plan_status(msm_member_t **mem, int k, int best, uint64_t target, const int *conflict, int outdated) {
    msm_member_t *p = mem[k];
    if (p->revision > target && !outdated) return SS_REVISION_REFUSED;
    if (conflict[k]) return SS_CONFLICT;
    if (best < 0) return SS_NO_STATE;
    if (!same_layout(p, mem[best])) return SS_LAYOUT_MISMATCH;
    /* SEND_ONLY never receives: an outdated one or one holding other content fails instead. */
    if (is_send_only(p) && (p->revision != target || !same_content(p, mem[best]))) return SS_CONFLICT;
    return SS_OK;
}

static void elect_and_plan(msm_t *m, msm_group_t *g, msm_op_t *op) {
    msm_member_t *mem[op->nmembers + 1];
    int n = members_in_ring_order(m, op, mem);
    int rollback;
    uint64_t target = pick_target(g, mem, n, &rollback);
    int conflict[n + 1];
    memset(conflict, 0, sizeof conflict);
    int best = rollback ? -1 : elect(mem, n, target, conflict);
    uint64_t leave[n + 1], kick[n + 1], oom[n + 1];
    int nleave = 0, nkick = 0, noom = 0;

    int rr = 0; /* round-robin over sources */
    for (int k = 0; k < n; k++) {
        msm_member_t *p = mem[k];
        const msm_peer_t *peer = msm_find(m, p->conn);
        uint8_t status = plan_status(mem, k, best, target, conflict, peer && peer->outdated);
        if (status != SS_OK) {
            char name[MSM_NAME_MAX];
            if (status == SS_REVISION_REFUSED)
                PLOG_WARN("master", "%s offered revision %llu, group %u expects %llu", msm_conn_name(m, p->conn, name),
                          (unsigned long long)p->revision, g->id, (unsigned long long)target);
            send_status(m, p->conn, status, target);
            leave[nleave++] = p->conn;
            /* The error first, so the peer's call returns a reason; then the kick the seed demands. */
            if (conflict[k]) kick[nkick++] = p->conn;
            continue;
        }
        int outdated = p->revision < target || is_recv_only(p);
        /* Sources: every other peer with the popular content that may send, up to the plan's limit; the
         * first (round-robin over the syncs' receivers) announces the hashes. */
        msm_member_t *src[WIRE_MAX_SS_SOURCES];
        int nsrc = 0;
        for (int tries = 0; tries < n && nsrc < WIRE_MAX_SS_SOURCES; tries++) {
            int j = (rr + tries) % n;
            if (mem[j] != p && may_send(mem[j], target, conflict[j]) && same_content(mem[j], mem[best]))
                src[nsrc++] = mem[j];
        }
        for (int j = 0; nsrc && j < n; j++)
            if (mem[j] == src[0]) rr = (j + 1) % n;
        if (is_send_only(p)) nsrc = 0;
        if (send_fetch_plan(m, p, target, src, nsrc, outdated) != 0) {
            oom[noom++] = p->conn;
            continue;
        }
        p->owes = 1;
    }
    op->phase = MSM_PHASE_RUNNING;
    op->target = target;
    /* A member told anything but OK leaves this sync (its next vote waits for the next one). */
    for (int k = 0; k < nleave; k++) msm_op_remove(op, leave[k]);
    /* Kicks last: a kick removes the peer record (shifting m->peers) and re-evaluates every operation. */
    for (int k = 0; k < noom; k++) {
        msm_peer_t *p = msm_find(m, oom[k]);
        if (p) msm_kick(m, p, "master out of memory for its shared-state plan");
    }
    for (int k = 0; k < nkick; k++) {
        msm_peer_t *p = msm_find(m, kick[k]);
        if (p) msm_kick(m, p, "SEND_ONLY shared state differs from another SEND_ONLY peer's");
    }
}

/* Ends the distribution once no member owes its report. */
static void maybe_finish(msm_t *m, msm_group_t *g, msm_op_t *op) {
    if (msm_op_owed(op)) return;
    /* Each member gets its own outcome, as in PCCL 1.0: the members that had nothing to fetch, or
     * fetched it, completed the revision; only a member whose fetch failed (its source lied or left
     * mid-transfer) is told so, keeps its revision and retries the sync. Its group-mates go on; their
     * next operation waits for it, and the stuck-vote breaker (msm_stuck.c) fails both sides if it
     * retries the sync meanwhile, so the group meets again at its next topology update or sync. */
    int completed = 0;
    for (int k = 0; k < op->nmembers; k++) {
        const msm_member_t *mb = &op->members[k];
        wire_msg_t d = {.type = M2C_SS_DONE};
        d.u.flag.value = (uint8_t)mb->ok;
        msm_send(m, mb->conn, &d);
        msm_peer_t *p = msm_find(m, mb->conn);
        if (p && mb->ok) {
            p->ss_revision = op->target;
            p->outdated = 0;
        }
        completed += mb->ok;
    }
    if (completed) {
        /* The members that completed it hold the group's new revision; nobody else does. */
        for (int i = 0; i < m->npeers; i++)
            if (m->peers[i].group == g->id) m->peers[i].holds_rev = 0;
        for (int k = 0; k < op->nmembers; k++) {
            msm_peer_t *p = op->members[k].ok ? msm_find(m, op->members[k].conn) : NULL;
            if (p) p->holds_rev = 1;
        }
        g->has_revision = 1;
        g->last_revision = op->target;
        m->stats.syncs_completed++;
    }
    msm_op_complete(m, op);
}

/* Moves group g's sync along: a distribution may end, then a complete vote is planned. */
static void reevaluate(msm_t *m, msm_group_t *g) {
    msm_op_t *op = msm_op_find(m, MSM_OP_SYNC, g->id, 0);
    if (op && op->phase == MSM_PHASE_RUNNING) {
        maybe_finish(m, g, op);
        op = msm_op_find(m, MSM_OP_SYNC, g->id, 0); /* votes that arrived during the distribution */
        if (op && op->phase == MSM_PHASE_RUNNING) return;
    }
    if (!op || !msm_op_all_voted(m, op)) return;
    elect_and_plan(m, g, op);
    /* Every member got a plan; those with nothing to do still report DIST_DONE. */
    op = msm_op_find(m, MSM_OP_SYNC, g->id, 0);
    if (op && op->phase == MSM_PHASE_RUNNING) maybe_finish(m, g, op);
}

void msm_ss_progress(msm_t *m) {
    for (int i = 0; i < m->ngroups; i++) reevaluate(m, &m->groups[i]);
}

int msm_ss_check(msm_t *m, msm_peer_t *p, const wire_msg_t *vote) {
    if (vote->u.sync.strategy <= PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY) return 0;
    msm_kick(m, p, "unknown shared-state strategy %u", vote->u.sync.strategy);
    return -PERR_REFUSED;
}

void msm_ss_on_vote(msm_t *m, msm_peer_t *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote) {
    (void)op;
    mb->strategy = vote->u.sync.strategy;
    mb->revision = vote->u.sync.revision;
    p->ss_revision = vote->u.sync.revision;
    if (vote->u.sync.n) {
        mb->tensors = malloc(vote->u.sync.n * sizeof(wire_tensor_t));
        if (!mb->tensors) {
            msm_kick(m, p, "master out of memory");
            return;
        }
        memcpy(mb->tensors, vote->u.sync.tensors, vote->u.sync.n * sizeof(wire_tensor_t));
        mb->ntensors = vote->u.sync.n;
    }
    reevaluate(m, msm_group(m, p->group, 0));
}

void msm_ss_on_dist_done(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    msm_op_t *op = msm_op_find(m, MSM_OP_SYNC, p->group, 0);
    msm_member_t *mb = op && op->phase == MSM_PHASE_RUNNING ? msm_op_member(op, p->conn) : NULL;
    if (!mb || !mb->owes) {
        msm_kick(m, p, "SS_DIST_DONE outside of a shared-state distribution");
        return;
    }
    mb->owes = 0;
    mb->ok = msg->u.flag.value != 0;
    reevaluate(m, msm_group(m, p->group, 0));
}

/* Voting: the sync is aborted (SS_PLAN status ABORTED); distributing: it failed for everyone. */
void msm_ss_fail(msm_t *m, msm_op_t *op, msm_fail_t why) {
    (void)why;
    for (int k = 0; k < op->nmembers; k++) {
        wire_msg_t d = {.type = op->phase == MSM_PHASE_VOTING ? M2C_SS_PLAN : M2C_SS_DONE};
        if (op->phase == MSM_PHASE_VOTING) d.u.ss_plan.status = SS_ABORTED;
        msm_send(m, op->members[k].conn, &d);
    }
}
