/* test_msm_ss_split.c - how the master spreads an outdated peer's fetch over every source: the pure split
 * (msm_ss_split.c) and the plan the state machine sends (sources, holders, ranges, bandwidth weights). */
#include "msm_harness.h"
#include "sm/msm_ss_split.h"


TT_FIXTURE(setup, teardown);

#define MIB ((uint64_t)1 << 20)

/* The ranges cover each item in order from 0 to its size, without gap or overlap, from holders only. */
static void check_cover(const msm_ss_item_t *it, uint32_t n, const wire_ss_range_t *r, int nr) {
    int k = 0;
    for (uint32_t t = 0; t < n; t++) {
        uint64_t at = 0;
        for (; k < nr && r[k].tensor == t; k++) {
            CHECK(r[k].offset == at && r[k].length > 0);
            CHECK(it[t].holders >> r[k].source & 1);
            at += r[k].length;
        }
        CHECK_EQ_U64(at, it[t].bytes);
    }
    CHECK_EQ_U64(k, nr);
}

/* Bytes each source sends. */
static void loads(const wire_ss_range_t *r, int nr, uint64_t *per) {
    memset(per, 0, WIRE_MAX_SS_SOURCES * sizeof *per);
    for (int k = 0; k < nr; k++) per[r[k].source] += r[k].length;
}

static void test_split_even(void) {
    /* a large tensor is cut into one aligned range per source, equal within one block */
    msm_ss_item_t it[1] = {{64 * MIB + 5, 7}};
    double w[3] = {1, 1, 1};
    wire_ss_range_t r[3];
    int nr = msm_ss_split(it, 1, w, 3, MSM_SS_SPLIT_MIN, r);
    CHECK_EQ_U64(nr, 3);
    check_cover(it, 1, r, nr);
    for (int k = 0; k < nr; k++) {
        CHECK_EQ_U64(r[k].source, k);
        CHECK(r[k].length + MSM_SS_ALIGN >= it[0].bytes / 3 && r[k].length <= it[0].bytes / 3 + MSM_SS_ALIGN + 5);
        if (k < nr - 1) CHECK_EQ_U64(r[k].length % MSM_SS_ALIGN, 0);
    }
    /* small tensors travel whole and are balanced: six of 1 MiB over three sources, two each */
    msm_ss_item_t small[6];
    for (int i = 0; i < 6; i++) small[i] = (msm_ss_item_t){MIB, 7};
    wire_ss_range_t rs[18];
    nr = msm_ss_split(small, 6, w, 3, MSM_SS_SPLIT_MIN, rs);
    CHECK_EQ_U64(nr, 6);
    check_cover(small, 6, rs, nr);
    uint64_t per[WIRE_MAX_SS_SOURCES];
    loads(rs, nr, per);
    for (int s = 0; s < 3; s++) CHECK_EQ_U64(per[s], 2 * MIB);
}

static void test_split_weighted(void) {
    /* weights 1:3:6 (bandwidth toward the receiver): each source's share of the bytes follows them */
    msm_ss_item_t it[4] = {{100 * MIB, 7}, {40 * MIB, 7}, {2 * MIB, 7}, {2 * MIB, 7}};
    double w[3] = {100, 300, 600};
    wire_ss_range_t r[12];
    int nr = msm_ss_split(it, 4, w, 3, MSM_SS_SPLIT_MIN, r);
    check_cover(it, 4, r, nr);
    uint64_t per[WIRE_MAX_SS_SOURCES], total = 144 * MIB;
    loads(r, nr, per);
    for (int s = 0; s < 3; s++) {
        double want = (double)total * w[s] / 1000.0, got = (double)per[s];
        CHECK(got > want - 2.5 * (double)MIB && got < want + 2.5 * (double)MIB); /* the small ones go whole */
    }
    /* a weight too small for one aligned block gets no range of that tensor, and coverage stays exact */
    msm_ss_item_t one[1] = {{8 * MIB, 3}};
    double tiny[2] = {1e-9, 1};
    nr = msm_ss_split(one, 1, tiny, 2, MSM_SS_SPLIT_MIN, r);
    CHECK_EQ_U64(nr, 1);
    CHECK_EQ_U64(r[0].source, 1);
    check_cover(one, 1, r, nr);
}

static void test_split_holders(void) {
    /* a tensor held by one source only (its allow_content_inequality bytes differ elsewhere) goes whole
     * to it, however large; an empty tensor gets no range; a tensor without a holder is an error */
    msm_ss_item_t it[3] = {{64 * MIB, 2}, {0, 7}, {64 * MIB, 5}};
    double w[3] = {1, 1, 1};
    wire_ss_range_t r[9];
    int nr = msm_ss_split(it, 3, w, 3, MSM_SS_SPLIT_MIN, r);
    check_cover(it, 3, r, nr);
    CHECK_EQ_U64(nr, 3);
    CHECK(r[0].tensor == 0 && r[0].source == 1 && r[0].length == 64 * MIB);
    CHECK(r[1].tensor == 2 && r[1].source == 0 && r[2].source == 2);
    msm_ss_item_t none[1] = {{MIB, 8}}; /* bit 3: no such source among three */
    CHECK(msm_ss_split(none, 1, w, 3, MSM_SS_SPLIT_MIN, r) == -PERR_INVALID);
    CHECK(msm_ss_split(it, 3, w, 0, MSM_SS_SPLIT_MIN, r) == -PERR_INVALID);
}

/* w: 64 MiB that must be equal; stats: allow_content_inequality, 8 bytes. */
static void state2(wire_tensor_t t[2], uint64_t hw, uint64_t hs) {
    memset(t, 0, 2 * sizeof *t);
    snprintf(t[0].key, sizeof t[0].key, "w");
    t[0].dtype = pcclFloat;
    t[0].count = 16 * MIB;
    t[0].hash = hw;
    snprintf(t[1].key, sizeof t[1].key, "stats");
    t[1].dtype = pcclDouble;
    t[1].count = 1;
    t[1].allow_inequality = 1;
    t[1].hash = hs;
}

/* Conn of the plan's source s. */
static uint64_t source_conn(const wire_msg_t *p, int s) {
    for (uint64_t c = 1; c <= 8; c++)
        if (is_uuid_of(p->u.ss_plan.sources[s].uuid, c)) return c;
    return 0;
}

static void test_plan_every_source(void) {
    make_group(4);
    wire_tensor_t a[2], b[2], z[2];
    state2(a, 0x111, 0x5);
    state2(b, 0x111, 0x6); /* same content, other stats */
    state2(z, 0, 0);
    sync_vote(1, 3, ENFORCE, a, 2);
    sync_vote(2, 3, ENFORCE, a, 2);
    sync_vote(3, 3, ENFORCE, b, 2);
    sync_vote(4, 0, ENFORCE, z, 2);
    const wire_msg_t *p = plan_of(4);
    CHECK(p && p->u.ss_plan.status == SS_OK && p->u.ss_plan.n == 2 && p->u.ss_plan.nsrc == 3);
    if (p && p->u.ss_plan.n == 2 && p->u.ss_plan.nsrc == 3) {
        CHECK(source_in(4, 1) && source_in(4, 2) && source_in(4, 3) && !source_in(4, 4));
        /* stats: only the sources holding the announced (first source's) bytes may send it */
        uint64_t first = source_conn(p, 0);
        CHECK(plan_has(p, "stats", first == 3 ? 0x6 : 0x5));
        for (int s = 0; s < 3; s++) {
            int same = (source_conn(p, s) == 3) == (first == 3);
            CHECK_EQ_U64(p->u.ss_plan.holders[1] >> s & 1, same);
            CHECK_EQ_U64(p->u.ss_plan.holders[0] >> s & 1, 1);
        }
        /* w is split three ways, evenly (no bandwidth measured), stats goes whole */
        msm_ss_item_t it[2] = {{64 * MIB, p->u.ss_plan.holders[0]}, {8, p->u.ss_plan.holders[1]}};
        check_cover(it, 2, p->u.ss_plan.ranges, (int)p->u.ss_plan.nranges);
        CHECK_EQ_U64(p->u.ss_plan.nranges, 4);
        for (uint32_t k = 0; k < p->u.ss_plan.nranges && k < 3; k++)
            CHECK(p->u.ss_plan.ranges[k].length + MSM_SS_ALIGN >= 64 * MIB / 3);
    }
    /* the up-to-date peers fetch nothing */
    for (uint64_t c = 1; c <= 2; c++) CHECK(plan_n(c) == 0 && plan_of(c)->u.ss_plan.nranges == 0);
    finish_sync(1, 4);
    CHECK_EQ_U64(count_type(M2C_SS_DONE), 4);
}

static void test_plan_bandwidth_weights(void) {
    make_group(4);
    /* optimize: the master learns 1->4 = 100, 2->4 = 300, 3->4 = 600 Mbit/s (everything else 1000) */
    for (uint64_t c = 1; c <= 4; c++) pkt(c, C2M_OPTIMIZE_TOPOLOGY);
    for (uint64_t c = 1; c <= 4; c++) {
        uint64_t to[3];
        double mbps[3];
        int n = 0;
        for (uint64_t d = 1; d <= 4; d++)
            if (d != c) {
                to[n] = d;
                mbps[n++] = d == 4 ? 100.0 * (double)(c == 1 ? 1 : c == 2 ? 3 : 6) : 1000;
            }
        bench_result(c, to, mbps, n);
    }
    for (uint64_t c = 1; c <= 4; c++)
        if (count_to(c, M2C_ESTABLISH_P2P)) p2p_ok(c, 1);
    CHECK_EQ_U64(count_type(M2C_OPTIMIZE_DONE), 4);
    clear_log();
    wire_tensor_t a[2], z[2];
    state2(a, 0x111, 0x5);
    state2(z, 0, 0);
    for (uint64_t c = 1; c <= 3; c++) sync_vote(c, 3, ENFORCE, a, 2);
    sync_vote(4, 0, ENFORCE, z, 2);
    const wire_msg_t *p = plan_of(4);
    CHECK(p && p->u.ss_plan.nsrc == 3 && p->u.ss_plan.n == 2);
    if (p && p->u.ss_plan.nsrc == 3) {
        uint64_t per[WIRE_MAX_SS_SOURCES];
        loads(p->u.ss_plan.ranges, (int)p->u.ss_plan.nranges, per);
        for (int s = 0; s < 3; s++) {
            uint64_t c = source_conn(p, s);
            double share = c == 1 ? 0.1 : c == 2 ? 0.3 : 0.6, want = share * 64.0 * (double)MIB;
            CHECK((double)per[s] > want - (double)MIB && (double)per[s] < want + (double)MIB);
        }
    }
    finish_sync(1, 4);
}

int main(void) {
    RUN_TEST(test_split_even);
    RUN_TEST(test_split_weighted);
    RUN_TEST(test_split_holders);
    RUN_TEST(test_plan_every_source);
    RUN_TEST(test_plan_bandwidth_weights);
    TEST_MAIN_END();
}
