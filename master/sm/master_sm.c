/*
 * master_sm.c - the master's consensus state machine (see master_sm.h).
 *
 * Consensus scopes (PCCL architecture, "Peer Groups & Communicators"):
 *  - accept new peers, are-peers-pending, optimize topology: all accepted peers of the run;
 *  - shared-state sync and collectives: the accepted peers of one peer group.
 * Every vote is re-evaluated whenever a peer leaves, so no vote waits for a
 * peer that is gone.
 */
#include "sm/master_sm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sm/msm_internal.h"

/* ---------- small helpers ---------- */

msm_peer_t *msm_find(msm_t *m, uint64_t conn) {
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].conn == conn) return &m->peers[i];
    return NULL;
}

const char *msm_peer_name(const msm_peer_t *p, char buf[MSM_NAME_MAX]) {
    const uint8_t *u = p->uuid;
    char where[ADDR_STRLEN];
    if (p->hello) {
        ccoip_socket_address_t a = {.inet = p->ip, .port = p->p2p_port};
        addr_str(&a, where);
        if (p->name[0])
            snprintf(buf, MSM_NAME_MAX, "peer %02x%02x%02x%02x \"%s\" (%s)", u[0], u[1], u[2], u[3], p->name, where);
        else
            snprintf(buf, MSM_NAME_MAX, "peer %02x%02x%02x%02x (%s)", u[0], u[1], u[2], u[3], where);
    } else {
        addr_ip_str(&p->ip, where);
        snprintf(buf, MSM_NAME_MAX, "peer conn=%llu (%s)", (unsigned long long)p->conn, where);
    }
    return buf;
}

const char *msm_conn_name(const msm_t *m, uint64_t conn, char buf[MSM_NAME_MAX]) {
    for (int i = 0; i < m->npeers; i++)
        if (m->peers[i].conn == conn) return msm_peer_name(&m->peers[i], buf);
    snprintf(buf, MSM_NAME_MAX, "conn=%llu", (unsigned long long)conn);
    return buf;
}

msm_group_t *msm_group(msm_t *m, uint32_t id, int create) {
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].id == id) return &m->groups[i];
    if (!create) return NULL;
    if (m->ngroups == m->cap_groups) {
        int cap = m->cap_groups ? m->cap_groups * 2 : 4;
        msm_group_t *g = realloc(m->groups, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        m->groups = g;
        m->cap_groups = cap;
    }
    msm_group_t *g = &m->groups[m->ngroups++];
    memset(g, 0, sizeof *g);
    g->id = id;
    return g;
}

void msm_send(msm_t *m, uint64_t conn, const wire_msg_t *msg) { m->io.send(m->io.ctx, conn, msg); }

static void remove_peer_record(msm_t *m, uint64_t conn);

static void vkick(msm_t *m, msm_peer_t *p, uint64_t *counter, const char *fmt, va_list ap) {
    char reason[256];
    vsnprintf(reason, sizeof reason, fmt, ap);
    uint64_t conn = p->conn;
    char name[MSM_NAME_MAX];
    PLOG_WARN("master", "kicking %s: %s", msm_peer_name(p, name), reason);
    wire_msg_t k = {.type = M2C_KICK};
    snprintf(k.u.kick.reason, sizeof k.u.kick.reason, "%s", reason);
    msm_send(m, conn, &k);
    ++*counter;
    m->io.close(m->io.ctx, conn, reason);
    remove_peer_record(m, conn);
}

void msm_kick(msm_t *m, msm_peer_t *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vkick(m, p, &m->stats.peers_kicked, fmt, ap);
    va_end(ap);
}

void msm_refuse(msm_t *m, msm_peer_t *p, uint64_t *counter, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vkick(m, p, counter, fmt, ap);
    va_end(ap);
}

void msm_world(const msm_t *m, uint32_t group, wire_world_t *w) {
    memset(w, 0, sizeof *w);
    for (int i = 0; i < m->ngroups; i++) {
        uint32_t n = (uint32_t)m->groups[i].ring_len;
        if (!n) continue;
        w->global_world_size += n;
        w->num_groups++;
        if (n > w->largest_group) w->largest_group = n;
        if (m->groups[i].id == group) w->group_world_size = n;
    }
}

static void ring_remove(msm_group_t *g, uint64_t conn) {
    for (int i = 0; i < g->ring_len; i++) {
        if (g->ring[i] != conn) continue;
        memmove(&g->ring[i], &g->ring[i + 1], (size_t)(g->ring_len - i - 1) * sizeof g->ring[0]);
        g->ring_len--;
        g->wired = 0;
        g->epoch++;
        return;
    }
}

int msm_ring_append(msm_group_t *g, uint64_t conn) {
    if (g->ring_len == g->ring_cap) {
        int cap = g->ring_cap ? g->ring_cap * 2 : 8;
        uint64_t *r = realloc(g->ring, (size_t)cap * sizeof *r);
        if (!r) return -PERR_NOMEM;
        g->ring = r;
        g->ring_cap = cap;
    }
    g->ring[g->ring_len++] = conn;
    g->epoch++;
    return 0;
}

/* ---------- lifecycle ---------- */

msm_t *msm_create(msm_io_t io) {
    msm_t *m = calloc(1, sizeof *m);
    if (m) {
        m->io = io;
        m->peer_timeout = 10000;
        m->vote_timeout = MSM_VOTE_TIMEOUT_MS;
        m->stripe_min_bytes = MSM_STRIPE_MIN_BYTES;
        m->wiring_timeout = MSM_WIRING_TIMEOUT_MS;
    }
    return m;
}

void msm_set_time(msm_t *m, uint64_t now_ms) {
    m->now = now_ms;
    if (!m->started_set) {
        m->started_set = 1;
        m->started = now_ms;
    }
}
void msm_set_peer_timeout(msm_t *m, uint64_t timeout_ms) { m->peer_timeout = timeout_ms; }
void msm_set_boot_grace(msm_t *m, uint64_t grace_ms) { m->boot_grace = grace_ms; }
void msm_set_rebuild_floor(msm_t *m, uint64_t floor_ms) { m->rebuild_floor = floor_ms; }
void msm_set_vote_timeout(msm_t *m, uint64_t timeout_ms) { m->vote_timeout = timeout_ms; }
void msm_set_stripe(msm_t *m, uint64_t min_bytes, int local) {
    m->stripe_min_bytes = min_bytes ? min_bytes : 1;
    m->stripe_local = local;
}
void msm_set_wiring_timeout(msm_t *m, uint64_t timeout_ms) { m->wiring_timeout = timeout_ms; }
int msm_set_relays(msm_t *m, const ccoip_socket_address_t *relays, uint32_t n) {
    if (n > MSM_RELAYS_MAX || (n && !relays)) return -PERR_INVALID;
    if (n) memcpy(m->relays, relays, n * sizeof *relays);
    m->nrelays = n;
    return 0;
}
const ccoip_socket_address_t *msm_relays(const msm_t *m, uint32_t *n) {
    *n = m->nrelays;
    return m->relays;
}
int msm_booting(const msm_t *m) { return m->booting && m->now < m->born + m->boot_grace; }

void msm_on_tick(msm_t *m) {
    while (m->peer_timeout) {
        msm_peer_t *late = NULL;
        for (int i = 0; i < m->npeers && !late; i++)
            /* A re-registered peer waits for the rebuild in silence; MSM_REBUILD_MS bounds that wait. */
            if (!m->peers[i].resumed && m->now > m->peers[i].last_seen + m->peer_timeout) late = &m->peers[i];
        if (!late) break;
        /* Kicking removes the peer, so rescan from the start each time (bounded by npeers). */
        msm_kick(m, late, "no packet or heartbeat for %llu ms", (unsigned long long)(m->now - late->last_seen));
    }
    msm_rebuild_check(m, 1);
    if (m->booting && !msm_booting(m)) {
        m->booting = 0;
        msm_topo_on_registered(m); /* the peers that registered during the grace */
    }
    msm_check_deadlines(m);
    msm_check_stuck(m);
    msm_finish_leaves(m);
}

void msm_destroy(msm_t *m) {
    if (!m) return;
    for (int i = 0; i < m->npeers; i++) {
        msm_resume_forget(&m->peers[i]);
        free(m->peers[i].edges);
    }
    msm_resume_free(m);
    for (int i = 0; i < m->ngroups; i++) {
        free(m->groups[i].ring);
        free(m->groups[i].moon_conns);
    }
    /* The connections are going away with the master: the fail path frees the records, sending nothing. */
    while (m->ops) msm_op_fail(m, m->ops, MSM_FAIL_SHUTDOWN);
    msm_grants_free(m);
    free(m->peers);
    free(m->groups);
    free(m->bw);
    free(m->moon_req.conns);
    free(m->moon_req.bw);
    free(m->reports);
    ident_keys_free(&m->allow);
    free(m);
}

void msm_on_connect(msm_t *m, uint64_t conn, const ccoip_inet_address_t *ip, const ccoip_inet_address_t *local,
                    const uint8_t nonce[32]) {
    if (m->npeers == m->cap_peers) {
        int cap = m->cap_peers ? m->cap_peers * 2 : 16;
        msm_peer_t *p = realloc(m->peers, (size_t)cap * sizeof *p);
        if (!p) {
            m->io.close(m->io.ctx, conn, "master out of memory");
            return;
        }
        m->peers = p;
        m->cap_peers = cap;
    }
    msm_peer_t *p = &m->peers[m->npeers++];
    memset(p, 0, sizeof *p);
    p->conn = conn;
    p->last_seen = m->now;
    if (!m->born) {
        m->born = m->now ? m->now : 1;
        m->booting = m->boot_grace > 0;
    }
    p->ip = *ip;
    p->obs_ip = *ip;
    p->local_ip = *local;
    memcpy(p->nonce, nonce, 32);
    wire_msg_t c = {.type = M2C_CHALLENGE};
    memcpy(c.u.challenge.nonce, nonce, 32);
    msm_send(m, conn, &c);
}

wire_peer_t msm_dial_entry(const msm_peer_t *to, const msm_peer_t *q) {
    wire_peer_t e = {.ip = q->ip, .port = q->p2p_port, .reach = q->reach};
    memcpy(e.uuid, q->uuid, 16);
    if (q->obs_port) {
        e.has_obs = 1;
        e.obs_ip = q->obs_ip;
        e.obs_port = q->obs_port;
    }
    /* q reached the master over loopback, so it runs on the master's host: a peer elsewhere dials that host
     * at the address it reached the master on itself. */
    int elsewhere = !addr_ip_is_loopback(&to->ip) && !addr_ip_is_any(&to->local_ip);
    if (addr_ip_is_loopback(&q->ip) && elsewhere) e.ip = to->local_ip;
    if (e.has_obs && addr_ip_is_loopback(&q->obs_ip) && elsewhere) e.obs_ip = to->local_ip;
    return e;
}

/* ---------- HELLO ---------- */

int msm_check_hello(msm_t *m, msm_peer_t *p, uint32_t magic, uint16_t version, uint16_t p2p_port) {
    if (magic != WIRE_MAGIC || version != WIRE_VERSION) {
        msm_refuse(m, p, magic != WIRE_MAGIC ? &m->stats.refused_magic : &m->stats.refused_version,
                   "protocol mismatch: master speaks version %u, peer sent version %u (magic 0x%08x)", WIRE_VERSION,
                   version, magic);
        return -PERR_REFUSED;
    }
    if (p2p_port == 0) {
        msm_kick(m, p, "peer announced p2p port 0");
        return -PERR_REFUSED;
    }
    return 0;
}

void msm_register(msm_t *m, msm_peer_t *p, uint32_t group, uint16_t p2p_port, uint32_t pool,
                  const ccoip_inet_address_t *adv) {
    (void)m;
    p->hello = 1;
    if (adv) p->ip = *adv;
    p->group = group;
    p->p2p_port = p2p_port;
    p->pool = pool ? pool : 1;
    if (p->pool > 64) p->pool = 64;
}

static void on_hello(msm_t *m, msm_peer_t *p, const wire_msg_t *msg) {
    const __typeof__(msg->u.hello) *h = &msg->u.hello;
    if (msm_check_hello(m, p, h->magic, h->version, h->p2p_port) != 0) return;
    if (msm_check_identity(m, &p, C2M_HELLO, &h->id, NULL) != 0) return;
    msm_register(m, p, h->peer_group, h->p2p_port, h->pool_size, h->has_adv ? &h->adv_ip : NULL);
    wire_msg_t w = {.type = M2C_WELCOME};
    memcpy(w.u.welcome.uuid, p->uuid, 16);
    msm_send(m, p->conn, &w);
    char name[MSM_NAME_MAX];
    PLOG_INFO("master", "%s registered (group %u)", msm_peer_name(p, name), p->group);
    msm_topo_on_registered(m);
}

/* ---------- LEAVE ---------- */

static void depart(msm_t *m, msm_peer_t *p) {
    char name[MSM_NAME_MAX];
    uint64_t conn = p->conn;
    PLOG_INFO("master", "%s left the run", msm_peer_name(p, name));
    m->stats.peers_left++;
    m->io.close(m->io.ctx, conn, "left the run");
    remove_peer_record(m, conn);
}

/* Whether conn is a member of an operation in its running phase (its ring, transfer or wiring; a granted
 * collective once every member voted under the grant). */
static int in_running_op(msm_t *m, uint64_t conn) {
    for (msm_op_t *op = m->ops; op; op = op->next)
        if (op->phase == MSM_PHASE_RUNNING && msm_op_member(op, conn)) return 1;
    return 0;
}

static void on_leave(msm_t *m, msm_peer_t *p) {
    if (p->leaving) {
        msm_kick(m, p, "duplicate LEAVE");
        return;
    }
    p->leaving = 1;
    if (in_running_op(m, p->conn)) {
        char name[MSM_NAME_MAX];
        PLOG_INFO("master", "%s is leaving once its running operation ends", msm_peer_name(p, name));
        return;
    }
    depart(m, p);
}

void msm_finish_leaves(msm_t *m) {
    for (int i = 0; i < m->npeers; i++) {
        if (!m->peers[i].leaving || in_running_op(m, m->peers[i].conn)) continue;
        depart(m, &m->peers[i]);
        i = -1; /* the removal may end other operations and shifts the table: rescan */
    }
    msm_grants_check(m);
}

/* Whether msg is a vote of some operation kind (a leaving peer may only report). */
static int is_vote(const wire_msg_t *msg) {
    for (int k = 0; k < MSM_OP_NKINDS; k++)
        if (msg->type == msm_kinds[k].vote) return 1;
    return 0;
}

/* ---------- dispatch ---------- */

static void on_packet(msm_t *m, uint64_t conn, const wire_msg_t *msg);

void msm_on_packet(msm_t *m, uint64_t conn, const wire_msg_t *msg) {
    on_packet(m, conn, msg);
    msm_finish_leaves(m);
}

static void on_packet(msm_t *m, uint64_t conn, const wire_msg_t *msg) {
    msm_peer_t *p = msm_find(m, conn);
    if (!p) return;
    p->last_seen = m->now;
    if (!p->hello) {
        if (msg->type == C2M_HELLO) on_hello(m, p, msg);
        else if (msg->type == C2M_RESUME) msm_on_resume(m, p, msg);
        else msm_kick(m, p, "expected HELLO or RESUME, got %s", wire_type_name(msg->type));
        return;
    }
    switch (msg->type) {
    case C2M_HELLO:
    case C2M_RESUME:
        msm_kick(m, p, "duplicate %s", wire_type_name(msg->type));
        return;
    case C2M_HEARTBEAT: {
        wire_msg_t ack = {.type = M2C_HEARTBEAT};
        msm_send(m, conn, &ack);
        if (p->unheard) {
            p->unheard = 0;
            msm_topo_on_registered(m); /* a newcomer from a RESUME may join accept rounds now */
        }
        return;
    }
    case C2M_P2P_ESTABLISHED:
        if (p->resumed) msm_resume_on_established(m, p, msg);
        else msm_ops_on_packet(m, p, msg);
        return;
    case C2M_LEAVE:
        on_leave(m, p);
        return;
    case C2M_RENDEZVOUS: /* ring wiring of a newcomer needs it before the peer is accepted */
        msm_on_rendezvous(m, p, msg);
        return;
    case C2M_EDGES:
        msm_on_edges(m, p, msg);
        return;
    default:
        break;
    }
    if (p->leaving && is_vote(msg)) {
        msm_kick(m, p, "%s after LEAVE", wire_type_name(msg->type));
        return;
    }
    if (!p->accepted) {
        msm_kick(m, p, "%s is not allowed before the peer is %s", wire_type_name(msg->type),
                 p->resumed ? "told the run is rebuilt" : "accepted");
        return;
    }
    switch (msg->type) {
    case C2M_PEER_UNREACHABLE: msm_report_unreachable(m, p, msg->u.welcome.uuid); break;
    /* Votes and reports of the operations (the kinds table, msm_kinds.c); anything else is a kick. */
    default: msm_ops_on_packet(m, p, msg); break;
    }
}

/* ---------- departure ---------- */

static void remove_peer_record(msm_t *m, uint64_t conn) {
    msm_peer_t *p = msm_find(m, conn);
    if (!p) return;
    uint32_t group = p->group;
    int was_accepted = p->accepted;
    msm_ops_on_departure(m, conn, p->leaving); /* it leaves every operation at once; a running one may fail */
    msm_reports_forget_conn(m, conn);
    msm_resume_on_departure(m, p);
    msm_resume_forget(p);
    free(p->edges);
    msm_opt_forget_conn(m, conn);
    /* Order-preserving removal: newcomers are appended to rings in table order. */
    size_t at = (size_t)(p - m->peers);
    memmove(p, p + 1, (size_t)(m->npeers - 1 - (int)at) * sizeof *p);
    m->npeers--;
    if (was_accepted) {
        msm_group_t *g = msm_group(m, group, 0);
        if (g) {
            ring_remove(g, conn);
            /* A group none of whose members holds its revision any more (it emptied, or the peers that
             * held it are gone) forgets it: the next sync resumes from what the members hold, any
             * revision, instead of refusing every offer as a rollback. */
            int holder = 0;
            for (int i = 0; i < m->npeers && !holder; i++)
                holder = m->peers[i].accepted && m->peers[i].group == group && m->peers[i].holds_rev;
            if (g->has_revision && !holder) {
                PLOG_WARN("master", "group %u: no member holds revision %llu any more; its next sync takes what "
                          "the members hold", group, (unsigned long long)g->last_revision);
                g->has_revision = 0;
            }
        }
    }
    /* Re-evaluate every consensus the departed peer could have been holding up. */
    m->reevaluate_pending = 1;
    if (!m->in_reevaluate) {
        m->in_reevaluate = 1;
        while (m->reevaluate_pending) {
            m->reevaluate_pending = 0;
            msm_ops_progress(m);
        }
        m->in_reevaluate = 0;
    }
}

void msm_on_disconnect(msm_t *m, uint64_t conn) {
    msm_peer_t *p = msm_find(m, conn);
    if (!p) return;
    char name[MSM_NAME_MAX];
    PLOG_INFO("master", "%s disconnected", msm_peer_name(p, name));
    remove_peer_record(m, conn);
    msm_rebuild_check(m, 0);
    msm_finish_leaves(m);
}

int msm_end_run(msm_t *m, const char *reason) {
    /* No verdicts: the peers end every call with the run, so nothing is sent but SHUTDOWN. */
    while (m->ops) msm_op_fail(m, m->ops, MSM_FAIL_SHUTDOWN);
    msm_grants_free(m);
    wire_msg_t s = {.type = M2C_SHUTDOWN};
    snprintf(s.u.kick.reason, sizeof s.u.kick.reason, "%s", reason);
    int n = m->npeers;
    for (int i = 0; i < n; i++) {
        msm_send(m, m->peers[i].conn, &s);
        m->io.close(m->io.ctx, m->peers[i].conn, "the run is over");
        msm_resume_forget(&m->peers[i]);
        free(m->peers[i].edges);
    }
    m->npeers = 0;
    return n;
}

/* ---------- views ---------- */

int msm_peer_count(const msm_t *m) { return m->npeers; }

int msm_peer_view(const msm_t *m, int index, msm_peer_view_t *out) {
    if (index < 0 || index >= m->npeers) return -PERR_INVALID;
    const msm_peer_t *p = &m->peers[index];
    out->conn = p->conn;
    memcpy(out->uuid, p->uuid, 16);
    out->name = p->name;
    out->ip = p->ip;
    out->p2p_port = p->p2p_port;
    out->group = p->group;
    out->accepted = p->accepted;
    out->revision = p->ss_revision;
    out->last_seen_ms = p->last_seen;
    out->obs_ip = p->obs_ip;
    out->obs_port = p->obs_port;
    out->reach = p->reach;
    out->nedges = p->nedges;
    out->edges = p->edges;
    const char *in_op = msm_ops_peer_state(m, p->conn);
    out->state = !p->hello ? "connecting" : in_op ? in_op : p->resumed ? "resuming" : !p->accepted ? "registered" : "idle";
    return 0;
}

void msm_get_stats(const msm_t *m, msm_stats_t *out) {
    *out = m->stats;
    out->registered = 0;
    out->accepted = 0;
    out->groups = 0;
    for (int i = 0; i < m->npeers; i++) {
        if (m->peers[i].accepted) out->accepted++;
        else if (m->peers[i].hello) out->registered++;
    }
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].ring_len) out->groups++;
}

int msm_group_ring(const msm_t *m, uint32_t group, uint64_t *conns, int max) {
    for (int i = 0; i < m->ngroups; i++) {
        if (m->groups[i].id != group) continue;
        int n = m->groups[i].ring_len < max ? m->groups[i].ring_len : max;
        memcpy(conns, m->groups[i].ring, (size_t)n * sizeof *conns);
        return n;
    }
    return 0;
}
