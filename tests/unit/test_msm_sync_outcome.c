/* test_msm_sync_outcome.c - the master's pure state machine: what SS_DONE tells each member
 * of a shared-state sync. As in PCCL 1.0, a failed fetch fails only that member's sync; the
 * others complete the revision, and the failed member's retry fetches from a peer that holds it.
 * Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

static wire_tensor_t tensor(uint64_t hash) {
    wire_tensor_t t = {.dtype = pcclFloat, .count = 1000, .hash = hash};
    snprintf(t.key, sizeof t.key, "w");
    return t;
}

static uint64_t source_of(uint64_t c) {
    for (uint64_t s = 1; s <= 8; s++)
        if (source_is(c, s)) return s;
    return 0;
}

static uint64_t revision_of(uint64_t c) {
    msm_peer_view_t v;
    return view_of(c, &v) == 0 ? v.revision : UINT64_MAX;
}

static int done_flag(uint64_t c) {
    const wire_msg_t *d = last_to(c, M2C_SS_DONE);
    return d ? d->u.flag.value : -1;
}

static uint64_t syncs_completed(void) {
    msm_stats_t st;
    msm_get_stats(M, &st);
    return st.syncs_completed;
}

/* Peers 1 and 2 hold revision 4, newcomer 3 fetches; returns 3's source (1 or 2). */
static uint64_t plan_newcomer(const wire_tensor_t *up, const wire_tensor_t *fresh) {
    sync_vote(1, 4, ENFORCE, up, 1);
    sync_vote(2, 4, ENFORCE, up, 1);
    sync_vote(3, 0, ENFORCE, fresh, 1);
    CHECK(plan_status(3) == SS_OK && plan_n(3) == 1);
    uint64_t src = source_of(3);
    CHECK(src == 1 || src == 2);
    return src;
}

/* The receiver's source dies mid-transfer: the up-to-date peers complete revision 4, the receiver
 * alone is told its sync failed, and its retry is served by the survivor. */
static void test_source_lost(void) {
    wire_tensor_t up = tensor(0x111), fresh = tensor(0);
    for (int report_first = 0; report_first <= 1; report_first++) {
        restart();
        make_group(3);
        uint64_t src = plan_newcomer(&up, &fresh), other = src == 1 ? 2 : 1;
        flag(other, C2M_SS_DIST_DONE, 1);
        if (report_first) flag(3, C2M_SS_DIST_DONE, 0);
        CHECK_EQ_U64(count_type(M2C_SS_DONE), 0); /* the source still owes its report */
        disconnect(src);
        if (!report_first) {
            CHECK_EQ_U64(count_type(M2C_SS_DONE), 0); /* the receiver still owes its report */
            flag(3, C2M_SS_DIST_DONE, 0);
        }
        CHECK_EQ_U64(done_flag(other), 1);
        CHECK_EQ_U64(done_flag(3), 0);
        CHECK_EQ_U64(revision_of(other), 4);
        CHECK_EQ_U64(revision_of(3), 0);
        CHECK_EQ_U64(syncs_completed(), 1);
        clear_log();
        sync_vote(other, 4, ENFORCE, &up, 1);
        CHECK_EQ_U64(total_sends(), 0); /* the receiver is still a member: everyone votes */
        sync_vote(3, 0, ENFORCE, &fresh, 1);
        CHECK(plan_status(3) == SS_OK && plan_n(3) == 1 && source_is(3, other));
        CHECK(plan_of(3) && plan_of(3)->u.ss_plan.revision == 4 && plan_has(plan_of(3), "w", 0x111));
        CHECK(plan_status(other) == SS_OK && plan_n(other) == 0);
        flag(other, C2M_SS_DIST_DONE, 1);
        flag(3, C2M_SS_DIST_DONE, 1);
        CHECK_EQ_U64(done_flag(other), 1);
        CHECK_EQ_U64(done_flag(3), 1);
        CHECK_EQ_U64(revision_of(3), 4);
    }
}

/* A source that stays but sent bytes that did not hash right: only the receiver fails. */
static void test_bad_bytes(void) {
    wire_tensor_t up = tensor(0x111), fresh = tensor(0);
    make_group(3);
    plan_newcomer(&up, &fresh);
    flag(1, C2M_SS_DIST_DONE, 1);
    flag(3, C2M_SS_DIST_DONE, 0);
    flag(2, C2M_SS_DIST_DONE, 1);
    CHECK_EQ_U64(done_flag(1), 1);
    CHECK_EQ_U64(done_flag(2), 1);
    CHECK_EQ_U64(done_flag(3), 0);
    CHECK(!kicked(1) && !kicked(2) && !kicked(3));
    CHECK_EQ_U64(syncs_completed(), 1);
}

/* The survivor goes on to its all-reduce while the failed receiver retries the sync: neither can
 * complete without the other, the stuck-vote breaker fails both, and the next sync serves it. */
static void test_group_goes_on(void) {
    wire_tensor_t up = tensor(0x111), fresh = tensor(0);
    make_group(3);
    uint64_t src = plan_newcomer(&up, &fresh), other = src == 1 ? 2 : 1;
    flag(other, C2M_SS_DIST_DONE, 1);
    disconnect(src);
    flag(3, C2M_SS_DIST_DONE, 0);
    clear_log();
    coll_init(other, 0);
    sync_vote(3, 0, ENFORCE, &fresh, 1);
    tick_past_grace();
    CHECK(last_to(other, M2C_COLL_REJECT) && last_to(other, M2C_COLL_REJECT)->u.reject.reason == REJECT_CONFLICT);
    CHECK_EQ_U64(plan_status(3), SS_ABORTED);
    CHECK(!kicked(other) && !kicked(3));
    clear_log();
    sync_vote(other, 4, ENFORCE, &up, 1);
    sync_vote(3, 0, ENFORCE, &fresh, 1);
    CHECK(plan_status(3) == SS_OK && source_is(3, other) && plan_has(plan_of(3), "w", 0x111));
}

/* The only holder of the revision leaves mid-transfer: nobody completed it, so the group keeps
 * its previous revision (none here) and the receiver is told its sync failed. */
static void test_nobody_completed(void) {
    wire_tensor_t up = tensor(0x111), fresh = tensor(0);
    make_group(2);
    sync_vote(1, 4, ENFORCE, &up, 1);
    sync_vote(2, 0, ENFORCE, &fresh, 1);
    CHECK(source_is(2, 1));
    disconnect(1);
    flag(2, C2M_SS_DIST_DONE, 0);
    CHECK_EQ_U64(done_flag(2), 0);
    CHECK_EQ_U64(syncs_completed(), 0);
    msm_group_view_t g[4];
    CHECK(msm_group_views(M, g, 4) >= 1 && g[0].id == 0 && !g[0].has_revision);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_source_lost);
    RUN_TEST(test_bad_bytes);
    RUN_TEST(test_group_goes_on);
    RUN_TEST(test_nobody_completed);
    TEST_MAIN_END();
}
