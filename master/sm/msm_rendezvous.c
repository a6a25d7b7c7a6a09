/*
 * msm_rendezvous.c - the master as rendezvous of NAT traversal (docs/nat.md): observed addresses,
 * reachability verdicts, RENDEZVOUS requests answered to both sides (punch, or a relay once a punch
 * failed), and the EDGES peers report. Pure: the server passes the observed port, the probe's verdict and
 * the clock in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/master_sm.h"
#include "sm/msm_internal.h"

void msm_set_observed_port(msm_t *m, uint64_t conn, uint16_t port) {
    msm_peer_t *p = msm_find(m, conn);
    if (p) p->obs_port = port;
}

void msm_on_reachable(msm_t *m, uint64_t conn, int reachable) {
    msm_peer_t *p = msm_find(m, conn);
    if (!p) return;
    p->reach = reachable ? WIRE_REACH_YES : WIRE_REACH_NO;
    char name[MSM_NAME_MAX];
    if (!reachable) PLOG_INFO("master", "%s does not accept inbound p2p connections", msm_peer_name(p, name));
}

int msm_probe_addr(const msm_t *m, uint64_t conn, ccoip_socket_address_t *out) {
    for (int i = 0; i < m->npeers; i++) {
        const msm_peer_t *p = &m->peers[i];
        if (p->conn != conn) continue;
        if (!p->hello) return -PERR_INVALID;
        *out = (ccoip_socket_address_t){.inet = p->ip, .port = p->p2p_port};
        return 0;
    }
    return -PERR_INVALID;
}

static msm_peer_t *find_uuid(msm_t *m, const uint8_t uuid[16]) {
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].hello && memcmp(m->peers[i].uuid, uuid, 16) == 0) return &m->peers[i];
    return NULL;
}

static void refuse(msm_t *m, msm_peer_t *p, const wire_msg_t *req, const char *reason) {
    wire_msg_t a = {.type = M2C_RENDEZVOUS};
    a.u.rdv.req = req->u.rdv_req.req;
    memcpy(a.u.rdv.peer, req->u.rdv_req.target, 16);
    a.u.rdv.mode = WIRE_RDV_REFUSED;
    snprintf(a.u.rdv.reason, sizeof a.u.rdv.reason, "%s", reason);
    msm_send(m, p->conn, &a);
    char name[MSM_NAME_MAX];
    PLOG_INFO("master", "rendezvous of %s refused: %s", msm_peer_name(p, name), reason);
}

/* Why p may not rendezvous with the target now, or NULL. Counts the request against p's rate window. */
static const char *check(msm_t *m, msm_peer_t *p, const msm_peer_t *t) {
    if (m->now >= p->rdv_window + MSM_RDV_WINDOW_MS || !p->rdv_window) {
        p->rdv_window = m->now ? m->now : 1;
        p->rdv_count = 0;
    }
    if (++p->rdv_count > MSM_RDV_PER_WINDOW) return "too many rendezvous requests: wait and retry";
    if (!t || t->leaving) return "the target is not a registered peer (unknown or departed)";
    if (t == p) return "a peer cannot rendezvous with itself";
    if (t->group != p->group) return "the target is in another peer group";
    return NULL;
}

/* The answer to `to`: mode, role, the other side's observed address (punch), as msm_dial_entry gives it. */
static wire_msg_t answer(uint32_t req, const msm_peer_t *to, const msm_peer_t *other, uint8_t mode, uint8_t role) {
    wire_peer_t e = msm_dial_entry(to, other);
    wire_msg_t a = {.type = M2C_RENDEZVOUS};
    a.u.rdv.req = req;
    memcpy(a.u.rdv.peer, other->uuid, 16);
    a.u.rdv.mode = mode;
    a.u.rdv.role = role;
    a.u.rdv.has_ip = 1;
    a.u.rdv.ip = e.obs_ip;
    a.u.rdv.port = e.obs_port;
    a.u.rdv.delay_ms = MSM_RDV_DELAY_MS;
    return a;
}

void msm_set_rendezvous_nonce(msm_t *m, const uint8_t nonce[16]) { memcpy(m->rdv_nonce, nonce, 16); }

/* Both sides meet at a relay: the same relay for the pair, the nonce the server mints their token from. */
static void relay_pair(msm_t *m, msm_peer_t *p, msm_peer_t *t, uint32_t req) {
    uint32_t n;
    const ccoip_socket_address_t *relays = msm_relays(m, &n);
    const ccoip_socket_address_t *r = &relays[(p->conn + t->conn) % n];
    wire_msg_t a[2];
    for (int side = 0; side < 2; side++) {
        a[side] = (wire_msg_t){.type = M2C_RENDEZVOUS};
        a[side].u.rdv.req = side == 0 ? req : 0;
        memcpy(a[side].u.rdv.peer, (side == 0 ? t : p)->uuid, 16);
        a[side].u.rdv.mode = WIRE_RDV_RELAY;
        a[side].u.rdv.role = side == 0 ? WIRE_RDV_DIALER : WIRE_RDV_TARGET;
        a[side].u.rdv.has_ip = 1;
        a[side].u.rdv.ip = r->inet;
        a[side].u.rdv.port = r->port;
        memcpy(a[side].u.rdv.token, m->rdv_nonce, 16);
    }
    msm_send(m, t->conn, &a[1]);
    msm_send(m, p->conn, &a[0]);
    char x[MSM_NAME_MAX], y[MSM_NAME_MAX];
    PLOG_INFO("master", "rendezvous: %s meets %s at a relay", msm_peer_name(p, x), msm_peer_name(t, y));
}

/* The punch index of the pair's next punch: a rolling counter per pair, so that a pair's concurrent punched
 * connections (ring stripes, shared state) use distinct port pairs (docs/nat.md). */
static uint8_t punch_index(msm_t *m, const msm_peer_t *p, const msm_peer_t *t) {
    uint64_t lo = p->conn < t->conn ? p->conn : t->conn, hi = p->conn < t->conn ? t->conn : p->conn;
    int slot = 0;
    for (int i = 0; i < MSM_PUNCH_PAIRS; i++) {
        if (m->punch_pairs[i].lo == lo && m->punch_pairs[i].hi == hi) {
            slot = i;
            break;
        }
        if (m->punch_pairs[i].used < m->punch_pairs[slot].used) slot = i; /* else: the least recently used */
    }
    if (m->punch_pairs[slot].lo != lo || m->punch_pairs[slot].hi != hi) {
        m->punch_pairs[slot].lo = lo;
        m->punch_pairs[slot].hi = hi;
        m->punch_pairs[slot].next = 0;
    }
    m->punch_pairs[slot].used = ++m->punch_uses;
    uint8_t index = m->punch_pairs[slot].next;
    m->punch_pairs[slot].next = (uint8_t)((index + 1) % MSM_PUNCH_INDEXES);
    return index;
}

void msm_on_rendezvous(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    msm_peer_t *t = find_uuid(m, msg->u.rdv_req.target);
    const char *why = check(m, p, t);
    uint32_t nrelays = 0;
    msm_relays(m, &nrelays);
    int relay = !why && (msg->u.rdv_req.punch_failed || !p->obs_port || !t->obs_port);
    if (relay && !nrelays)
        why = msg->u.rdv_req.punch_failed ? "the punch failed and the run has no relay"
                                          : "no observed address to punch to and the run has no relay";
    if (why) {
        refuse(m, p, msg, why);
        return;
    }
    if (relay) {
        relay_pair(m, p, t, msg->u.rdv_req.req);
        return;
    }
    wire_msg_t to_dialer = answer(msg->u.rdv_req.req, p, t, WIRE_RDV_PUNCH, WIRE_RDV_DIALER);
    wire_msg_t to_target = answer(0, t, p, WIRE_RDV_PUNCH, WIRE_RDV_TARGET);
    to_dialer.u.rdv.index = to_target.u.rdv.index = punch_index(m, p, t);
    msm_send(m, t->conn, &to_target);
    msm_send(m, p->conn, &to_dialer);
    char a[MSM_NAME_MAX], b[MSM_NAME_MAX];
    PLOG_INFO("master", "rendezvous: %s punches to %s (index %u)", msm_peer_name(p, a), msm_peer_name(t, b),
              to_dialer.u.rdv.index);
}

void msm_on_edges(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    (void)m;
    uint32_t n = msg->u.edges.n;
    wire_edge_t *e = n ? malloc((size_t)n * sizeof *e) : NULL;
    if (n && !e) return; /* keeps the last report */
    for (uint32_t i = 0; i < n; i++) {
        e[i] = msg->u.edges.e[i];
        if (e[i].kind > WIRE_EDGE_RELAYED) e[i].kind = WIRE_EDGE_DIRECT;
    }
    free(p->edges);
    p->edges = e;
    p->nedges = n;
}

void msm_penalize_relayed(msm_t *m, const msm_group_t *g, double *bw, int n) {
    if (n > g->ring_len) n = g->ring_len;
    uint8_t *relayed = n > 0 ? calloc((size_t)n * (size_t)n, 1) : NULL;
    if (!relayed) return;
    for (int i = 0; i < n; i++) {
        const msm_peer_t *p = msm_find(m, g->ring[i]);
        for (uint32_t e = 0; p && e < p->nedges; e++) {
            for (int j = 0; j < n && p->edges[e].kind == WIRE_EDGE_RELAYED; j++) {
                const msm_peer_t *q = j == i ? NULL : msm_find(m, g->ring[j]);
                if (q && memcmp(q->uuid, p->edges[e].uuid, 16) == 0) relayed[i * n + j] = relayed[j * n + i] = 1;
            }
        }
    }
    for (int k = 0; k < n * n; k++)
        if (relayed[k]) bw[k] *= MSM_RELAYED_BW_FACTOR; /* once per pair and direction, whoever reported it */
    free(relayed);
}
