/* test_msm_algo.c - the master's choice of algorithm (msm_algo.c, docs/algorithms.md): the cost model picks
 * recursive doubling for 4 KiB at 8 peers (recursive halving and doubling where rd does not exist) and the ring
 * for 16 MiB; COMMENCE carries the choice to every member; a forced choice (PCCL_ALGO in COLL_INIT) is obeyed where the kind has it, and members that
 * force different ones are rejected on every member with the reason. The round trips the bandwidth probes
 * measured set the latency: the crossover moves to larger payloads as it grows, the ring's edges set the ring's,
 * the slowest pair the partners'. */
#include <math.h>

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
    /* where rhd exists: all-reduces, quantized or not; plain reduce-scatters of any world ranked by position (3, 5,
     * 6 and 7 fold) */
    CHECK(msm_algo_has_rhd(pcclExtCollAllReduce, 0, 0, 1, 5) && msm_algo_has_rhd(pcclExtCollAllReduce, 1, 1, 1, 4));
    for (uint32_t w = 2; w <= 9; w++) CHECK(msm_algo_has_rhd(pcclExtCollReduceScatter, 0, 1, 1, w));
    CHECK(!msm_algo_has_rhd(pcclExtCollReduceScatter, 0, 1, 1, 1));
    CHECK(!msm_algo_has_rhd(pcclExtCollReduceScatter, 1, 1, 1, 6)); /* quantized */
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

/* A reduce-scatter or an all-gather costs each algorithm half its all-reduce in a power-of-two world; where the
 * world folds, rhd pays two more latencies and the whole vector once more: 4 KiB in a world of 3 or 5 (the ring's
 * 2 and 4 hops against rhd's 3 and 4) stays on the ring, 6, 7 and 12 run rhd; 16 MiB stays on the ring. */
static void test_model_half(void) {
    for (uint32_t n = 4; n <= 64; n *= 2) {
        msm_algo_cost_t full = cost(4096, n), half = full;
        half.half = 1;
        CHECK(fabs(msm_algo_ring_s(&half) * 2 - msm_algo_ring_s(&full)) < 1e-12);
        CHECK(fabs(msm_algo_rhd_s(&half) * 2 - msm_algo_rhd_s(&full)) < 1e-12);
    }
    const uint32_t worlds[] = {3, 5, 6, 7, 12};
    const uint8_t small[] = {WIRE_ALGO_RING, WIRE_ALGO_RING, WIRE_ALGO_RHD, WIRE_ALGO_RHD, WIRE_ALGO_RHD};
    for (int i = 0; i < 5; i++) {
        msm_algo_cost_t s = cost(4096, worlds[i]), l = cost(16 << 20, worlds[i]), fold = cost(16 << 20, worlds[i]);
        s.half = l.half = 1;
        CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &s) == small[i]);
        CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &l) == WIRE_ALGO_RING);
        /* the fold's whole vector: more than half the all-reduce's rhd time */
        CHECK(msm_algo_rhd_s(&l) * 2 > msm_algo_rhd_s(&fold));
    }
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

/* Every member's COMMENCE of tag carries algo (and rhd or rd one slot). */
static void check_commenced(int n, uint64_t tag, uint8_t algo) {
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), n);
    for (int c = 1; c <= n; c++) {
        const wire_msg_t *m = commence_of((uint64_t)c, tag);
        CHECK(m && m->u.commence.algo == algo);
        if (m && (algo == WIRE_ALGO_RHD || algo == WIRE_ALGO_RD)) CHECK_EQ_U64(__builtin_popcountll(m->u.commence.slots), 1);
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

/* A reduce-scatter and an all-gather have recursive halving or doubling in a world of any size ranked by ring
 * position; the model chooses by size and world. */
static void test_reduce_scatter(void) {
    make_group(4);
    run_kind(4, 1, pcclExtCollReduceScatter, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);
    run_kind(4, 2, pcclExtCollReduceScatter, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    run_kind(4, 3, pcclExtCollReduceScatter, 1024, WIRE_ALGO_RHD, pcclQuantMinMax, WIRE_ALGO_RING);
    run_kind(4, 4, pcclExtCollAllGather, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);
    run_kind(4, 5, pcclExtCollAllGather, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);
    restart();
    make_group(3);
    run_kind(3, 1, pcclExtCollReduceScatter, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD); /* folds */
    run_kind(3, 2, pcclExtCollAllGather, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);     /* folds */
    run_kind(3, 3, pcclExtCollReduceScatter, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING); /* no hop saved */
    restart();
    make_group(6);
    run_kind(6, 1, pcclExtCollReduceScatter, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);
    run_kind(6, 2, pcclExtCollReduceScatter, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
}

static void test_auto_by_size(void) {
    make_group(8);
    run(8, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RD);           /* 4 KiB */
    run(8, 2, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);     /* 16 MiB */
    run(8, 3, 4u << 20, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);       /* forced */
    run(8, 4, 1024, WIRE_ALGO_RING, 0, WIRE_ALGO_RING);         /* forced */
    run(8, 5, 1024, WIRE_ALGO_RHD, pcclQuantMinMax, WIRE_ALGO_RHD);  /* quantized: forced */
    run(8, 6, 1024, WIRE_ALGO_AUTO, pcclQuantMinMax, WIRE_ALGO_RD); /* quantized: by size */
    run(8, 7, 1024, WIRE_ALGO_RD, pcclQuantMinMax, WIRE_ALGO_RD);   /* quantized: forced */
}

static void test_auto_small_world(void) {
    make_group(3);
    run(3, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RD); /* fold, 1 step, unfold: 3 hops against the ring's 4 */
    run(3, 2, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD);
}

/* An rhd all-reduce, quantized or not, stripes over the pool as the ring does, and so do an rhd reduce-scatter, an
 * all-gather and a tree broadcast. */
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
    const uint8_t kinds[] = {pcclExtCollReduceScatter, pcclExtCollAllGather};
    for (int i = 0; i < 2; i++) {
        clear_log();
        for (uint64_t c = 1; c <= 4; c++) vote_kind(c, 20 + i, kinds[i], 4u << 20, WIRE_ALGO_RHD, 0);
        const wire_msg_t *r = commence_of(1, 20 + i);
        CHECK(r && r->u.commence.algo == WIRE_ALGO_RHD && __builtin_popcountll(r->u.commence.slots) == 4);
        uint64_t seq = commenced_seq(1, 20 + i);
        for (uint64_t c = 1; c <= 4; c++) coll_done(c, 20 + i, seq, 1);
    }
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

/* The largest payload (a power of two) for which the model picks rhd at world peers over 1 Gbit/s links whose
 * round trips are ring_rtt (the ring's edges) and max_rtt (the slowest pair), microseconds. */
static double crossover(uint32_t world, double ring_rtt, double max_rtt) {
    msm_algo_links_t l = {.slowest_mbps = 1000, .ring_rtt_us = ring_rtt, .max_rtt_us = max_rtt};
    double last = 0;
    for (uint64_t b = 1; b <= (1ull << 40); b *= 2) {
        msm_algo_cost_t c = msm_algo_cost_of(&l, b, world, 0);
        if (msm_algo_choose(1, WIRE_ALGO_AUTO, &c) == WIRE_ALGO_RHD) last = (double)b;
    }
    return last;
}

static void test_model_latency(void) {
    /* nothing measured: the defaults */
    msm_algo_links_t none = {0};
    msm_algo_cost_t d = msm_algo_cost_of(&none, 4096, 8, 0);
    CHECK(d.alpha == MSM_ALGO_ALPHA_S && d.alpha_rhd == MSM_ALGO_ALPHA_S);
    CHECK(d.beta_ring == 8.0 / (MSM_ALGO_DEFAULT_MBPS * 1e6) && d.beta_rhd == d.beta_ring);
    /* half a round trip per message; the ring's from its edges, the partners' from the slowest pair */
    msm_algo_links_t l = {.slowest_mbps = 1000, .ring_rtt_us = 2000, .max_rtt_us = 80000};
    msm_algo_cost_t c = msm_algo_cost_of(&l, 4096, 8, 0);
    CHECK(c.alpha == 1e-3 && c.alpha_rhd == 0.04 && c.beta_ring == 8.0 / 1e9);
    /* only pairs off the ring measured: the ring takes their latency too */
    msm_algo_links_t off = {.slowest_mbps = 1000, .max_rtt_us = 500};
    c = msm_algo_cost_of(&off, 4096, 8, 0);
    CHECK(c.alpha == 250e-6 && c.alpha_rhd == 250e-6);
    /* the crossover moves to larger payloads as the latency grows, at every world size */
    for (uint32_t n = 4; n <= 32; n *= 2) {
        double prev = 0;
        for (double rtt = 20; rtt <= 80000; rtt *= 10) {
            double x = crossover(n, rtt, rtt);
            CHECK(x > prev);
            prev = x;
        }
    }
    /* the WAN emulation's 40 ms round trip: 16 MiB at 8 peers runs rhd; a LAN's 200 us, the ring */
    msm_algo_links_t wan = {.slowest_mbps = 1000, .ring_rtt_us = 40000, .max_rtt_us = 40000};
    msm_algo_links_t lan = {.slowest_mbps = 1000, .ring_rtt_us = 200, .max_rtt_us = 200};
    msm_algo_cost_t w16 = msm_algo_cost_of(&wan, 16 << 20, 8, 0), l16 = msm_algo_cost_of(&lan, 16 << 20, 8, 0);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &w16) == WIRE_ALGO_RHD);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &l16) == WIRE_ALGO_RING);
    /* one distant pair slows every rhd step but only its own ring edge, if any: 4 KiB stays on a fast ring */
    msm_algo_links_t far = {.slowest_mbps = 1000, .ring_rtt_us = 1000, .max_rtt_us = 80000};
    msm_algo_cost_t f4 = msm_algo_cost_of(&far, 4096, 8, 0), n4 = msm_algo_cost_of(&lan, 4096, 8, 0);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &f4) == WIRE_ALGO_RING);
    CHECK(msm_algo_choose(1, WIRE_ALGO_AUTO, &n4) == WIRE_ALGO_RHD);
    CHECK(crossover(8, 1000, 80000) < crossover(8, 1000, 1000));
}

/* Every peer of the group 1 -> 2 -> ... -> n (n <= 9) measures every other in one optimization: its ring
 * successor at 1000 Mbit/s and the rest at 500 (so the ring stays), each pair's round trip rtt(from, to)
 * microseconds (NULL: none measured). */
static void measure_all(int n, double (*rtt)(uint64_t from, uint64_t to)) {
    clear_log();
    for (uint64_t c = 1; c <= (uint64_t)n; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    for (uint64_t c = 1; c <= (uint64_t)n; c++) {
        const wire_msg_t *r = last_to(c, M2C_BENCH_REQUEST);
        CHECK(r && r->u.bench_req.n == (uint32_t)n - 1);
        uint64_t to[8];
        double mbps[8], rtts[8];
        for (int k = 0; k < n - 1; k++) {
            to[k] = (c + (uint64_t)k) % (uint64_t)n + 1; /* ring offsets 1 .. n - 1 */
            mbps[k] = k == 0 ? 1000 : 500;
            rtts[k] = rtt ? rtt(c, to[k]) : 0;
        }
        bench_result_rtt(c, to, mbps, rtt ? rtts : NULL, n - 1);
    }
    CHECK_EQ_U64(count_type(M2C_ESTABLISH_P2P), 0);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), (uint64_t)n);
    for (uint64_t c = 1; c <= (uint64_t)n; c++)
        CHECK(last_to(c, M2C_OPTIMIZE_DONE) && last_to(c, M2C_OPTIMIZE_DONE)->u.flag.value == 1);
}

static double rtt_wan(uint64_t from, uint64_t to) { return (void)from, (void)to, 40000; }
static double rtt_lan(uint64_t from, uint64_t to) { return (void)from, (void)to, 200; }
/* a fast ring (1 ms edges) whose peers 1 and 5 are 80 ms apart */
static double rtt_far(uint64_t from, uint64_t to) { return (from == 1 && to == 5) || (from == 5 && to == 1) ? 80000 : 1000; }
static double rtt_bad(uint64_t from, uint64_t to) { return (void)from, (void)to, 0.0 / 0.0; }

/* The round trips of the probes reach the choice: 16 MiB at 8 peers runs rhd over 40 ms round trips, the ring over
 * 200 us ones and with none measured (the default latency); the store keeps each pair's round trip. */
static void test_measured_latency(void) {
    make_group(8);
    measure_all(8, rtt_wan);
    msm_bw_view_t v[64];
    int nv = msm_bw_views(M, v, 64);
    CHECK_EQ_U64(nv, 56);
    for (int i = 0; i < nv && i < 64; i++) CHECK(v[i].rtt_us == 40000);
    run(8, 1, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RHD);
    restart();
    make_group(8);
    measure_all(8, rtt_lan);
    run(8, 1, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    run(8, 2, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RD);
    restart();
    make_group(8);
    measure_all(8, NULL);
    run(8, 1, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    nv = msm_bw_views(M, v, 64);
    for (int i = 0; i < nv && i < 64; i++) CHECK(v[i].rtt_us == 0);
    /* a round trip that is no number leaves the latency unknown; the bandwidth still counts */
    restart();
    make_group(8);
    measure_all(8, rtt_bad);
    nv = msm_bw_views(M, v, 64);
    CHECK_EQ_U64(nv, 56);
    for (int i = 0; i < nv && i < 64; i++) CHECK(v[i].rtt_us == 0 && v[i].mbps >= 500);
    run(8, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RD);
}

/* One distant pair: 4 KiB at 8 peers keeps the ring (its edges are 1 ms apart, every rhd step could wait 80 ms),
 * where the same ring with uniform 1 ms round trips runs rhd. */
static void test_distant_pair(void) {
    make_group(8);
    measure_all(8, rtt_far);
    run(8, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    run(8, 2, 1024, WIRE_ALGO_RHD, 0, WIRE_ALGO_RHD); /* forced still wins */
}

/* Recursive doubling: the all-reduce's alone; log2 p latencies where rhd pays 2 log2 p, so it takes the smallest
 * payloads at every world size, 2 included (1 latency against the ring's 2), and not 400 KB at 2 peers nor 1 MiB
 * or 16 MiB at 8;
 * forced where only rhd exists it means rhd. */
static void test_rd(void) {
    const int all = MSM_ALGO_HAS_RHD | MSM_ALGO_HAS_RD;
    CHECK_EQ_U64(msm_algo_has(pcclExtCollAllReduce, 1, 0, 1, 5), all);
    CHECK_EQ_U64(msm_algo_has(pcclExtCollReduceScatter, 0, 1, 1, 4), MSM_ALGO_HAS_RHD);
    CHECK_EQ_U64(msm_algo_has(pcclExtCollBroadcast, 0, 0, 1, 4), MSM_ALGO_HAS_RHD);
    CHECK_EQ_U64(msm_algo_has(pcclExtCollBarrier, 0, 1, 1, 4), 0);
    for (uint32_t n = 2; n <= 256; n++) {
        msm_algo_cost_t small = cost(4096, n);
        CHECK(msm_algo_choose(all, WIRE_ALGO_AUTO, &small) == WIRE_ALGO_RD);
        CHECK(msm_algo_rd_s(&small) < msm_algo_rhd_s(&small) && msm_algo_rd_s(&small) < msm_algo_ring_s(&small));
        CHECK(msm_algo_choose(MSM_ALGO_HAS_RHD, WIRE_ALGO_AUTO, &small) != WIRE_ALGO_RD);
    }
    /* 2 members: the same bytes as the ring in one exchange; a fold and its return cost 2 hops */
    msm_algo_cost_t two = cost(4096, 2), three = cost(4096, 3), four = cost(4096, 4);
    CHECK(fabs(msm_algo_rd_s(&two) * 3 - msm_algo_rd_s(&three)) < 1e-12);
    CHECK(fabs(msm_algo_rd_s(&two) * 2 - msm_algo_rd_s(&four)) < 1e-12);
    /* 2 members with the defaults: 100 KB runs rd, 400 KB the ring (kappa_rd: rd reduces all it receives) */
    msm_algo_cost_t k100 = cost(100000, 2), k400 = cost(400000, 2);
    CHECK(msm_algo_choose(all, WIRE_ALGO_AUTO, &k100) == WIRE_ALGO_RD);
    CHECK(msm_algo_choose(all, WIRE_ALGO_AUTO, &k400) == WIRE_ALGO_RING);
    msm_algo_cost_t mib = cost(1 << 20, 8), large = cost(16 << 20, 8);
    CHECK(msm_algo_choose(all, WIRE_ALGO_AUTO, &mib) != WIRE_ALGO_RD);
    CHECK(msm_algo_choose(all, WIRE_ALGO_AUTO, &large) == WIRE_ALGO_RING);
    CHECK(msm_algo_choose(all, WIRE_ALGO_RD, &large) == WIRE_ALGO_RD);
    CHECK(msm_algo_choose(all, WIRE_ALGO_RD, NULL) == WIRE_ALGO_RD);
    CHECK(msm_algo_choose(MSM_ALGO_HAS_RHD, WIRE_ALGO_RD, &large) == WIRE_ALGO_RHD);
    CHECK(msm_algo_choose(0, WIRE_ALGO_RD, &large) == WIRE_ALGO_RING);
    CHECK(msm_algo_choose(all, WIRE_ALGO_RHD, &two) == WIRE_ALGO_RHD);
    CHECK(strcmp(msm_algo_name(WIRE_ALGO_RD), "rd") == 0);
    /* through the master: 2 peers, by size and forced; an all-gather forced to rd runs rhd */
    make_group(2);
    run(2, 1, 1024, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RD);
    run(2, 2, 4u << 20, WIRE_ALGO_AUTO, 0, WIRE_ALGO_RING);
    run(2, 3, 4u << 20, WIRE_ALGO_RD, 0, WIRE_ALGO_RD);
    run_kind(2, 4, pcclExtCollAllGather, 1024, WIRE_ALGO_RD, 0, WIRE_ALGO_RHD);
    /* the master counts each completed op under the algorithm it ran */
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK(st.by_algo[WIRE_ALGO_RD] == 2 && st.by_algo[WIRE_ALGO_RING] == 1 && st.by_algo[WIRE_ALGO_RHD] == 1);
    CHECK(st.by_algo[WIRE_ALGO_AUTO] == 0);
    /* members forcing rd and rhd are rejected with the reason */
    clear_log();
    vote(1, 9, 1024, WIRE_ALGO_RD, 0);
    vote(2, 9, 1024, WIRE_ALGO_RHD, 0);
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    const wire_msg_t *r = last_to(2, M2C_COLL_REJECT);
    CHECK(r && strstr(r->u.reject.detail, "PCCL_ALGO=rd") && strstr(r->u.reject.detail, "rhd"));
}

int main(void) {
    RUN_TEST(test_model);
    RUN_TEST(test_model_half);
    RUN_TEST(test_model_latency);
    RUN_TEST(test_measured_latency);
    RUN_TEST(test_distant_pair);
    RUN_TEST(test_auto_by_size);
    RUN_TEST(test_auto_small_world);
    RUN_TEST(test_forced_mismatch_rejected);
    RUN_TEST(test_reduce_scatter);
    RUN_TEST(test_rhd_stripes);
    RUN_TEST(test_rd);
    TEST_MAIN_END();
}
