/* test_gate.c - the limits on strangers (gate.c): caps per address and in
 * total, whom they evict, the byte budget a RESUME draws on, the deadline, and
 * strangers held past their first message. */
#include "base/gate.h"
#include "tinytest.h"

static const gate_limits_t LIM = {.per_addr = 3, .total = 5, .bytes_per_addr = 1000, .bytes_total = 1500,
                                   .deadline_ms = 100};

static void test_per_address_cap_refuses_the_newcomer(void) {
    gate_t g;
    gate_init(&g, &LIM);
    uint64_t ev;
    for (uint64_t id = 1; id <= 3; id++) CHECK(gate_admit(&g, id, 7, 0, &ev) == 0 && ev == 0);
    CHECK(gate_admit(&g, 4, 7, 0, &ev) == -PERR_REFUSED);
    CHECK(!gate_is_stranger(&g, 4) && gate_is_stranger(&g, 1));
    CHECK(gate_admit(&g, 5, 8, 0, &ev) == 0 && ev == 0); /* another address is not affected */
    gate_remove(&g, 2);
    CHECK(gate_admit(&g, 6, 7, 0, &ev) == 0); /* a slot of address 7 is free again */
    CHECK_EQ_U64(g.refused, 1);
    gate_free(&g);
}

static void test_total_cap_evicts_the_oldest_of_the_busiest_address(void) {
    gate_t g;
    gate_init(&g, &LIM);
    uint64_t ev;
    CHECK(gate_admit(&g, 1, 8, 0, &ev) == 0);  /* an honest peer, first */
    CHECK(gate_admit(&g, 2, 7, 1, &ev) == 0);  /* a flood from address 7 */
    CHECK(gate_admit(&g, 3, 7, 2, &ev) == 0);
    CHECK(gate_admit(&g, 4, 7, 3, &ev) == 0);
    CHECK(gate_admit(&g, 5, 9, 4, &ev) == 0);
    CHECK(gate_admit(&g, 6, 10, 5, &ev) == 0 && ev == 2); /* full: 7's oldest goes, not peer 1 */
    CHECK(gate_is_stranger(&g, 1) && !gate_is_stranger(&g, 2) && gate_is_stranger(&g, 6));
    CHECK_EQ_U64(g.evicted, 1);
    gate_free(&g);
}

static void test_evict_one(void) {
    gate_t g;
    gate_init(&g, &LIM);
    uint64_t ev, id = 0;
    CHECK(gate_evict_one(&g, &id) == -PERR_INVALID);
    CHECK(gate_admit(&g, 1, 8, 0, &ev) == 0);
    CHECK(gate_admit(&g, 2, 7, 0, &ev) == 0);
    CHECK(gate_admit(&g, 3, 7, 0, &ev) == 0);
    CHECK(gate_evict_one(&g, &id) == 0 && id == 2); /* address 7 holds the most */
    CHECK(gate_evict_one(&g, &id) == 0 && id == 1); /* a tie: the oldest */
    CHECK(g.n == 1 && g.evicted == 2);
    gate_free(&g);
}

static void test_byte_budget(void) {
    gate_t g;
    gate_init(&g, &LIM);
    uint64_t ev[GATE_EVICT_MAX];
    size_t n;
    uint64_t one;
    CHECK(gate_admit(&g, 1, 7, 0, &one) == 0);
    CHECK(gate_admit(&g, 2, 7, 0, &one) == 0);
    CHECK(gate_admit(&g, 3, 8, 0, &one) == 0);
    CHECK(gate_reserve(&g, 1, 600, ev, &n) == 0 && n == 0);
    CHECK(gate_reserve(&g, 2, 500, ev, &n) == -PERR_REFUSED); /* address 7 would hold 1100 > 1000 */
    CHECK(!gate_is_stranger(&g, 2));
    CHECK(gate_reserve(&g, 3, 800, ev, &n) == 0 && n == 0);
    CHECK_EQ_U64(g.bytes, 1400);
    CHECK(gate_reserve(&g, 3, 800, ev, &n) == 0 && n == 0); /* no more than it holds: no change */
    CHECK(gate_admit(&g, 4, 9, 0, &one) == 0);
    /* 1400 + 300 > 1500: the address holding the most bytes (8, with 800) loses its oldest. */
    CHECK(gate_reserve(&g, 4, 300, ev, &n) == 0 && n == 1 && ev[0] == 3);
    CHECK_EQ_U64(g.bytes, 900);
    CHECK(gate_reserve(&g, 4, 2000, ev, &n) == -PERR_REFUSED); /* beyond the whole budget */
    CHECK_EQ_U64(g.bytes, 600);
    gate_remove(&g, 1);
    CHECK_EQ_U64(g.bytes, 0);
    CHECK(gate_reserve(&g, 99, 5000, ev, &n) == 0); /* not a stranger: not the gate's business */
    gate_free(&g);
}

static void test_deadline(void) {
    gate_t g;
    gate_init(&g, &LIM);
    uint64_t ev, out[4];
    CHECK(gate_admit(&g, 1, 7, 0, &ev) == 0);
    CHECK(gate_admit(&g, 2, 8, 50, &ev) == 0);
    CHECK(gate_admit(&g, 3, 9, 90, &ev) == 0);
    CHECK(gate_expire(&g, 100, out, 4) == 0);
    CHECK(gate_expire(&g, 151, out, 4) == 2 && out[0] == 1 && out[1] == 2);
    CHECK(gate_is_stranger(&g, 3) && g.n == 1);
    CHECK_EQ_U64(g.expired, 2);
    gate_free(&g);
}

/* A held stranger (a RESUME the master keeps until its rebuild) keeps counting its bytes, fewer or more,
 * and outlives the deadline; the others behind it still expire. */
static void test_hold(void) {
    gate_t g;
    gate_init(&g, &LIM);
    uint64_t one, ev[GATE_EVICT_MAX], out[4];
    size_t n;
    CHECK(gate_admit(&g, 1, 7, 0, &one) == 0);
    CHECK(gate_admit(&g, 2, 8, 10, &one) == 0);
    CHECK(gate_reserve(&g, 1, 900, ev, &n) == 0);
    CHECK(gate_hold(&g, 1, 300, ev, &n) == 0 && n == 0);
    CHECK_EQ_U64(g.bytes, 300);
    CHECK(gate_hold(&g, 1, 1200, ev, &n) == -PERR_REFUSED); /* more than address 7 may hold: refused, removed */
    CHECK(!gate_is_stranger(&g, 1) && g.bytes == 0);
    CHECK(gate_admit(&g, 3, 7, 20, &one) == 0);
    CHECK(gate_hold(&g, 3, 400, ev, &n) == 0 && g.bytes == 400);
    CHECK(gate_expire(&g, 1000, out, 4) == 1 && out[0] == 2); /* 3 is held: only 2 expires */
    CHECK(gate_is_stranger(&g, 3));
    CHECK(gate_hold(&g, 99, 5000, ev, &n) == 0); /* not a stranger */
    gate_remove(&g, 3);
    CHECK_EQ_U64(g.bytes, 0);
    gate_free(&g);
}

int main(void) {
    RUN_TEST(test_per_address_cap_refuses_the_newcomer);
    RUN_TEST(test_total_cap_evicts_the_oldest_of_the_busiest_address);
    RUN_TEST(test_evict_one);
    RUN_TEST(test_byte_budget);
    RUN_TEST(test_deadline);
    RUN_TEST(test_hold);
    TEST_MAIN_END();
}
