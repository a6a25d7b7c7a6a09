/* test_ss_strategies.c - the shared-state strategies of seed 002 on the pure
 * master state machine (msm_shared_state.c): RECEIVE_ONLY content never counts
 * and is never a source, agreeing SEND_ONLY peers decide and never receive,
 * disagreeing SEND_ONLY peers get SS_CONFLICT and are kicked, and
 * allow_content_inequality only matters for up-to-date peers.
 *
 * The recording msm_io_t follows tests/unit/test_master_sm.c: every message
 * is deep-copied, must encode, and must never go to a closed connection. */
#include "log.h"
#include "master_sm.h"
#include "pccl.h"
#include "tinytest.h"
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ENFORCE = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
       RECV_ONLY = PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
       SEND_ONLY = PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY };

/* ---------- recording io ---------- */

typedef struct ev {
    int is_close;
    uint64_t conn;
    wire_msg_t msg;
} ev_t;

static ev_t evs[4096];
static int nevs;
static uint64_t closed[64];
static int nclosed, violations;

static int was_closed(uint64_t conn) {
    for (int i = 0; i < nclosed; i++)
        if (closed[i] == conn) return 1;
    return 0;
}

static void rec_send(void *ctx, uint64_t conn, const wire_msg_t *msg) {
    (void)ctx;
    wbuf_t b = {0};
    if (was_closed(conn) || !wire_type_is_m2c(msg->type) || wire_encode(msg, &b) != 0) violations++;
    wbuf_free(&b);
    if (nevs == (int)(sizeof evs / sizeof evs[0])) {
        violations++;
        return;
    }
    ev_t *e = &evs[nevs++];
    memset(e, 0, sizeof *e);
    e->conn = conn;
    e->msg = *msg;
    /* Deep-copy the plan's fetch list (the state machine owns it); the union's other pointer members are
     * not kept (only plans are inspected), so wire_msg_free must not see them. */
    if (msg->type == M2C_SS_PLAN) {
        size_t sz = msg->u.ss_plan.n * sizeof(wire_tensor_t);
        e->msg.u.ss_plan.fetch = sz ? malloc(sz) : NULL;
        if (sz) memcpy(e->msg.u.ss_plan.fetch, msg->u.ss_plan.fetch, sz);
    } else if (msg->type == M2C_ESTABLISH_P2P) {
        e->msg.u.establish.peers = NULL;
        e->msg.u.establish.n = 0;
    } else if (msg->type == M2C_COLL_COMMENCE) {
        e->msg.u.commence.ring = NULL;
        e->msg.u.commence.n = 0;
    }
}

static void rec_close(void *ctx, uint64_t conn, const char *reason) {
    (void)ctx;
    (void)reason;
    if (was_closed(conn)) violations++;
    if (nclosed < 64) closed[nclosed++] = conn;
    if (nevs < (int)(sizeof evs / sizeof evs[0])) {
        ev_t *e = &evs[nevs++];
        memset(e, 0, sizeof *e);
        e->is_close = 1;
        e->conn = conn;
    }
}

static void clear_log(void) {
    for (int i = 0; i < nevs; i++)
        if (!evs[i].is_close) wire_msg_free(&evs[i].msg);
    nevs = 0;
}

static msm_t *M;

static void setup(void) {
    clear_log();
    nclosed = 0;
    violations = 0;
    msm_io_t io = {.ctx = NULL, .send = rec_send, .close = rec_close};
    M = msm_create(io);
    CHECK(M != NULL);
}

static void teardown(void) {
    CHECK_EQ_U64(violations, 0);
    msm_destroy(M);
    M = NULL;
    clear_log();
}

static const wire_msg_t *last_to(uint64_t conn, uint16_t type) {
    for (int i = nevs - 1; i >= 0; i--)
        if (!evs[i].is_close && evs[i].conn == conn && evs[i].msg.type == type) return &evs[i].msg;
    return NULL;
}
static const wire_msg_t *plan_of(uint64_t c) { return last_to(c, M2C_SS_PLAN); }
static int plan_status(uint64_t c) { return plan_of(c) ? plan_of(c)->u.ss_plan.status : -1; }
static int plan_n(uint64_t c) { return plan_of(c) ? (int)plan_of(c)->u.ss_plan.n : -1; }

/* A KICK went to conn, after its SS_PLAN, and conn was then closed. */
static int kicked_after_plan(uint64_t conn) {
    int plan = -1, kick = -1, close = -1;
    for (int i = 0; i < nevs; i++) {
        if (evs[i].conn != conn) continue;
        if (evs[i].is_close) close = close < 0 ? i : close;
        else if (evs[i].msg.type == M2C_SS_PLAN && plan < 0) plan = i;
        else if (evs[i].msg.type == M2C_KICK && kick < 0) kick = i;
    }
    return plan >= 0 && kick > plan && close > kick;
}

/* ---------- peer events ---------- */

static void uuid_of(uint64_t conn, uint8_t u[16]) {
    for (int i = 0; i < 16; i++) u[i] = (uint8_t)(conn * 13 + (uint64_t)i * 7 + 1);
}
static int source_is(uint64_t c, uint64_t src) {
    uint8_t u[16];
    uuid_of(src, u);
    return plan_of(c) && memcmp(plan_of(c)->u.ss_plan.source.uuid, u, 16) == 0;
}

static void join(uint64_t conn) {
    uint8_t ip[4] = {10, 0, 0, (uint8_t)conn}, u[16];
    uuid_of(conn, u);
    msm_on_connect(M, conn, ip, u);
    wire_msg_t h = {.type = C2M_HELLO};
    h.u.hello.magic = WIRE_MAGIC;
    h.u.hello.version = WIRE_VERSION;
    h.u.hello.p2p_port = (uint16_t)(20000 + conn);
    h.u.hello.pool_size = 1;
    msm_on_packet(M, conn, &h);
}
static void flag(uint64_t conn, uint16_t type, int v) {
    wire_msg_t m = {.type = type};
    m.u.flag.value = (uint8_t)v;
    msm_on_packet(M, conn, &m);
}

/* Accepted group of conns 1..n: 1 bootstraps, the rest join in one accept round. */
static void make_group(int n) {
    join(1);
    flag(1, C2M_P2P_ESTABLISHED, 1);
    for (int i = 2; i <= n; i++) join((uint64_t)i);
    if (n > 1) {
        wire_msg_t u = {.type = C2M_UPDATE_TOPOLOGY};
        msm_on_packet(M, 1, &u);
        for (int i = 1; i <= n; i++) flag((uint64_t)i, C2M_P2P_ESTABLISHED, 1);
    }
    for (int i = 0; i < msm_peer_count(M); i++) {
        msm_peer_view_t v;
        CHECK(msm_peer_view(M, i, &v) == 0 && v.accepted);
    }
    clear_log();
}

/* Two tensors: "w" must be equal, "stats" may differ. */
static void state(wire_tensor_t t[2], uint64_t hw, uint64_t hs) {
    memset(t, 0, 2 * sizeof *t);
    snprintf(t[0].key, sizeof t[0].key, "w");
    t[0].dtype = pcclFloat;
    t[0].count = 100;
    t[0].hash = hw;
    snprintf(t[1].key, sizeof t[1].key, "stats");
    t[1].dtype = pcclDouble;
    t[1].count = 2;
    t[1].allow_inequality = 1;
    t[1].hash = hs;
}

static void vote(uint64_t conn, uint64_t rev, int strategy, const wire_tensor_t *t) {
    wire_msg_t m = {.type = C2M_SYNC_SHARED_STATE};
    m.u.sync.revision = rev;
    m.u.sync.strategy = (uint8_t)strategy;
    m.u.sync.n = 2;
    m.u.sync.tensors = (wire_tensor_t *)t;
    msm_on_packet(M, conn, &m);
}

static void done_all(uint64_t first, uint64_t last) {
    for (uint64_t c = first; c <= last; c++) flag(c, C2M_SS_DIST_DONE, 1);
}

/* ---------- tests ---------- */

/* RECEIVE_ONLY content does not count: x is held by two peers but one of them is RECEIVE_ONLY, so the
 * 1:1 tie goes to the first peer's a; the RECEIVE_ONLY peer is never a source. */
static void test_receive_only_never_counts(void) {
    wire_tensor_t a[2], x[2];
    state(a, 0xa, 0x1);
    state(x, 0xb, 0x1);
    setup();
    make_group(3);
    vote(1, 1, ENFORCE, a);
    vote(2, 1, RECV_ONLY, x);
    vote(3, 1, ENFORCE, x);
    CHECK(plan_status(1) == SS_OK && plan_n(1) == 0);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 1 && source_is(2, 1));
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 1 && source_is(3, 1));
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.fetch[0].hash == 0xa);
    done_all(1, 3);
    CHECK(last_to(2, M2C_SS_DONE) && last_to(2, M2C_SS_DONE)->u.flag.value == 1);
    teardown();

    /* A RECEIVE_ONLY peer that already holds the popular content receives nothing, and is not a source
     * for another outdated peer even though its content matches. */
    setup();
    make_group(3);
    wire_tensor_t z[2];
    state(z, 0x0, 0x0);
    vote(1, 4, ENFORCE, a);
    vote(2, 4, RECV_ONLY, a);
    vote(3, 0, ENFORCE, z);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 0);
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 2 && source_is(3, 1));
    teardown();

    /* A RECEIVE_ONLY peer offering a newer revision does not pull the group forward. */
    setup();
    make_group(2);
    vote(1, 3, ENFORCE, a);
    vote(2, 9, RECV_ONLY, x);
    CHECK(plan_status(1) == SS_OK && plan_of(1)->u.ss_plan.revision == 3);
    CHECK(plan_status(2) == SS_REVISION_REFUSED && plan_of(2)->u.ss_plan.revision == 3);
    teardown();

    /* Only RECEIVE_ONLY peers: nobody may provide the state. */
    setup();
    make_group(2);
    vote(1, 1, RECV_ONLY, a);
    vote(2, 1, RECV_ONLY, a);
    CHECK(plan_status(1) == SS_NO_STATE && plan_status(2) == SS_NO_STATE);
    teardown();
}

/* Agreeing SEND_ONLY peers decide even in the minority and never receive. */
static void test_send_only_agree(void) {
    wire_tensor_t a[2], s1[2], s2[2], old[2];
    state(a, 0xa, 0x1);
    state(s1, 0x5, 0x2);
    state(s2, 0x5, 0x3); /* same content as s1: only the allow-inequality tensor differs */
    state(old, 0x7, 0x1);
    setup();
    make_group(5);
    vote(1, 2, SEND_ONLY, s1);
    vote(2, 2, SEND_ONLY, s2);
    vote(3, 2, ENFORCE, a);
    vote(4, 2, ENFORCE, a);
    vote(5, 2, ENFORCE, a);
    CHECK(plan_status(1) == SS_OK && plan_n(1) == 0);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 0); /* never receives, not even "stats" */
    for (uint64_t c = 3; c <= 5; c++) {
        CHECK(plan_status(c) == SS_OK && plan_n(c) == 1 && (source_is(c, 1) || source_is(c, 2)));
        CHECK(plan_of(c) && plan_of(c)->u.ss_plan.fetch[0].hash == 0x5);
    }
    done_all(1, 5);
    for (uint64_t c = 1; c <= 5; c++) CHECK(last_to(c, M2C_SS_DONE) != NULL);
    clear_log();

    /* An outdated SEND_ONLY peer would have to receive: it fails (not kicked), the rest sync at revision 3. */
    vote(1, 3, SEND_ONLY, s1);
    vote(2, 2, SEND_ONLY, old);
    vote(3, 3, ENFORCE, s1);
    vote(4, 3, ENFORCE, s1);
    vote(5, 3, ENFORCE, s1);
    CHECK(plan_status(2) == SS_CONFLICT);
    CHECK(last_to(2, M2C_KICK) == NULL && !was_closed(2));
    for (uint64_t c = 3; c <= 5; c++) CHECK(plan_status(c) == SS_OK && plan_n(c) == 0);
    flag(1, C2M_SS_DIST_DONE, 1);
    done_all(3, 5);
    CHECK(last_to(1, M2C_SS_DONE) != NULL && last_to(2, M2C_SS_DONE) == NULL);
    teardown();
}

/* Disagreeing SEND_ONLY peers: each gets SS_CONFLICT and is then kicked; the others elect among
 * themselves and finish without them. */
static void test_send_only_disagree(void) {
    wire_tensor_t a[2], x[2], y[2];
    state(a, 0xa, 0x1);
    state(x, 0xb, 0x1);
    state(y, 0xc, 0x1);
    setup();
    make_group(4);
    vote(1, 1, SEND_ONLY, x);
    vote(2, 1, SEND_ONLY, a);
    vote(3, 1, ENFORCE, a);
    vote(4, 1, ENFORCE, y);
    CHECK(plan_status(1) == SS_CONFLICT && kicked_after_plan(1));
    CHECK(plan_status(2) == SS_CONFLICT && kicked_after_plan(2));
    CHECK(!was_closed(3) && !was_closed(4));
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 0);
    /* 3 and 4 tie 1:1; the first in ring order wins, and the source is never a kicked peer */
    CHECK(plan_status(4) == SS_OK && plan_n(4) == 1 && source_is(4, 3));
    CHECK_EQ_U64(msm_peer_count(M), 2);
    done_all(3, 4);
    CHECK(last_to(3, M2C_SS_DONE) && last_to(4, M2C_SS_DONE));
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.syncs_completed, 1);
    CHECK_EQ_U64(st.peers_kicked, 2);
    teardown();

    /* Every sender kicked: the RECEIVE_ONLY peer learns that no state is available. */
    setup();
    make_group(3);
    vote(1, 1, SEND_ONLY, x);
    vote(2, 1, SEND_ONLY, a);
    vote(3, 1, RECV_ONLY, a);
    CHECK(kicked_after_plan(1) && kicked_after_plan(2));
    CHECK(plan_status(3) == SS_NO_STATE);
    teardown();
}

/* allow_content_inequality: an up-to-date peer keeps its differing tensor, an outdated one takes it. */
static void test_allow_inequality(void) {
    wire_tensor_t a[2], b[2], c[2];
    state(a, 0xa, 0x1);
    state(b, 0xa, 0x2);
    state(c, 0xa, 0x3);
    setup();
    make_group(3);
    vote(1, 5, ENFORCE, a);
    vote(2, 5, ENFORCE, b);
    vote(3, 4, ENFORCE, c);
    CHECK(plan_status(1) == SS_OK && plan_n(1) == 0);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 0);
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 1);
    CHECK(plan_of(3) && strcmp(plan_of(3)->u.ss_plan.fetch[0].key, "stats") == 0);
    teardown();
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_receive_only_never_counts);
    RUN_TEST(test_send_only_agree);
    RUN_TEST(test_send_only_disagree);
    RUN_TEST(test_allow_inequality);
    TEST_MAIN_END();
}
