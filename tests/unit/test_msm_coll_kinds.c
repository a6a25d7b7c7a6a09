/* test_msm_coll_kinds.c - the master's collectives by kind (msm_coll_kinds.c through msm_collective.c): every
 * kind commences with its kind, root, ranks, counts and holders; every bad input is rejected on every member
 * with the reason naming the values; the stats and views by kind. Driven through the shared harness
 * (msm_harness.h). */
#include "msm_harness.h"
#include "pccl_coll.h"
#include "sm/msm_coll_kinds.h"

TT_FIXTURE(setup, teardown);

/* One member's COLL_INIT (dtype float, op sum, no quantization unless set). */
typedef struct vote {
    uint8_t kind, flags, op, quant_algo;
    uint8_t dtype;       /* 0 means float here: pcclUint8 is spelled out through quant tests only */
    uint8_t quant_dtype; /* when quantized; 0 means uint8 */
    uint64_t count, key, capacity, hash;
    uint32_t max_world;
} vote_t;

static void vote(uint64_t conn, uint64_t tag, vote_t v) {
    wire_msg_t m = {.type = C2M_COLL_INIT};
    m.u.coll_init.tag = tag;
    m.u.coll_init.kind = v.kind;
    m.u.coll_init.flags = v.flags;
    m.u.coll_init.count = v.count;
    m.u.coll_init.dtype = v.dtype ? v.dtype : pcclFloat;
    m.u.coll_init.op = v.op;
    m.u.coll_init.quant_algo = v.quant_algo;
    m.u.coll_init.quant_dtype = v.quant_algo ? (v.quant_dtype ? v.quant_dtype : pcclUint8) : m.u.coll_init.dtype;
    m.u.coll_init.rank_key = v.key;
    m.u.coll_init.capacity = v.capacity;
    m.u.coll_init.max_world = v.max_world;
    m.u.coll_init.hash = v.hash;
    msm_on_packet(M, conn, &m);
}

/* Conns 1..n in ring order, named peer-a, peer-b, ... (pool of 8). */
static void make_named_group(int n) {
    static const char *const names[] = {"peer-a", "peer-b", "peer-c", "peer-d"};
    connect_(1);
    next_name = names[0];
    hello_g(1, 0, 8);
    p2p_ok(1, 1);
    for (int i = 1; i < n; i++) {
        connect_((uint64_t)i + 1);
        next_name = names[i];
        hello_g((uint64_t)i + 1, 0, 8);
    }
    if (n > 1) {
        pkt(1, C2M_UPDATE_TOPOLOGY);
        for (int i = 0; i < n; i++) p2p_ok((uint64_t)i + 1, 1);
    }
    for (int i = 0; i < n; i++) CHECK(is_accepted((uint64_t)i + 1));
    clear_log();
}

/* Checks that the COMMENCE conn got for tag has kind, root, and per ring position rank[i], count[i], holds[i]. */
static void check_commence(uint64_t conn, uint64_t tag, uint8_t kind, uint32_t root, const uint32_t *rank,
                           const uint64_t *count, const uint8_t *holds, uint32_t n) {
    const wire_msg_t *c = commence_of(conn, tag);
    CHECK(c != NULL);
    if (!c) return;
    CHECK_EQ_U64(c->u.commence.kind, kind);
    CHECK_EQ_U64(c->u.commence.root, root);
    CHECK_EQ_U64(c->u.commence.n, n);
    CHECK(c->u.commence.members != NULL);
    for (uint32_t i = 0; c->u.commence.members && i < n && i < c->u.commence.n; i++) {
        CHECK_EQ_U64(c->u.commence.members[i].rank, rank[i]);
        CHECK_EQ_U64(c->u.commence.members[i].count, count[i]);
        CHECK_EQ_U64(c->u.commence.members[i].holds, holds[i]);
    }
}

/* Every member 1..n got COMMENCE for tag and reports success; the operation completes. */
static void finish(uint64_t tag, int n) {
    uint64_t seq = commenced_seq(1, tag);
    CHECK(seq != 0);
    for (int c = 1; c <= n; c++) coll_done((uint64_t)c, tag, seq, 1);
    CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), (uint64_t)n);
}

static const uint32_t RANKS[] = {0, 1, 2};
static const uint8_t NONE[] = {0, 0, 0};

/* Each kind commences with its plan, completes, and counts its payload bytes under its name. */
static void test_every_kind_commences(void) {
    static const struct {
        uint8_t kind;
        vote_t v[3];
        uint32_t root;
        uint64_t count[3];
        uint8_t holds[3];
        uint64_t bytes;
    } cases[] = {
        {pcclExtCollAllReduce, {{.count = 100}, {.count = 100}, {.count = 100}}, 0, {100, 100, 100}, {0}, 400},
        {pcclExtCollAllReduce, /* 2-bit codes of pccl_compress.h pass the master's checks */
         {{.quant_algo = pcclQuantZeroPointScale, .quant_dtype = 65, .count = 100},
          {.quant_algo = pcclQuantZeroPointScale, .quant_dtype = 65, .count = 100},
          {.quant_algo = pcclQuantZeroPointScale, .quant_dtype = 65, .count = 100}},
         0, {100, 100, 100}, {0}, 400},
        {pcclExtCollBroadcast,
         {{.kind = 1, .count = 100, .capacity = 100},
          {.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 100, .capacity = 100},
          {.kind = 1, .count = 100, .capacity = 200}},
         1, {100, 100, 100}, {0, 1, 0}, 400},
        {pcclExtCollAllGather,
         {{.kind = 2, .count = 10, .capacity = 30}, {.kind = 2, .count = 10, .capacity = 30},
          {.kind = 2, .count = 10, .capacity = 64}},
         0, {10, 10, 10}, {0}, 120},
        {pcclExtCollAllGatherV,
         {{.kind = 3, .count = 1, .capacity = 6, .max_world = 3}, {.kind = 3, .count = 2, .capacity = 6},
          {.kind = 3, .count = 3, .capacity = 6, .max_world = 8}},
         0, {1, 2, 3}, {0}, 24},
        {pcclExtCollReduceScatter,
         {{.kind = 4, .count = 10, .capacity = 4, .op = pcclMax}, {.kind = 4, .count = 10, .capacity = 4, .op = pcclMax},
          {.kind = 4, .count = 10, .capacity = 4, .op = pcclMax}},
         0, {10, 10, 10}, {0}, 40},
        {pcclExtCollBarrier, {{.kind = 5}, {.kind = 5}, {.kind = 5}}, 0, {0, 0, 0}, {0}, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        restart();
        make_named_group(3);
        for (uint64_t c = 1; c <= 3; c++) vote(c, 40 + k, cases[k].v[c - 1]);
        CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 0);
        for (uint64_t c = 1; c <= 3; c++)
            check_commence(c, 40 + k, cases[k].kind, cases[k].root, RANKS, cases[k].count, cases[k].holds, 3);
        if (cases[k].kind == pcclExtCollBarrier) { /* complete at its COMMENCE: no report, no COMPLETE */
            CHECK_EQ_U64(msm_op_views(M, NULL, 0), 0);
            for (uint64_t c = 1; c <= 3; c++) coll_done(c, 40 + k, commenced_seq(1, 40 + k), 1); /* ignored */
            CHECK_EQ_U64(count_type(M2C_COLL_COMPLETE), 0);
        } else {
            finish(40 + k, 3);
        }
        msm_stats_t st;
        msm_get_stats(M, &st);
        for (unsigned j = 0; j < MSM_COLL_NKINDS; j++) {
            CHECK_EQ_U64(st.by_kind[j].completed, j == cases[k].kind);
            CHECK_EQ_U64(st.by_kind[j].bytes, j == cases[k].kind ? cases[k].bytes : 0);
        }
        CHECK_EQ_U64(st.collectives_completed, 1);
        msm_group_view_t g;
        CHECK_EQ_U64(msm_group_views(M, &g, 1), 1);
        CHECK_EQ_U64(g.by_kind[cases[k].kind].completed, 1);
        CHECK_EQ_U64(g.by_kind[cases[k].kind].bytes, cases[k].bytes);
        /* "reduced" bytes are the reducing kinds' only */
        int reduces = cases[k].kind == pcclExtCollAllReduce || cases[k].kind == pcclExtCollReduceScatter;
        CHECK_EQ_U64(g.reduced_bytes, reduces ? cases[k].bytes : 0);
        CHECK_EQ_U64(g.collectives_completed, 1);
    }
}

/* With rank keys on every member, ranks follow the keys in ascending order; the ring stays the measured one. */
static void test_ranked(void) {
    make_named_group(3);
    static const uint64_t keys[] = {30, 10, 20};
    for (uint64_t c = 1; c <= 3; c++)
        vote(c, 5, (vote_t){.kind = pcclExtCollAllGather, .flags = PCCL_EXT_COLL_RANKED, .key = keys[c - 1],
                            .count = 2, .capacity = 6});
    static const uint32_t rank[] = {2, 0, 1};
    static const uint64_t count[] = {2, 2, 2};
    check_commence(2, 5, pcclExtCollAllGather, 0, rank, count, NONE, 3);
    const wire_msg_t *c = commence_of(3, 5);
    for (uint32_t i = 0; c && i < 3; i++) CHECK(is_uuid_of(c->u.commence.ring[i], i + 1));
    /* a ranked broadcast: the root is named by ring position, whatever its rank */
    finish(5, 3);
    clear_log();
    for (uint64_t c2 = 1; c2 <= 3; c2++)
        vote(c2, 6, (vote_t){.kind = pcclExtCollBroadcast, .flags = (uint8_t)(PCCL_EXT_COLL_RANKED |
                                                                              (c2 == 3 ? PCCL_EXT_COLL_ROOT : 0)),
                             .key = keys[c2 - 1], .count = 4, .capacity = 4});
    static const uint64_t four[] = {4, 4, 4};
    static const uint8_t holds[] = {0, 0, 1};
    check_commence(1, 6, pcclExtCollBroadcast, 2, rank, four, holds, 3);
}

/* Shared sources: the members that set the flag and whose hash equals the root's hold the data too. */
static void test_shared_sources(void) {
    make_named_group(4);
    static const uint64_t hash[] = {7, 7, 8, 7};
    for (uint64_t c = 1; c <= 4; c++)
        vote(c, 9, (vote_t){.kind = pcclExtCollBroadcast,
                            .flags = (uint8_t)((c == 2 ? PCCL_EXT_COLL_ROOT : 0) |
                                               (c == 4 ? 0 : PCCL_EXT_COLL_SHARED_SOURCES)),
                            .count = 16, .capacity = 16, .hash = hash[c - 1]});
    static const uint32_t rank[] = {0, 1, 2, 3};
    static const uint64_t count[] = {16, 16, 16, 16};
    static const uint8_t holds[] = {1, 1, 0, 0}; /* conn 4 has the hash but did not hash: it set no flag */
    check_commence(1, 9, pcclExtCollBroadcast, 1, rank, count, holds, 4);
    /* without the flag on the root, only the root holds */
    finish(9, 4);
    clear_log();
    for (uint64_t c = 1; c <= 4; c++)
        vote(c, 10, (vote_t){.kind = pcclExtCollBroadcast,
                             .flags = (uint8_t)(c == 2 ? PCCL_EXT_COLL_ROOT : PCCL_EXT_COLL_SHARED_SOURCES),
                             .count = 16, .capacity = 16, .hash = 7});
    static const uint8_t root_only[] = {0, 1, 0, 0};
    check_commence(3, 10, pcclExtCollBroadcast, 1, rank, count, root_only, 4);
}

/* Every member got COLL_REJECT(tag, PARAM_MISMATCH) with this detail, nothing commenced, nobody was kicked. */
static void check_rejected(uint64_t tag, int n, const char *detail) {
    CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 0);
    CHECK_EQ_U64(count_type(M2C_KICK), 0);
    for (uint64_t c = 1; c <= (uint64_t)n; c++) {
        const wire_msg_t *r = last_to(c, M2C_COLL_REJECT);
        CHECK(r && r->u.reject.tag == tag && r->u.reject.reason == REJECT_PARAM_MISMATCH);
        if (r && strcmp(r->u.reject.detail, detail) != 0)
            fprintf(stderr, "  detail \"%s\", expected \"%s\"\n", r->u.reject.detail, detail);
        CHECK(r && strcmp(r->u.reject.detail, detail) == 0);
    }
}

static const struct bad {
    const char *what;
    vote_t v[3];
    const char *detail;
} BAD[] = {
    {"no root",
     {{.kind = 1, .count = 4, .capacity = 4}, {.kind = 1, .count = 4, .capacity = 4},
      {.kind = 1, .count = 4, .capacity = 4}},
     "no member is the root"},
    {"two roots",
     {{.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 4, .capacity = 4}, {.kind = 1, .count = 4, .capacity = 4},
      {.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 4, .capacity = 4}},
     "two roots: peer-a and peer-c"},
    {"three roots",
     {{.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 4, .capacity = 4},
      {.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 4, .capacity = 4},
      {.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 4, .capacity = 4}},
     "3 roots, peer-a and peer-b among them"},
    {"kinds differ",
     {{.kind = 2, .count = 4, .capacity = 12}, {.kind = 1, .count = 4, .capacity = 12},
      {.kind = 2, .count = 4, .capacity = 12}},
     "kinds differ: all_gather on peer-a, broadcast on peer-b"},
    {"dtypes differ",
     {{.kind = 2, .count = 4, .capacity = 12}, {.kind = 2, .dtype = pcclDouble, .count = 4, .capacity = 12},
      {.kind = 2, .count = 4, .capacity = 12}},
     "dtypes differ: float on peer-a, double on peer-b"},
    {"counts differ",
     {{.kind = 2, .count = 4, .capacity = 15}, {.kind = 2, .count = 4, .capacity = 15},
      {.kind = 2, .count = 5, .capacity = 15}},
     "counts differ: 4 on peer-a, 5 on peer-c"},
    {"broadcast counts differ",
     {{.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 4, .capacity = 8}, {.kind = 1, .count = 8, .capacity = 8},
      {.kind = 1, .count = 4, .capacity = 8}},
     "counts differ: 4 on peer-a, 8 on peer-b"},
    {"all-reduce counts differ", {{.count = 4}, {.count = 4}, {.count = 3}}, "counts differ: 4 on peer-a, 3 on peer-c"},
    {"reduce ops differ",
     {{.kind = 4, .count = 9, .capacity = 3}, {.kind = 4, .op = pcclMax, .count = 9, .capacity = 3},
      {.kind = 4, .count = 9, .capacity = 3}},
     "reduce ops differ: sum on peer-a, max on peer-b"},
    {"quantizations differ",
     {{.kind = 4, .count = 9, .capacity = 3}, {.kind = 4, .count = 9, .capacity = 3},
      {.kind = 4, .quant_algo = pcclQuantMinMax, .count = 9, .capacity = 3}},
     "quantizations differ: none to float on peer-a, min_max to uint8 on peer-c"},
    {"quantized widths differ (pccl_compress.h)",
     {{.quant_algo = pcclQuantMinMax, .quant_dtype = 64, .count = 9},
      {.quant_algo = pcclQuantMinMax, .quant_dtype = 65, .count = 9},
      {.quant_algo = pcclQuantMinMax, .quant_dtype = 64, .count = 9}},
     "quantizations differ: min_max to uint4 on peer-a, min_max to uint2 on peer-b"},
    {"broadcast output too small",
     {{.kind = 1, .flags = PCCL_EXT_COLL_ROOT, .count = 12, .capacity = 12}, {.kind = 1, .count = 12, .capacity = 12},
      {.kind = 1, .count = 12, .capacity = 8}},
     "output too small on peer-c: needs 12 elements, holds 8"},
    {"all-gather output too small",
     {{.kind = 2, .count = 4, .capacity = 12}, {.kind = 2, .count = 4, .capacity = 12},
      {.kind = 2, .count = 4, .capacity = 8}},
     "output too small on peer-c: needs 12 elements, holds 8"},
    {"all-gather output past 2^64",
     {{.kind = 2, .count = UINT64_MAX / 2, .capacity = UINT64_MAX}, {.kind = 2, .count = UINT64_MAX / 2, .capacity = 1},
      {.kind = 2, .count = UINT64_MAX / 2, .capacity = 1}},
     "output too small on peer-a: needs more than 18446744073709551615 elements, holds 18446744073709551615"},
    {"all-gather-v output too small",
     {{.kind = 3, .count = 1, .capacity = 6}, {.kind = 3, .count = 2, .capacity = 5}, {.kind = 3, .count = 3, .capacity = 6}},
     "output too small on peer-b: needs 6 elements, holds 5"},
    {"all-gather-v counts too small",
     {{.kind = 3, .count = 1, .capacity = 6, .max_world = 2}, {.kind = 3, .count = 2, .capacity = 6},
      {.kind = 3, .count = 3, .capacity = 6}},
     "counts too small on peer-a: a world of 3, holds 2"},
    {"reduce-scatter output too small",
     {{.kind = 4, .count = 10, .capacity = 4}, {.kind = 4, .count = 10, .capacity = 4},
      {.kind = 4, .count = 10, .capacity = 3}},
     "output too small on peer-c: needs 4 elements, holds 3"},
    {"rank keys on some members",
     {{.kind = 5}, {.kind = 5, .flags = PCCL_EXT_COLL_RANKED, .key = 1}, {.kind = 5}},
     "rank keys on only some members: peer-b sets one, peer-a does not"},
    {"rank keys missing on one",
     {{.kind = 5, .flags = PCCL_EXT_COLL_RANKED}, {.kind = 5, .flags = PCCL_EXT_COLL_RANKED, .key = 1}, {.kind = 5}},
     "rank keys on only some members: peer-a sets one, peer-c does not"},
    {"duplicate rank keys",
     {{.kind = 5, .flags = PCCL_EXT_COLL_RANKED, .key = 5}, {.kind = 5, .flags = PCCL_EXT_COLL_RANKED, .key = 9},
      {.kind = 5, .flags = PCCL_EXT_COLL_RANKED, .key = 5}},
     "duplicate rank key 5: peer-a and peer-c"},
    {"unknown kind", {{.kind = 5}, {.kind = 9}, {.kind = 5}}, "unknown collective kind 9 from peer-b"},
};

/* Each bad input is rejected on every member with the reason; the tag is free again after it. */
static void test_bad_inputs_rejected(void) {
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        restart();
        make_named_group(3);
        for (uint64_t c = 1; c <= 3; c++) {
            CHECK_EQ_U64(count_type(M2C_COLL_REJECT), 0); /* nothing is decided before the last vote */
            vote(c, 70, BAD[k].v[c - 1]);
        }
        if (count_type(M2C_COLL_REJECT) != 3) fprintf(stderr, "  case: %s\n", BAD[k].what);
        check_rejected(70, 3, BAD[k].detail);
        msm_stats_t st;
        msm_get_stats(M, &st);
        CHECK_EQ_U64(st.collectives_rejected, 1);
        uint8_t kind = BAD[k].v[0].kind;
        CHECK_EQ_U64(st.by_kind[kind].rejected, 1);
        msm_group_view_t g;
        CHECK_EQ_U64(msm_group_views(M, &g, 1), 1);
        CHECK_EQ_U64(g.by_kind[kind].rejected, 1);
        /* the same tag with good parameters commences */
        clear_log();
        for (uint64_t c = 1; c <= 3; c++) vote(c, 70, (vote_t){.kind = pcclExtCollBarrier});
        CHECK_EQ_U64(count_type(M2C_COLL_COMMENCE), 3);
    }
}

/* All-gather of variable counts: the counts may differ, and each member's count is its own in COMMENCE. */
static void test_all_gather_v_counts_differ(void) {
    make_named_group(3);
    vote(1, 3, (vote_t){.kind = pcclExtCollAllGatherV, .count = 0, .capacity = 100});
    vote(2, 3, (vote_t){.kind = pcclExtCollAllGatherV, .count = 70, .capacity = 100, .max_world = 3});
    vote(3, 3, (vote_t){.kind = pcclExtCollAllGatherV, .count = 30, .capacity = 100});
    static const uint64_t count[] = {0, 70, 30};
    check_commence(1, 3, pcclExtCollAllGatherV, 0, RANKS, count, NONE, 3);
    finish(3, 3);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.by_kind[pcclExtCollAllGatherV].bytes, 400);
}

/* A reason names an unnamed member by its uuid's first 8 hex digits. */
static void test_unnamed_member_in_reason(void) {
    make_group(2);
    vote(1, 4, (vote_t){.kind = pcclExtCollBroadcast, .flags = PCCL_EXT_COLL_ROOT, .count = 1, .capacity = 1});
    vote(2, 4, (vote_t){.kind = pcclExtCollBroadcast, .flags = PCCL_EXT_COLL_ROOT, .count = 1, .capacity = 1});
    uint8_t a[16], b[16];
    uuid_of(1, a);
    uuid_of(2, b);
    char want[128];
    snprintf(want, sizeof want, "two roots: peer %02x%02x%02x%02x and peer %02x%02x%02x%02x", a[0], a[1], a[2], a[3],
             b[0], b[1], b[2], b[3]);
    check_rejected(4, 2, want);
}

/* The world is the members at the decision: a member that leaves before voting shrinks the output needed. */
static void test_departure_shrinks_world(void) {
    make_named_group(3);
    vote(1, 8, (vote_t){.kind = pcclExtCollAllGather, .count = 10, .capacity = 20});
    vote(2, 8, (vote_t){.kind = pcclExtCollAllGather, .count = 10, .capacity = 20});
    CHECK_EQ_U64(total_sends(), 0);
    disconnect(3);
    static const uint64_t count[] = {10, 10};
    check_commence(1, 8, pcclExtCollAllGather, 0, RANKS, count, NONE, 2);
    /* the root leaving a broadcast vote leaves none */
    finish(8, 2);
    clear_log();
    join(4); /* registered, not accepted: not in the world */
    clear_log();
    vote(1, 9, (vote_t){.kind = pcclExtCollBroadcast, .count = 1, .capacity = 1});
    CHECK_EQ_U64(total_sends(), 0);
    vote(2, 9, (vote_t){.kind = pcclExtCollBroadcast, .count = 1, .capacity = 1});
    check_rejected(9, 2, "no member is the root");
}

/* Alone, every kind is rejected for too few peers (not for its parameters), with the reason. */
static void test_alone(void) {
    make_named_group(1);
    vote(1, 2, (vote_t){.kind = pcclExtCollBroadcast, .count = 1});
    const wire_msg_t *r = last_to(1, M2C_COLL_REJECT);
    CHECK(r && r->u.reject.reason == REJECT_TOO_FEW_PEERS);
    CHECK(r && strcmp(r->u.reject.detail, "fewer than two peers in the group") == 0);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.by_kind[pcclExtCollBroadcast].rejected, 1);
}

/* Stripes follow the bytes the kind moves: an all-gather of 1 MiB per member moves 3 MiB on a ring of 3. */
static void test_stripes_by_payload(void) {
    make_named_group(3);
    const uint64_t mib = (1u << 20) / 4;
    for (uint64_t c = 1; c <= 3; c++) vote(c, 1, (vote_t){.kind = pcclExtCollAllGather, .count = mib, .capacity = 3 * mib});
    const wire_msg_t *a = commence_of(1, 1);
    CHECK(a && a->u.commence.slots == 0x07);
    finish(1, 3);
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) vote(c, 2, (vote_t){.count = mib});
    const wire_msg_t *b = commence_of(1, 2);
    CHECK(b && __builtin_popcountll(b->u.commence.slots) == 1); /* the grant of tag 1 may hold slot 0 */
    finish(2, 3);
    clear_log();
    for (uint64_t c = 1; c <= 3; c++) vote(c, 3, (vote_t){.kind = pcclExtCollBarrier});
    const wire_msg_t *d = commence_of(1, 3);
    CHECK(d && __builtin_popcountll(d->u.commence.slots) == 1); /* no data, still one connection */
}

/* Views and stats: the kind of each operation while voting and running, aborts and rejections by kind, an unknown
 * kind in the totals only. */
static void test_views_and_stats(void) {
    make_named_group(2);
    vote(1, 11, (vote_t){.kind = pcclExtCollReduceScatter, .count = 8, .capacity = 4});
    vote(1, 12, (vote_t){.kind = 7});
    msm_op_view_t v[4];
    CHECK_EQ_U64(msm_op_views(M, v, 4), 2);
    CHECK(v[0].collective && strcmp(v[0].collective, "reduce_scatter") == 0 && !v[0].running);
    CHECK(v[1].collective == NULL && strcmp(v[1].kind, "collective") == 0);
    vote(2, 11, (vote_t){.kind = pcclExtCollReduceScatter, .count = 8, .capacity = 4});
    CHECK_EQ_U64(msm_op_views(M, v, 4), 2);
    CHECK(v[0].running && strcmp(v[0].collective, "reduce_scatter") == 0);
    uint64_t seq = commenced_seq(1, 11);
    clear_log();
    vote(2, 12, (vote_t){.kind = 7});
    check_rejected(12, 2, "unknown collective kind 7 from peer-a");
    coll_done(2, 11, seq, 0); /* a failure aborts it */
    CHECK_EQ_U64(count_type(M2C_COLL_ABORT), 2);
    pkt(1, C2M_UPDATE_TOPOLOGY); /* other kinds have no collective kind */
    CHECK_EQ_U64(msm_op_views(M, v, 4), 1);
    CHECK(v[0].collective == NULL);
    msm_stats_t st;
    msm_get_stats(M, &st);
    CHECK_EQ_U64(st.collectives_rejected, 1);
    CHECK_EQ_U64(st.collectives_aborted, 1);
    CHECK_EQ_U64(st.by_kind[pcclExtCollReduceScatter].aborted, 1);
    CHECK_EQ_U64(st.by_kind[pcclExtCollReduceScatter].completed, 0);
    uint64_t rejected = 0;
    for (unsigned k = 0; k < MSM_COLL_NKINDS; k++) rejected += st.by_kind[k].rejected;
    CHECK_EQ_U64(rejected, 0);
    CHECK(strcmp(msm_coll_kind_name(pcclExtCollAllGatherV), "all_gather_v") == 0);
    CHECK(msm_coll_kind_name(MSM_COLL_NKINDS) == NULL);
}

/* The pure functions on their edges: no members, ties of keys only in a failed check. */
static void test_pure_edges(void) {
    char detail[MSM_COLL_DETAIL_MAX];
    CHECK_EQ_U64(msm_coll_check(NULL, NULL, 0, detail), 0);
    CHECK_EQ_U64(detail[0], 0);
    uint32_t root = 9;
    CHECK_EQ_U64(msm_coll_plan(NULL, 0, &root, NULL), 0);
    CHECK_EQ_U64(root, 0);
    msm_coll_vote_t v[2] = {{.kind = pcclExtCollAllGather, .dtype = pcclDouble, .count = 3},
                            {.kind = pcclExtCollAllGather, .dtype = pcclDouble, .count = 3}};
    CHECK_EQ_U64(msm_coll_payload_bytes(v, 2), 48);
    v[0].kind = v[1].kind = 200;
    CHECK_EQ_U64(msm_coll_payload_bytes(v, 2), 0);
    const char *names[] = {"x", "y"};
    CHECK(msm_coll_check(v, names, 2, detail) == -PERR_INVALID);
    CHECK(strcmp(detail, "unknown collective kind 200 from x") == 0);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* rejections log warnings by design */
    RUN_TEST(test_every_kind_commences);
    RUN_TEST(test_ranked);
    RUN_TEST(test_shared_sources);
    RUN_TEST(test_bad_inputs_rejected);
    RUN_TEST(test_all_gather_v_counts_differ);
    RUN_TEST(test_unnamed_member_in_reason);
    RUN_TEST(test_departure_shrinks_world);
    RUN_TEST(test_alone);
    RUN_TEST(test_stripes_by_payload);
    RUN_TEST(test_views_and_stats);
    RUN_TEST(test_pure_edges);
    TEST_MAIN_END();
}
