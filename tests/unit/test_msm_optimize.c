/* test_msm_optimize.c - the master's pure state machine, operation kind by kind:
 * optimize topology: bandwidth probes, the solve, the re-wiring round and the background (moonshot) search. Driven event by event through the shared harness (msm_harness.h). */
#include "msm_harness.h"
#include "topology/topology_solver.h"


TT_FIXTURE(setup, teardown);

static void test_optimize_two_peers(void) {
    /* two peers: one ring exists, nothing to measure */
    make_group(2);
    pkt(1, C2M_OPTIMIZE_TOPOLOGY);
    CHECK_EQ_U64(total_sends(), 0);
    CHECK(strcmp(state_of(1), "vote_optimize") == 0);
    pkt(2, C2M_OPTIMIZE_TOPOLOGY);
    CHECK(last_to(1, M2C_OPTIMIZE_DONE) && last_to(1, M2C_OPTIMIZE_DONE)->u.flag.value == 1);
    CHECK(last_to(2, M2C_OPTIMIZE_DONE) && last_to(2, M2C_OPTIMIZE_DONE)->u.flag.value == 1);
    CHECK_EQ_U64(count_type(M2C_BENCH_REQUEST), 0);
}

/* Three peers' probes: peer 1 measures t1 at b1 Mbit/s, ... 1->2, 2->3, 3->1 are slow, the reverse is fast. */
static const uint64_t t1[] = {2, 3}, t2[] = {1, 3}, t3[] = {1, 2};
static const double b1[] = {100, 1000}, b2[] = {1000, 100}, b3[] = {100, 1000};

/* three peers: missing pairs are measured, the ring is solved and re-wired */
static void test_optimize_three_peers(void) {
    make_group(3); /* ring 1 -> 2 -> 3 -> 1 */
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    CHECK_EQ_U64(count_type(M2C_BENCH_REQUEST), 3);
    CHECK(last_to(1, M2C_BENCH_REQUEST) && last_to(1, M2C_BENCH_REQUEST)->u.bench_req.n == 2);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 0);
    /* the best ring is 1 -> 3 -> 2 -> 1 */
    bench_result(1, t1, b1, 2);
    bench_result(2, t2, b2, 2);
    CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P), 0);
    bench_result(3, t3, b3, 2);
    CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P), 3); /* ring changed: re-wire, no newcomers */
    uint64_t want[] = {1, 3, 2};
    check_establish_ring(1, want, 3);
    for (uint64_t c = 1; c <= 3; c++) p2p_ok(c, 1);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 3);
    CHECK(last_to(2, M2C_OPTIMIZE_DONE)->u.flag.value == 1);
    CHECK_EQ_U64(count_type(M2C_TOPOLOGY_DONE), 0);
    /* a second optimization measures nothing new and keeps the ring */
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    CHECK_EQ_U64(count_type(M2C_BENCH_REQUEST), 0);
    CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P), 0);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 3);
}

/* a failed probe fails the optimization for everyone; a retry measures the missing pair */
static void test_optimize_failed_probe(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    double bad[] = {0, 500}, ok2[] = {500, 500};
    bench_result(1, t1, bad, 2);
    bench_result(2, t2, ok2, 2);
    bench_result(3, t3, ok2, 2);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 3);
    CHECK(last_to(1, M2C_OPTIMIZE_DONE)->u.flag.value == 0);
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    CHECK_EQ_U64(count_type(M2C_BENCH_REQUEST), 1);
    CHECK(last_to(1, M2C_BENCH_REQUEST) && last_to(1, M2C_BENCH_REQUEST)->u.bench_req.n == 1);
}

/* a result without a request, or a NaN, is handled: kick / failure */
static void test_optimize_bad_results(void) {
    make_group(3);
    double nan_bw[] = {0.0 / 0.0, 1};
    bench_result(2, t2, nan_bw, 2);
    CHECK(kicked(2));
}

/* a departure during the measurements fails the optimization once the rest reported */
static void test_optimize_departure(void) {
    make_group(3);
    for (uint64_t c = 1; c <= 3; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    disconnect(3);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 0);
    bench_result(1, t1, b1, 2);
    bench_result(2, t2, b2, 2);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 2);
    CHECK(last_to(1, M2C_OPTIMIZE_DONE)->u.flag.value == 0);
}

/* 17 peers: beyond the exact solver, so the quick solve asks for a background search; its result is
 * adopted only for the same membership and only when better. */
static void moon_measure_all(int n, uint64_t seed) {
    for (int p = 1; p <= n; p++) {
        uint64_t to[32];
        double mbps[32];
        int k = 0;
        for (int q = 1; q <= n; q++) {
            if (q == p) continue;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            to[k] = (uint64_t)q;
            mbps[k++] = 100 + (double)(seed >> 40) / (double)(1ull << 24) * 900;
        }
        wire_msg_t m = {.type = C2M_BENCH_RESULT};
        wire_bw_t r[32];
        for (int i = 0; i < k; i++) {
            uuid_of(to[i], r[i].uuid);
            r[i].mbps = mbps[i];
        }
        m.u.bench_res.n = (uint32_t)k;
        m.u.bench_res.results = r;
        msm_on_packet(M, (uint64_t)p, &m);
    }
}

/* 12 peers: each measures its 8 nearest ring offsets, not its 11 pairs; the solve takes the pairs never measured as
 * no bandwidth and completes; the next optimization measures the 3 pairs each peer still misses. */
static void test_optimize_bounded_probes(void) {
    make_group(12); /* ring 1 -> 2 -> ... -> 12 -> 1 */
    for (uint64_t c = 1; c <= 12; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    CHECK_EQ_U64(count_type(M2C_BENCH_REQUEST), 12);
    for (uint64_t c = 1; c <= 12; c++) {
        const wire_msg_t *r = last_to(c, M2C_BENCH_REQUEST);
        CHECK(r && r->u.bench_req.n == 8);
        uint64_t to[8];
        double mbps[8];
        for (int k = 0; k < 8; k++) {
            to[k] = (c - 1 + (uint64_t)k + 1) % 12 + 1; /* ring offsets 1..8 */
            mbps[k] = 1000;
        }
        bench_result(c, to, mbps, 8);
    }
    /* A new ring (many tie) uses measured pairs only: each edge is one of the first ring's offsets 1..8. */
    const wire_msg_t *e = last_to(1, M2C_ESTABLISH_P2P);
    for (uint32_t i = 0; e && i < e->u.establish.n; i++) {
        unsigned a = e->u.establish.peers[i].ip.ipv4.data[3];
        unsigned b = e->u.establish.peers[(i + 1) % e->u.establish.n].ip.ipv4.data[3];
        unsigned offset = (b + 12 - a) % 12;
        CHECK(offset >= 1 && offset <= 8);
    }
    if (e)
        for (uint64_t c = 1; c <= 12; c++) p2p_ok(c, 1);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 12);
    CHECK(last_to(1, M2C_OPTIMIZE_DONE) && last_to(1, M2C_OPTIMIZE_DONE)->u.flag.value == 1);
    clear_log();
    for (uint64_t c = 1; c <= 12; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    CHECK_EQ_U64(count_type(M2C_BENCH_REQUEST), 12);
    CHECK(last_to(5, M2C_BENCH_REQUEST) && last_to(5, M2C_BENCH_REQUEST)->u.bench_req.n == 3);
}

static void test_moonshot(void) {
    const int n = 17;
    make_group(n);
    for (int c = 1; c <= n; c++) pkt((uint64_t)c, C2M_OPTIMIZE_TOPOLOGY);
    moon_measure_all(n, 7);
    for (int c = 1; c <= n; c++) p2p_ok((uint64_t)c, 1); /* the re-wiring round, if the ring changed */
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), (uint64_t)n);
    msm_moonshot_t req;
    int have = msm_take_moonshot(M, &req);
    CHECK(have == 1);
    if (have) {
        CHECK(req.n == n && req.conns && req.bw);
        msm_moonshot_t again;
        CHECK(msm_take_moonshot(M, &again) == 0); /* one request at a time */
        /* a result for an older membership is discarded: the next optimize keeps its ring */
        int order[32];
        for (int i = 0; i < n; i++) order[i] = (n - i) % n; /* reversed: almost surely worse */
        msm_on_moonshot_result(M, req.group, req.epoch + 1, req.conns, order, n);
        clear_log();
        for (int c = 1; c <= n; c++) pkt((uint64_t)c, C2M_OPTIMIZE_TOPOLOGY);
        CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P), 0); /* nothing new measured, same ring */
        CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), (uint64_t)n);
        /* a worse result of the same membership is not adopted either */
        msm_moonshot_t req2;
        if (msm_take_moonshot(M, &req2)) {
            msm_on_moonshot_result(M, req2.group, req2.epoch, req2.conns, order, n);
            clear_log();
            for (int c = 1; c <= n; c++) pkt((uint64_t)c, C2M_OPTIMIZE_TOPOLOGY);
            CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P), 0);
            free(req2.conns);
            free(req2.bw);
        }
        /* a long search of the same membership: adopted exactly when it beats the current ring */
        msm_moonshot_t req3;
        if (msm_take_moonshot(M, &req3)) {
            uint64_t cur[32];
            int cur_order[32], m3 = msm_group_ring(M, 0, cur, 32);
            for (int i = 0; i < m3; i++)
                for (int j = 0; j < n; j++)
                    if (req3.conns[j] == cur[i]) cur_order[i] = j;
            topo_solution_t longer = {0};
            CHECK(topo_solve(req3.bw, n, 1000, NULL, &longer) == 0);
            int better = topo_compare_values(longer.bottleneck_mbps, longer.total_time,
                                             topo_ring_bottleneck(req3.bw, n, cur_order),
                                             topo_ring_time(req3.bw, n, cur_order)) < 0;
            msm_on_moonshot_result(M, req3.group, req3.epoch, req3.conns, longer.order, n);
            clear_log();
            for (int c = 1; c <= n; c++) pkt((uint64_t)c, C2M_OPTIMIZE_TOPOLOGY);
            CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P) > 0, (uint64_t)better);
            fprintf(stderr, "  17 peers: background search %s the quick ring\n", better ? "beat" : "matched");
            topo_solution_free(&longer);
            free(req3.conns);
            free(req3.bw);
        }
        free(req.conns);
        free(req.bw);
    }
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* kicks log warnings by design */
    RUN_TEST(test_optimize_two_peers);
    RUN_TEST(test_optimize_three_peers);
    RUN_TEST(test_optimize_failed_probe);
    RUN_TEST(test_optimize_bad_results);
    RUN_TEST(test_optimize_departure);
    RUN_TEST(test_optimize_bounded_probes);
    RUN_TEST(test_moonshot);
    TEST_MAIN_END();
}
