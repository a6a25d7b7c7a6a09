/* test_msm_collective.c - the master's pure state machine, operation kind by kind:
 * collectives: commence, reject, slots, stripes, complete, abort, stale DONE, departures and conflicts with other operations. Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

static void test_coll_basic(void) {
    make_group(3);
    coll_init(1, 7);
    coll_init(2, 7);
    CHECK_EQ_U64(total_sends(), 0);
    coll_init(3, 7);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 3);
    uint64_t seq = commenced_seq(1, 7);
    CHECK(seq != 0);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *m = commence_of(c, 7);
        CHECK(m != NULL);
        if (!m) continue;
        CHECK_EQ_U64(m->u.commence.op_seq, seq);
        CHECK_EQ_U64(m->u.commence.slots, 1);
        CHECK_EQ_U64(m->u.commence.n, 3);
        for (uint32_t i = 0; i < m->u.commence.n; i++) CHECK(is_uuid_of(m->u.commence.ring[i], i + 1));
        check_world(&m->u.commence.world, 3, 3, 1, 3);
    }
    coll_done(1, 7, seq, 1);
    coll_done(2, 7, seq, 1);
    CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), 0);
    coll_done(3, 7, seq, 1);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *m = end_of(c, M2C_COLL_COMPLETE, 7);
        CHECK(m && m->u.coll.ok == 1 && m->u.coll.op_seq == seq);
    }
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT), 0);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_completed, 1);

    /* the same tag again: a new op_seq; one failure aborts everyone */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 7);
    uint64_t seq2 = commenced_seq(2, 7);
    CHECK(seq2 > seq);
    coll_done(1, 7, seq2, 1);
    coll_done(2, 7, seq2, 0);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *m = end_of(c, M2C_COLL_ABORT, 7);
        CHECK(m && m->u.coll.ok == 0 && m->u.coll.op_seq == seq2);
    }
    CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), 0);
    /* the late DONE of the aborted attempt is ignored */
    int before = nevs;
    coll_done(3, 7, seq2, 1);
    CHECK_EQ_U64(nevs, before);
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_aborted, 1);

    /* retry; a stale DONE carrying the old op_seq does not count and kicks nobody */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 7);
    uint64_t seq3 = commenced_seq(3, 7);
    CHECK(seq3 > seq2);
    coll_done(1, 7, seq2, 0);
    coll_done(2, 7, seq2, 1);
    coll_done(3, 7, 999999, 1);
    coll_done(3, 12345, seq3, 1); /* unknown tag */
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT) + count_type(M2C_COLL_COMPLETE) + count_type(M2C_KICK), 0);
    CHECK(!closed_in_log(1) && !closed_in_log(2) && !closed_in_log(3));
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 7, seq3, 1);
    CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), 3);

    /* a COLL_INIT for a tag this peer already started kicks it */
    clear_log();
    coll_init(1, 8);
    coll_init(1, 8);
    CHECK(kicked(1));
    /* and the remaining two run tag 8 without it */
    coll_init(2, 8);
    coll_init(3, 8);
    const wire_msg_t *m = commence_of(2, 8);
    CHECK(m && m->u.commence.n == 2);
}

static void test_coll_reject(void) {
    make_group(3);
    coll_init_full(1, 9, 100, pcclFloat);
    coll_init_full(2, 9, 100, pcclFloat);
    coll_init_full(3, 9, 101, pcclFloat);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    for (uint64_t c = 1; c <= 3; c++) {
        const wire_msg_t *r = last_to(c, M2C_COLL_REJECT);
        CHECK(r && r->u.reject.tag == 9 && r->u.reject.reason == REJECT_PARAM_MISMATCH);
    }
    /* the tag is free again; a dtype mismatch is rejected the same way */
    clear_log();
    coll_init_full(1, 9, 100, pcclFloat);
    coll_init_full(2, 9, 100, pcclDouble);
    coll_init_full(3, 9, 100, pcclFloat);
    CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 3);
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) coll_init_full(c, 9, 100, pcclFloat);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 3);
}

/* a group of one */
static void test_coll_reject_group_of_one(void) {
    make_group(1);
    coll_init(1, 3);
    const wire_msg_t *r = last_to(1, M2C_COLL_REJECT);
    CHECK(r && r->u.reject.tag == 3 && r->u.reject.reason == REJECT_TOO_FEW_PEERS);
}

/* a group that shrinks to one while voting */
static void test_coll_reject_group_shrinks_to_one(void) {
    make_group(2);
    coll_init(1, 3);
    disconnect(2);
    const wire_msg_t *r = last_to(1, M2C_COLL_REJECT);
    CHECK(r && r->u.reject.reason == REJECT_TOO_FEW_PEERS);
}

static void test_coll_slots(void) {
    make_group_ex(1, 3, 0, 2);
    for (uint64_t c = 1; c <= 3; c++) {
        coll_init(c, 10);
        coll_init(c, 11);
    }
    const wire_msg_t *a = commence_of(1, 10), *b = commence_of(1, 11);
    CHECK(a && b);
    if (a && b) {
        CHECK_EQ_U64(a->u.commence.slots, 1);
        CHECK_EQ_U64(b->u.commence.slots, 2);
        CHECK(a->u.commence.op_seq != b->u.commence.op_seq);
    }
    uint64_t sa = commenced_seq(1, 10), sb = commenced_seq(1, 11);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 12);
    CHECK(commence_of(1, 12) == NULL); /* both slots busy */
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 6);
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 10, sa, 1);
    CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), 3);
    const wire_msg_t *cc = commence_of(2, 12);
    CHECK(cc && cc->u.commence.slots == 1);
    /* an abort frees a slot as well */
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 13);
    CHECK(commence_of(1, 13) == NULL);
    coll_done(2, 11, sb, 0);
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT), 3);
    const wire_msg_t *d = commence_of(3, 13);
    CHECK(d && d->u.commence.slots == 2);
}

/* the pool is the smallest of the group */
static void test_coll_slots_smallest_pool(void) {
    connect_(1);
    hello_g(1, 0, 4);
    p2p_ok(1, 1);
    connect_(2);
    hello_g(2, 0, 1);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    p2p_ok(1, 1);
    p2p_ok(2, 1);
    clear_log();
    for (uint64_t c = 1; c <= 2; c++) {
        coll_init(c, 1);
        coll_init(c, 2);
    }
    CHECK(commence_of(1, 1) != NULL);
    CHECK(commence_of(1, 2) == NULL);
}

/* conns 1..3 in one group with a pool of 8, all voting tag with count floats */
static void vote_all(uint64_t tag, uint64_t count) {
    for (uint64_t c = 1; c <= 3; c++) coll_init_full(c, tag, count, pcclFloat);
}

static const uint64_t MiB_floats = (1u << 20) / 4;

/* An op alone on a pool of 8 takes all 8 slots; the next one waits for them. */
static void test_coll_stripes(void) {
    make_group_ex(1, 3, 0, 8);
    vote_all(20, 64 * MiB_floats);
    const wire_msg_t *a = commence_of(2, 20);
    CHECK(a && a->u.commence.slots == 0xff);
    uint64_t sa = commenced_seq(1, 20);
    vote_all(21, 64 * MiB_floats);
    CHECK(commence_of(1, 21) == NULL);
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 20, sa, 1);
    const wire_msg_t *b = commence_of(3, 21);
    CHECK(b && b->u.commence.slots == 0xff);
}

/* ops voting at once share the free slots; small ops get one stripe per MiB at most */
static void test_coll_stripes_shared(void) {
    make_group_ex(1, 3, 0, 8);
    coll_init_full(1, 30, 64 * MiB_floats, pcclFloat);
    coll_init_full(1, 31, 64 * MiB_floats, pcclFloat);
    for (uint64_t c = 2; c <= 3; c++) coll_init_full(c, 30, 64 * MiB_floats, pcclFloat);
    const wire_msg_t *a = commence_of(1, 30);
    CHECK(a && a->u.commence.slots == 0x0f); /* tag 31 is still voting: half each */
    for (uint64_t c = 2; c <= 3; c++) coll_init_full(c, 31, 64 * MiB_floats, pcclFloat);
    const wire_msg_t *b = commence_of(1, 31);
    CHECK(b && b->u.commence.slots == 0xf0);
    vote_all(32, 3 * MiB_floats);
    CHECK(commence_of(1, 32) == NULL); /* every slot is busy */
    uint64_t s31 = commenced_seq(1, 31);
    for (uint64_t c = 1; c <= 3; c++) coll_done(c, 31, s31, 1);
    const wire_msg_t *d = commence_of(1, 32);
    CHECK(d && d->u.commence.slots == 0x70); /* 3 MiB: three stripes */
    vote_all(33, 1000);
    const wire_msg_t *e = commence_of(1, 33);
    CHECK(e && e->u.commence.slots == 0x80);
}

/* A ring within one host is not striped unless asked, and the minimum size is configurable. */
static void test_coll_stripes_local_ring(void) {
    for (int local = 0; local <= 1; local++) {
        restart();
        msm_set_stripe(M, 2u << 20, local);
        for (uint64_t c = 1; c <= 2; c++) {
            const ccoip_inet_address_t ip = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}};
            uint8_t n[32];
            nonce_of(c, n);
            msm_on_connect(M, c, &ip, &ip, n);
            hello_g(c, 0, 8);
            if (c == 1) p2p_ok(1, 1);
        }
        pkt(1, C2M_UPDATE_TOPOLOGY);
        for (uint64_t c = 1; c <= 2; c++) p2p_ok(c, 1);
        CHECK(is_accepted(2));
        for (uint64_t c = 1; c <= 2; c++) coll_init_full(c, 40, 8 * MiB_floats, pcclFloat);
        const wire_msg_t *f = commence_of(1, 40);
        CHECK(f && f->u.commence.slots == (local ? 0x0fu : 0x01u));
    }
}

static void test_coll_departure(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) coll_init(c, 4);
    uint64_t seq = commenced_seq(1, 4);
    coll_done(1, 4, seq, 1);
    disconnect(2);
    CHECK(end_of(1, M2C_COLL_ABORT, 4) != NULL);
    CHECK(end_of(3, M2C_COLL_ABORT, 4) != NULL);
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT), 2);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_aborted, 1);
    /* the group shrinks to one during a vote: too few peers */
    clear_log();
    join(9); /* registered only: not part of the group */
    coll_init(1, 5);
    disconnect(3);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    const wire_msg_t *r = last_to(1, M2C_COLL_REJECT);
    CHECK(r && r->u.reject.tag == 5 && r->u.reject.reason == REJECT_TOO_FEW_PEERS);
    CHECK_EQ_U64(sends_to(9), 2); /* only its CHALLENGE and WELCOME */
    CHECK_EQ_U64(count_to(9, M2C_CHALLENGE) + count_to(9, M2C_WELCOME), 2);
}

/* a departure during the vote commences the rest */
static void test_coll_departure_during_vote(void) {
    make_group(3);
    coll_init(1, 5);
    coll_init(2, 5);
    disconnect(3);
    const wire_msg_t *c1 = commence_of(1, 5), *c2 = commence_of(2, 5);
    CHECK(c1 && c2 && c1->u.commence.n == 2 && c2->u.commence.op_seq == c1->u.commence.op_seq);
}

static void test_update_then_coll(void) {
    make_group(2);
    pkt(1, C2M_UPDATE_TOPOLOGY);
    coll_init(1, 1); /* while voting UPDATE_TOPOLOGY */
    CHECK(kicked(1));
    CHECK(!closed_in_log(2));
}

static void test_coll_then_update(void) {
    make_group(2);
    coll_init(1, 1);
    pkt(1, C2M_UPDATE_TOPOLOGY); /* while in a collective */
    CHECK(kicked(1));
    CHECK(!closed_in_log(2));
}

static void test_sync_then_coll(void) {
    make_group(2);
    wire_tensor_t t = {.key = "w", .dtype = pcclFloat, .count = 4, .hash = 1};
    sync_vote(1, 1, 0, &t, 1);
    coll_init(1, 1); /* while syncing */
    CHECK(kicked(1));
}

static void test_coll_then_sync(void) {
    make_group(2);
    coll_init(1, 1);
    wire_tensor_t t = {.key = "w", .dtype = pcclFloat, .count = 4, .hash = 1};
    sync_vote(1, 1, 0, &t, 1); /* sync while in a collective */
    CHECK(kicked(1));
}

/* /v1/status reads the records: kind, scope, phase, members and start time; members read "collective". */
static void test_coll_views(void) {
    make_group(2);
    msm_set_time(M, 5000);
    coll_init(1, 7);
    msm_op_view_t v[4];
    CHECK_EQ_U64(msm_op_views(M, v, 4), 1);
    CHECK(strcmp(v[0].kind, "collective") == 0 && v[0].group == 0 && v[0].tag == 7 && !v[0].running);
    CHECK_EQ_U64(v[0].members, 1);
    CHECK_EQ_U64(v[0].started_ms, 5000);
    CHECK(strcmp(state_of(1), "collective") == 0 && strcmp(state_of(2), "idle") == 0);
    msm_set_time(M, 6000);
    coll_init(2, 7);
    CHECK_EQ_U64(msm_op_views(M, v, 4), 1);
    CHECK(v[0].running && v[0].op_seq == commenced_seq(1, 7));
    CHECK_EQ_U64(v[0].started_ms, 5000); /* the vote's start: one record from vote to end */
    uint64_t conns[4];
    CHECK_EQ_U64(msm_op_view_members(M, 0, conns, 4), 2);
    CHECK((conns[0] == 1 && conns[1] == 2) || (conns[0] == 2 && conns[1] == 1));
    CHECK(msm_op_view_members(M, 1, conns, 4) == -PERR_INVALID);
    CHECK(strcmp(state_of(2), "collective") == 0);
    coll_done(1, 7, commenced_seq(1, 7), 1);
    coll_done(2, 7, commenced_seq(1, 7), 1);
    CHECK_EQ_U64(msm_op_views(M, v, 4), 0);
    CHECK(strcmp(state_of(1), "idle") == 0);
}

/* Sorted conns the index-th operation waits on, into w[8]; their number. */
static int waiting(int index, uint64_t *w) {
    int n = msm_op_view_waiting(M, index, w, 8);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && w[j - 1] > w[j]; j--) {
            uint64_t t = w[j];
            w[j] = w[j - 1];
            w[j - 1] = t;
        }
    return n;
}

/* The peers an operation waits on (what `pccl status` names in a stall): the group's peers whose vote is missing
 * while it votes, the members that owe their report while it runs; a run-wide vote waits on accepted peers. */
static void test_coll_waiting(void) {
    make_group(3);
    uint64_t w[8];
    CHECK(msm_op_view_waiting(M, 0, w, 8) == -PERR_INVALID);
    coll_init(1, 7);
    CHECK_EQ_U64(waiting(0, w), 2);
    CHECK(w[0] == 2 && w[1] == 3);
    coll_init(3, 7);
    CHECK_EQ_U64(waiting(0, w), 1);
    CHECK(w[0] == 2);
    coll_init(2, 7); /* every vote in: it runs, and every member owes its report */
    CHECK_EQ_U64(waiting(0, w), 3);
    uint64_t seq = commenced_seq(1, 7);
    coll_done(2, 7, seq, 1);
    CHECK_EQ_U64(waiting(0, w), 2);
    CHECK(w[0] == 1 && w[1] == 3);
    CHECK_EQ_U64(msm_op_view_waiting(M, 0, w, 1), 2); /* the count, even past max */
    coll_done(1, 7, seq, 1);
    coll_done(3, 7, seq, 1);
    CHECK_EQ_U64(msm_op_views(M, NULL, 0), 0);
    pkt(2, C2M_UPDATE_TOPOLOGY); /* a run-wide vote */
    msm_op_view_t v[2];
    CHECK_EQ_U64(msm_op_views(M, v, 2), 1);
    CHECK(strcmp(v[0].kind, "update_topology") == 0 && v[0].group == MSM_RUN_WIDE);
    CHECK_EQ_U64(waiting(0, w), 2);
    CHECK(w[0] == 1 && w[1] == 3);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_coll_basic);
    RUN_TEST(test_coll_reject);
    RUN_TEST(test_coll_reject_group_of_one);
    RUN_TEST(test_coll_reject_group_shrinks_to_one);
    RUN_TEST(test_coll_slots);
    RUN_TEST(test_coll_slots_smallest_pool);
    RUN_TEST(test_coll_stripes);
    RUN_TEST(test_coll_stripes_shared);
    RUN_TEST(test_coll_stripes_local_ring);
    RUN_TEST(test_coll_departure);
    RUN_TEST(test_coll_departure_during_vote);
    RUN_TEST(test_update_then_coll);
    RUN_TEST(test_coll_then_update);
    RUN_TEST(test_sync_then_coll);
    RUN_TEST(test_coll_then_sync);
    RUN_TEST(test_coll_views);
    RUN_TEST(test_coll_waiting);
    TEST_MAIN_END();
}
