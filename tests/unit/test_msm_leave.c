/* test_msm_leave.c - the master's pure state machine: LEAVE, a clean departure between operations.
 * A peer in no running operation is removed at once (its votes go on without it, nothing is
 * aborted); a member of a running collective is removed when the collective ends, which completes
 * for everyone. Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

static uint64_t stat_left(void) {
    msm_stats_t st;
    msm_get_stats(M, &st);
    return st.peers_left;
}

static uint64_t stat_aborted(void) {
    msm_stats_t st;
    msm_get_stats(M, &st);
    return st.collectives_aborted;
}

/* Closed by the master without a KICK. */
static int left_cleanly(uint64_t conn) { return closed_in_log(conn) && count_to(conn, M2C_KICK) == 0; }

static void check_ring(const uint64_t *expect, int n) {
    uint64_t ring[8];
    CHECK_EQ_U64(msm_group_ring(M, 0, ring, 8), n);
    for (int i = 0; i < n; i++) CHECK_EQ_U64(ring[i], expect[i]);
}

static void test_leave_between_operations(void) {
    make_group(3);
    pkt(2, C2M_LEAVE);
    CHECK(left_cleanly(2));
    CHECK_EQ_U64(total_sends(), 0); /* nobody is told anything: no abort, no reject */
    CHECK_EQ_U64(stat_left(), 1);
    CHECK_EQ_U64(msm_peer_count(M), 2);
    check_ring((uint64_t[]){1, 3}, 2);

    /* the next collective runs on the shrunk ring */
    clear_log();
    coll_init(1, 7);
    coll_init(3, 7);
    const wire_msg_t *c = commence_of(1, 7);
    CHECK(c != NULL);
    if (c) {
        CHECK_EQ_U64(c->u.commence.n, 2);
        CHECK(is_uuid_of(c->u.commence.ring[0], 1) && is_uuid_of(c->u.commence.ring[1], 3));
        check_world(&c->u.commence.world, 2, 2, 1, 2);
    }
    uint64_t seq = commenced_seq(1, 7);
    coll_done(1, 7, seq, 1);
    coll_done(3, 7, seq, 1);
    CHECK(end_of(1, M2C_COLL_COMPLETE, 7) && end_of(3, M2C_COLL_COMPLETE, 7));
    CHECK_EQ_U64(stat_aborted(), 0);
}

/* The others voted already; the vote completes without the leaver instead of being rejected. */
static void test_leave_during_vote(void) {
    make_group(3);
    coll_init(1, 7);
    coll_init(2, 7);
    CHECK_EQ_U64(total_sends(), 0);
    pkt(3, C2M_LEAVE);
    CHECK(left_cleanly(3));
    CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 0);
    const wire_msg_t *c = commence_of(1, 7);
    CHECK(c && c->u.commence.n == 2);
    CHECK(commence_of(2, 7) != NULL);
    CHECK_EQ_U64(stat_left(), 1);

    /* a newcomer that was only registered leaves too */
    connect_(9);
    hello_g(9, 0, 1);
    pkt(9, C2M_LEAVE);
    CHECK(left_cleanly(9));
    CHECK_EQ_U64(stat_left(), 2);
}

/* A LEAVE during a running collective: the collective completes for all three, then the peer goes. */
static void test_leave_during_collective(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 7);
    uint64_t seq = commenced_seq(1, 7);
    CHECK(seq != 0);
    pkt(3, C2M_LEAVE);
    CHECK(!closed_in_log(3));
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT), 0);
    CHECK_EQ_U64(stat_left(), 0);
    check_ring((uint64_t[]){1, 2, 3}, 3);
    coll_done(1, 7, seq, 1);
    coll_done(2, 7, seq, 1);
    /* the others vote their next collective while the leaver still owes its report */
    coll_init(1, 8);
    coll_init(2, 8);
    CHECK(commence_of(1, 8) == NULL);
    coll_done(3, 7, seq, 1);
    for (uint64_t c = 1; c <= 3; c++) CHECK(end_of(c, M2C_COLL_COMPLETE, 7) != NULL);
    CHECK(left_cleanly(3));
    CHECK_EQ_U64(stat_left(), 1);
    CHECK_EQ_U64(stat_aborted(), 0);
    check_ring((uint64_t[]){1, 2}, 2);
    /* its departure completed the next vote */
    const wire_msg_t *c8 = commence_of(1, 8);
    CHECK(c8 && c8->u.commence.n == 2);
    CHECK(commence_of(3, 8) == NULL);
}

/* A running collective that fails for another reason still lets the leaver go when it ends. */
static void test_leave_after_failed_collective(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 7);
    uint64_t seq = commenced_seq(1, 7);
    pkt(3, C2M_LEAVE);
    coll_done(1, 7, seq, 0);
    CHECK(end_of(3, M2C_COLL_ABORT, 7) != NULL);
    CHECK(left_cleanly(3));
    CHECK_EQ_U64(stat_left(), 1);
}

static void test_leave_out_of_state(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 7);
    CHECK(commenced_seq(1, 7) != 0);
    pkt(3, C2M_LEAVE);
    pkt(3, C2M_LEAVE);
    CHECK(kicked(3));
    CHECK_EQ_U64(stat_left(), 0);

    clear_log();
    for (uint64_t c = 1; c <= 2; c++) coll_init(c, 9);
    CHECK(commenced_seq(1, 9) != 0);
    pkt(2, C2M_LEAVE);
    coll_init(2, 10); /* a vote after LEAVE */
    CHECK(kicked(2));

    /* before HELLO only HELLO or RESUME */
    connect_(5);
    pkt(5, C2M_LEAVE);
    CHECK(kicked(5));
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_leave_between_operations);
    RUN_TEST(test_leave_during_vote);
    RUN_TEST(test_leave_during_collective);
    RUN_TEST(test_leave_after_failed_collective);
    RUN_TEST(test_leave_out_of_state);
    TEST_MAIN_END();
}
