/* tinytest.h - minimal assertions for unit tests: each test binary is one
 * process; a failed CHECK prints file:line and the test exits non-zero. */
#ifndef TINYTEST_H
#define TINYTEST_H
#include <stdio.h>
#include <stdlib.h>

static int tt_failures = 0;
static int tt_checks = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        tt_checks++;                                                             \
        if (!(cond)) {                                                           \
            tt_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                       \
    do {                                                                         \
        unsigned long long tt_a_ = (unsigned long long)(a), tt_b_ = (unsigned long long)(b); \
        tt_checks++;                                                             \
        if (tt_a_ != tt_b_) {                                                    \
            tt_failures++;                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %llu != %llu\n", __FILE__, __LINE__, #a, #b, tt_a_, tt_b_); \
        }                                                                        \
    } while (0)

#define RUN_TEST(fn)                                                             \
    do {                                                                         \
        int tt_before_ = tt_failures;                                            \
        fn();                                                                    \
        fprintf(stderr, "%s %s\n", tt_failures == tt_before_ ? "ok  " : "FAIL", #fn); \
    } while (0)

#define TEST_MAIN_END()                                                          \
    do {                                                                         \
        fprintf(stderr, "%d checks, %d failed\n", tt_checks, tt_failures);       \
        return tt_failures ? 1 : 0;                                              \
    } while (0)

/* libgomp is not built with ThreadSanitizer, so its threads cause false reports:
 * under TSan the OpenMP tests run one thread (the serial/parallel equality is
 * checked in the normal and ASan builds). */
#if defined(__SANITIZE_THREAD__)
#define TT_OMP_THREADS(n) 1
#else
#define TT_OMP_THREADS(n) (n)
#endif
#endif
