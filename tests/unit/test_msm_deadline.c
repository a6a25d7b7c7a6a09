/* test_msm_deadline.c - the master's pure state machine: no peer can stall the run. Votes, owed
 * reports and wiring reports have deadlines (msm_deadline.c); a newcomer that never wires fails one
 * accept round only. Driven event by event through the shared harness (msm_harness.h). */
#include <string.h>

#include "msm_harness.h"

#define VOTE_MS 5000

static uint64_t now_ms;

static void at(uint64_t t) {
    now_ms = t;
    msm_set_time(M, t);
    msm_on_tick(M);
}

static void setup_deadlines(void) {
    setup();
    now_ms = 0;
    msm_set_time(M, 0);
    msm_set_peer_timeout(M, 0); /* heartbeats are not what these tests are about */
    msm_set_vote_timeout(M, VOTE_MS);
}
TT_FIXTURE(setup_deadlines, teardown);

/* A member that stops voting (its heartbeats go on) is kicked when the vote is VOTE_MS old. */
static void test_vote_deadline(void) {
    make_group(3);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    at(VOTE_MS - 1);
    CHECK(!kicked(3) && count_type(M2C_TOPOLOGY_DONE) == 0);
    at(VOTE_MS);
    CHECK(kicked(3));
    CHECK(strstr(kick_reason(3), "did not vote") != NULL);
    p2p_ok(1, 1); /* the ring without 3 is wired */
    p2p_ok(2, 1);
    CHECK(last_to(1, M2C_TOPOLOGY_DONE) && last_to(1, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 1);
    CHECK(last_to(2, M2C_TOPOLOGY_DONE) && last_to(2, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 1);
    CHECK(!kicked(1) && !kicked(2));
}

/* the same for a collective: the voters go on without the silent member */
static void test_vote_deadline_collective(void) {
    make_group(3);
    coll_init(1, 7);
    coll_init(2, 7);
    at(VOTE_MS);
    CHECK(kicked(3));
    CHECK_EQ_U64(count_to(1, M2C_COLL_COMMENCE) + count_to(2, M2C_COLL_COMMENCE), 2);
}

/* the deadline counts from the vote's opening, not from the last vote */
static void test_vote_deadline_from_opening(void) {
    make_group(3);
    at(1000);
    pkt(1, C2M_PEERS_PENDING);
    at(1000 + VOTE_MS - 1);
    pkt(2, C2M_PEERS_PENDING);
    CHECK(!kicked(3));
    at(1000 + VOTE_MS);
    CHECK(kicked(3) && !kicked(1) && !kicked(2));
    CHECK(last_to(1, M2C_PEERS_PENDING) != NULL);
}

/* 0 disables the deadline */
static void test_vote_deadline_disabled(void) {
    msm_set_vote_timeout(M, 0);
    make_group(2);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    at(1000000000);
    CHECK(!kicked(2) && count_type(M2C_TOPOLOGY_DONE) == 0);
}

/* Once a member reported a collective's end, the others have VOTE_MS to report theirs. */
static void test_report_deadline(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 9);
    uint64_t seq = commenced_seq(1, 9);
    at(60000); /* a long transfer: no deadline while nobody reported */
    CHECK(!kicked(1) && !kicked(2) && !kicked(3));
    coll_done(1, 9, seq, 1);
    coll_done(2, 9, seq, 1);
    at(61000);
    at(61000 + VOTE_MS - 1);
    CHECK(!kicked(3));
    at(61000 + VOTE_MS);
    CHECK(kicked(3));
    CHECK(strstr(kick_reason(3), "all-reduce") != NULL || strstr(kick_reason(3), "collective") != NULL);
    CHECK(end_of(1, M2C_COLL_ABORT, 9) != NULL || end_of(1, M2C_COLL_COMPLETE, 9) != NULL);
    CHECK(!kicked(1) && !kicked(2));
}

/* A newcomer that never reports its wiring fails one round, sits out the next, and is kicked at the
 * wiring deadline. */
static void test_newcomer_never_wires(void) {
    make_group(2);
    join(3); /* registers, but never wires (a raw HELLO with heartbeats) */
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    CHECK_EQ_U64(count_to(3, M2C_ESTABLISH_P2P), 1);
    p2p_ok(1, 0); /* 1 cannot reach it */
    CHECK(last_to(1, M2C_TOPOLOGY_DONE) && last_to(1, M2C_TOPOLOGY_DONE)->u.topo_done.ok == 0);
    join(4); /* an honest newcomer */
    clear_log();
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    CHECK_EQ_U64(count_to(3, M2C_ESTABLISH_P2P), 0); /* left out: it owes the last round's report */
    CHECK_EQ_U64(count_to(4, M2C_ESTABLISH_P2P), 1);
    p2p_ok(2, 1); /* 2's stale report of the failed round */
    p2p_ok(1, 1);
    p2p_ok(2, 1);
    p2p_ok(4, 1);
    CHECK(is_accepted(4));
    CHECK(!kicked(3));
    at(MSM_WIRING_TIMEOUT_MS);
    CHECK(kicked(3));
    CHECK(strstr(kick_reason(3), "wiring") != NULL);
    CHECK(!kicked(1) && !kicked(2) && !kicked(4));
}

/* a member that never reports a round it wired in is kicked at the wiring deadline */
static void test_member_never_reports_wiring(void) {
    make_group(2);
    join(3);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    p2p_ok(1, 1);
    p2p_ok(3, 1);
    at(MSM_WIRING_TIMEOUT_MS - 1);
    CHECK(!kicked(2));
    at(MSM_WIRING_TIMEOUT_MS);
    CHECK(kicked(2) && !kicked(1) && !kicked(3));
    CHECK(last_to(1, M2C_TOPOLOGY_DONE) != NULL);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_vote_deadline);
    RUN_TEST(test_vote_deadline_collective);
    RUN_TEST(test_vote_deadline_from_opening);
    RUN_TEST(test_vote_deadline_disabled);
    RUN_TEST(test_report_deadline);
    RUN_TEST(test_newcomer_never_wires);
    RUN_TEST(test_member_never_reports_wiring);
    TEST_MAIN_END();
}
