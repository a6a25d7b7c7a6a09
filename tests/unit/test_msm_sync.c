/* test_msm_sync.c - the master's pure state machine, operation kind by kind:
 * shared-state sync: plans, revisions, layouts, strategies and departures. Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

static void state3(wire_tensor_t t[3], uint64_t hw, uint64_t hb, uint64_t hs) {
    memset(t, 0, 3 * sizeof *t);
    snprintf(t[0].key, sizeof t[0].key, "w");
    t[0].dtype = pcclFloat;
    t[0].count = 1000;
    t[0].hash = hw;
    snprintf(t[1].key, sizeof t[1].key, "b");
    t[1].dtype = pcclFloat;
    t[1].count = 10;
    t[1].hash = hb;
    snprintf(t[2].key, sizeof t[2].key, "step_stats");
    t[2].dtype = pcclDouble;
    t[2].count = 2;
    t[2].allow_inequality = 1;
    t[2].hash = hs;
}

static void test_ss_equal(void) {
    make_group(3);
    wire_tensor_t t[3];
    state3(t, 0x111, 0x222, 0x333);
    sync_vote(1, 1, ENFORCE, t, 3);
    sync_vote(2, 1, ENFORCE, t, 3);
    CHECK_EQ_U64(total_sends(), 0);
    CHECK(strcmp(state_of(1), "sync") == 0);
    sync_vote(3, 1, ENFORCE, t, 3);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *p = plan_of(c);
        CHECK(p && p->u.ss_plan.status == SS_OK && p->u.ss_plan.revision == 1 && p->u.ss_plan.n == 0);
    }
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 0);
    flag(1, C2M_SS_DIST_DONE, 1);
    flag(2, C2M_SS_DIST_DONE, 1);
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 0);
    flag(3, C2M_SS_DIST_DONE, 1);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *d = last_to(c, M2C_SS_DONE);
        CHECK(d && d->u.flag.value == 1);
        msm_peer_view_t v;
        CHECK(view_of(c, &v) == 0 && v.revision == 1 && strcmp(v.state, "idle") == 0);
    }
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.syncs_completed, 1);
    /* a second vote while the first peer is still voting kicks; DIST_DONE outside a sync kicks */
    clear_log();
    sync_vote(1, 2, ENFORCE, t, 3);
    sync_vote(1, 2, ENFORCE, t, 3);
    CHECK(kicked(1));
    flag(2, C2M_SS_DIST_DONE, 1);
    CHECK(kicked(2));
}

/* an unknown strategy kicks */
static void test_ss_unknown_strategy(void) {
    make_group(2);
    wire_tensor_t t[3];
    state3(t, 0x111, 0x222, 0x333);
    sync_vote(1, 1, 3, t, 3);
    CHECK(kicked(1));
}

static void test_ss_minority(void) {
    make_group(3);
    wire_tensor_t a[3], b[3];
    state3(a, 0x111, 0x222, 0x333);
    state3(b, 0x999, 0x222, 0x444); /* w differs; step_stats differs but may */
    sync_vote(1, 4, ENFORCE, a, 3);
    sync_vote(2, 4, ENFORCE, a, 3);
    sync_vote(3, 4, ENFORCE, b, 3);
    const wire_msg_t *p1 = plan_of(1), *p2 = plan_of(2), *p3 = plan_of(3);
    CHECK(p1 && p1->u.ss_plan.status == SS_OK && p1->u.ss_plan.n == 0);
    CHECK(p2 && p2->u.ss_plan.status == SS_OK && p2->u.ss_plan.n == 0);
    CHECK(p3 && p3->u.ss_plan.status == SS_OK && p3->u.ss_plan.revision == 4);
    if (p3 && p3->u.ss_plan.n >= 1) {
        CHECK_EQ_U64(p3->u.ss_plan.n, 1);
        CHECK(plan_has(p3, "w", 0x111));
        CHECK(p3->u.ss_plan.fetch[0].count == 1000 && p3->u.ss_plan.fetch[0].dtype == pcclFloat);
        /* both majority peers send, each listed with its p2p address */
        CHECK_EQ_U64(p3->u.ss_plan.nsrc, 2);
        for (int k = 0; k < p3->u.ss_plan.nsrc && k < 2; k++) {
            const wire_peer_t *s = &p3->u.ss_plan.sources[k];
            CHECK((is_uuid_of(s->uuid, 1) && s->port == port_of(1) && s->ip.ipv4.data[3] == 1) ||
                  (is_uuid_of(s->uuid, 2) && s->port == port_of(2) && s->ip.ipv4.data[3] == 2));
        }
    }
    finish_sync(1, 3);
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 3);
}

static void test_ss_newcomer(void) {
    make_group(3);
    wire_tensor_t a[3], z[3];
    state3(a, 0x111, 0x222, 0x333);
    state3(z, 0x0, 0x222, 0x0); /* b happens to match already */
    sync_vote(3, 0, ENFORCE, z, 3);
    sync_vote(1, 5, ENFORCE, a, 3);
    sync_vote(2, 5, ENFORCE, a, 3);
    const wire_msg_t *p3 = plan_of(3);
    CHECK(p3 && p3->u.ss_plan.status == SS_OK && p3->u.ss_plan.revision == 5);
    if (p3) {
        CHECK_EQ_U64(p3->u.ss_plan.n, 2); /* w and step_stats (outdated peers take everything that differs) */
        CHECK(plan_has(p3, "w", 0x111));
        CHECK(plan_has(p3, "step_stats", 0x333));
        CHECK(!source_in(3, 3) && source_in(3, 1) && source_in(3, 2));
    }
    CHECK(plan_of(1) && plan_of(1)->u.ss_plan.n == 0);
    finish_sync(1, 3);
    msm_peer_view_t v;
    CHECK(view_of(3, &v) == 0 && v.revision == 5);
}

static void test_ss_revisions(void) {
    make_group(3);
    wire_tensor_t a[3];
    state3(a, 0x111, 0x222, 0x333);
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 5, ENFORCE, a, 3);
    finish_sync(1, 3);
    clear_log();
    /* too far ahead: refused, told the expected revision; the rest sync */
    sync_vote(1, 6, ENFORCE, a, 3);
    sync_vote(2, 6, ENFORCE, a, 3);
    sync_vote(3, 8, ENFORCE, a, 3);
    const wire_msg_t *p3 = plan_of(3);
    CHECK(p3 && p3->u.ss_plan.status == SS_REVISION_REFUSED && p3->u.ss_plan.revision == 6);
    CHECK(plan_of(1) && plan_of(1)->u.ss_plan.status == SS_OK && plan_of(1)->u.ss_plan.revision == 6);
    CHECK(strcmp(state_of(3), "idle") == 0);
    finish_sync(1, 2);
    CHECK(last_to(1, M2C_SS_DONE) && last_to(2, M2C_SS_DONE));
    CHECK_EQ_U64(count_to(3, M2C_SS_DONE), 0);
    /* the same revision again is allowed */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 6, ENFORCE, a, 3);
    for (uint64_t c = 1; c <= 3; c++)
        CHECK(plan_of(c) && plan_of(c)->u.ss_plan.status == SS_OK && plan_of(c)->u.ss_plan.revision == 6);
    finish_sync(1, 3);
    /* everyone offering an older revision: a rollback, nobody has the state */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 4, ENFORCE, a, 3);
    for (uint64_t c = 1; c <= 3; c++) CHECK(plan_of(c) && plan_of(c)->u.ss_plan.status == SS_NO_STATE);
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 0);
    /* the group is free to sync again */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 7, ENFORCE, a, 3);
    for (uint64_t c = 1; c <= 3; c++)
        CHECK(plan_of(c) && plan_of(c)->u.ss_plan.status == SS_OK && plan_of(c)->u.ss_plan.revision == 7);
}

/* first sync of a group: any revision (resume from a checkpoint) */
static void test_ss_first_sync_any_revision(void) {
    wire_tensor_t a[3];
    state3(a, 0x111, 0x222, 0x333);
    make_group(2);
    sync_vote(1, 1000, ENFORCE, a, 3);
    sync_vote(2, 1000, ENFORCE, a, 3);
    CHECK(plan_of(1) && plan_of(1)->u.ss_plan.status == SS_OK && plan_of(1)->u.ss_plan.revision == 1000);
}

static void test_ss_layout_and_strategies(void) {
    wire_tensor_t a[3], l[3];
    state3(a, 0x111, 0x222, 0x333);
    state3(l, 0x111, 0x222, 0x333);
    l[0].count = 999;
    make_group(3);
    sync_vote(1, 1, ENFORCE, a, 3);
    sync_vote(2, 1, ENFORCE, a, 3);
    sync_vote(3, 1, ENFORCE, l, 3);
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.status == SS_LAYOUT_MISMATCH);
    CHECK(plan_of(1) && plan_of(1)->u.ss_plan.status == SS_OK);
    finish_sync(1, 2);
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 2);
    /* a missing key is a layout mismatch too */
    clear_log();
    sync_vote(1, 2, ENFORCE, a, 3);
    sync_vote(2, 2, ENFORCE, a, 3);
    sync_vote(3, 2, ENFORCE, a, 2);
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.status == SS_LAYOUT_MISMATCH);
}

/* everyone RECEIVE_ONLY: no state */
static void test_ss_all_receive_only(void) {
    wire_tensor_t a[3], x[3];
    state3(a, 0x111, 0x222, 0x333);
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 1, RECV_ONLY, a, 3);
    for (uint64_t c = 1; c <= 3; c++) CHECK(plan_of(c) && plan_of(c)->u.ss_plan.status == SS_NO_STATE);
    /* the group can sync again afterwards */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 1, ENFORCE, a, 3);
    CHECK_EQ_U64(count_type(M2C_SS_PLAN), 3);
    finish_sync(1, 3);
    /* a RECEIVE_ONLY peer takes everything that differs, even allow-inequality tensors */
    clear_log();
    state3(x, 0x1, 0x222, 0x2);
    sync_vote(1, 2, ENFORCE, a, 3);
    sync_vote(2, 2, ENFORCE, a, 3);
    sync_vote(3, 2, RECV_ONLY, x, 3);
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.n == 2 && plan_has(plan_of(3), "w", 0x111) &&
          plan_has(plan_of(3), "step_stats", 0x333));
}

/* a SEND_ONLY peer's content wins even in the minority; two disagreeing SEND_ONLY peers conflict */
static void test_ss_send_only(void) {
    wire_tensor_t a[3], x[3];
    state3(a, 0x111, 0x222, 0x333);
    make_group(3);
    state3(x, 0x5, 0x222, 0x333);
    sync_vote(1, 1, SEND_ONLY, x, 3);
    sync_vote(2, 1, ENFORCE, a, 3);
    sync_vote(3, 1, ENFORCE, a, 3);
    CHECK(plan_of(1) && plan_of(1)->u.ss_plan.status == SS_OK && plan_of(1)->u.ss_plan.n == 0);
    for (uint64_t c = 2; c <= 3; c++) {
        const wire_msg_t *p = plan_of(c);
        CHECK(p && p->u.ss_plan.n == 1 && plan_has(p, "w", 0x5) && source_is(c, 1) &&
              p->u.ss_plan.nsrc == 1);
    }
    finish_sync(1, 3);
    clear_log();
    sync_vote(1, 2, SEND_ONLY, x, 3);
    sync_vote(2, 2, SEND_ONLY, a, 3);
    sync_vote(3, 2, ENFORCE, a, 3);
    CHECK(plan_of(2) && plan_of(2)->u.ss_plan.status == SS_CONFLICT);
}

/* A member leaving before its vote: the rest sync. (One leaving during distribution, and what each member
 * is told: test_msm_sync_outcome.c.) */
static void test_ss_departures(void) {
    wire_tensor_t a[3];
    state3(a, 0x111, 0x222, 0x333);
    make_group(3);
    sync_vote(1, 1, ENFORCE, a, 3);
    sync_vote(2, 1, ENFORCE, a, 3);
    CHECK_EQ_U64(total_sends(), 0);
    disconnect(3);
    CHECK(plan_of(1) && plan_of(2));
    finish_sync(1, 2);
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 2);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.syncs_completed, 1);
}

/* a vote while the group distributes (this peer was refused and retries) waits for the next round */
static void test_ss_vote_while_distributing(void) {
    wire_tensor_t a[3];
    state3(a, 0x111, 0x222, 0x333);
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 1, ENFORCE, a, 3);
    finish_sync(1, 3);
    sync_vote(1, 2, ENFORCE, a, 3);
    sync_vote(2, 2, ENFORCE, a, 3);
    sync_vote(3, 9, ENFORCE, a, 3);
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.status == SS_REVISION_REFUSED);
    sync_vote(3, 2, ENFORCE, a, 3);
    CHECK(!kicked(3));
    CHECK(!closed_in_log(1) && !closed_in_log(2));
    finish_sync(1, 2);
    CHECK(last_to(1, M2C_SS_DONE) != NULL);
    /* the deferred vote of peer 3 (revision 2, now outdated) joins the next sync */
    sync_vote(1, 3, ENFORCE, a, 3);
    sync_vote(2, 3, ENFORCE, a, 3);
    CHECK(plan_of(3) && plan_of(3)->u.ss_plan.status == SS_OK && plan_of(3)->u.ss_plan.revision == 3);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_ss_equal);
    RUN_TEST(test_ss_unknown_strategy);
    RUN_TEST(test_ss_minority);
    RUN_TEST(test_ss_newcomer);
    RUN_TEST(test_ss_revisions);
    RUN_TEST(test_ss_first_sync_any_revision);
    RUN_TEST(test_ss_layout_and_strategies);
    RUN_TEST(test_ss_all_receive_only);
    RUN_TEST(test_ss_send_only);
    RUN_TEST(test_ss_departures);
    RUN_TEST(test_ss_vote_while_distributing);
    TEST_MAIN_END();
}
