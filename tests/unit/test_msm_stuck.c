/* test_msm_stuck.c - the master's pure state machine, operation kind by kind:
 * votes that can never complete, broken on the tick after the grace (msm_stuck.c). Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

/* Votes that can never complete are broken on the tick (msm_stuck.c). One peer updates while the other
 * asks whether peers are pending: the asker is told "yes". */
static void test_stuck_update_against_pending(void) {
    make_group(2);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_PEERS_PENDING);
    CHECK_EQ_U64(total_sends(), 0);
    msm_on_tick(M);
    CHECK(last_to(2, M2C_PEERS_PENDING) && last_to(2, M2C_PEERS_PENDING)->u.flag.value == 1);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    CHECK(last_to(1, M2C_TOPOLOGY_DONE) && last_to(1, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 1);
    CHECK(last_to(2, M2C_TOPOLOGY_DONE) && last_to(2, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 1);
}

/* one peer updates while the other all-reduces: both calls fail instead of waiting forever */
static void test_stuck_update_against_allreduce(void) {
    make_group(2);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    coll_init(2, 7);
    msm_on_tick(M);
    CHECK_EQ_U64(total_sends(), 0); /* within the grace nothing is broken yet */
    tick_past_grace();
    CHECK(last_to(1, M2C_TOPOLOGY_DONE) && last_to(1, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 0);
    CHECK(last_to(2, M2C_COLL_REJECT) && last_to(2, M2C_COLL_REJECT)->u.reject.reason == REJECT_CONFLICT);
    CHECK(!kicked(1) && !kicked(2));
    /* afterwards both can agree again */
    coll_init(1, 7);
    coll_init(2, 7);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 2);
}

/* a sync against an optimize vote: both fail */
static void test_stuck_sync_against_optimize(void) {
    make_group(2);
    wire_tensor_t t = {.key = "w", .dtype = pcclFloat, .count = 4, .hash = 1};
    sync_vote(1, 1, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &t, 1);
    pkt(2, C2M_OPTIMIZE_TOPOLOGY);
    tick_past_grace();
    CHECK(last_to(1, M2C_SS_PLAN) && last_to(1, M2C_SS_PLAN)->u.ss_plan.status == SS_ABORTED);
    CHECK(last_to(2, M2C_OPTIMIZE_DONE) && last_to(2, M2C_OPTIMIZE_DONE)->u.flag.value == 0);
}

/* not stuck: one peer votes, the other is still computing */
static void test_not_stuck_while_computing(void) {
    make_group(2);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    tick_past_grace();
    CHECK_EQ_U64(total_sends(), 0);
}

/* async all-reduces vote in any order: for a moment peer 1 waits on tag 7 and peer 2 on tag 8.
 * A tick then must not reject them (it did before the grace: a flaky e2e.test_quant under TSan). */
static void test_not_stuck_async_tags(void) {
    make_group(2);
    coll_init(1, 7);
    coll_init(2, 8);
    msm_on_tick(M);
    CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 0);
    coll_init(2, 7);
    coll_init(1, 8);
    CHECK(count_type(M2C_COLL_COMMENCE) >= 2); /* both voted on both tags: they run (pool size 1: in turn) */
    CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 0);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_stuck_update_against_pending);
    RUN_TEST(test_stuck_update_against_allreduce);
    RUN_TEST(test_stuck_sync_against_optimize);
    RUN_TEST(test_not_stuck_while_computing);
    RUN_TEST(test_not_stuck_async_tags);
    TEST_MAIN_END();
}
