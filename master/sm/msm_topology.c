/*
 * msm_topology.c - run-wide votes: accept new peers (update topology), its
 * wiring rounds (also run by optimize topology), and are-peers-pending.
 *
 * Accept round: when every accepted peer voted, registered peers join the
 * operation and every member is told its group's ring (ESTABLISH_P2P). Each
 * connects to its ring successor and reports. If all report success the
 * newcomers are appended to their rings and accepted; otherwise everyone gets
 * a failed TOPOLOGY_DONE, the newcomers stay registered, and a retry starts
 * over. A round that can no longer succeed (a member left or reported
 * failure) ends at once: peers still wiring may be waiting on the departed
 * one, and the early TOPOLOGY_DONE is what lets them stop (libpccl polls for
 * it); the reports they still owe are dropped when they arrive.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/msm_internal.h"

static void send_topology_done(msm_t *m, uint64_t conn, int ok) {
    msm_peer_t *p = msm_find(m, conn);
    if (!p) return;
    wire_msg_t d = {.type = M2C_TOPOLOGY_DONE};
    d.u.topo_done.ok = (uint8_t)ok;
    msm_world(m, p->group, &d.u.topo_done.world);
    msm_send(m, conn, &d);
}

/* The round wiring the rings now (accept or optimize), or NULL. */
static msm_op_t *wiring_op(msm_t *m) {
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op->wiring) return op;
    return NULL;
}

/* Ring of the member's group as the peer list it needs: the ring order, then the round's newcomers of that group. */
static void send_establish(msm_t *m, const msm_op_t *op, msm_peer_t *to) {
    msm_group_t *g = msm_group(m, to->group, 0);
    int n = 0;
    wire_peer_t *list = calloc((size_t)m->npeers + 1, sizeof *list);
    if (!list) return;
    for (int i = 0; g && i < g->ring_len; i++) {
        msm_peer_t *q = msm_find(m, g->ring[i]);
        if (!q) continue;
        list[n++] = msm_dial_entry(to, q);
    }
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *q = &m->peers[i];
        if (q->accepted || q->group != to->group || !msm_op_member(op, q->conn)) continue;
        list[n++] = msm_dial_entry(to, q);
    }
    wire_msg_t e = {.type = M2C_ESTABLISH_P2P};
    msm_world(m, to->group, &e.u.establish.world);
    e.u.establish.world.group_world_size = (uint32_t)n;
    e.u.establish.n = (uint32_t)n;
    e.u.establish.peers = list;
    msm_send(m, to->conn, &e);
    free(list);
}

/* A registered peer that may join the next accept round: one that still owes the report of an
 * earlier round is left out until it answers, so a newcomer that never wires fails one round only; a
 * newcomer from a RESUME only once it was heard from, and none while the resumed peers of its group
 * are being wired (msm_resume.c). */
static int eligible_newcomer(const msm_t *m, const msm_peer_t *p) {
    return p->hello && !p->accepted && !p->stale_reports && !p->resumed && !p->unheard &&
           !msm_resume_wiring(m, p->group);
}

/* Runs op's wiring round: the accepted peers, and the registered ones when newcomers are admitted. */
static void start_wiring(msm_t *m, msm_op_t *op, int newcomers) {
    op->phase = MSM_PHASE_RUNNING;
    op->wiring = 1;
    op->failed = 0;
    int fresh = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->accepted && !(newcomers && eligible_newcomer(m, p))) continue;
        msm_member_t *mb = msm_op_add(op, p->conn);
        if (!mb) {
            op->failed = 1;
            continue;
        }
        mb->owes = 1;
        mb->ok = 0;
        p->wiring_owed = 1;
        p->wiring_since = m->now;
        fresh += !p->accepted;
    }
    /* The round's start and end (admit_newcomers) in the log time an accept round (bench/scale.sh). */
    if (op->kind == MSM_OP_ACCEPT)
        PLOG_INFO("master", "accept round: wiring %d members, %d of them newcomers", op->nmembers, fresh);
    for (int i = 0; i < m->npeers; i++)
        if (msm_op_member(op, m->peers[i].conn)) send_establish(m, op, &m->peers[i]);
}

void msm_topo_start_rewire(msm_t *m, msm_op_t *op) { start_wiring(m, op, 0); }

void msm_topo_abandon_reports(msm_t *m, msm_op_t *op) {
    if (!op->wiring) return;
    for (int i = 0; i < op->nmembers; i++) {
        msm_peer_t *p = op->members[i].owes ? msm_find(m, op->members[i].conn) : NULL;
        if (p) p->stale_reports++;
        op->members[i].owes = 0;
    }
}

static void maybe_start_round(msm_t *m);

/* The accept round succeeded: newcomers join their rings (in registration order) and are accepted.
 * @return 0, or -PERR_NOMEM. */
static int admit_newcomers(msm_t *m, msm_op_t *op) {
    int fresh = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (p->accepted || !msm_op_member(op, p->conn)) continue;
        msm_group_t *g = msm_group(m, p->group, 1);
        if (!g || msm_ring_append(g, p->conn) != 0) return -PERR_NOMEM;
        p->accepted = 1;
        fresh++;
        char name[MSM_NAME_MAX];
        PLOG_INFO("master", "%s accepted into group %u", msm_peer_name(p, name), p->group);
    }
    PLOG_INFO("master", "accept round: %d newcomers accepted, %d members", fresh, op->nmembers);
    return 0;
}

/* Ends a wiring round once every member reported, or at once when it can no longer succeed. */
static void wiring_progress(msm_t *m, msm_op_t *op) {
    if (!op->failed && msm_op_owed(op)) return;
    int ok = !op->failed;
    for (int i = 0; i < op->nmembers; i++) ok &= op->members[i].ok;
    if (ok && op->kind == MSM_OP_ACCEPT && admit_newcomers(m, op) != 0) ok = 0;
    if (!ok) {
        msm_op_fail(m, op, MSM_FAIL_LOST);
    } else {
        op->wiring = 0;
        for (int i = 0; i < m->ngroups; i++) m->groups[i].wired = 1;
        if (op->kind == MSM_OP_OPTIMIZE) {
            for (int i = 0; i < op->nmembers; i++) {
                wire_msg_t r = {.type = M2C_OPTIMIZE_DONE};
                r.u.flag.value = 1;
                msm_send(m, op->members[i].conn, &r);
            }
        } else {
            for (int i = 0; i < op->nmembers; i++) send_topology_done(m, op->members[i].conn, 1);
        }
        msm_op_complete(m, op);
    }
    /* Peers that registered meanwhile, or a failed round with nobody accepted left, start the next one. */
    maybe_start_round(m);
}

static void maybe_start_round(msm_t *m) {
    msm_op_t *opt = msm_op_find(m, MSM_OP_OPTIMIZE, MSM_RUN_WIDE, 0);
    /* While a restarted master collects RESUMEs, its peers are not accepted yet: no round. While it wires
     * their rings, newcomers of the other groups may be accepted (eligible_newcomer). */
    if (m->rebuilding == MSM_RB_COLLECT || wiring_op(m) || (opt && opt->phase == MSM_PHASE_RUNNING)) return;
    msm_op_t *op = msm_op_find(m, MSM_OP_ACCEPT, MSM_RUN_WIDE, 0);
    int newcomers = 0, unwired = 0, accepted = 0;
    for (int i = 0; i < m->npeers; i++) {
        if (m->peers[i].accepted) accepted++;
        else if (eligible_newcomer(m, &m->peers[i])) newcomers++;
    }
    /* Bootstrap: with nobody accepted there is nobody to vote, so registered peers go straight in, once
     * the boot grace passed (the peers of a run this master lost re-register first: msm_set_boot_grace). */
    if (accepted ? !(op && msm_op_all_voted(m, op)) : !newcomers || msm_booting(m)) return;
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].ring_len && !m->groups[i].wired) unwired = 1;
    if (!newcomers && !unwired) {
        for (int i = 0; i < op->nmembers; i++) send_topology_done(m, op->members[i].conn, 1);
        msm_op_complete(m, op);
        return;
    }
    if (!op) op = msm_op_open(m, MSM_OP_ACCEPT, MSM_RUN_WIDE, 0);
    if (op) start_wiring(m, op, 1);
}

void msm_topo_on_registered(msm_t *m) { maybe_start_round(m); }

void msm_topo_on_vote(msm_t *m, msm_peer_t *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote) {
    (void)p, (void)op, (void)mb, (void)vote;
    maybe_start_round(m);
}

void msm_topo_on_established(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    msm_op_t *op = wiring_op(m);
    msm_member_t *mb = op ? msm_op_member(op, p->conn) : NULL;
    if (p->stale_reports > 0) {
        p->stale_reports--; /* the report for a round that already ended early */
        if (!p->stale_reports && !(mb && mb->owes)) p->wiring_owed = 0;
        if (!p->stale_reports && !p->accepted) maybe_start_round(m); /* it may join a round again */
        return;
    }
    if (!mb || !mb->owes) {
        msm_kick(m, p, "P2P_ESTABLISHED outside of a connection round");
        return;
    }
    mb->owes = 0;
    p->wiring_owed = p->stale_reports > 0;
    mb->ok = msg->u.flag.value != 0;
    if (!mb->ok) op->failed = 1;
    wiring_progress(m, op);
}

void msm_topo_progress(msm_t *m) {
    msm_op_t *op = wiring_op(m);
    if (op) wiring_progress(m, op);
    else maybe_start_round(m);
}

void msm_topo_fail(msm_t *m, msm_op_t *op, msm_fail_t why) {
    (void)why;
    msm_topo_abandon_reports(m, op);
    /* Newcomers that were not accepted keep waiting for the next round. */
    for (int i = 0; i < op->nmembers; i++) send_topology_done(m, op->members[i].conn, 0);
}

/* ---------- are peers pending ---------- */

static void answer_pending(msm_t *m, msm_op_t *op, int pending) {
    for (int i = 0; i < op->nmembers; i++) {
        wire_msg_t r = {.type = M2C_PEERS_PENDING};
        r.u.flag.value = (uint8_t)pending;
        msm_send(m, op->members[i].conn, &r);
    }
}

void msm_pending_progress(msm_t *m) {
    msm_op_t *op = msm_op_find(m, MSM_OP_PENDING, MSM_RUN_WIDE, 0);
    if (!op || !msm_op_all_voted(m, op)) return;
    int pending = 0;
    for (int i = 0; i < m->npeers; i++)
        if (eligible_newcomer(m, &m->peers[i])) pending = 1;
    answer_pending(m, op, pending);
    msm_op_complete(m, op);
}

void msm_pending_on_vote(msm_t *m, msm_peer_t *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote) {
    (void)p, (void)op, (void)mb, (void)vote;
    msm_pending_progress(m);
}

/* Broken by msm_stuck.c when it blocks an accept vote: "pending", so the voters go on to update with the others. */
void msm_pending_fail(msm_t *m, msm_op_t *op, msm_fail_t why) {
    (void)why;
    answer_pending(m, op, 1);
}
