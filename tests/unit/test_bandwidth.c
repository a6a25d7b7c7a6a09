/* test_bandwidth.c - the bandwidth probe (p2p/bandwidth.h) on loopback: a probe over several streams
 * measures what a server received; a stream that fails ends the others at once (one wait ends the
 * measurement) instead of leaving them to run out their duration against a silent server. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/bandwidth.h"
#include "tinytest.h"

#define HELLO_LEN 27 /* an open run's hello (p2p_hello.h) */
#define NSTREAMS 4

typedef struct server {
    int lfd;
    int serve; /* 1: serve every stream; 0: close the first, leave the others unread */
    atomic_int done;
} server_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *serve_one(void *p) {
    int fd = (int)(intptr_t)p;
    uint8_t hello[HELLO_LEN];
    if (net_recv_all(fd, hello, sizeof hello) == 0) bw_serve_connection(NULL, fd, 3000, 5000, 0);
    close(fd);
    return NULL;
}

static void *server_main(void *p) {
    server_t *s = p;
    int fds[NSTREAMS];
    pthread_t th[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++) {
        fds[i] = accept(s->lfd, NULL, NULL);
        if (fds[i] < 0) return NULL;
        if (s->serve) pthread_create(&th[i], NULL, serve_one, (void *)(intptr_t)fds[i]);
        else if (i == 0) close(fds[0]);
    }
    if (s->serve) {
        for (int i = 0; i < NSTREAMS; i++) pthread_join(th[i], NULL);
        return NULL;
    }
    /* The silent ones stay open until the client is done (bounded). */
    for (int k = 0; k < 1000 && !atomic_load(&s->done); k++) usleep(10000);
    for (int i = 1; i < NSTREAMS; i++) close(fds[i]);
    return NULL;
}

/* One probe of NSTREAMS streams (duration_ms each) against a loopback server (serve: as server_t says).
 * @return bw_measure's result; *dt: how long it took. */
static int probe(int serve, int duration_ms, bw_result_t *r, double *dt) {
    server_t s = {.serve = serve};
    ccoip_socket_address_t to;
    char err[64];
    uint16_t port = 0;
    CHECK(addr_parse("127.0.0.1", 1, 0, &to, err, sizeof err) == 0);
    s.lfd = net_listen(&to, &port);
    CHECK(s.lfd >= 0);
    to.port = port;
    atomic_init(&s.done, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, server_main, &s) == 0);
    uint8_t uuid[16] = {1};
    double t0 = now_s();
    int rc = bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, duration_ms, NSTREAMS, 3000, r);
    *dt = now_s() - t0;
    atomic_store(&s.done, 1);
    pthread_join(th, NULL);
    close(s.lfd);
    return rc;
}

static void test_streams_measure(void) {
    bw_result_t r;
    double dt;
    CHECK(probe(1, 200, &r, &dt) == 0);
    CHECK(r.bytes > 0 && r.ns > 0 && r.mbps > 0);
}

static void test_failed_stream_ends_the_others(void) {
    bw_result_t r;
    double dt;
    /* Alone, each silent stream would send for 3 s and then block until its 6 s socket timeout. */
    int rc = probe(0, 3000, &r, &dt);
    CHECK(rc < 0 && rc != -PERR_INVALID);
    CHECK(dt < 2.0);
    CHECK(r.bytes == 0 && r.mbps == 0);
}

static void test_bad_arguments(void) {
    ccoip_socket_address_t to = {0};
    uint8_t uuid[16] = {1};
    bw_result_t r;
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 100, 0, 1000, &r) == -PERR_INVALID);
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 100, 65, 1000, &r) == -PERR_INVALID);
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 0, 1, 1000, &r) == -PERR_INVALID);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_streams_measure);
    RUN_TEST(test_failed_stream_ends_the_others);
    RUN_TEST(test_bad_arguments);
    TEST_MAIN_END();
}
