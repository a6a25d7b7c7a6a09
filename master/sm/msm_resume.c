/*
 * msm_resume.c - rebuilding a run from its peers after the master restarted.
 *
 * A restarted master knows nothing; the peers are the authority, but only peers
 * that prove what they claim. Each accepted peer of the old master re-registers
 * with RESUME (its uuid, group, ring as last established, revision of its last
 * completed sync, that sync's hashes, its collectives without a verdict).
 *
 * A RESUME joins the rebuild only during the restart window (MSM_RESUME_WINDOW_MS
 * after the master started, or while a rebuild collects), into a group that has
 * not synced on this master, within the caps (MSM_RESUME_MAX_PEERS resuming
 * peers, rings of at most as many, MSM_RESUME_MAX_OPS collectives). Any other
 * RESUME is taken as a HELLO: the peer is registered as a newcomer (RESUMED with
 * ok = 0) and joins the run through an accept round, once it was heard from.
 *
 * 1. Collect: the master holds the resuming peers (no votes possible: they wait
 *    for RESUMED) until every peer named in a reported ring is back (not before
 *    the floor, msm_set_rebuild_floor), or MSM_REBUILD_MS after the first
 *    RESUME. Only the tensor entries' digest is kept, not the entries.
 * 2. Per group: the ring is the order reported by the most peers (restricted to
 *    those back), then any peer not in it; each peer waiting for a verdict on a
 *    collective of the lost master gets it (COMPLETE unless some resuming peer of
 *    the group did not finish it).
 * 3. Wiring: like newcomers, the resuming peers are accepted only once their ring
 *    is wired: each gets ESTABLISH_P2P and reports. A peer that does not report
 *    within MSM_REBUILD_WIRING_MS is kicked; one that reports a failure and the
 *    successor it could not reach (unless that one never reported) become
 *    newcomers (RESUMED ok = 0); the others are wired again without them, at most
 *    MSM_REBUILD_WIRING_ROUNDS times. A round in which everyone reports success
 *    accepts its peers.
 * 4. Revision: the one most of the accepted peers report with the same hashes
 *    (ties: the higher, which they back); the others are outdated: their next
 *    sync receives the state, even if they claim to be ahead.
 * Newcomers that registered with the restarted master first may already form the
 * group (bootstrap): the resumed peers join them, and the next accept round wires
 * the ring.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/msm_internal.h"
#include "sm/msm_rebuild.h"

/* Reported ring entries up to which every RESUME checks whether all named peers are back; beyond, the tick does. */
#define MSM_RESUME_CHECK_RING 4096

enum { RW_OWES, RW_OK, RW_FAIL, RW_GONE };

/* One group's rebuilt ring being proven. */
typedef struct msm_rewire {
    uint32_t group;
    int n, round;
    uint64_t deadline;
    uint64_t *conns; /* this round's ring */
    uint8_t *state;  /* RW_* per member */
} msm_rewire_t;

void msm_resume_forget(msm_peer_t *p) {
    free(p->resume_ring);
    p->resume_ring = NULL;
    p->resume_nring = 0;
    free(p->resume_ops);
    p->resume_ops = NULL;
    p->resume_nops = 0;
    p->resume_ops_lost = 0;
}

void msm_resume_free(msm_t *m) {
    for (int i = 0; i < m->nrewire; i++) {
        free(m->rewire[i].conns);
        free(m->rewire[i].state);
    }
    free(m->rewire);
    m->rewire = NULL;
    m->nrewire = 0;
}

size_t msm_resume_held(const msm_t *m, uint64_t conn) {
    for (int i = 0; i < m->npeers; i++) {
        const msm_peer_t *p = &m->peers[i];
        if (p->conn != conn) continue;
        if (p->resumed != MSM_RS_COLLECT) return 0;
        return sizeof *p + (size_t)p->resume_nring * 16 + (size_t)p->resume_nops * sizeof *p->resume_ops;
    }
    return 0;
}

int msm_resume_collecting(const msm_t *m) { return m->rebuilding == MSM_RB_COLLECT; }

int msm_resume_wiring(const msm_t *m, uint32_t group) {
    for (int k = 0; k < m->nrewire; k++)
        if (m->rewire[k].group == group) return 1;
    return 0;
}

/* ---------- 2: verdicts ---------- */

/* The verdicts on the ops p's ring finished (protocol.md, "Collectives the lost master left without a
 * verdict"): COMPLETE unless a resuming peer of the group did not finish it. The lost master completed an
 * op only once every member had finished, so this never contradicts what it already told anyone. */
static void send_verdicts(msm_t *m, msm_peer_t *p, const msm_rb_ops_t *unfinished) {
    unsigned done = 0, aborted = 0;
    for (uint32_t i = 0; i < p->resume_nops; i++) {
        const wire_op_outcome_t *op = &p->resume_ops[i];
        if (!op->finished) continue;
        int ok = !msm_rb_unfinished(unfinished, op);
        wire_msg_t v = {.type = ok ? M2C_COLL_COMPLETE : M2C_COLL_ABORT};
        v.u.coll.tag = op->tag;
        v.u.coll.op_seq = op->op_seq;
        v.u.coll.ok = (uint8_t)ok;
        msm_send(m, p->conn, &v);
        done += (unsigned)ok;
        aborted += (unsigned)!ok;
    }
    char name[MSM_NAME_MAX];
    if (done + aborted)
        PLOG_INFO("master", "%s: %u collectives of the lost master complete (every member finished them), %u abort",
                  msm_peer_name(p, name), done, aborted);
}

/* ---------- 3: wiring ---------- */

static void start_round(msm_t *m, msm_rewire_t *rw) {
    rw->deadline = m->now + MSM_REBUILD_WIRING_MS;
    memset(rw->state, RW_OWES, (size_t)rw->n);
    msm_peer_t **ps = malloc((size_t)rw->n * sizeof *ps);
    wire_peer_t *list = malloc((size_t)rw->n * sizeof *list);
    for (int i = 0; ps && i < rw->n; i++) ps[i] = msm_find(m, rw->conns[i]);
    for (int i = 0; ps && list && i < rw->n; i++) {
        if (!ps[i]) continue;
        for (int j = 0; j < rw->n; j++)
            if (ps[j]) list[j] = msm_dial_entry(ps[i], ps[j]);
        wire_msg_t e = {.type = M2C_ESTABLISH_P2P};
        msm_world(m, rw->group, &e.u.establish.world);
        e.u.establish.world.group_world_size = (uint32_t)rw->n;
        e.u.establish.n = (uint32_t)rw->n;
        e.u.establish.peers = list;
        msm_send(m, rw->conns[i], &e);
    }
    /* Out of memory: nobody was told; they never report and are kicked at the deadline. */
    free(ps);
    free(list);
}

/* p becomes a newcomer: registered, accepted at its next accept round. */
static void demote(msm_t *m, uint64_t conn, const char *why) {
    msm_peer_t *p = msm_find(m, conn);
    if (!p) return;
    p->resumed = 0;
    wire_msg_t no = {.type = M2C_RESUMED};
    msm_send(m, conn, &no);
    char name[MSM_NAME_MAX];
    PLOG_WARN("master", "%s %s: joins as a new peer", msm_peer_name(p, name), why);
}

/* Every member of rw's round reported success: they join the group's ring and are accepted. */
static void accept_ring(msm_t *m, msm_rewire_t *rw) {
    msm_group_t *g = msm_group(m, rw->group, 1);
    msm_peer_t **ps = malloc((size_t)rw->n * sizeof *ps);
    int n = 0;
    for (int i = 0; ps && i < rw->n; i++)
        if ((ps[n] = msm_find(m, rw->conns[i]))) n++;
    int had = g ? g->ring_len : 0, in = 0;
    while (g && ps && in < n && msm_ring_append(g, ps[in]->conn) == 0) in++;
    if (!ps)
        for (int i = 0; i < rw->n; i++) demote(m, rw->conns[i], "(master out of memory)");
    for (int i = in; ps && i < n; i++) demote(m, ps[i]->conn, "(master out of memory)");
    if (!in) {
        free(ps);
        return;
    }
    int best = msm_rb_claim((const msm_peer_t *const *)ps, in);
    if (best >= 0) {
        g->has_revision = 1;
        g->last_revision = ps[best]->resume_rev;
        for (int i = 0; i < m->npeers; i++) /* newcomers accepted meanwhile hold another revision */
            if (m->peers[i].group == rw->group) m->peers[i].holds_rev = 0;
    } else if (!had) {
        g->has_revision = 0;
    }
    uint64_t rev = g->has_revision ? g->last_revision : 0;
    for (int i = 0; i < in; i++) {
        msm_peer_t *p = ps[i];
        p->accepted = 1;
        p->resumed = 0;
        p->ss_revision = p->resume_rev;
        int same = best >= 0 && p->resume_has_rev && p->resume_rev == rev &&
                   memcmp(p->resume_digest, ps[best]->resume_digest, 16) == 0;
        p->outdated = best >= 0 && !same;
        p->holds_rev = same;
        char name[MSM_NAME_MAX];
        if (p->outdated)
            PLOG_WARN("master", "%s resumed at revision %llu, the group's majority is at %llu: outdated",
                      msm_peer_name(p, name), (unsigned long long)p->resume_rev, (unsigned long long)rev);
    }
    g->wired = had == 0; /* newcomers accepted before the peers came back need new connections */
    for (int i = 0; i < in; i++) {
        wire_msg_t r = {.type = M2C_RESUMED};
        r.u.resumed.ok = 1;
        msm_world(m, rw->group, &r.u.resumed.world);
        r.u.resumed.revision = rev;
        msm_send(m, ps[i]->conn, &r);
        ps[i]->last_seen = m->now; /* its heartbeats start again now */
    }
    m->rebuilt_peers += in;
    PLOG_INFO("master", "group %u rebuilt: %d peers, revision %llu%s, ring %s", rw->group, in,
              (unsigned long long)rev, best >= 0 ? "" : " (none yet)", g->wired ? "as before" : "to be rewired");
    free(ps);
}

/*
 * Ends rw's round (everyone reported, or the deadline passed). Silent members go to kick[]. A member that
 * could not reach its successor and that successor become newcomers, since either may be the one at
 * fault; unless the successor never reported (it is the one). @return 1 when the group's rebuild is over.
 */
static int end_round(msm_t *m, msm_rewire_t *rw, uint64_t *kick, int *nkick) {
    int n = rw->n, clean = 1;
    for (int i = 0; i < n; i++) {
        if (rw->state[i] == RW_OWES) {
            kick[(*nkick)++] = rw->conns[i];
            rw->state[i] = RW_GONE;
        }
        clean &= rw->state[i] == RW_OK;
    }
    if (clean) {
        accept_ring(m, rw);
        return 1;
    }
    uint8_t *out = calloc((size_t)n, 1);
    if (!out) return 0; /* tried again at the next tick */
    for (int i = 0; i < n; i++) {
        if (rw->state[i] != RW_FAIL) continue;
        int s = (i + 1) % n;
        if (n > 1 && rw->state[s] == RW_GONE) continue;
        out[i] = 1;
        out[s] = 1;
    }
    int left = 0, last = rw->round >= MSM_REBUILD_WIRING_ROUNDS;
    for (int i = 0; i < n; i++) {
        if (rw->state[i] == RW_GONE) continue;
        if (out[i] || last) {
            demote(m, rw->conns[i], out[i] ? "could not be wired into its rebuilt ring"
                                           : "was not wired into its rebuilt ring in time");
            continue;
        }
        rw->conns[left++] = rw->conns[i];
    }
    free(out);
    rw->n = left;
    if (!left) return 1;
    rw->round++;
    PLOG_INFO("master", "group %u: wiring the rebuilt ring again without the peers that failed (%d left, round %d)",
              rw->group, left, rw->round);
    start_round(m, rw);
    return 0;
}

static void finish_rebuild(msm_t *m) {
    m->rebuilding = 0;
    m->stats.rebuilds++;
    uint64_t rev = 0;
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].ring_len && m->groups[i].has_revision && m->groups[i].last_revision > rev)
            rev = m->groups[i].last_revision;
    PLOG_INFO("master", "rebuilt run from %d peers at revision %llu in %llu ms", m->rebuilt_peers,
              (unsigned long long)rev, (unsigned long long)(m->now - m->rebuild_started));
    m->rebuilt_peers = 0;
    msm_topo_on_registered(m); /* newcomers that registered meanwhile may now be accepted */
}

static void wiring_progress(msm_t *m) {
    uint64_t *kick = NULL;
    int nkick = 0, cap = 0;
    for (int k = 0; k < m->nrewire; k++) cap += m->rewire[k].n;
    if (cap && !(kick = malloc((size_t)cap * sizeof *kick))) return;
    for (int k = 0; k < m->nrewire;) {
        msm_rewire_t *rw = &m->rewire[k];
        int owes = 0;
        for (int i = 0; i < rw->n; i++) owes |= rw->state[i] == RW_OWES;
        if ((owes && m->now < rw->deadline) || !end_round(m, rw, kick, &nkick)) {
            k++;
            continue;
        }
        free(rw->conns);
        free(rw->state);
        memmove(rw, rw + 1, (size_t)(m->nrewire - k - 1) * sizeof *rw);
        m->nrewire--;
    }
    /* Kicks last (they remove records and re-evaluate operations), before the rebuild ends: a silent peer
     * must not be taken into an accept round. */
    for (int i = 0; i < nkick; i++) {
        msm_peer_t *p = msm_find(m, kick[i]);
        if (p)
            msm_kick(m, p, "did not report its ring wiring within %d ms of the rebuild", MSM_REBUILD_WIRING_MS);
    }
    free(kick);
    if (!m->nrewire) finish_rebuild(m);
}

void msm_resume_on_established(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    for (int k = 0; p->resumed == MSM_RS_WIRING && k < m->nrewire; k++) {
        msm_rewire_t *rw = &m->rewire[k];
        for (int i = 0; i < rw->n; i++) {
            if (rw->conns[i] != p->conn || rw->state[i] != RW_OWES) continue;
            rw->state[i] = msg->u.flag.value ? RW_OK : RW_FAIL;
            msm_rebuild_check(m, 0);
            return;
        }
    }
    msm_kick(m, p, "P2P_ESTABLISHED outside of a connection round");
}

void msm_resume_on_departure(msm_t *m, msm_peer_t *p) {
    if (p->resumed == MSM_RS_COLLECT) {
        m->nresuming--;
        m->resume_ring_total -= p->resume_nring;
    }
    for (int k = 0; p->resumed == MSM_RS_WIRING && k < m->nrewire; k++)
        for (int i = 0; i < m->rewire[k].n; i++)
            if (m->rewire[k].conns[i] == p->conn) m->rewire[k].state[i] = RW_GONE;
}

/* ---------- 1 -> 2: the collection ends ---------- */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Orders group's ring, sends its verdicts and adds its wiring. @return 0, or -PERR_NOMEM. */
static int plan_group(msm_t *m, const msm_rb_index_t *ix, uint32_t group, int *mem, int *order) {
    int n = 0;
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].resumed == MSM_RS_COLLECT && m->peers[i].group == group) mem[n++] = i;
    msm_rewire_t rw = {.group = group, .n = n, .round = 1};
    rw.conns = malloc((size_t)n * sizeof *rw.conns);
    rw.state = malloc((size_t)n);
    msm_rewire_t *grown = realloc(m->rewire, (size_t)(m->nrewire + 1) * sizeof *grown);
    if (grown) m->rewire = grown;
    msm_rb_ops_t unfinished;
    if (!rw.conns || !rw.state || !grown || msm_rb_ring_order(m, ix, mem, n, order) != 0) {
        free(rw.conns);
        free(rw.state);
        return -PERR_NOMEM;
    }
    msm_rb_ops_build(m, mem, n, &unfinished); /* out of memory: every verdict aborts */
    for (int k = 0; k < n; k++) send_verdicts(m, &m->peers[mem[k]], &unfinished);
    msm_rb_ops_free(&unfinished);
    for (int k = 0; k < n; k++) rw.conns[k] = m->peers[order[k]].conn;
    m->rewire[m->nrewire++] = rw;
    return 0;
}

static void end_collection(msm_t *m) {
    size_t np = (size_t)(m->npeers ? m->npeers : 1);
    uint32_t *groups = malloc(np * sizeof *groups);
    int *mem = malloc(np * sizeof *mem), *order = malloc(np * sizeof *order), ng = 0;
    msm_rb_index_t ix = {0};
    int ok = groups && mem && order && msm_rb_index_build(m, &ix) == 0;
    for (int i = 0; ok && i < m->npeers; i++)
        if (m->peers[i].resumed == MSM_RS_COLLECT) groups[ng++] = m->peers[i].group;
    if (ok) qsort(groups, (size_t)ng, sizeof *groups, cmp_u32);
    for (int k = 0; ok && k < ng; k++)
        if (k == 0 || groups[k] != groups[k - 1]) ok = plan_group(m, &ix, groups[k], mem, order) == 0;
    msm_rb_index_free(&ix);
    free(groups), free(mem), free(order);
    int planned = 0;
    for (int k = 0; k < m->nrewire; k++)
        for (int i = 0; i < m->rewire[k].n; i++) {
            msm_peer_t *p = msm_find(m, m->rewire[k].conns[i]);
            msm_resume_forget(p);
            p->resumed = MSM_RS_WIRING;
            planned++;
        }
    m->nresuming = 0;
    m->resume_ring_total = 0;
    m->rebuilding = MSM_RB_WIRING;
    PLOG_INFO("master", "%d peers re-registered in %llu ms: wiring their rings in %d groups", planned,
              (unsigned long long)(m->now - m->rebuild_started), m->nrewire);
    for (int k = 0; k < m->nrewire; k++) start_round(m, &m->rewire[k]);
    /* Only an allocation failure leaves a peer unplanned: it cannot be part of the run. */
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].resumed == MSM_RS_COLLECT) {
            msm_kick(m, &m->peers[i], "master out of memory while rebuilding the run");
            i = -1;
        }
}

void msm_rebuild_check(msm_t *m, int from_tick) {
    if (m->in_rebuild) return;
    m->in_rebuild = 1;
    if (m->rebuilding == MSM_RB_COLLECT) {
        /* Not before the floor: a RESUME naming only itself must not end the collection before the run's
         * peers, retrying since the master went away, are back. */
        int done = m->now >= m->rebuild_started + MSM_REBUILD_MS;
        if (!done && m->now >= m->rebuild_started + m->rebuild_floor &&
            (from_tick || m->resume_ring_total <= MSM_RESUME_CHECK_RING))
            msm_rb_all_named_back(m, &done); /* out of memory: not done, the deadline ends it */
        if (done) end_collection(m);
    }
    if (m->rebuilding == MSM_RB_WIRING) wiring_progress(m);
    m->in_rebuild = 0;
}

/* ---------- RESUME ---------- */

/* The group ran on this master past its first sync: a RESUME is too late to shape it. (A group with no
 * revision yet may hold only newcomers that registered first after the restart: they are kept.) */
static int group_is_established(msm_t *m, uint32_t group) {
    msm_group_t *g = msm_group(m, group, 0);
    return g && g->ring_len && g->has_revision;
}

/* Why this RESUME cannot join a rebuild (written to why), or NULL: it can. */
static const char *not_resumable(msm_t *m, const wire_msg_t *msg, char *why, size_t len) {
    const __typeof__(msg->u.resume) *r = &msg->u.resume;
    if (group_is_established(m, r->peer_group)) snprintf(why, len, "after the run was rebuilt");
    else if (m->rebuilding == MSM_RB_WIRING) snprintf(why, len, "while the rebuilt rings are wired");
    else if (!m->rebuilding && m->now >= m->started + MSM_RESUME_WINDOW_MS)
        snprintf(why, len, "%llu ms after the master started, past its restart window of %d ms",
                 (unsigned long long)(m->now - m->started), MSM_RESUME_WINDOW_MS);
    else if (m->nresuming >= MSM_RESUME_MAX_PEERS)
        snprintf(why, len, "beyond the %d peers a rebuild takes", MSM_RESUME_MAX_PEERS);
    else if (r->nring > MSM_RESUME_MAX_PEERS)
        snprintf(why, len, "with a ring of %u peers (a rebuild takes %d)", r->nring, MSM_RESUME_MAX_PEERS);
    else if (r->nops > MSM_RESUME_MAX_OPS)
        snprintf(why, len, "with %u collectives (at most %d)", r->nops, MSM_RESUME_MAX_OPS);
    else return NULL;
    return why;
}

void msm_on_resume(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    const __typeof__(msg->u.resume) *r = &msg->u.resume;
    if (msm_check_hello(m, p, r->magic, r->version, r->p2p_port) != 0) return;
    /* Only the holder of the uuid's key resumes it; it replaces a stale connection of its own. */
    if (msm_check_identity(m, &p, C2M_RESUME, &r->id, r->uuid) != 0) return;
    msm_register(m, p, r->peer_group, r->p2p_port, r->pool_size, r->has_adv ? &r->adv_ip : NULL);
    m->stats.reregistrations++;
    char why[128], name[MSM_NAME_MAX];
    if (not_resumable(m, msg, why, sizeof why)) {
        /* A new peer, accepted at the next round like any other once it was heard from (a HEARTBEAT): a
         * connection that only sent RESUME never holds up an accept round. */
        p->unheard = 1;
        wire_msg_t no = {.type = M2C_RESUMED};
        msm_send(m, p->conn, &no);
        PLOG_INFO("master", "%s resumed %s: joins as a new peer", msm_peer_name(p, name), why);
        return;
    }
    p->resumed = MSM_RS_COLLECT;
    p->resume_has_rev = r->has_revision != 0;
    p->resume_rev = r->revision;
    msm_rb_digest_tensors(r->tensors, r->n, p->resume_digest);
    if (r->nring && (p->resume_ring = malloc((size_t)r->nring * 16))) {
        memcpy(p->resume_ring, r->ring, (size_t)r->nring * 16);
        p->resume_nring = r->nring;
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
    m->nresuming++;
    m->resume_ring_total += p->resume_nring;
    if (!m->rebuilding) {
        m->rebuilding = MSM_RB_COLLECT;
        m->rebuild_started = m->now;
    }
    PLOG_INFO("master", "%s re-registered (group %u, revision %llu)", msm_peer_name(p, name), p->group,
              (unsigned long long)r->revision);
    msm_rebuild_check(m, 0);
}
