/* test_msm_end_run.c - the master's pure state machine ending the run (msm_end_run: `pccl shutdown`,
 * `pccl master --on-signal end-run`): every connection, whatever its state, gets one SHUTDOWN with the
 * reason and is closed right after it; operations in flight end without a verdict (no abort, no
 * complete, no reject: the peers end every call with the run); the state machine forgets every peer,
 * so what those connections still deliver is ignored. Driven through the shared harness. */
#include "msm_harness.h"

TT_FIXTURE(setup, teardown);

/* conn's messages in the log: exactly one, SHUTDOWN with reason, then its close. */
static int told_then_closed(uint64_t conn, const char *reason) {
    int sends = 0, shutdown_at = -1, close_at = -1;
    for (int i = 0; i < nevs; i++) {
        if (evs[i].conn != conn) continue;
        if (evs[i].is_close) {
            close_at = i;
            continue;
        }
        sends++;
        if (evs[i].msg.type == M2C_SHUTDOWN && !strcmp(evs[i].msg.u.kick.reason, reason)) shutdown_at = i;
    }
    return sends == 1 && shutdown_at >= 0 && close_at > shutdown_at;
}

static void test_end_run_tells_everyone(void) {
    make_group(3);
    /* a collective running, peer 1's ring finished; a vote open on another tag; a newcomer; a stranger */
    coll_init(1, 7);
    coll_init(2, 7);
    coll_init(3, 7);
    uint64_t seq = commenced_seq(1, 7);
    CHECK(seq != 0);
    coll_done(1, 7, seq, 1);
    coll_init(1, 8);
    connect_(9);
    hello_g(9, 0, 1);
    connect_(10);
    clear_log();
    CHECK_EQ_U64(msm_end_run(M, "shutdown requested on the admin port"), 5);
    for (uint64_t c = 1; c <= 3; c++) CHECK(told_then_closed(c, "shutdown requested on the admin port"));
    CHECK(told_then_closed(9, "shutdown requested on the admin port"));
    CHECK(told_then_closed(10, "shutdown requested on the admin port"));
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT) + count_type(M2C_COLL_COMPLETE) + count_type(M2C_COLL_REJECT), 0);
    CHECK_EQ_U64(msm_peer_count(M), 0);

    /* what the closed connections still deliver reaches no peer: nothing is sent, nothing kicked */
    clear_log();
    coll_done(2, 7, seq, 1);
    pkt(2, C2M_HEARTBEAT);
    disconnect(3);
    tick_past_grace();
    CHECK_EQ_U64(total_sends(), 0);
}

static void test_end_run_without_peers(void) {
    CHECK_EQ_U64(msm_end_run(M, ""), 0);
    CHECK_EQ_U64(total_sends(), 0);
}

/* A shutdown reason longer than the wire's string is cut to fit, never refused. */
static void test_end_run_long_reason(void) {
    make_group(1);
    char reason[400];
    memset(reason, 'r', sizeof reason - 1);
    reason[sizeof reason - 1] = 0;
    clear_log();
    CHECK_EQ_U64(msm_end_run(M, reason), 1);
    const wire_msg_t *s = last_to(1, M2C_SHUTDOWN);
    CHECK(s && strlen(s->u.kick.reason) == 255);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_end_run_tells_everyone);
    RUN_TEST(test_end_run_without_peers);
    RUN_TEST(test_end_run_long_reason);
    TEST_MAIN_END();
}
