/* test_msm_sync_strategies.c - the shared-state strategies of seed 002 on the pure
 * master state machine (msm_shared_state.c): RECEIVE_ONLY content never counts
 * and is never a source, agreeing SEND_ONLY peers decide and never receive,
 * disagreeing SEND_ONLY peers get SS_CONFLICT and are kicked, and
 * allow_content_inequality only matters for up-to-date peers.
 * Driven through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

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


/* ---------- tests ---------- */

/* RECEIVE_ONLY content does not count: x is held by two peers but one of them is RECEIVE_ONLY, so the
 * 1:1 tie goes to the first peer's a; the RECEIVE_ONLY peer is never a source. */
static void test_receive_only_never_counts(void) {
    wire_tensor_t a[2], x[2];
    state(a, 0xa, 0x1);
    state(x, 0xb, 0x1);
    make_group(3);
    vote(1, 1, ENFORCE, a);
    vote(2, 1, RECV_ONLY, x);
    vote(3, 1, ENFORCE, x);
    CHECK(plan_status(1) == SS_OK && plan_n(1) == 0);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 1 && source_is(2, 1));
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 1 && source_is(3, 1));
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.fetch[0].hash == 0xa);
    finish_sync(1, 3);
    CHECK(last_to(2, M2C_SS_DONE) && last_to(2, M2C_SS_DONE)->u.flag.value == 1);
}

/* A RECEIVE_ONLY peer that already holds the popular content receives nothing, and is not a source
 * for another outdated peer even though its content matches. */
static void test_receive_only_holder_not_a_source(void) {
    wire_tensor_t a[2];
    state(a, 0xa, 0x1);
    make_group(3);
    wire_tensor_t z[2];
    state(z, 0x0, 0x0);
    vote(1, 4, ENFORCE, a);
    vote(2, 4, RECV_ONLY, a);
    vote(3, 0, ENFORCE, z);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 0);
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 2 && source_is(3, 1));
}

/* A RECEIVE_ONLY peer offering a newer revision does not pull the group forward. */
static void test_receive_only_newer_revision(void) {
    wire_tensor_t a[2], x[2];
    state(a, 0xa, 0x1);
    state(x, 0xb, 0x1);
    make_group(2);
    vote(1, 3, ENFORCE, a);
    vote(2, 9, RECV_ONLY, x);
    CHECK(plan_status(1) == SS_OK && plan_of(1)->u.ss_plan.revision == 3);
    CHECK(plan_status(2) == SS_REVISION_REFUSED && plan_of(2)->u.ss_plan.revision == 3);
}

/* Only RECEIVE_ONLY peers: nobody may provide the state. */
static void test_only_receive_only(void) {
    wire_tensor_t a[2];
    state(a, 0xa, 0x1);
    make_group(2);
    vote(1, 1, RECV_ONLY, a);
    vote(2, 1, RECV_ONLY, a);
    CHECK(plan_status(1) == SS_NO_STATE && plan_status(2) == SS_NO_STATE);
}

/* Agreeing SEND_ONLY peers decide even in the minority and never receive. */
static void test_send_only_agree(void) {
    wire_tensor_t a[2], s1[2], s2[2], old[2];
    state(a, 0xa, 0x1);
    state(s1, 0x5, 0x2);
    state(s2, 0x5, 0x3); /* same content as s1: only the allow-inequality tensor differs */
    state(old, 0x7, 0x1);
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
    finish_sync(1, 5);
    for (uint64_t c = 1; c <= 5; c++) CHECK(last_to(c, M2C_SS_DONE) != NULL);
    clear_log();

    /* An outdated SEND_ONLY peer would have to receive: it fails (not kicked), the rest sync at revision 3. */
    vote(1, 3, SEND_ONLY, s1);
    vote(2, 2, SEND_ONLY, old);
    vote(3, 3, ENFORCE, s1);
    vote(4, 3, ENFORCE, s1);
    vote(5, 3, ENFORCE, s1);
    CHECK(plan_status(2) == SS_CONFLICT);
    CHECK(last_to(2, M2C_KICK) == NULL && !closed_in_log(2));
    for (uint64_t c = 3; c <= 5; c++) CHECK(plan_status(c) == SS_OK && plan_n(c) == 0);
    flag(1, C2M_SS_DIST_DONE, 1);
    finish_sync(3, 5);
    CHECK(last_to(1, M2C_SS_DONE) != NULL && last_to(2, M2C_SS_DONE) == NULL);
}

/* Disagreeing SEND_ONLY peers: each gets SS_CONFLICT and is then kicked; the others elect among
 * themselves and finish without them. */
static void test_send_only_disagree(void) {
    wire_tensor_t a[2], x[2], y[2];
    state(a, 0xa, 0x1);
    state(x, 0xb, 0x1);
    state(y, 0xc, 0x1);
    make_group(4);
    vote(1, 1, SEND_ONLY, x);
    vote(2, 1, SEND_ONLY, a);
    vote(3, 1, ENFORCE, a);
    vote(4, 1, ENFORCE, y);
    CHECK(plan_status(1) == SS_CONFLICT && kicked_after_plan(1));
    CHECK(plan_status(2) == SS_CONFLICT && kicked_after_plan(2));
    CHECK(!closed_in_log(3) && !closed_in_log(4));
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 0);
    /* 3 and 4 tie 1:1; the first in ring order wins, and the source is never a kicked peer */
    CHECK(plan_status(4) == SS_OK && plan_n(4) == 1 && source_is(4, 3));
    CHECK_EQ_U64(msm_peer_count(M), 2);
    finish_sync(3, 4);
    CHECK(last_to(3, M2C_SS_DONE) && last_to(4, M2C_SS_DONE));
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.syncs_completed, 1);
    CHECK_EQ_U64(st.peers_kicked, 2);
}

/* Every sender kicked: the RECEIVE_ONLY peer learns that no state is available. */
static void test_send_only_all_kicked(void) {
    wire_tensor_t a[2], x[2];
    state(a, 0xa, 0x1);
    state(x, 0xb, 0x1);
    make_group(3);
    vote(1, 1, SEND_ONLY, x);
    vote(2, 1, SEND_ONLY, a);
    vote(3, 1, RECV_ONLY, a);
    CHECK(kicked_after_plan(1) && kicked_after_plan(2));
    CHECK(plan_status(3) == SS_NO_STATE);
}

/* allow_content_inequality: an up-to-date peer keeps its differing tensor, an outdated one takes it. */
static void test_allow_inequality(void) {
    wire_tensor_t a[2], b[2], c[2];
    state(a, 0xa, 0x1);
    state(b, 0xa, 0x2);
    state(c, 0xa, 0x3);
    make_group(3);
    vote(1, 5, ENFORCE, a);
    vote(2, 5, ENFORCE, b);
    vote(3, 4, ENFORCE, c);
    CHECK(plan_status(1) == SS_OK && plan_n(1) == 0);
    CHECK(plan_status(2) == SS_OK && plan_n(2) == 0);
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 1);
    CHECK(plan_of(3) && strcmp(plan_of(3)->u.ss_plan.fetch[0].key, "stats") == 0);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_receive_only_never_counts);
    RUN_TEST(test_receive_only_holder_not_a_source);
    RUN_TEST(test_receive_only_newer_revision);
    RUN_TEST(test_only_receive_only);
    RUN_TEST(test_send_only_agree);
    RUN_TEST(test_send_only_disagree);
    RUN_TEST(test_send_only_all_kicked);
    RUN_TEST(test_allow_inequality);
    TEST_MAIN_END();
}
