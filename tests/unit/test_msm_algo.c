/* test_msm_algo.c - the master's choice of algorithm (msm_algo.c, docs/algorithms.md): the cost model picks
 * recursive halving and doubling for 4 KiB at 8 peers and the ring for 16 MiB; COMMENCE carries the choice to
 * every member; a forced choice (PCCL_ALGO in COLL_INIT) is obeyed where the kind has it, and members that
 * force different ones are rejected on every member with the reason. */
#include "msm_harness.h"
#include "pccl_coll.h"
#include "sm/msm_algo.h"

TT_FIXTURE(setup, teardown);

static msm_algo_cost_t cost(double bytes, uint32_t world) {
    double beta = 8.0 / (MSM_ALGO_DEFAULT_MBPS * 1e6);
    return (msm_algo_cost_t){.bytes = bytes, .alpha = MSM_ALGO_ALPHA_S, .beta_ring = beta, .beta_rhd = beta,
                             .world = world};
}

static void test_model(void) {
    for (uint32_t n = 4; n <= 256; n *= 2) {
        msm_algo_cost_t small = cost(4096, n), large = cost(16 << 20, n);
        CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &small) == WIRE_ALGO_RHD);
        CHECK(msm_algo_rhd_s(&small) < msm_algo_ring_s(&small));
        /* the ring's 2 (N - 1) latencies outweigh the bandwidth term from 64 peers on */
        CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &large) ==
              (n <= 32 ? WIRE_ALGO_RING : WIRE_ALGO_RHD));
    }
    /* 2 log2 p + 2 latencies against 2 (N - 1): a world of 3 gains nothing, 5 and 9 do */
    msm_algo_cost_t three = cost(4096, 3), five = cost(4096, 5), nine = cost(4096, 9), two = cost(8, 2);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &three) == WIRE_ALGO_RING);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &five) == WIRE_ALGO_RHD);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &nine) == WIRE_ALGO_RHD);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &two) == WIRE_ALGO_RING);
    /* 20 ms latencies (the WAN emulation): 16 MiB at 16 peers is latency-bound too */
    msm_algo_cost_t wan = cost(16 << 20, 16);
    wan.alpha = 0.02;
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &wan) == WIRE_ALGO_RHD);
    /* forced choices; other kinds and quantized reduce-scatters stay on the ring */
    msm_algo_cost_t small = cost(4096, 8), large = cost(16 << 20, 8);
    CHECK(msm_algo_choose(1, WIRE_ALGO_RHD, &large) == WIRE_ALGO_RHD);
    CHECK(msm_algo_choose(1, WIRE_ALGO_RING, &small) == WIRE_ALGO_RING);
    CHECK(msm_algo_choose(0, WIRE_ALGO_RHD, &small) == WIRE_ALGO_RING);
    /* where rhd exists: all-reduces, quantized or not; plain reduce-scatters of power-of-two worlds ranked by
     * position */
    CHECK(msm_algo_has_rhd(pcclExtCollAllReduce, 0, 0, 1, 5) && msm_algo_has_rhd(pcclExtCollAllReduce, 1, 1, 1, 4));
    CHECK(msm_algo_has_rhd(pcclExtCollReduceScatter, 0, 1, 1, 8) && !msm_algo_has_rhd(pcclExtCollReduceScatter, 0, 1, 1, 6));
    CHECK(!msm_algo_has_rhd(pcclExtCollReduceScatter, 0, 0, 1, 8) && !msm_algo_has_rhd(pcclExtCollReduceScatter, 1, 1, 1, 8));
    CHECK(msm_algo_has_rhd(pcclExtCollAllGather, 0, 1, 1, 8) && msm_algo_has_rhd(pcclExtCollAllGatherV, 0, 1, 1, 4));
    CHECK(msm_algo_has_rhd(pcclExtCollAllGather, 0, 1, 1, 6) && !msm_algo_has_rhd(pcclExtCollAllGather, 0, 0, 1, 6));
    CHECK(!msm_algo_has_rhd(pcclExtCollBarrier, 0, 1, 1, 8));
    /* a broadcast has the binomial tree with one holder, whatever the world and ranks */
    CHECK(msm_algo_has_rhd(pcclExtCollBroadcast, 0, 0, 1, 7) && !msm_algo_has_rhd(pcclExtCollBroadcast, 0, 1, 2, 8));
    msm_algo_cost_t b_small = cost(4096, 16), b_large = cost(16 << 20, 16), b_three = cost(4096, 3);
    b_small.bcast = b_large.bcast = b_three.bcast = 1;
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &b_small) == WIRE_ALGO_RHD);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &b_large) == WIRE_ALGO_RING);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &b_three) == WIRE_ALGO_RING);
    CHECK(strcmp(msm_algo_name(WIRE_ALGO_RHD), "rhd") == 0 && strcmp(msm_algo_name(9), "unknown") == 0);
}

static void vote_kind(uint64_t conn, uint64_t tag, uint8_t kind, uint64_t count, uint8_t algo, uint8_t quant) {
    wire_msg_t m = {.type = C2M_COLL_INIT};
    m.u.coll_init.kind = kind;
    m.u.coll_init.capacity = kind == pcclExtCollAllReduce ? 0 : count * 64; /* room for an all-gather too */
    m.u.coll_init.tag = tag;
    m.u.coll_init.count = count;
    m.u.coll_init.dtype = pcclFloat;
    m.u.coll_init.op = pcclSum;
    m.u.coll_init.algo = algo;
    m.u.coll_init.quant_algo = quant;
    m.u.coll_init.quant_dtype = quant ? pcclUint8 : 0;
    msm_on_packet(M, conn, &m);
}

static void vote(uint64_t conn, uint64_t tag, uint64_t count, uint8_t algo, uint8_t quant) {
    vote_kind(conn, tag, pcclExtCollAllReduce, count, algo, quant);
}

/* Every member's COMMENCE of tag carries algo (and rhd one slot). */
static void check_commenced(int n, uint64_t tag, uint8_t algo) {
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), n);
    for (int c = 1; c <= n; c++) {
        const wire_msg_t *m = commence_of((uint64_t)c, tag);
        CHECK(m && m->u.commence.algo == algo);
        if (m && algo == WIRE_ALGO_RHD) CHECK_EQ_U64(__builtin_popcountll(m->u.commence.slots), 1);
    }
}

static void run_kind(int n, uint64_t tag, uint8_t kind, uint64_t count, uint8_t algo, uint8_t quant, uint8_t expect) {
    clear_log();
    for (int c = 1; c <= n; c++) vote_kind((uint64_t)c, tag, kind, count, algo, quant);
    check_commenced(n, tag, expect);
    uint64_t seq = commenced_seq(1, tag);
    for (int c = 1; c <= n; c++) coll_done((uint64_t)c, tag, seq, 1);
}

static void run(int n, uint64_t tag, uint64_t count, uint8_t algo, uint8_t quant, uint8_t expect) {
    run_kind(n, tag, pcclExtCollAllReduce, count, algo, quant, expect);
}

/* A reduce-scatter and an all-gather have recursive halving or doubling in a power-of-two world ranked by ring
 * position only. */
static void test_reduce_scatter(void) {
    make_group(4);
    run_kind(4, 1, pcclExtCollReduceScatter, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);
    run_kind(4, 2, pcclExtCollReduceScatter, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    run_kind(4, 3, pcclExtCollReduceScatter, 1024, WIRE_ALGO_RHD, pcclQuantMinMax, WIRE_ALGO_RING);
    run_kind(4, 4, pcclExtCollAllGather, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);
    run_kind(4, 5, pcclExtCollAllGather, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);
    restart();
    make_group(3);
    run_kind(3, 1, pcclExtCollReduceScatter, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RING);
    run_kind(3, 2, pcclExtCollAllGather, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD); /* folds */
}

static void test_auto_by_size(void) {
    make_group(8);
    run(8, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);          /* 4 KiB */
    run(8, 2, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);     /* 16 MiB */
    run(8, 3, 4u << 20, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);       /* forced */
    run(8, 4, 1024, WIRE_ALGO_RING, 0, WIRE_ALGO_RING);         /* forced */
    run(8, 5, 1024, WIRE_ALGO_RHD, pcclQuantMinMax, WIRE_ALGO_RHD);  /* quantized: forced */
    run(8, 6, 1024, WIRE_ALGO_AUTO, pcclQuantMinMax, WIRE_ALGO_RHD); /* quantized: by size */
}

static void test_auto_small_world(void) {
    make_group(3);
    run(3, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    run(3, 2, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);
}

/* An rhd all-reduce, quantized or not, stripes over the pool as the ring does; an rhd reduce-scatter gets one
 * slot. */
static void test_rhd_stripes(void) {
    make_group_ex(1, 4, 0, 4);
    msm_set_stripe(M, 1u << 20, 1);
    for (uint8_t quant = 0; quant <= pcclQuantMinMax; quant += pcclQuantMinMax) {
        clear_log();
        for (uint64_t c = 1; c <= 4; c++) vote_kind(c, 10 + quant, pcclExtCollAllReduce, 4u << 20, WIRE_ALGO_RHD, quant);
        const wire_msg_t *m = commence_of(1, 10 + quant);
        CHECK(m && m->u.commence.algo == WIRE_ALGO_RHD && __builtin_popcountll(m->u.commence.slots) == 4);
        uint64_t seq = commenced_seq(1, 10 + quant);
        for (uint64_t c = 1; c <= 4; c++) coll_done(c, 10 + quant, seq, 1);
    }
    clear_log();
    for (uint64_t c = 1; c <= 4; c++) vote_kind(c, 20, pcclExtCollReduceScatter, 4u << 20, WIRE_ALGO_RHD, 0);
    const wire_msg_t *r = commence_of(1, 20);
    CHECK(r && r->u.commence.algo == WIRE_ALGO_RHD && __builtin_popcountll(r->u.commence.slots) == 1);
}

static void test_forced_mismatch_rejected(void) {
    make_group(4);
    clear_log();
    vote(1, 9, 1024, WIRE_ALGO_RHD, 0);
    vote(2, 9, 1024, WIRE_ALGO_RHD, 0);
    vote(3, 9, 1024, WIRE_ALGO_RING, 0);
    vote(4, 9, 1024, WIRE_ALGO_RHD, 0);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    for (uint64_t c = 1; c <= 4; c++) {
        const wire_msg_t *r = last_to(c, M2C_COLL_REJECT);
        CHECK(r && r->u.reject.reason == REJECT_PARAM_MISMATCH && strstr(r->u.reject.detail, "algorithms differ") &&
              strstr(r->u.reject.detail, "PCCL_ALGO=rhd") && strstr(r->u.reject.detail, "ring"));
    }
    clear_log();
    for (uint64_t c = 1; c <= 4; c++) vote(c, 9, 1024, 7, 0); /* no such algorithm */
    const wire_msg_t *r = last_to(1, M2C_COLL_REJECT);
    CHECK(r && strstr(r->u.reject.detail, "unknown algorithm 7"));
}

int main(void) {
    RUN_TEST(test_model);
    RUN_TEST(test_auto_by_size);
    RUN_TEST(test_auto_small_world);
    RUN_TEST(test_forced_mismatch_rejected);
    RUN_TEST(test_reduce_scatter);
    RUN_TEST(test_rhd_stripes);
    TEST_MAIN_END();
}
