/* test_msm_pending.c - the master's pure state machine, operation kind by kind:
 * the are-peers-pending vote. Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

/* ---------- are peers pending ---------- */

static int pending_answer(uint64_t conn) {
    const wire_msg_t *m = last_to(conn, M2C_PEERS_PENDING);
    return m ? m->u.flag.value : -1;
}

static void test_pending(void) {
    make_group(3);
    pkt(1, C2M_PEERS_PENDING);
    pkt(2, C2M_PEERS_PENDING);
    CHECK_EQ_U64(total_sends(), 0);
    pkt(3, C2M_PEERS_PENDING);
    for (uint64_t c = 1; c <= 3; c++) CHECK_EQ_U64(pending_answer(c), 0);

    clear_log();
    join(4);
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_PEERS_PENDING);
    for (uint64_t c = 1; c <= 3; c++) CHECK_EQ_U64(pending_answer(c), 1);
    CHECK_EQ_U64(count_to(4, M2C_PEERS_PENDING), 0);

    /* a non-voter leaves: the voters get their answer without it */
    clear_log();
    pkt(1, C2M_PEERS_PENDING);
    pkt(2, C2M_PEERS_PENDING);
    CHECK_EQ_U64(count_type(M2C_PEERS_PENDING), 0);
    disconnect(3);
    CHECK_EQ_U64(pending_answer(1), 1);
    CHECK_EQ_U64(pending_answer(2), 1);
    CHECK_EQ_U64(count_type(M2C_PEERS_PENDING), 2);

    /* the waiting peer leaves: the answer becomes false */
    clear_log();
    disconnect(4);
    CHECK_EQ_U64(total_sends(), 0);
    pkt(1, C2M_PEERS_PENDING);
    pkt(2, C2M_PEERS_PENDING);
    CHECK_EQ_U64(pending_answer(1), 0);
    CHECK_EQ_U64(pending_answer(2), 0);
}

/* a voter leaving does not answer the rest early */
static void test_pending_voter_leaves(void) {
    make_group(3);
    pkt(1, C2M_PEERS_PENDING);
    disconnect(1);
    CHECK_EQ_U64(total_sends(), 0);
    pkt(2, C2M_PEERS_PENDING);
    CHECK_EQ_U64(total_sends(), 0);
    pkt(3, C2M_PEERS_PENDING);
    CHECK_EQ_U64(pending_answer(2), 0);
    CHECK_EQ_U64(pending_answer(3), 0);
    /* duplicate vote kicks */
    pkt(2, C2M_PEERS_PENDING);
    pkt(2, C2M_PEERS_PENDING);
    CHECK(kicked(2));
    CHECK_EQ_U64(pending_answer(3), 0);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_pending);
    RUN_TEST(test_pending_voter_leaves);
    TEST_MAIN_END();
}
