/* test_msm_pipeline.c - the master's pure state machine, pipelined collectives (msm_grant.c, docs/protocol.md
 * "Pipelined collectives"): a steady state of one exchange with the master per operation, and every way a
 * grant ends (a changed vote, a parameter mismatch, a departure, a failed ring before or after every member
 * voted, a changed ring, a shortage of slots, a vote under a grant this master never made); a barrier ends at its
 * COMMENCE. */
#include "msm_harness.h"
#include "pccl_coll.h"

TT_FIXTURE(setup, teardown);

static void init_under(uint64_t conn, uint64_t tag, uint64_t count, uint64_t grant_seq) {
    coll_init_under(conn, tag, count, pcclFloat, grant_seq);
}

/* The grant the last COMPLETE of tag to conn carried: its op_seq (0: none); *next_tag its tag. */
static uint64_t grant_of(uint64_t conn, uint64_t tag, uint64_t *next_tag) {
    const wire_msg_t *c = end_of(conn, M2C_COLL_COMPLETE, tag);
    if (next_tag) *next_tag = c ? c->u.coll.next_tag : 0;
    return c ? c->u.coll.next_seq : 0;
}

/* conn got COLL_REVOKE for the grant seq of tag and no COLL_ABORT: it votes again, nothing failed. */
static void check_revoked(uint64_t conn, uint64_t tag, uint64_t seq) {
    const wire_msg_t *r = end_of(conn, M2C_COLL_REVOKE, tag);
    CHECK(r && r->u.coll.op_seq == seq);
    CHECK_EQ_U64(count_to(conn, M2C_COLL_ABORT), 0);
}

/* A plain operation of tag on members 1..n: vote, COMMENCE, every DONE; returns the grant COMPLETE carried. */
static uint64_t plain_op(int n, uint64_t tag) {
    for (uint64_t c = 1; c <= (uint64_t)n; c++) coll_init(c, tag);
    uint64_t seq = commenced_seq(1, tag);
    CHECK(seq != 0);
    for (uint64_t c = 1; c <= (uint64_t)n; c++) coll_done(c, tag, seq, 1);
    return grant_of(1, tag, NULL);
}

/* In the steady state an operation costs one exchange: each member sends its vote and its DONE and gets one
 * message, the COMPLETE that also pre-commences the next operation; no COMMENCE. */
static void test_steady_state_one_exchange(void) {
    make_group(3);
    uint64_t seq = plain_op(3, 7);
    CHECK(seq != 0);
    const wire_msg_t *c1 = end_of(1, M2C_COLL_COMPLETE, 7);
    CHECK(c1 && c1->u.coll.next_tag == 7 && c1->u.coll.slots == 1);
    for (int round = 0; round < 5; round++) {
        clear_log();
        for (uint64_t c = 1; c <= 3; c++) init_under(c, 7, 1000, seq);
        CHECK_EQ_U64(total_sends(), 0); /* the votes need no answer: the rings run */
        for (uint64_t c = 1; c <= 3; c++) coll_done(c, 7, seq, 1);
        for (uint64_t c = 1; c <= 3; c++) {
            CHECK_EQ_U64(sends_to(c), 1); /* one round trip: DONE -> COMPLETE */
            const wire_msg_t *m = end_of(c, M2C_COLL_COMPLETE, 7);
            CHECK(m && m->u.coll.ok == 1 && m->u.coll.op_seq == seq && m->u.coll.next_seq > seq);
        }
        uint64_t next = grant_of(1, 7, NULL);
        CHECK(next > seq);
        seq = next;
    }
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_completed, 6);
}

/* A DONE may reach the master before another member's vote under the grant: it counts once that vote arrives. */
static void test_done_before_last_vote(void) {
    make_group(2);
    uint64_t seq = plain_op(2, 3);
    clear_log();
    init_under(1, 3, 1000, seq);
    coll_done(1, 3, seq, 1);
    CHECK_EQ_U64(total_sends(), 0);
    init_under(2, 3, 1000, seq);
    coll_done(2, 3, seq, 1);
    CHECK(end_of(1, M2C_COLL_COMPLETE, 3) && end_of(2, M2C_COLL_COMPLETE, 3));
}

/* Callers that count tags up, one operation at a time, are granted the next tag. */
static void test_counting_tags(void) {
    make_group(2);
    plain_op(2, 10);
    clear_log();
    plain_op(2, 11);
    uint64_t next_tag = 0, seq = grant_of(2, 11, &next_tag);
    CHECK(seq != 0);
    CHECK_EQ_U64(next_tag, 12);
    clear_log();
    for (uint64_t c = 1; c <= 2; c++) init_under(c, 12, 1000, seq);
    CHECK_EQ_U64(total_sends(), 0);
    for (uint64_t c = 1; c <= 2; c++) coll_done(c, 12, seq, 1);
    CHECK(grant_of(1, 12, &next_tag) != 0 && next_tag == 13);
}

/* A member that changed its parameters votes plainly: the grant is revoked for everyone, the members that ran under
 * it vote again, and the mismatch is rejected on every member with the reason, as without a grant. */
static void test_mismatch_under_grant(void) {
    make_group(3);
    uint64_t seq = plain_op(3, 5);
    clear_log();
    init_under(1, 5, 1000, seq);
    init_under(2, 5, 1000, seq);
    coll_init_full(3, 5, 999, pcclFloat);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *r = end_of(c, M2C_COLL_REVOKE, 5);
        CHECK(r && r->u.coll.op_seq == seq);
    }
    CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 0);
    coll_init(1, 5);
    coll_init(2, 5);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *r = last_to(c, M2C_COLL_REJECT);
        CHECK(r && r->u.reject.reason == REJECT_PARAM_MISMATCH && strstr(r->u.reject.detail, "counts differ"));
    }
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    for (uint64_t c = 1; c <= 3; c++) CHECK(!kicked(c));
}

/* Once every member voted under the grant the operation runs: a failed ring aborts it on every member. */
static void test_abort_after_every_vote(void) {
    make_group(3);
    uint64_t seq = plain_op(3, 2);
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) init_under(c, 2, 1000, seq);
    coll_done(1, 2, seq, 1);
    coll_done(2, 2, seq, 0);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *a = end_of(c, M2C_COLL_ABORT, 2);
        CHECK(a && a->u.coll.op_seq == seq);
    }
    CHECK_EQ_U64(count_type(M2C_COLL_REVOKE), 0);
    CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), 0);
}

/* A ring that fails before every member voted (a member still computing, or a broken link) revokes the grant: the
 * members vote again and the plain vote waits for the late one; its vote under the revoked grant is dropped. */
static void test_failure_before_every_vote(void) {
    make_group(3);
    uint64_t seq = plain_op(3, 4);
    clear_log();
    init_under(1, 4, 1000, seq);
    init_under(2, 4, 1000, seq);
    coll_done(1, 4, seq, 0);
    for (uint64_t c = 1; c <= 3; c++) CHECK(end_of(c, M2C_COLL_REVOKE, 4) != NULL);
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT), 0);
    int before = nevs;
    init_under(3, 4, 1000, seq); /* sent before its REVOKE arrived */
    coll_done(2, 4, seq, 0);
    CHECK_EQ_U64(nevs, before);
    CHECK(!kicked(3) && !kicked(2));
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 4);
    uint64_t again = commenced_seq(3, 4);
    CHECK(again > seq);
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 4, again, 1);
    for (uint64_t c = 1; c <= 3; c++) CHECK(end_of(c, M2C_COLL_COMPLETE, 4) != NULL);
}

/* A voter's departure while members run under the grant aborts the operation for them, as in a commenced one (they
 * restore and retry); a member that had not voted yet loses its grant. */
static void test_departure_aborts(void) {
    make_group(4);
    uint64_t seq = plain_op(4, 9);
    clear_log();
    init_under(1, 9, 1000, seq);
    init_under(2, 9, 1000, seq);
    init_under(4, 9, 1000, seq);
    disconnect(4);
    for (uint64_t c = 1; c <= 2; c++) {
        const wire_msg_t *a = end_of(c, M2C_COLL_ABORT, 9);
        CHECK(a && a->u.coll.op_seq == seq);
        CHECK(end_of(c, M2C_COLL_REVOKE, 9) == NULL);
    }
    const wire_msg_t *r = end_of(3, M2C_COLL_REVOKE, 9);
    CHECK(r && r->u.coll.op_seq == seq);
    CHECK_EQ_U64(count_to(3, M2C_COLL_ABORT), 0);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_aborted, 1);
    disconnect(3);
    clear_log();
    coll_init(1, 9);
    coll_init(2, 9);
    const wire_msg_t *cm = commence_of(1, 9);
    CHECK(cm && cm->u.commence.n == 2 && cm->u.commence.slots == 1);
    /* an unused grant is revoked as well */
    uint64_t s2 = cm ? cm->u.commence.op_seq : 0;
    coll_done(1, 9, s2, 1);
    coll_done(2, 9, s2, 1);
    CHECK(grant_of(1, 9, NULL) != 0);
    clear_log();
    connect_(5);
    hello_g(5, 0, 1);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    pkt(2, C2M_UPDATE_TOPOLOGY);
    p2p_ok(1, 1);
    p2p_ok(2, 1);
    p2p_ok(5, 1);
    CHECK(is_accepted(5));
    for (uint64_t c = 1; c <= 2; c++) CHECK(end_of(c, M2C_COLL_REVOKE, 9) != NULL);
}

/* A holder that leaves before it voted under the grant leaves between operations: nothing is aborted; the members
 * that ran under it get COLL_REVOKE (they stop, restore and vote again) and the plain vote runs without it. */
static void test_departure_before_vote_revokes(void) {
    make_group(4);
    uint64_t seq = plain_op(4, 9);
    clear_log();
    init_under(1, 9, 1000, seq);
    init_under(2, 9, 1000, seq);
    disconnect(4);
    for (uint64_t c = 1; c <= 3; c++) check_revoked(c, 9, seq);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_aborted, 0);
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 9);
    const wire_msg_t *cm = commence_of(1, 9);
    CHECK(cm && cm->u.commence.n == 3);
    uint64_t s2 = cm ? cm->u.commence.op_seq : 0;
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 9, s2, 1);
    for (uint64_t c = 1; c <= 3; c++) CHECK(end_of(c, M2C_COLL_COMPLETE, 9) != NULL);
}

/* A LEAVE from a member that voted under the grant before every member did leaves between operations, as a plain
 * vote's voter does: it departs at once, nothing is aborted, the others get COLL_REVOKE and vote again without it.
 * Once every member voted (the op runs everywhere) a LEAVE waits for the verdict, as a commenced member's does. */
static void test_leave_under_grant(void) {
    make_group(3);
    uint64_t seq = plain_op(3, 9);
    clear_log();
    init_under(1, 9, 1000, seq);
    init_under(2, 9, 1000, seq);
    pkt(2, C2M_LEAVE);
    CHECK(ever_closed(2));
    for (uint64_t c = 1; c <= 3; c += 2) check_revoked(c, 9, seq);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_aborted, 0);
    CHECK_EQ_U64(st.peers_left, 1);
    clear_log();
    coll_init(1, 9);
    coll_init(3, 9);
    const wire_msg_t *cm = commence_of(1, 9);
    CHECK(cm && cm->u.commence.n == 2);
    uint64_t s2 = cm ? cm->u.commence.op_seq : 0;
    coll_done(1, 9, s2, 1);
    coll_done(3, 9, s2, 1);
    CHECK(end_of(1, M2C_COLL_COMPLETE, 9) != NULL);
    uint64_t g = grant_of(1, 9, NULL);
    CHECK(g != 0);
    /* every member voted under the next grant: the leave waits for the verdict */
    clear_log();
    init_under(1, 9, 1000, g);
    init_under(3, 9, 1000, g);
    pkt(3, C2M_LEAVE);
    CHECK(!ever_closed(3));
    coll_done(1, 9, g, 1);
    coll_done(3, 9, g, 1);
    for (uint64_t c = 1; c <= 3; c += 2) {
        const wire_msg_t *m = end_of(c, M2C_COLL_COMPLETE, 9);
        CHECK(m && m->u.coll.ok == 1 && m->u.coll.op_seq == g);
    }
    CHECK(ever_closed(3));
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_aborted, 0);
    CHECK_EQ_U64(st.peers_left, 2);
}

/* An operation of another tag that needs the slot of an unused grant gets it; the grant is revoked. */
static void test_slot_shortage_revokes(void) {
    make_group(2); /* pool of 1 */
    uint64_t seq = plain_op(2, 1);
    CHECK(seq != 0);
    clear_log();
    coll_init(1, 50);
    coll_init(2, 50);
    for (uint64_t c = 1; c <= 2; c++) CHECK(end_of(c, M2C_COLL_REVOKE, 1) != NULL);
    const wire_msg_t *cm = commence_of(1, 50);
    CHECK(cm && cm->u.commence.slots == 1);
}

/* Broadcasts are never granted: a chain finishes on its first members before the last one started. A vote
 * under a grant this master never made is a kick. */
static void test_not_granted(void) {
    make_group(2);
    for (uint64_t c = 1; c <= 2; c++) {
        wire_msg_t m = {.type = C2M_COLL_INIT};
        m.u.coll_init.tag = 6;
        m.u.coll_init.kind = pcclExtCollBroadcast;
        m.u.coll_init.dtype = pcclFloat;
        m.u.coll_init.count = m.u.coll_init.capacity = 100;
        m.u.coll_init.flags = c == 1 ? PCCL_EXT_COLL_ROOT : 0;
        msm_on_packet(M, c, &m);
    }
    uint64_t seq = commenced_seq(1, 6);
    CHECK(seq != 0);
    for (uint64_t c = 1; c <= 2; c++) coll_done(c, 6, seq, 1);
    CHECK(end_of(1, M2C_COLL_COMPLETE, 6) && grant_of(1, 6, NULL) == 0);
    init_under(1, 8, 1000, 1000000);
    CHECK(kicked(1));
}

/* A barrier is one round trip: complete at its COMMENCE (every member voted), with no report and no COMPLETE;
 * it moves nothing, so it does not wait for a connection slot another operation holds. */
static void test_barrier_ends_at_commence(void) {
    make_group(2); /* pool of 1: the all-reduce below holds the only slot */
    for (uint64_t c = 1; c <= 2; c++) coll_init(c, 1);
    uint64_t ar = commenced_seq(1, 1);
    CHECK(ar != 0);
    for (uint64_t c = 1; c <= 2; c++) {
        wire_msg_t m = {.type = C2M_COLL_INIT};
        m.u.coll_init.tag = 2;
        m.u.coll_init.kind = pcclExtCollBarrier;
        msm_on_packet(M, c, &m);
    }
    uint64_t bar = commenced_seq(1, 2);
    CHECK(bar != 0 && commenced_seq(2, 2) == bar);
    msm_op_view_t v[4];
    CHECK_EQ_U64(msm_op_views(M, v, 4), 1); /* the all-reduce alone */
    CHECK_EQ_U64(v[0].tag, 1);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.by_kind[pcclExtCollBarrier].completed, 1);
    CHECK_EQ_U64(st.collectives_completed, 1);
    coll_done(1, 2, bar, 1); /* a report from an older peer is ignored */
    CHECK(!kicked(1) && end_of(1, M2C_COLL_COMPLETE, 2) == NULL);
    for (uint64_t c = 1; c <= 2; c++) coll_done(c, 1, ar, 1);
    CHECK(end_of(2, M2C_COLL_COMPLETE, 1) != NULL);
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_completed, 2);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_steady_state_one_exchange);
    RUN_TEST(test_done_before_last_vote);
    RUN_TEST(test_counting_tags);
    RUN_TEST(test_mismatch_under_grant);
    RUN_TEST(test_abort_after_every_vote);
    RUN_TEST(test_failure_before_every_vote);
    RUN_TEST(test_departure_aborts);
    RUN_TEST(test_departure_before_vote_revokes);
    RUN_TEST(test_leave_under_grant);
    RUN_TEST(test_slot_shortage_revokes);
    RUN_TEST(test_not_granted);
    RUN_TEST(test_barrier_ends_at_commence);
    TEST_MAIN_END();
}
