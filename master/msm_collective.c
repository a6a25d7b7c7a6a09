/*
 * msm_collective.c - per-tag collective consensus of one peer group.
 *
 * VOTE_INITIATE: every accepted member sends COLL_INIT(tag, parameters). When
 * all did, the parameters are cross-checked (a mismatch rejects the call on
 * every peer instead of corrupting data), a free connection-pool slot is
 * assigned (ops beyond the pool wait for a slot), and COMMENCE carries the ring.
 * PERFORM: members run the ring and report COLL_DONE. All ok -> COMPLETE;
 * any failure or departure -> ABORT to all members at once (their buffers are
 * restored and they may retry).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "msm_internal.h"

static msm_coll_t *find_coll(msm_group_t *g, uint64_t tag) {
    for (msm_coll_t *c = g->colls; c; c = c->next)
        if (c->tag == tag) return c;
    return NULL;
}

static void unlink_coll(msm_group_t *g, msm_coll_t *c) {
    for (msm_coll_t **pp = &g->colls; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    free(c->voters);
    free(c->done);
    free(c);
}

void msm_coll_free_all(msm_group_t *g) {
    while (g->colls) unlink_coll(g, g->colls);
}

static int has_member(const msm_coll_t *c, uint64_t conn) {
    for (int i = 0; i < c->nvoters; i++)
        if (c->voters[i] == conn) return 1;
    return 0;
}

int msm_peer_in_running_coll(msm_t *m, const msm_peer_t *p) {
    msm_group_t *g = msm_group(m, p->group, 0);
    if (!g) return 0;
    for (msm_coll_t *c = g->colls; c; c = c->next)
        if (has_member(c, p->conn)) return 1;
    return 0;
}

static uint32_t group_pool(msm_t *m, msm_group_t *g) {
    uint32_t pool = 64;
    for (int i = 0; i < g->ring_len; i++) {
        msm_peer_t *p = msm_find(m, g->ring[i]);
        if (p && p->pool < pool) pool = p->pool;
    }
    return pool ? pool : 1;
}

static int slot_free(msm_group_t *g, uint32_t slot) {
    for (msm_coll_t *c = g->colls; c; c = c->next)
        if (c->running && c->slot == slot) return 0;
    return 1;
}

static void send_coll(msm_t *m, uint64_t conn, uint16_t type, const msm_coll_t *c, int ok) {
    wire_msg_t w = {.type = type};
    w.u.coll.tag = c->tag;
    w.u.coll.op_seq = c->op_seq;
    w.u.coll.ok = (uint8_t)ok;
    msm_send(m, conn, &w);
}

static void reject_all(msm_t *m, msm_group_t *g, msm_coll_t *c, uint8_t reason) {
    for (int i = 0; i < c->nvoters; i++) {
        wire_msg_t w = {.type = M2C_COLL_REJECT};
        w.u.reject.tag = c->tag;
        w.u.reject.reason = reason;
        msm_send(m, c->voters[i], &w);
    }
    unlink_coll(g, c);
}

static int commence(msm_t *m, msm_group_t *g, msm_coll_t *c) {
    uint32_t pool = group_pool(m, g), slot;
    for (slot = 0; slot < pool; slot++)
        if (slot_free(g, slot)) break;
    if (slot == pool) return 0; /* all connections busy: wait for one */
    uint8_t(*ring)[16] = calloc((size_t)g->ring_len, 16);
    uint8_t *done = calloc((size_t)g->ring_len, 1);
    uint64_t *members = calloc((size_t)g->ring_len, sizeof *members);
    if (!ring || !done || !members) {
        free(ring);
        free(done);
        free(members);
        return 0;
    }
    int n = 0;
    for (int i = 0; i < g->ring_len; i++) {
        msm_peer_t *p = msm_find(m, g->ring[i]);
        if (!p) continue;
        memcpy(ring[n], p->uuid, 16);
        members[n++] = p->conn;
    }
    free(c->voters);
    free(c->done);
    c->voters = members;
    c->nvoters = n;
    c->done = done;
    c->running = 1;
    c->slot = slot;
    c->op_seq = ++m->next_op_seq;
    wire_msg_t w = {.type = M2C_COLL_COMMENCE};
    w.u.commence.tag = c->tag;
    w.u.commence.op_seq = c->op_seq;
    w.u.commence.slot = slot;
    msm_world(m, g->id, &w.u.commence.world);
    w.u.commence.n = (uint32_t)n;
    w.u.commence.ring = ring;
    for (int i = 0; i < n; i++) msm_send(m, members[i], &w);
    PLOG_DEBUG("master", "group %u tag %llu commenced: op %llu, slot %u, %d peers", g->id, (unsigned long long)c->tag,
               (unsigned long long)c->op_seq, slot, n);
    free(ring);
    return 1;
}

/* Decide every voting collective whose vote is complete; commence in tag order of arrival. */
static void evaluate(msm_t *m, msm_group_t *g) {
    int progress = 1;
    while (progress) {
        progress = 0;
        for (msm_coll_t *c = g->colls; c; c = c->next) {
            if (c->running) continue;
            int all = g->ring_len > 0;
            for (int i = 0; i < g->ring_len && all; i++)
                if (!has_member(c, g->ring[i])) all = 0;
            if (!all) continue;
            if (c->mismatch) {
                PLOG_WARN("master", "group %u tag %llu rejected: %s", g->id, (unsigned long long)c->tag,
                          c->mismatch_reason);
                reject_all(m, g, c, REJECT_PARAM_MISMATCH);
                progress = 1;
                break;
            }
            if (g->ring_len < 2) {
                reject_all(m, g, c, REJECT_TOO_FEW_PEERS);
                progress = 1;
                break;
            }
            if (commence(m, g, c)) {
                progress = 1;
                break;
            }
        }
    }
}

void msm_coll_on_init(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    if (p->vote_update || p->vote_optimize || p->ss_phase || p->establishing) {
        msm_kick(m, p, "COLL_INIT while another operation of this peer is in progress");
        return;
    }
    msm_group_t *g = msm_group(m, p->group, 0);
    if (!g) {
        msm_kick(m, p, "COLL_INIT from a peer without a group");
        return;
    }
    const __typeof__(msg->u.coll_init) *ci = &msg->u.coll_init;
    msm_coll_t *c = find_coll(g, ci->tag);
    if (c && (c->running || has_member(c, p->conn))) {
        msm_kick(m, p, "COLL_INIT for tag %llu which this peer already started", (unsigned long long)ci->tag);
        return;
    }
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) {
            msm_kick(m, p, "master out of memory");
            return;
        }
        c->tag = ci->tag;
        c->count = ci->count;
        c->dtype = ci->dtype;
        c->op = ci->op;
        c->quant_algo = ci->quant_algo;
        c->quant_dtype = ci->quant_dtype;
        /* Append so that commencement follows launch order. */
        msm_coll_t **pp = &g->colls;
        while (*pp) pp = &(*pp)->next;
        *pp = c;
    } else if (c->count != ci->count || c->dtype != ci->dtype || c->op != ci->op ||
               c->quant_algo != ci->quant_algo || c->quant_dtype != ci->quant_dtype) {
        if (!c->mismatch)
            snprintf(c->mismatch_reason, sizeof c->mismatch_reason,
                     "peers disagree on (count, dtype, op, quantization): (%llu,%u,%u,%u/%u) vs (%llu,%u,%u,%u/%u)",
                     (unsigned long long)c->count, c->dtype, c->op, c->quant_algo, c->quant_dtype,
                     (unsigned long long)ci->count, ci->dtype, ci->op, ci->quant_algo, ci->quant_dtype);
        c->mismatch = 1;
    }
    uint64_t *v = realloc(c->voters, (size_t)(c->nvoters + 1) * sizeof *v);
    if (!v) {
        msm_kick(m, p, "master out of memory");
        return;
    }
    c->voters = v;
    c->voters[c->nvoters++] = p->conn;
    evaluate(m, g);
}

static void finish(msm_t *m, msm_group_t *g, msm_coll_t *c, int ok) {
    for (int i = 0; i < c->nvoters; i++) send_coll(m, c->voters[i], ok ? M2C_COLL_COMPLETE : M2C_COLL_ABORT, c, ok);
    if (ok) {
        m->stats.collectives_completed++;
        msm_reports_forget_group(m, g->id); /* the ring worked: old unreachability reports are stale */
    }
    else m->stats.collectives_aborted++;
    unlink_coll(g, c);
    evaluate(m, g); /* a slot became free */
}

void msm_coll_on_done(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    msm_group_t *g = msm_group(m, p->group, 0);
    if (!g) return;
    msm_coll_t *c = find_coll(g, msg->u.coll.tag);
    /* A DONE for an operation that was already aborted is a normal race: ignore it. */
    if (!c || !c->running || c->op_seq != msg->u.coll.op_seq) return;
    int i;
    for (i = 0; i < c->nvoters; i++)
        if (c->voters[i] == p->conn) break;
    if (i == c->nvoters) {
        msm_kick(m, p, "COLL_DONE for tag %llu from a non-member", (unsigned long long)c->tag);
        return;
    }
    if (!msg->u.coll.ok) {
        PLOG_INFO("master", "group %u tag %llu failed on conn=%llu: aborting", g->id, (unsigned long long)c->tag,
                  (unsigned long long)p->conn);
        finish(m, g, c, 0);
        return;
    }
    c->done[i] = 1;
    for (i = 0; i < c->nvoters; i++)
        if (!c->done[i]) return;
    finish(m, g, c, 1);
}

void msm_coll_on_departure(msm_t *m, msm_group_t *g, uint64_t conn) {
    int again = 1;
    while (again) {
        again = 0;
        for (msm_coll_t *c = g->colls; c; c = c->next) {
            if (!has_member(c, conn)) continue;
            if (c->running) {
                PLOG_INFO("master", "group %u tag %llu: member conn=%llu left mid-operation, aborting", g->id,
                          (unsigned long long)c->tag, (unsigned long long)conn);
                /* Remove the departed member first so it is not messaged. */
                for (int i = 0; i < c->nvoters; i++)
                    if (c->voters[i] == conn) {
                        c->voters[i] = c->voters[--c->nvoters];
                        c->done[i] = c->done[c->nvoters];
                        break;
                    }
                finish(m, g, c, 0);
                again = 1;
                break;
            }
            for (int i = 0; i < c->nvoters; i++)
                if (c->voters[i] == conn) {
                    c->voters[i] = c->voters[--c->nvoters];
                    break;
                }
            if (c->nvoters == 0) {
                unlink_coll(g, c);
                again = 1;
                break;
            }
        }
    }
    evaluate(m, g);
}
