/* test_err.c - the internal error table (libpccl/src/base/err.h): every code has its own description and a
 * pcclResult_t, codes are negative and distinct, and what is outside the table is named as such. */
#include <string.h>

#include "base/err.h"
#include "tinytest.h"

static void test_table(void) {
    CHECK(strcmp(perr_str(0), "success") == 0);
    CHECK_EQ_U64(perr_result(0), pcclSuccess);
    int n = 0;
#define CHECK_(name, res, txt)                                            \
    do {                                                                  \
        CHECK(-PERR_##name < 0);                                          \
        CHECK(strcmp(perr_str(-PERR_##name), txt) == 0);                  \
        CHECK_EQ_U64(perr_result(-PERR_##name), res);                     \
        for (int j = 1; j < PERR_COUNT_; j++)                             \
            if (j != PERR_##name) CHECK(strcmp(perr_str(-j), txt) != 0);  \
        n++;                                                              \
    } while (0);
    PCCL_ERRORS(CHECK_)
#undef CHECK_
    CHECK_EQ_U64(n, PERR_COUNT_ - 1);
    CHECK(strcmp(perr_str(-PERR_COUNT_), "unknown error") == 0);
    CHECK(strcmp(perr_str(1), "unknown error") == 0);
    CHECK_EQ_U64(perr_result(-1000), pcclInternalError);
}

int main(void) {
    RUN_TEST(test_table);
    TEST_MAIN_END();
}
