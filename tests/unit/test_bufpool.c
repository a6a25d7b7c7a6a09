/* test_bufpool.c - the caching allocator reuses released buffers, picks the
 * smallest that fits, and never hands out a buffer that is too small. */
#include <string.h>
#include <unistd.h>

#include "base/bufpool.h"
#include "tinytest.h"

static void test_reuse_and_fit(void) {
    bufpool_t p;
    bufpool_init(&p);
    size_t c1, c2, c3;
    void *a = bufpool_get(&p, 1000, &c1), *b = bufpool_get(&p, 5000, &c2);
    CHECK(a && b && c1 == 1000 && c2 == 5000);
    memset(a, 1, c1);
    memset(b, 2, c2);
    bufpool_put(&p, b, c2);
    bufpool_put(&p, a, c1);
    void *d = bufpool_get(&p, 900, &c3); /* smallest that fits: a */
    CHECK(d == a && c3 == 1000);
    void *e = bufpool_get(&p, 2000, &c3); /* only b fits */
    CHECK(e == b && c3 == 5000);
    void *f = bufpool_get(&p, 6000, &c3); /* nothing fits: fresh */
    CHECK(f && f != a && f != b && c3 == 6000);
    bufpool_put(&p, d, 1000);
    bufpool_put(&p, e, 5000);
    bufpool_put(&p, f, 6000);
    bufpool_destroy(&p);
}

static void test_full_pool_keeps_larger(void) {
    bufpool_t p;
    bufpool_init(&p);
    void *bufs[BUFPOOL_SLOTS + 1];
    size_t cap;
    for (int i = 0; i <= BUFPOOL_SLOTS; i++) bufs[i] = bufpool_get(&p, (size_t)(i + 1) * 64, &cap);
    for (int i = 0; i <= BUFPOOL_SLOTS; i++) bufpool_put(&p, bufs[i], (size_t)(i + 1) * 64);
    /* the largest survived even though the pool was full when it came back */
    void *big = bufpool_get(&p, (size_t)(BUFPOOL_SLOTS + 1) * 64, &cap);
    CHECK(big == bufs[BUFPOOL_SLOTS]);
    bufpool_put(&p, big, cap);
    bufpool_destroy(&p);
}

static void test_trim_idle(void) {
    bufpool_t p;
    bufpool_init(&p);
    size_t cap;
    void *a = bufpool_get(&p, 4096, &cap);
    bufpool_put(&p, a, cap);
    bufpool_trim(&p, 3600 * 1000); /* recently used: kept */
    CHECK(p.total == 4096);
    usleep(20 * 1000);
    bufpool_trim(&p, 10);
    CHECK(p.total == 0);
    bufpool_destroy(&p);
}

/* A buffer above BUFPOOL_MAX_BYTES (the backup of a large tensor) is kept while
 * such requests come (reallocating it page-faults the whole buffer every op);
 * the bound falls back once the pool is idle and empty. malloc without touching
 * the memory only reserves address space, so this needs no real 1.5 GiB. */
static void test_large_buffer_kept(void) {
    bufpool_t p;
    bufpool_init(&p);
    size_t big = BUFPOOL_MAX_BYTES + (BUFPOOL_MAX_BYTES >> 1), cap, scap;
    void *a = bufpool_get(&p, big, &cap), *s = bufpool_get(&p, 4096, &scap);
    CHECK(a != NULL && s != NULL);
    bufpool_put(&p, s, scap);
    bufpool_trim(&p, 0); /* a buffer is still out: the bound stays high */
    CHECK(p.peak == big);
    bufpool_put(&p, a, cap);
    void *b = bufpool_get(&p, big, &cap);
    CHECK(b == a);
    bufpool_put(&p, b, cap);
    CHECK(p.total == big);
    bufpool_trim(&p, 0); /* idle and empty: back to the small bound */
    CHECK(p.total == 0 && p.peak == 0);
    void *c = bufpool_get(&p, 4096, &scap);
    bufpool_put(&p, c, scap);
    bufpool_destroy(&p);
}

int main(void) {
    RUN_TEST(test_reuse_and_fit);
    RUN_TEST(test_full_pool_keeps_larger);
    RUN_TEST(test_trim_idle);
    RUN_TEST(test_large_buffer_kept);
    TEST_MAIN_END();
}
