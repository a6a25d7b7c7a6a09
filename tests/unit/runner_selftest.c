/* runner_selftest.c - cases for the runner in tinytest.h, checked by runner_selftest.sh (the ctest
 * unit.runner_selftest): two tests fail on purpose, one hanging past its deadline and one crashing;
 * the others must pass, including those that run after the failures, and each starts from the state
 * main() built with its fixture around it; with TT_SELFTEST_THREAD main() starts a thread first, and no
 * test may run. Not a test_*.c file: its failures are meant. */
#include "tinytest.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static int fixture_state; /* 1 between setup and teardown */
static int carried;       /* what a test leaves behind: the next one must not see it */

static void set_up(void) {
    CHECK_EQ_U64(fixture_state, 0);
    fixture_state = 1;
}
static void tear_down(void) {
    CHECK_EQ_U64(fixture_state, 1);
    fixture_state = 0;
}
TT_FIXTURE(set_up, tear_down);
TT_TIMEOUT(2);

static void passes_first(void) {
    CHECK_EQ_U64(fixture_state, 1);
    CHECK_EQ_U64(carried, 0);
    carried = 1;
}

static void hangs(void) {
    for (;;) pause();
}

static void crashes(void) {
    raise(SIGSEGV);
}

static void passes_after_failures(void) {
    CHECK_EQ_U64(fixture_state, 1);
    CHECK_EQ_U64(carried, 0); /* passes_first's change stayed in its own process */
    carried = 1;
}

static void fails_a_check(void) {
    CHECK(getenv("TT_SELFTEST_FAIL_CHECK") == NULL);
}

static void *idle_thread(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(void) {
    pthread_t t;
    if (getenv("TT_SELFTEST_THREAD")) pthread_create(&t, NULL, idle_thread, NULL); /* what main() must not do */
    RUN_TEST(passes_first);
    RUN_TEST(hangs);
    RUN_TEST(crashes);
    RUN_TEST(passes_after_failures);
    RUN_TEST(fails_a_check);
    TEST_MAIN_END();
}
