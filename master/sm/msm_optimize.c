/*
 * msm_optimize.c - optimize-topology consensus (run-wide).
 *
 * When every accepted peer voted OPTIMIZE_TOPOLOGY, the master asks peers to
 * measure only the directed pairs missing from its bandwidth store, at most
 * MSM_PROBE_TARGETS per peer and round, nearest in ring order first, so that a
 * round's probes grow with the peers, not with their pairs (BENCH_REQUEST; each
 * peer sends to its targets for MSM_PROBE_MS); pairs never measured count as no
 * bandwidth in the solve, and the next optimization measures the next ones. It stores the
 * results, solves each group's ring with the ATSP solver within
 * TOPO_QUICK_TIME_MS (maximize the bottleneck, then minimize the summed
 * per-edge time; docs/topology.md), and, if a ring changed, runs a wiring
 * round of the accepted peers only (no newcomers are admitted). Any failed
 * measurement, failed wiring or departure answers OPTIMIZE_DONE(0): the
 * peers' pcclOptimizeTopology returns pcclTopologyOptimizationFailed and a
 * retry measures what is still missing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "sm/msm_internal.h"
#include "topology/topology.h"

#define MSM_PROBE_MS 300
/* Most pairs one peer measures per round: every pair of a group of up to 9, the 8 nearest ring offsets beyond. */
#define MSM_PROBE_TARGETS 8

double msm_bw_get(const msm_t *m, uint64_t from, uint64_t to) {
    for (int i = 0; i < m->nbw; i++)
        if (m->bw[i].from == from && m->bw[i].to == to) return m->bw[i].mbps;
    return -1;
}

/* Stores a measured link. @return 0, or -PERR_NOMEM. */
static int bw_set(msm_t *m, uint64_t from, uint64_t to, double mbps) {
    for (int i = 0; i < m->nbw; i++)
        if (m->bw[i].from == from && m->bw[i].to == to) {
            m->bw[i].mbps = mbps;
            return 0;
        }
    if (m->nbw == m->cap_bw) {
        int cap = m->cap_bw ? m->cap_bw * 2 : 64;
        msm_bw_t *b = realloc(m->bw, (size_t)cap * sizeof *b);
        if (!b) return -PERR_NOMEM;
        m->bw = b;
        m->cap_bw = cap;
    }
    m->bw[m->nbw++] = (msm_bw_t){from, to, mbps};
    return 0;
}

/* One machine-readable line per solve: peers (uuid prefixes in the current ring order), the
 * measured matrix in that order, and the chosen ring as indices into it. */
static void log_solution(const msm_t *m, const msm_group_t *g, const double *bw, int n, const topo_solution_t *sol) {
    if (!pccl_log_enabled(PCCL_LOG_INFO)) return;
    cJSON *o = cJSON_CreateObject(), *peers = cJSON_AddArrayToObject(o, "peers");
    cJSON *mat = cJSON_AddArrayToObject(o, "matrix_mbps"), *ring = cJSON_AddArrayToObject(o, "ring");
    for (int i = 0; i < n; i++) {
        char id[9] = "?";
        msm_peer_t *p = msm_find((msm_t *)m, g->ring[i]);
        if (p) snprintf(id, sizeof id, "%02x%02x%02x%02x", p->uuid[0], p->uuid[1], p->uuid[2], p->uuid[3]);
        cJSON_AddItemToArray(peers, cJSON_CreateString(id));
        cJSON *row = cJSON_CreateArray();
        for (int j = 0; j < n; j++) cJSON_AddItemToArray(row, cJSON_CreateNumber(i == j ? 0 : bw[i * n + j]));
        cJSON_AddItemToArray(mat, row);
        cJSON_AddItemToArray(ring, cJSON_CreateNumber(sol->order[i]));
    }
    cJSON_AddNumberToObject(o, "group", g->id);
    cJSON_AddNumberToObject(o, "bottleneck_mbps", sol->bottleneck_mbps);
    cJSON_AddBoolToObject(o, "optimal", sol->optimal != 0);
    char *s = cJSON_PrintUnformatted(o);
    if (s) PLOG_INFO("master", "topology solved: %s", s);
    cJSON_free(s);
    cJSON_Delete(o);
}

/* Index of conn in g's ring, or -PERR_INVALID when it is not in it. */
static int ring_pos(const msm_group_t *g, uint64_t conn) {
    for (int i = 0; i < g->ring_len; i++)
        if (g->ring[i] == conn) return i;
    return -PERR_INVALID;
}

/* A background result still valid for g's membership, as ring positions. @return 0 if usable, -PERR_INVALID
 * when none is, or g's membership changed since. */
static int moonshot_order(msm_group_t *g, int *order) {
    if (!g->moon_conns || g->moon_epoch != g->epoch || g->moon_n != g->ring_len) return -PERR_INVALID;
    for (int i = 0; i < g->moon_n; i++)
        if ((order[i] = ring_pos(g, g->moon_conns[i])) < 0) return -PERR_INVALID;
    return 0;
}

/* Leaves a request for a background search of g's ring (one at a time). */
static void request_moonshot(msm_t *m, msm_group_t *g, const double *bw) {
    if (m->moon_req.n) return;
    int n = g->ring_len;
    m->moon_req.conns = malloc((size_t)n * sizeof *m->moon_req.conns);
    m->moon_req.bw = malloc((size_t)n * (size_t)n * sizeof *m->moon_req.bw);
    if (!m->moon_req.conns || !m->moon_req.bw) {
        free(m->moon_req.conns);
        free(m->moon_req.bw);
        m->moon_req = (msm_moonshot_t){0};
        return;
    }
    memcpy(m->moon_req.conns, g->ring, (size_t)n * sizeof *g->ring);
    memcpy(m->moon_req.bw, bw, (size_t)n * (size_t)n * sizeof *bw);
    m->moon_req.n = n;
    m->moon_req.group = g->id;
    m->moon_req.epoch = g->epoch;
}

int msm_take_moonshot(msm_t *m, msm_moonshot_t *out) {
    if (!m->moon_req.n) return 0;
    *out = m->moon_req;
    m->moon_req = (msm_moonshot_t){0};
    return 1;
}

void msm_on_moonshot_result(msm_t *m, uint32_t group, uint64_t epoch, const uint64_t *req_conns, const int *order,
                            int n) {
    msm_group_t *g = msm_group(m, group, 0);
    if (!g || g->epoch != epoch || n != g->ring_len) return; /* membership changed: discard */
    uint64_t *ring = malloc((size_t)n * sizeof *ring);
    if (!ring) return;
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n) {
            free(ring);
            return;
        }
        ring[i] = req_conns[order[i]];
    }
    free(g->moon_conns);
    g->moon_conns = ring;
    g->moon_n = n;
    g->moon_epoch = epoch;
}

/* Rings of 2 have one order; larger rings are re-solved from the store (or take a better
 * background result of the same membership). */
static void solve_groups(msm_t *m) {
    for (int gi = 0; gi < m->ngroups; gi++) {
        msm_group_t *g = &m->groups[gi];
        int n = g->ring_len;
        if (n < 3) continue;
        double *bw = calloc((size_t)n * (size_t)n, sizeof *bw);
        int *moon = malloc((size_t)n * sizeof *moon);
        if (!bw || !moon) {
            free(bw);
            free(moon);
            continue;
        }
        /* One pass over the store (a pair not measured stays 0: no bandwidth known), not a search per pair. */
        for (int k = 0; k < m->nbw; k++) {
            int i = ring_pos(g, m->bw[k].from), j = i < 0 ? -1 : ring_pos(g, m->bw[k].to);
            if (j >= 0 && i != j) bw[i * n + j] = m->bw[k].mbps;
        }
        msm_penalize_relayed(m, g, bw, n);
        topo_solution_t sol = {0};
        if (topo_solve(bw, n, TOPO_QUICK_TIME_MS, NULL, &sol) == 0) {
            if (moonshot_order(g, moon) == 0 &&
                topo_compare_values(topo_ring_bottleneck(bw, n, moon), topo_ring_time(bw, n, moon),
                                    sol.bottleneck_mbps, sol.total_time) < 0) {
                PLOG_INFO("master", "group %u: adopting the background search's better ring", g->id);
                memcpy(sol.order, moon, (size_t)n * sizeof *moon);
                sol.bottleneck_mbps = topo_ring_bottleneck(bw, n, moon);
                sol.total_time = topo_ring_time(bw, n, moon);
            } else if (!sol.optimal) {
                request_moonshot(m, g, bw);
            }
            free(g->moon_conns); /* used or stale: a new search starts from the new store */
            g->moon_conns = NULL;
            log_solution(m, g, bw, n, &sol);
            /* Rings are cyclic: compare as sequences starting at the same peer. */
            int start = 0;
            for (int i = 0; i < n; i++)
                if (sol.order[i] == 0) start = i;
            int same = 1;
            for (int i = 0; i < n; i++) same &= sol.order[(start + i) % n] == i;
            if (!same) {
                uint64_t *ring = malloc((size_t)n * sizeof *ring);
                if (ring) {
                    for (int i = 0; i < n; i++) ring[i] = g->ring[sol.order[i]];
                    memcpy(g->ring, ring, (size_t)n * sizeof *ring);
                    free(ring);
                    g->wired = 0;
                    PLOG_INFO("master", "group %u: new ring, bottleneck %.1f Mbit/s%s", g->id, sol.bottleneck_mbps,
                              sol.optimal ? " (proven optimal)" : "");
                }
            }
        }
        topo_solution_free(&sol);
        free(bw);
        free(moon);
    }
}

static msm_op_t *optimize_op(msm_t *m) { return msm_op_find(m, MSM_OP_OPTIMIZE, MSM_RUN_WIDE, 0); }

static void finish(msm_t *m, msm_op_t *op) {
    if (op->failed) {
        msm_op_fail(m, op, MSM_FAIL_LOST);
        return;
    }
    solve_groups(m);
    int unwired = 0;
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].ring_len >= 2 && !m->groups[i].wired) unwired = 1;
    if (unwired) {
        msm_topo_start_rewire(m, op);
        return;
    }
    for (int i = 0; i < op->nmembers; i++) {
        wire_msg_t r = {.type = M2C_OPTIMIZE_DONE};
        r.u.flag.value = 1;
        msm_send(m, op->members[i].conn, &r);
    }
    msm_op_complete(m, op);
}

/* Asks each member to probe the pairs of its group missing from the store; returns 1 if anyone was asked. */
static int request_probes(msm_t *m, msm_op_t *op) {
    int asked = 0;
    for (int i = 0; i < m->npeers; i++) {
        msm_peer_t *p = &m->peers[i];
        msm_group_t *g = p->accepted ? msm_group(m, p->group, 0) : NULL;
        msm_member_t *mb = msm_op_member(op, p->conn);
        if (!g || !mb || g->ring_len < 3) continue;
        wire_peer_t *targets = calloc((size_t)g->ring_len, sizeof *targets);
        if (!targets) continue;
        /* Targets in ring-offset order: in probe slot k every peer sends to the peer k places ahead,
         * so each receiver takes one probe at a time instead of several competing ones. */
        int pos = 0;
        for (int r = 0; r < g->ring_len; r++)
            if (g->ring[r] == p->conn) pos = r;
        uint32_t nt = 0;
        for (int k = 1; k < g->ring_len && nt < MSM_PROBE_TARGETS; k++) {
            msm_peer_t *q = msm_find(m, g->ring[(pos + k) % g->ring_len]);
            if (!q || q == p || msm_bw_get(m, p->conn, q->conn) > 0) continue;
            targets[nt++] = msm_dial_entry(p, q);
        }
        if (nt) {
            wire_msg_t req = {.type = M2C_BENCH_REQUEST};
            req.u.bench_req.duration_ms = MSM_PROBE_MS;
            req.u.bench_req.n = nt;
            req.u.bench_req.peers = targets;
            msm_send(m, p->conn, &req);
            mb->owes = 1;
            asked = 1;
        }
        free(targets);
    }
    return asked;
}

/* Starts the measurements once every accepted peer voted and no wiring round runs. */
static void maybe_start(msm_t *m, msm_op_t *op) {
    if (op->phase != MSM_PHASE_VOTING || !msm_op_all_voted(m, op)) return;
    for (msm_op_t *o = m->ops; o; o = o->next)
        if (o->wiring) return;
    op->phase = MSM_PHASE_RUNNING;
    op->failed = 0;
    if (!request_probes(m, op)) finish(m, op);
}

void msm_opt_on_vote(msm_t *m, msm_peer_t *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote) {
    (void)p, (void)mb, (void)vote;
    maybe_start(m, op);
}

void msm_opt_on_result(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    msm_op_t *op = optimize_op(m);
    msm_member_t *mb = op && !op->wiring ? msm_op_member(op, p->conn) : NULL;
    if (!mb || !mb->owes) {
        msm_kick(m, p, "BENCH_RESULT without a request");
        return;
    }
    mb->owes = 0;
    for (uint32_t i = 0; i < msg->u.bench_res.n; i++) {
        const wire_bw_t *r = &msg->u.bench_res.results[i];
        msm_peer_t *q = NULL;
        for (int k = 0; k < m->npeers && !q; k++)
            if (memcmp(m->peers[k].uuid, r->uuid, 16) == 0) q = &m->peers[k];
        if (!q || !isfinite(r->mbps) || r->mbps <= 0 || q->group != p->group) {
            /* A failed or nonsensical measurement fails this optimization; the pair stays missing. */
            op->failed = 1;
            continue;
        }
        if (bw_set(m, p->conn, q->conn, r->mbps) != 0) op->failed = 1;
    }
    if (!msm_op_owed(op)) finish(m, op);
}

void msm_opt_forget_conn(msm_t *m, uint64_t conn) {
    int kept = 0;
    for (int i = 0; i < m->nbw; i++)
        if (m->bw[i].from != conn && m->bw[i].to != conn) m->bw[kept++] = m->bw[i];
    m->nbw = kept;
}

/* After a departure: a vote may now be complete; measurements end (failed) once the rest reported,
 * since the peers are still probing; a wiring round is the accept kind's to end. */
void msm_opt_progress(msm_t *m) {
    msm_op_t *op = optimize_op(m);
    if (!op || op->wiring) return;
    if (op->phase == MSM_PHASE_VOTING) maybe_start(m, op);
    else if (!msm_op_owed(op)) finish(m, op);
}

void msm_opt_fail(msm_t *m, msm_op_t *op, msm_fail_t why) {
    (void)why;
    msm_topo_abandon_reports(m, op);
    for (int i = 0; i < op->nmembers; i++) {
        wire_msg_t r = {.type = M2C_OPTIMIZE_DONE};
        msm_send(m, op->members[i].conn, &r);
    }
}
