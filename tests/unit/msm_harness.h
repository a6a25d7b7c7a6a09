/* msm_harness.h - the one test harness of the master's pure state machine
 * (master_sm.c, msm_*.c): a recording msm_io_t, queries on what it recorded,
 * helpers that play a peer's events, and group builders. Included by the
 * tests/unit/test_msm_*.c files (one per operation kind) and the others that
 * drive the state machine.
 *
 * Every message the state machine sends is deep-copied (it owns the memory),
 * must be a master-to-peer type that encodes, and must never go to a
 * connection after the state machine closed it (teardown checks). */
#ifndef PCCL_TEST_MSM_HARNESS_H
#define PCCL_TEST_MSM_HARNESS_H

#include "sec/identity.h"
#include "base/log.h"
#include "sm/master_sm.h"
#include "sm/msm_admin.h"
#include "pccl.h"
#include "tinytest.h"
#include "base/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- recording io ---------- */

typedef struct ev {
    int is_close;
    uint64_t conn;
    wire_msg_t msg; /* deep copy (sends) */
    char reason[256]; /* closes */
} ev_t;

static ev_t *evs;
static int nevs, capevs;
static uint64_t closed_ever[256];
static int nclosed_ever;
static int contract_violations;

static inline int ever_closed(uint64_t conn) {
    for (int i = 0; i < nclosed_ever; i++)
        if (closed_ever[i] == conn) return 1;
    return 0;
}

static inline ev_t *push_ev(void) {
    if (nevs == capevs) {
        capevs = capevs ? capevs * 2 : 64;
        evs = realloc(evs, (size_t)capevs * sizeof *evs);
    }
    ev_t *e = &evs[nevs++];
    memset(e, 0, sizeof *e);
    return e;
}

static inline void *dup_bytes(const void *p, size_t n) {
    if (!p || !n) return NULL;
    void *d = malloc(n);
    memcpy(d, p, n);
    return d;
}

static inline void rec_send(void *ctx, uint64_t conn, const wire_msg_t *msg) {
    (void)ctx;
    if (ever_closed(conn)) {
        contract_violations++;
        fprintf(stderr, "  send of %s to conn %llu after close\n", wire_type_name(msg->type), (unsigned long long)conn);
    }
    if (!wire_type_is_m2c(msg->type)) contract_violations++;
    wbuf_t b = {0};
    if (wire_encode(msg, &b) != 0) {
        contract_violations++;
        fprintf(stderr, "  unencodable %s\n", wire_type_name(msg->type));
    }
    wbuf_free(&b);
    ev_t *e = push_ev();
    e->conn = conn;
    e->msg = *msg;
    switch (msg->type) {
    case M2C_ESTABLISH_P2P:
        e->msg.u.establish.peers = dup_bytes(msg->u.establish.peers, msg->u.establish.n * sizeof(wire_peer_t));
        break;
    case M2C_SS_PLAN:
        e->msg.u.ss_plan.fetch = dup_bytes(msg->u.ss_plan.fetch, msg->u.ss_plan.n * sizeof(wire_tensor_t));
        e->msg.u.ss_plan.holders = dup_bytes(msg->u.ss_plan.holders, msg->u.ss_plan.n * sizeof(uint32_t));
        e->msg.u.ss_plan.ranges = dup_bytes(msg->u.ss_plan.ranges, msg->u.ss_plan.nranges * sizeof(wire_ss_range_t));
        break;
    case M2C_COLL_COMMENCE:
        e->msg.u.commence.ring = dup_bytes(msg->u.commence.ring, (size_t)msg->u.commence.n * 16);
        e->msg.u.commence.members =
            dup_bytes(msg->u.commence.members, (size_t)msg->u.commence.n * sizeof(wire_coll_member_t));
        break;
    case M2C_BENCH_REQUEST:
        e->msg.u.bench_req.peers = dup_bytes(msg->u.bench_req.peers, msg->u.bench_req.n * sizeof(wire_peer_t));
        break;
    default: break;
    }
}

static inline void rec_close(void *ctx, uint64_t conn, const char *reason) {
    (void)ctx;
    if (ever_closed(conn)) {
        contract_violations++;
        fprintf(stderr, "  conn %llu closed twice\n", (unsigned long long)conn);
    }
    if (nclosed_ever < 256) closed_ever[nclosed_ever++] = conn;
    ev_t *e = push_ev();
    e->is_close = 1;
    e->conn = conn;
    snprintf(e->reason, sizeof e->reason, "%s", reason ? reason : "");
}

static inline void clear_log(void) {
    for (int i = 0; i < nevs; i++)
        if (!evs[i].is_close) wire_msg_free(&evs[i].msg);
    nevs = 0;
}

static msm_t *M;

/* The fixture of the state machine's tests (their files declare TT_FIXTURE(setup, teardown)): a fresh
 * state machine and an empty log. setup() while one exists tears it down first, and teardown() without
 * one does nothing, so restart() gives a table-driven test a fresh machine per case. */
static inline void teardown(void);
static inline void setup(void) {
    if (M) teardown();
    clear_log();
    nclosed_ever = 0;
    contract_violations = 0;
    msm_io_t io = {.ctx = NULL, .send = rec_send, .close = rec_close};
    M = msm_create(io);
    CHECK(M != NULL);
}

static inline void teardown(void) {
    if (!M) return;
    CHECK_EQ_U64(contract_violations, 0);
    msm_destroy(M);
    M = NULL;
    clear_log();
}
static inline void restart(void) { setup(); }

/* ---------- queries on the log ---------- */

static inline int count_to(uint64_t conn, uint16_t type) {
    int n = 0;
    for (int i = 0; i < nevs; i++)
        if (!evs[i].is_close && evs[i].conn == conn && evs[i].msg.type == type) n++;
    return n;
}
static inline int count_type(uint16_t type) {
    int n = 0;
    for (int i = 0; i < nevs; i++)
        if (!evs[i].is_close && evs[i].msg.type == type) n++;
    return n;
}
static inline int sends_to(uint64_t conn) {
    int n = 0;
    for (int i = 0; i < nevs; i++)
        if (!evs[i].is_close && evs[i].conn == conn) n++;
    return n;
}
static inline int total_sends(void) {
    int n = 0;
    for (int i = 0; i < nevs; i++) n += !evs[i].is_close;
    return n;
}
static inline const wire_msg_t *last_to(uint64_t conn, uint16_t type) {
    for (int i = nevs - 1; i >= 0; i--)
        if (!evs[i].is_close && evs[i].conn == conn && evs[i].msg.type == type) return &evs[i].msg;
    return NULL;
}
static inline int closed_in_log(uint64_t conn) {
    for (int i = 0; i < nevs; i++)
        if (evs[i].is_close && evs[i].conn == conn) return 1;
    return 0;
}
/* KICK with a non-empty reason sent to conn, then conn closed; nothing after. */
static inline int kicked(uint64_t conn) {
    int k = -1, c = -1;
    for (int i = 0; i < nevs; i++) {
        if (evs[i].conn != conn) continue;
        if (!evs[i].is_close && evs[i].msg.type == M2C_KICK && evs[i].msg.u.kick.reason[0] && k < 0) k = i;
        if (evs[i].is_close && c < 0) c = i;
    }
    return k >= 0 && c > k;
}
static inline const char *kick_reason(uint64_t conn) {
    const wire_msg_t *k = last_to(conn, M2C_KICK);
    return k ? k->u.kick.reason : "";
}

/* ---------- peer events ---------- */

/* Every peer `who` holds a fixed key pair (seeded from who), so its uuid, derived from the public key, is
 * known in advance; connection conn's CHALLENGE nonce is fixed too (nonce_of). */
static inline const ident_t *key_of(uint64_t who) {
    static ident_t cache[512];
    static uint8_t made[512];
    static ident_t spare;
    ident_t *id = who < 512 ? &cache[who] : &spare;
    if (who >= 512 || !made[who]) {
        uint8_t seed[32];
        for (int i = 0; i < 32; i++) seed[i] = (uint8_t)(who * 29 + (uint64_t)i * 5 + 3);
        seed[31] ^= (uint8_t)(who >> 8); /* peers 256 apart differ too */
        seed[30] ^= (uint8_t)(who >> 16);
        ident_from_seed(id, seed);
        if (who < 512) made[who] = 1;
    }
    return id;
}
static inline void uuid_of(uint64_t who, uint8_t u[16]) { ident_uuid(key_of(who)->pk, u); }
static inline void nonce_of(uint64_t conn, uint8_t n[32]) {
    for (int i = 0; i < 32; i++) n[i] = (uint8_t)(conn * 17 + (uint64_t)i * 11 + 7);
}
static inline int is_uuid_of(const uint8_t u[16], uint64_t conn) {
    uint8_t x[16];
    uuid_of(conn, x);
    return memcmp(u, x, 16) == 0;
}
static inline uint16_t port_of(uint64_t conn) { return (uint16_t)(20000 + conn); }

static inline void connect_(uint64_t conn) {
    ccoip_inet_address_t ip = {.protocol = inetIPv4, .ipv4.data = {10, 0, (uint8_t)(conn >> 8), (uint8_t)conn}};
    uint8_t n[32];
    nonce_of(conn, n);
    const ccoip_inet_address_t local = {.protocol = inetIPv4, .ipv4.data = {10, 0, 0, 254}};
    msm_on_connect(M, conn, &ip, &local, n);
}
/* The name the next signed HELLO or RESUME announces (then reset to none). */
static const char *next_name;
/* Delivers HELLO or RESUME m on conn as peer `who` would send it: its public key and next_name, signed over
 * nonce, encoded and decoded as the master's server does. */
static inline void deliver_signed_as(uint64_t conn, uint64_t who, const uint8_t nonce[32], wire_msg_t *m) {
    const ident_t *id = key_of(who);
    wire_identity_t *wi = m->type == C2M_HELLO ? &m->u.hello.id : &m->u.resume.id;
    memcpy(wi->pubkey, id->pk, 32);
    snprintf(wi->name, sizeof wi->name, "%s", next_name ? next_name : "");
    next_name = NULL;
    wbuf_t b = {0};
    wire_msg_t d;
    char err[256];
    CHECK(ident_encode_signed(id, nonce, m, &b) == 0);
    CHECK(wire_decode(b.data + 4, b.len - 4, &d, err, sizeof err) == 0);
    msm_on_packet(M, conn, &d);
    wire_msg_free(&d);
    wbuf_free(&b);
}
/* As peer conn, over conn's own challenge. */
static inline void deliver_signed(uint64_t conn, wire_msg_t *m) {
    uint8_t n[32];
    nonce_of(conn, n);
    deliver_signed_as(conn, conn, n, m);
}
static inline void hello_full(uint64_t conn, uint32_t magic, uint16_t version, uint32_t group, uint16_t port, uint32_t pool) {
    wire_msg_t h = {.type = C2M_HELLO};
    h.u.hello.magic = magic;
    h.u.hello.version = version;
    h.u.hello.peer_group = group;
    h.u.hello.p2p_port = port;
    h.u.hello.pool_size = pool;
    deliver_signed(conn, &h);
}
static inline void hello_g(uint64_t conn, uint32_t group, uint32_t pool) {
    hello_full(conn, WIRE_MAGIC, WIRE_VERSION, group, port_of(conn), pool);
}
static inline void join(uint64_t conn) {
    connect_(conn);
    hello_g(conn, 0, 1);
}
static inline void pkt(uint64_t conn, uint16_t type) {
    wire_msg_t m = {.type = type};
    msm_on_packet(M, conn, &m);
}
static inline void flag(uint64_t conn, uint16_t type, int v) {
    wire_msg_t m = {.type = type};
    m.u.flag.value = (uint8_t)v;
    msm_on_packet(M, conn, &m);
}
static inline void p2p_ok(uint64_t conn, int ok) { flag(conn, C2M_P2P_ESTABLISHED, ok); }
/* A vote for an all-reduce (sum); grant_seq: the grant it runs under (0: a plain vote). */
static inline void coll_init_under(uint64_t conn, uint64_t tag, uint64_t count, uint8_t dtype, uint64_t grant_seq) {
    wire_msg_t m = {.type = C2M_COLL_INIT};
    m.u.coll_init.tag = tag;
    m.u.coll_init.count = count;
    m.u.coll_init.dtype = dtype;
    m.u.coll_init.op = pcclSum;
    m.u.coll_init.grant_seq = grant_seq;
    msm_on_packet(M, conn, &m);
}
static inline void coll_init_full(uint64_t conn, uint64_t tag, uint64_t count, uint8_t dtype) {
    coll_init_under(conn, tag, count, dtype, 0);
}
static inline void coll_init(uint64_t conn, uint64_t tag) { coll_init_full(conn, tag, 1000, pcclFloat); }
static inline void coll_done(uint64_t conn, uint64_t tag, uint64_t op_seq, int ok) {
    wire_msg_t m = {.type = C2M_COLL_DONE};
    m.u.coll.tag = tag;
    m.u.coll.op_seq = op_seq;
    m.u.coll.ok = (uint8_t)ok;
    msm_on_packet(M, conn, &m);
}
static inline void sync_vote(uint64_t conn, uint64_t rev, int strategy, const wire_tensor_t *t, uint32_t n) {
    wire_msg_t m = {.type = C2M_SYNC_SHARED_STATE};
    m.u.sync.revision = rev;
    m.u.sync.strategy = (uint8_t)strategy;
    m.u.sync.n = n;
    m.u.sync.tensors = (wire_tensor_t *)t;
    msm_on_packet(M, conn, &m);
}
/* Reports bandwidth from `from` to each conn in `to` (mbps[i]; <= 0 = failed probe) and the round trip
 * (rtt_us[i]; rtt_us NULL: none measured). */
static inline void bench_result_rtt(uint64_t from, const uint64_t *to, const double *mbps, const double *rtt_us,
                                    int n) {
    wire_msg_t m = {.type = C2M_BENCH_RESULT};
    wire_bw_t r[8];
    for (int i = 0; i < n && i < 8; i++) {
        uuid_of(to[i], r[i].uuid);
        r[i].mbps = mbps[i];
        r[i].rtt_us = rtt_us ? rtt_us[i] : 0;
    }
    m.u.bench_res.n = (uint32_t)n;
    m.u.bench_res.results = r;
    msm_on_packet(M, from, &m);
}
static inline void bench_result(uint64_t from, const uint64_t *to, const double *mbps, int n) {
    bench_result_rtt(from, to, mbps, NULL, n);
}
/* After a disconnect the state machine must not message conn either. */
static inline void disconnect(uint64_t conn) {
    if (!ever_closed(conn) && nclosed_ever < 256) closed_ever[nclosed_ever++] = conn;
    msm_on_disconnect(M, conn);
}

static inline int view_of(uint64_t conn, msm_peer_view_t *v) {
    for (int i = 0; i < msm_peer_count(M); i++)
        if (msm_peer_view(M, i, v) == 0 && v->conn == conn) return 0;
    return -1;
}
static inline int is_accepted(uint64_t conn) {
    msm_peer_view_t v;
    return view_of(conn, &v) == 0 && v.accepted;
}
static inline const char *state_of(uint64_t conn) {
    msm_peer_view_t v;
    return view_of(conn, &v) == 0 ? v.state : "gone";
}

/* Builds an accepted group of conns first..first+n-1 (first bootstraps, the rest join in one round). */
static inline void make_group_ex(uint64_t first, int n, uint32_t group, uint32_t pool) {
    connect_(first);
    hello_g(first, group, pool);
    CHECK_EQ_U64(count_to(first, M2C_ESTABLISH_P2P), 1);
    p2p_ok(first, 1);
    CHECK(is_accepted(first));
    if (n > 1) {
        for (int i = 1; i < n; i++) {
            connect_(first + (uint64_t)i);
            hello_g(first + (uint64_t)i, group, pool);
        }
        pkt(first, C2M_UPDATE_TOPOLOGY);
        for (int i = 0; i < n; i++) p2p_ok(first + (uint64_t)i, 1);
    }
    for (int i = 0; i < n; i++) CHECK(is_accepted(first + (uint64_t)i));
    clear_log();
}
static inline void make_group(int n) { make_group_ex(1, n, 0, 1); }

static inline void check_world(const wire_world_t *w, uint32_t global, uint32_t group, uint32_t ngroups, uint32_t largest) {
    CHECK_EQ_U64(w->global_world_size, global);
    CHECK_EQ_U64(w->group_world_size, group);
    CHECK_EQ_U64(w->num_groups, ngroups);
    CHECK_EQ_U64(w->largest_group, largest);
}


static inline void check_establish_ring(uint64_t to, const uint64_t *expect, int n) {
    const wire_msg_t *e = last_to(to, M2C_ESTABLISH_P2P);
    CHECK(e != NULL);
    if (!e) return;
    CHECK_EQ_U64(e->u.establish.n, n);
    CHECK_EQ_U64(e->u.establish.world.group_world_size, n);
    for (int i = 0; i < n && i < (int)e->u.establish.n; i++) {
        CHECK(is_uuid_of(e->u.establish.peers[i].uuid, expect[i]));
        CHECK_EQ_U64(e->u.establish.peers[i].port, port_of(expect[i]));
        CHECK_EQ_U64(e->u.establish.peers[i].ip.ipv4.data[3], (uint8_t)expect[i]);
    }
}

/* ---------- shared state ---------- */

enum { ENFORCE = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
       RECV_ONLY = PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
       SEND_ONLY = PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY };

static inline const wire_msg_t *plan_of(uint64_t c) { return last_to(c, M2C_SS_PLAN); }
static inline int plan_status(uint64_t c) { return plan_of(c) ? plan_of(c)->u.ss_plan.status : -1; }
static inline int plan_n(uint64_t c) { return plan_of(c) ? (int)plan_of(c)->u.ss_plan.n : -1; }
static inline int plan_has(const wire_msg_t *p, const char *key, uint64_t hash) {
    for (uint32_t i = 0; p && i < p->u.ss_plan.n; i++)
        if (strcmp(p->u.ss_plan.fetch[i].key, key) == 0) return p->u.ss_plan.fetch[i].hash == hash;
    return 0;
}
/* src is the plan's first source, the one whose hashes the plan announces. */
static inline int source_is(uint64_t c, uint64_t src) {
    return plan_of(c) && plan_of(c)->u.ss_plan.nsrc && is_uuid_of(plan_of(c)->u.ss_plan.sources[0].uuid, src);
}
/* src is one of the plan's sources. */
static inline int source_in(uint64_t c, uint64_t src) {
    for (int s = 0; plan_of(c) && s < plan_of(c)->u.ss_plan.nsrc; s++)
        if (is_uuid_of(plan_of(c)->u.ss_plan.sources[s].uuid, src)) return 1;
    return 0;
}
/* A KICK went to conn, after its SS_PLAN, and conn was then closed. */
static inline int kicked_after_plan(uint64_t conn) {
    int plan = -1, kick = -1, close = -1;
    for (int i = 0; i < nevs; i++) {
        if (evs[i].conn != conn) continue;
        if (evs[i].is_close) close = close < 0 ? i : close;
        else if (evs[i].msg.type == M2C_SS_PLAN && plan < 0) plan = i;
        else if (evs[i].msg.type == M2C_KICK && kick < 0) kick = i;
    }
    return plan >= 0 && kick > plan && close > kick;
}
static inline void finish_sync(uint64_t first, uint64_t last) {
    for (uint64_t c = first; c <= last; c++) flag(c, C2M_SS_DIST_DONE, 1);
}

/* ---------- collectives ---------- */

static inline const wire_msg_t *commence_of(uint64_t conn, uint64_t tag) {
    for (int i = nevs - 1; i >= 0; i--)
        if (!evs[i].is_close && evs[i].conn == conn && evs[i].msg.type == M2C_COLL_COMMENCE &&
            evs[i].msg.u.commence.tag == tag)
            return &evs[i].msg;
    return NULL;
}
static inline uint64_t commenced_seq(uint64_t conn, uint64_t tag) {
    const wire_msg_t *c = commence_of(conn, tag);
    return c ? c->u.commence.op_seq : 0;
}
static inline const wire_msg_t *end_of(uint64_t conn, uint16_t type, uint64_t tag) {
    for (int i = nevs - 1; i >= 0; i--)
        if (!evs[i].is_close && evs[i].conn == conn && evs[i].msg.type == type && evs[i].msg.u.coll.tag == tag)
            return &evs[i].msg;
    return NULL;
}

/* ---------- stuck votes ---------- */

/* One tick now, then one after the stuck grace: a conflict is broken only if it lasted. */
static inline void tick_past_grace(void) {
    static uint64_t t;
    msm_on_tick(M);
    t += MSM_STUCK_GRACE_MS;
    msm_set_time(M, t);
    msm_on_tick(M);
}

#endif /* PCCL_TEST_MSM_HARNESS_H */
