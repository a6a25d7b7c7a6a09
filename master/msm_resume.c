/*
 * msm_resume.c - rebuilding a run from its peers after the master restarted.
 *
 * A restarted master knows nothing; the peers are the authority. Each accepted
 * peer of the old master re-registers with RESUME (its uuid, group, ring as
 * last established, revision of its last completed sync, that sync's hashes).
 * The master holds them (state "resuming", no votes possible: the peers wait
 * for RESUMED) until every peer named in a reported ring is back, or until
 * MSM_REBUILD_MS after the first RESUME. Then, per group:
 *  - ring: the order reported by the most peers (restricted to those back),
 *    then any peer not in it; the ring counts as wired only if it is exactly
 *    what every member reported, otherwise the next accept round rewires it;
 *  - revision: the one reported by the most peers (ties: the higher, so the run
 *    never goes back). A peer that reported another revision or other hashes is
 *    marked outdated: its next sync receives the state, even if it claims to be
 *    ahead. No single peer is trusted over the majority.
 * Newcomers that registered with the restarted master first may already form
 * the group (bootstrap): the resumed peers join them, and the next accept round
 * wires the ring. A RESUME to a group that has synced on this master (after the
 * rebuild, or with a master that never lost its run) is a new peer: RESUMED
 * with ok = 0, and it must join again.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msm_internal.h"

static void free_resume(msm_peer_t *p) {
    free(p->resume_ring);
    p->resume_ring = NULL;
    p->resume_nring = 0;
}

void msm_resume_forget(msm_peer_t *p) {
    free_resume(p);
    free(p->resume_tensors);
    p->resume_tensors = NULL;
    p->resume_n = 0;
    free(p->resume_ops);
    p->resume_ops = NULL;
    p->resume_nops = 0;
    p->resume_ops_lost = 0;
}

static msm_peer_t *find_uuid(msm_t *m, const uint8_t uuid[16], uint32_t group, int resumed_only) {
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *q = &m->peers[i];
        if (q->hello && q->group == group && (!resumed_only || q->resumed) && memcmp(q->uuid, uuid, 16) == 0)
            return q;
    }
    return NULL;
}

/* Every peer some resumed peer names in its ring is back (or the reported rings are empty). */
static int all_named_back(msm_t *m) {
    for (int i = 0; i < m->npeers; i++) {
        const msm_peer_t *p = &m->peers[i];
        if (!p->resumed) continue;
        for (uint32_t k = 0; k < p->resume_nring; k++)
            if (!find_uuid(m, p->resume_ring[k], p->group, 1)) return 0;
    }
    return 1;
}

/* p's reported ring restricted to the resumed peers of its group, as indexes into m->peers. */
static int filtered_ring(msm_t *m, const msm_peer_t *p, int *out) {
    int n = 0;
    for (uint32_t k = 0; k < p->resume_nring; k++) {
        msm_peer_t *q = find_uuid(m, p->resume_ring[k], p->group, 1);
        int dup = 0;
        for (int j = 0; j < n && q; j++) dup |= out[j] == (int)(q - m->peers);
        if (q && !dup) out[n++] = (int)(q - m->peers);
    }
    return n;
}

static int same_hashes(const msm_peer_t *a, const msm_peer_t *b) {
    if (a->resume_n != b->resume_n) return 0;
    for (uint32_t i = 0; i < a->resume_n; i++)
        if (strcmp(a->resume_tensors[i].key, b->resume_tensors[i].key) ||
            a->resume_tensors[i].hash != b->resume_tensors[i].hash)
            return 0;
    return 1;
}

/* Most reported revision among members (ties: the higher); *popular = a member holding it with the most common hashes. */
static int majority_revision(msm_t *m, const int *mem, int n, uint64_t *rev, int *popular) {
    int best = -1, best_votes = 0;
    for (int a = 0; a < n; a++) {
        const msm_peer_t *p = &m->peers[mem[a]];
        if (!p->resume_has_rev) continue;
        int votes = 0;
        for (int b = 0; b < n; b++) {
            const msm_peer_t *q = &m->peers[mem[b]];
            votes += q->resume_has_rev && q->resume_rev == p->resume_rev && same_hashes(p, q);
        }
        if (votes > best_votes || (votes == best_votes && best >= 0 && p->resume_rev > m->peers[best].resume_rev)) {
            best = mem[a];
            best_votes = votes;
        }
    }
    if (best < 0) return 0;
    *rev = m->peers[best].resume_rev;
    *popular = best;
    return 1;
}

/* Whether a member of the rebuilt group did not finish op (tag, op_seq) of the lost master. */
static int unfinished_anywhere(msm_t *m, const int *order, int n, const wire_op_outcome_t *op) {
    for (int k = 0; k < n; k++) {
        const msm_peer_t *q = &m->peers[order[k]];
        if (q->resume_ops_lost) return 1;
        for (uint32_t i = 0; i < q->resume_nops; i++)
            if (!q->resume_ops[i].finished && q->resume_ops[i].tag == op->tag && q->resume_ops[i].op_seq == op->op_seq)
                return 1;
    }
    return 0;
}

/* The verdicts on the ops p's ring finished (protocol.md, "Collectives the lost master left without a
 * verdict"): COMPLETE unless a member did not finish it. The lost master completed an op only once
 * every member had finished, so this never contradicts what it already told anyone. */
static void send_verdicts(msm_t *m, const int *order, int n, msm_peer_t *p) {
    for (uint32_t i = 0; i < p->resume_nops; i++) {
        const wire_op_outcome_t *op = &p->resume_ops[i];
        if (!op->finished) continue;
        int ok = !unfinished_anywhere(m, order, n, op);
        wire_msg_t v = {.type = ok ? M2C_COLL_COMPLETE : M2C_COLL_ABORT};
        v.u.coll.tag = op->tag;
        v.u.coll.op_seq = op->op_seq;
        v.u.coll.ok = (uint8_t)ok;
        msm_send(m, p->conn, &v);
        char name[MSM_NAME_MAX];
        PLOG_INFO("master", "%s: tag %llu of the lost master %s", msm_peer_name(p, name),
                  (unsigned long long)op->tag, ok ? "completes (every member finished it)" : "aborts");
    }
}

static void rebuild_group(msm_t *m, uint32_t group) {
    int mem[m->npeers], order[m->npeers], cand[m->npeers];
    int n = 0;
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].resumed && m->peers[i].group == group) mem[n++] = i;
    if (n == 0) return;
    /* The ring most members report, restricted to those back. */
    int norder = 0, best_votes = -1;
    for (int a = 0; a < n; a++) {
        int nc = filtered_ring(m, &m->peers[mem[a]], cand), votes = 0;
        for (int b = 0; b < n; b++) {
            int other[m->npeers];
            int no = filtered_ring(m, &m->peers[mem[b]], other);
            votes += no == nc && memcmp(other, cand, (size_t)nc * sizeof *cand) == 0;
        }
        if (votes > best_votes) {
            best_votes = votes;
            norder = nc;
            memcpy(order, cand, (size_t)nc * sizeof *cand);
        }
    }
    for (int a = 0; a < n; a++) {
        int in = 0;
        for (int k = 0; k < norder; k++) in |= order[k] == mem[a];
        if (!in) order[norder++] = mem[a];
    }
    msm_group_t *g = msm_group(m, group, 1);
    if (!g) return; /* out of memory: finish_rebuild kicks the members */
    int wired = g->ring_len == 0; /* newcomers accepted before the peers came back need new connections */
    uint64_t rev = 0;
    int popular = -1, has_rev = majority_revision(m, mem, n, &rev, &popular);
    g->has_revision = has_rev;
    g->last_revision = rev;
    for (int k = 0; k < norder; k++) {
        msm_peer_t *p = &m->peers[order[k]];
        if (p->resume_nring != (uint32_t)norder) wired = 0;
        for (int j = 0; j < norder && wired; j++)
            wired = memcmp(p->resume_ring[j], m->peers[order[j]].uuid, 16) == 0;
    }
    for (int k = 0; k < norder; k++) {
        msm_peer_t *p = &m->peers[order[k]];
        if (msm_ring_append(g, p->conn) != 0) return;
        p->accepted = 1;
        p->resumed = 0;
        p->ss_revision = p->resume_rev;
        p->outdated = has_rev && (!p->resume_has_rev || p->resume_rev != rev || !same_hashes(p, &m->peers[popular]));
        char name[MSM_NAME_MAX];
        if (p->outdated)
            PLOG_WARN("master", "%s resumed at revision %llu, the group's majority is at %llu: outdated",
                      msm_peer_name(p, name), (unsigned long long)p->resume_rev, (unsigned long long)rev);
    }
    g->wired = wired;
    /* Every member's list is needed for each verdict: all verdicts first, each before its RESUMED. */
    for (int k = 0; k < norder; k++) send_verdicts(m, order, norder, &m->peers[order[k]]);
    for (int k = 0; k < norder; k++) {
        msm_peer_t *p = &m->peers[order[k]];
        wire_msg_t r = {.type = M2C_RESUMED};
        r.u.resumed.ok = 1;
        msm_world(m, group, &r.u.resumed.world);
        r.u.resumed.revision = rev;
        msm_send(m, p->conn, &r);
        p->last_seen = m->now; /* its heartbeats start again now */
        msm_resume_forget(p);
    }
    PLOG_INFO("master", "group %u rebuilt: %d peers, revision %llu%s, ring %s", group, norder,
              (unsigned long long)rev, has_rev ? "" : " (none yet)", wired ? "as before" : "to be rewired");
}

static void finish_rebuild(msm_t *m) {
    uint64_t took = m->now - m->rebuild_started;
    uint32_t groups[m->npeers > 0 ? m->npeers : 1];
    int ng = 0;
    m->rebuilding = 0;
    for (int i = 0; i < m->npeers; i++) {
        if (!m->peers[i].resumed) continue;
        int seen = 0;
        for (int k = 0; k < ng; k++) seen |= groups[k] == m->peers[i].group;
        if (!seen) groups[ng++] = m->peers[i].group;
    }
    int peers = 0;
    uint64_t rev = 0;
    for (int k = 0; k < ng; k++) {
        rebuild_group(m, groups[k]);
        msm_group_t *g = msm_group(m, groups[k], 0);
        if (!g) continue;
        peers += g->ring_len;
        if (g->has_revision && g->last_revision > rev) rev = g->last_revision;
    }
    /* Only an allocation failure leaves a peer unplaced: it cannot be part of the run. */
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].resumed) {
            msm_kick(m, &m->peers[i], "master out of memory while rebuilding the run");
            i = -1;
        }
    m->stats.rebuilds++;
    PLOG_INFO("master", "rebuilt run from %d peers at revision %llu in %llu ms", peers, (unsigned long long)rev,
              (unsigned long long)took);
    msm_topo_on_registered(m); /* newcomers that registered meanwhile may now be accepted */
}

void msm_rebuild_check(msm_t *m) {
    if (!m->rebuilding) return;
    if (m->now >= m->rebuild_started + MSM_REBUILD_MS || all_named_back(m)) finish_rebuild(m);
}

/* The group ran on this master past its first sync: a RESUME is too late to shape it. (A group with no
 * revision yet may hold only newcomers that registered first after the restart: they are kept.) */
static int group_is_established(msm_t *m, uint32_t group) {
    msm_group_t *g = msm_group(m, group, 0);
    return g && g->ring_len && g->has_revision;
}

void msm_on_resume(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    const __typeof__(msg->u.resume) *r = &msg->u.resume;
    if (msm_check_hello(m, p, r->magic, r->version, r->p2p_port) != 0) return;
    /* Only the holder of the uuid's key resumes it; it replaces a stale connection of its own. */
    if (msm_check_identity(m, &p, C2M_RESUME, &r->id, r->uuid) != 0) return;
    msm_register(m, p, r->peer_group, r->p2p_port, r->pool_size, r->has_adv ? &r->adv_ip : NULL);
    m->stats.reregistrations++;
    if (!m->rebuilding && group_is_established(m, r->peer_group)) {
        /* The run went on without it: a new peer, accepted at the next round like any other. */
        wire_msg_t no = {.type = M2C_RESUMED};
        msm_send(m, p->conn, &no);
        char name[MSM_NAME_MAX];
        PLOG_INFO("master", "%s resumed after the run was rebuilt: joins as a new peer", msm_peer_name(p, name));
        msm_topo_on_registered(m);
        return;
    }
    p->resumed = 1;
    p->resume_has_rev = r->has_revision != 0;
    p->resume_rev = r->revision;
    if (r->nring) {
        p->resume_ring = malloc((size_t)r->nring * 16);
        if (p->resume_ring) {
            memcpy(p->resume_ring, r->ring, (size_t)r->nring * 16);
            p->resume_nring = r->nring;
        }
    }
    if (r->nops) {
        p->resume_ops = malloc((size_t)r->nops * sizeof *p->resume_ops);
        if (p->resume_ops) {
            memcpy(p->resume_ops, r->ops, (size_t)r->nops * sizeof *p->resume_ops);
            p->resume_nops = r->nops;
        } else {
            p->resume_ops_lost = 1;
        }
    }
    if (r->n && (p->resume_tensors = malloc((size_t)r->n * sizeof *p->resume_tensors))) {
        memcpy(p->resume_tensors, r->tensors, (size_t)r->n * sizeof *p->resume_tensors);
        p->resume_n = r->n;
    }
    if (!m->rebuilding) {
        m->rebuilding = 1;
        m->rebuild_started = m->now;
    }
    char name[MSM_NAME_MAX];
    PLOG_INFO("master", "%s re-registered (group %u, revision %llu)", msm_peer_name(p, name), p->group,
              (unsigned long long)r->revision);
    msm_rebuild_check(m);
}
