/* test_op_report.c - when a member whose streams or links to a peer failed to open reports that peer unreachable
 * to the master (op_reports_unreachable, the one rule of the ring and of recursive halving and doubling): a
 * commenced op does, for a connection it could not make and for one that never came; an op run under a grant
 * never does (the peer may just not have called yet); a connection that never came because the op was aborted
 * meanwhile is no report. */
#include <pthread.h>
#include <string.h>

#include "base/base.h"
#include "op/op_record.h"
#include "tinytest.h"

static void test_reports(void) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static pccl_op_t o;
    memset(&o, 0, sizeof o);
    CHECK(pwait_init(&o.w, &mu, NULL, 0) == 0);
    CHECK(op_reports_unreachable(&o, -PERR_IO));
    CHECK(op_reports_unreachable(&o, -PERR_TIMEOUT));
    o.pipelined = 1;
    CHECK(!op_reports_unreachable(&o, -PERR_IO));
    CHECK(!op_reports_unreachable(&o, -PERR_TIMEOUT));
    o.pipelined = 0;
    CHECK(pwait_cancel(&o.w, -PERR_CANCELLED) == 1);
    CHECK(!op_reports_unreachable(&o, -PERR_TIMEOUT));
    CHECK(op_reports_unreachable(&o, -PERR_IO));
    pwait_destroy(&o.w);
}

int main(void) {
    RUN_TEST(test_reports);
    TEST_MAIN_END();
}
