/*
 * msm_topology.c - run-wide votes: accept new peers (update topology),
 * are-peers-pending, optimize topology.
 *
 * Accept round: when every accepted peer voted, registered peers are appended
 * to their group's ring and every involved peer is told its group's ring
 * (ESTABLISH_P2P). Each connects to its ring successor and reports. If all
 * report success the newcomers become accepted; otherwise everyone gets a
 * failed TOPOLOGY_DONE, the newcomers stay registered, and a retry starts over.
 * A round that can no longer succeed (a member left or reported failure) ends
 * at once: peers still wiring may be waiting on the departed one, and the
 * early TOPOLOGY_DONE is what lets them stop (libpccl polls for it).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msm_internal.h"

static int all_accepted_voted(msm_t *m, size_t field_offset) {
    int any = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->accepted) continue;
        any = 1;
        if (!*(int *)((char *)p + field_offset)) return 0;
    }
    return any;
}

static void send_topology_done(msm_t *m, msm_peer_t *p, int ok) {
    wire_msg_t d = {.type = M2C_TOPOLOGY_DONE};
    d.u.topo_done.ok = (uint8_t)ok;
    msm_world(m, p->group, &d.u.topo_done.world);
    msm_send(m, p->conn, &d);
}

/* Ring of group g as the peer list a member needs, plus the newcomers of that group. */
static void send_establish(msm_t *m, msm_peer_t *to) {
    msm_group_t *g = msm_group(m, to->group, 0);
    int n = 0;
    wire_peer_t *list = calloc((size_t)m->npeers + 1, sizeof *list);
    if (!list) return;
    /* Existing ring order first, then newcomers in registration order. */
    if (g)
        for (int i = 0; i < g->ring_len; i++) {
            msm_peer_t *q = msm_find(m, g->ring[i]);
            if (!q) continue;
            memcpy(list[n].uuid, q->uuid, 16);
            memcpy(list[n].ip, q->ip, 4);
            list[n++].port = q->p2p_port;
        }
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *q = &m->peers[i];
        if (q->accepted || !q->establishing || q->group != to->group) continue;
        memcpy(list[n].uuid, q->uuid, 16);
        memcpy(list[n].ip, q->ip, 4);
        list[n++].port = q->p2p_port;
    }
    wire_msg_t e = {.type = M2C_ESTABLISH_P2P};
    msm_world(m, to->group, &e.u.establish.world);
    e.u.establish.world.group_world_size = (uint32_t)n;
    e.u.establish.n = (uint32_t)n;
    e.u.establish.peers = list;
    msm_send(m, to->conn, &e);
    free(list);
}

static void maybe_start_round(msm_t *m);

static void finish_round(msm_t *m) {
    int ok = 1;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (p->establishing && !p->established_ok) ok = 0;
    }
    if (m->round_lost_peer) ok = 0;
    if (m->round_optimize) {
        m->establishing = m->round_optimize = m->round_lost_peer = 0;
        for (int i = 0; i < m->npeers; i++) m->peers[i].establishing = 0;
        if (ok)
            for (int i = 0; i < m->ngroups; i++) m->groups[i].wired = 1;
        msm_topo_finish_optimize(m, ok);
        maybe_start_round(m);
        return;
    }
    if (ok) {
        for (int i = 0; i < m->npeers; i++) {
            msm_peer_t *p = &m->peers[i];
            if (!p->establishing || p->accepted) continue;
            msm_group_t *g = msm_group(m, p->group, 1);
            if (!g || msm_ring_append(g, p->conn) != 0) {
                ok = 0;
                break;
            }
            p->accepted = 1;
            PLOG_INFO("master", "peer conn=%llu accepted into group %u", (unsigned long long)p->conn, p->group);
        }
        for (int i = 0; i < m->ngroups; i++) m->groups[i].wired = 1;
    }
    m->establishing = 0;
    m->round_lost_peer = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->establishing && !p->vote_update) continue;
        p->establishing = p->established_reported = p->established_ok = 0;
        p->vote_update = 0;
        /* A newcomer that was not accepted keeps waiting for the next round. */
        send_topology_done(m, p, ok);
    }
    /* Peers that registered meanwhile, or a failed round with nobody accepted left, start the next one. */
    maybe_start_round(m);
}

static void maybe_start_round(msm_t *m) {
    /* While a restarted master rebuilds the run, its peers are not accepted yet: no bootstrap. */
    if (m->establishing || m->optimizing || m->rebuilding) return;
    int newcomers = 0, unwired = 0, accepted = 0;
    for (int i = 0; i < m->npeers; i++) {
        if (m->peers[i].accepted) accepted++;
        else if (m->peers[i].hello) newcomers++;
    }
    /* Bootstrap: with nobody accepted there is nobody to vote, so registered peers go straight in. */
    if (accepted ? !all_accepted_voted(m, offsetof(msm_peer_t, vote_update)) : !newcomers) return;
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].ring_len && !m->groups[i].wired) unwired = 1;
    if (!newcomers && !unwired) {
        for (int i = 0; i < m->npeers; i++) {
            msm_peer_t *p = &m->peers[i];
            if (!p->vote_update) continue;
            p->vote_update = 0;
            send_topology_done(m, p, 1);
        }
        return;
    }
    m->establishing = 1;
    m->round_lost_peer = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (p->accepted || p->hello) {
            p->establishing = 1;
            p->established_reported = p->established_ok = 0;
        }
    }
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].establishing) send_establish(m, &m->peers[i]);
}

static void maybe_finish_round(msm_t *m) {
    if (!m->establishing) return;
    int doomed = m->round_lost_peer, unreported = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->establishing) continue;
        if (!p->established_reported) unreported = 1;
        else if (!p->established_ok) doomed = 1;
    }
    if (unreported && !doomed) return;
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].establishing && !m->peers[i].established_reported) m->peers[i].stale_reports++;
    finish_round(m);
}

void msm_topo_on_registered(msm_t *m) { maybe_start_round(m); }

void msm_topo_on_vote(msm_t *m, msm_peer_t *p) {
    if (p->vote_update || p->establishing) {
        msm_kick(m, p, "duplicate UPDATE_TOPOLOGY vote");
        return;
    }
    if (p->ss_phase || msm_peer_in_running_coll(m, p)) {
        msm_kick(m, p, "UPDATE_TOPOLOGY while a shared-state sync or collective of this peer is in progress");
        return;
    }
    p->vote_update = 1;
    maybe_start_round(m);
}

void msm_topo_on_established(msm_t *m, msm_peer_t *p, int ok) {
    if (p->stale_reports > 0) {
        p->stale_reports--; /* the report for a round that already ended early */
        return;
    }
    if (!p->establishing || p->established_reported) {
        msm_kick(m, p, "P2P_ESTABLISHED outside of a connection round");
        return;
    }
    p->established_reported = 1;
    p->established_ok = ok != 0;
    maybe_finish_round(m);
}

void msm_topo_on_pending_vote(msm_t *m, msm_peer_t *p) {
    if (p->vote_pending) {
        msm_kick(m, p, "duplicate PEERS_PENDING vote");
        return;
    }
    p->vote_pending = 1;
    if (!all_accepted_voted(m, offsetof(msm_peer_t, vote_pending))) return;
    int pending = 0;
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].hello && !m->peers[i].accepted) pending = 1;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *q = &m->peers[i];
        if (!q->vote_pending) continue;
        q->vote_pending = 0;
        wire_msg_t r = {.type = M2C_PEERS_PENDING};
        r.u.flag.value = (uint8_t)pending;
        msm_send(m, q->conn, &r);
    }
}

void msm_topo_finish_optimize(msm_t *m, int ok) {
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *q = &m->peers[i];
        if (!q->vote_optimize) continue;
        q->vote_optimize = 0;
        wire_msg_t r = {.type = M2C_OPTIMIZE_DONE};
        r.u.flag.value = (uint8_t)ok;
        msm_send(m, q->conn, &r);
    }
}

void msm_topo_start_rewire(msm_t *m) {
    m->establishing = 1;
    m->round_optimize = 1;
    m->round_lost_peer = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        if (!p->accepted) continue;
        p->establishing = 1;
        p->established_reported = p->established_ok = 0;
    }
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].establishing) send_establish(m, &m->peers[i]);
}

void msm_topo_on_departure(msm_t *m, uint64_t conn) {
    (void)conn;
    if (m->establishing) {
        /* If the departed peer was being wired (round_lost_peer), the round fails now. */
        maybe_finish_round(m);
    } else {
        maybe_start_round(m);
    }
    /* Pending votes complete without the departed peer. */
    for (int i = 0; i < m->npeers; i++) {
        if (m->peers[i].vote_pending) {
            msm_peer_t *q = &m->peers[i];
            q->vote_pending = 0;
            msm_topo_on_pending_vote(m, q);
            break;
        }
    }
    msm_opt_on_departure(m, conn);
}
