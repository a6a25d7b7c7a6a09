/* test_log_sink.c - pcclToolLogSetSink (base/log.c): records that pass the level go to the sink with their level,
 * component and message instead of stderr; NULL restores stderr; replacing the sink returns only once no thread
 * is inside the previous one, so that it may be released (threads log while it is replaced). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "pccl_tools.h"
#include "tinytest.h"

typedef struct {
    atomic_int calls;
    atomic_int inside;
    int last_level;
    char last_component[32];
    char last_msg[64];
} sink_t;

static void record(pcclLogLevel_t level, const char *component, const char *msg, void *ctx) {
    sink_t *s = ctx;
    atomic_fetch_add(&s->inside, 1);
    if (atomic_fetch_add(&s->calls, 1) == 0) {
        s->last_level = (int)level;
        snprintf(s->last_component, sizeof s->last_component, "%s", component);
        snprintf(s->last_msg, sizeof s->last_msg, "%s", msg);
    }
    usleep(200); /* long enough for a replacement to find a thread inside */
    atomic_fetch_sub(&s->inside, 1);
}

static void test_records_go_to_the_sink(void) {
    sink_t s = {0};
    pcclToolLogSetLevel(PCCL_LOG_WARN);
    pcclToolLogSetSink(record, &s);
    pcclToolLog(PCCL_LOG_INFO, "comp", "filtered %d", 1);
    CHECK(atomic_load(&s.calls) == 0);
    pcclToolLog(PCCL_LOG_WARN, "master", "peer %s left", "abc");
    CHECK(atomic_load(&s.calls) == 1);
    CHECK(s.last_level == PCCL_LOG_WARN);
    CHECK(strcmp(s.last_component, "master") == 0);
    CHECK(strcmp(s.last_msg, "peer abc left") == 0);
    pcclToolLog(PCCL_LOG_ERROR, NULL, "no component");
    CHECK(atomic_load(&s.calls) == 2);
    pcclToolLogSetSink(NULL, NULL);
    pcclToolLog(PCCL_LOG_ERROR, "test", "to stderr, not to the sink");
    CHECK(atomic_load(&s.calls) == 2);
}

static atomic_int stop;

static void *logger(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) pcclToolLog(PCCL_LOG_WARN, "t", "line");
    return NULL;
}

static void test_replacing_waits_for_threads_inside(void) {
    sink_t a = {0}, b = {0};
    pcclToolLogSetLevel(PCCL_LOG_WARN);
    pcclToolLogSetSink(record, &a);
    pthread_t t[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, logger, NULL) == 0);
    for (int round = 0; round < 50; round++) {
        sink_t *now = round % 2 ? &a : &b;
        sink_t *before = round % 2 ? &b : &a;
        int calls = atomic_load(&now->calls);
        pcclToolLogSetSink(record, now);
        CHECK(atomic_load(&before->inside) == 0);
        /* Until the loggers are inside the new sink (bounded), so that the next replacement finds them there. */
        for (int i = 0; i < 20000 && atomic_load(&now->calls) == calls; i++) usleep(100);
    }
    pcclToolLogSetSink(NULL, NULL);
    CHECK(atomic_load(&a.inside) == 0 && atomic_load(&b.inside) == 0);
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&a.calls) > 0 && atomic_load(&b.calls) > 0);
}

int main(void) {
    RUN_TEST(test_records_go_to_the_sink);
    RUN_TEST(test_replacing_waits_for_threads_inside);
    TEST_MAIN_END();
}
