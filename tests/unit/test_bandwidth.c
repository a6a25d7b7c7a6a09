/* test_bandwidth.c - the bandwidth probe (p2p/bandwidth.h) on loopback: a probe over several streams
 * measures what a server received and the round trip of its pings; a server echoes at most BW_MAX_PINGS pings
 * before the measurement it then serves; a stream that fails ends the others at once (one wait ends the
 * measurement) instead of leaving them to run out their duration against a silent server; cancelling the
 * caller's wait ends a probe, a served probe and a greeting at once instead of at their socket deadlines. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "p2p/bandwidth.h"
#include "p2p/p2p_hello.h"
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
    if (net_recv_all(fd, hello, sizeof hello) == 0) bw_serve_connection(NULL, fd, 3000, 5000, 0, NULL);
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
    int rc = bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, duration_ms, NSTREAMS, 3000, NULL, r);
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
    CHECK(r.rtt_us > 0 && r.rtt_us < 1e6); /* a loopback round trip */
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
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 100, 0, 1000, NULL, &r) == -PERR_INVALID);
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 100, 65, 1000, NULL, &r) == -PERR_INVALID);
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 0, 1, 1000, NULL, &r) == -PERR_INVALID);
}

/* A wait with an eventfd, and a thread that cancels it after ms. */
typedef struct canceller {
    pthread_mutex_t mu;
    pwait_t w;
    int ms;
    pthread_t th;
} canceller_t;

static void *cancel_later(void *p) {
    canceller_t *k = p;
    usleep((useconds_t)k->ms * 1000);
    pwait_cancel(&k->w, -PERR_CANCELLED);
    return NULL;
}

static void canceller_start(canceller_t *k, int ms) {
    pthread_mutex_init(&k->mu, NULL);
    CHECK(pwait_init(&k->w, &k->mu, NULL, 1) == 0);
    k->ms = ms;
    CHECK(pthread_create(&k->th, NULL, cancel_later, k) == 0);
}

static void canceller_end(canceller_t *k) {
    pthread_join(k->th, NULL);
    pwait_destroy(&k->w);
    pthread_mutex_destroy(&k->mu);
}

/* A loopback listener and a connection to it: *client and *server, both connected. */
static void connected_pair(int *client, int *server, ccoip_socket_address_t *to) {
    char err[64];
    uint16_t port = 0;
    CHECK(addr_parse("127.0.0.1", 1, 0, to, err, sizeof err) == 0);
    int lfd = net_listen(to, &port);
    CHECK(lfd >= 0);
    to->port = port;
    *client = net_connect_cancellable(to, 1000, NULL);
    CHECK(*client >= 0);
    *server = accept(lfd, NULL, NULL);
    CHECK(*server >= 0);
    close(lfd);
}

/* The server reads the hello and then nothing: alone, the probe would send for 5 s and then wait out its
 * 10 s of silence. */
static void test_cancelled_probe_ends_at_once(void) {
    for (int streams = 1; streams <= NSTREAMS; streams += NSTREAMS - 1) {
        ccoip_socket_address_t to;
        char err[64];
        uint16_t port = 0;
        CHECK(addr_parse("127.0.0.1", 1, 0, &to, err, sizeof err) == 0);
        int lfd = net_listen(&to, &port); /* its backlog takes the connections; nobody reads them */
        CHECK(lfd >= 0);
        to.port = port;
        canceller_t k;
        canceller_start(&k, 300);
        uint8_t uuid[16] = {1};
        bw_result_t r;
        double t0 = now_s();
        int rc = bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 5000, streams, 10000, &k.w, &r);
        double dt = now_s() - t0;
        canceller_end(&k);
        CHECK(rc == -PERR_CANCELLED);
        CHECK(dt < 2.0);
        CHECK(r.bytes == 0 && r.mbps == 0);
        close(lfd);
    }
}

/* A wait cancelled before the probe starts: nothing is dialled. */
static void test_probe_under_a_cancelled_wait(void) {
    pthread_mutex_t mu;
    pwait_t w;
    pthread_mutex_init(&mu, NULL);
    CHECK(pwait_init(&w, &mu, NULL, 1) == 0);
    pwait_cancel(&w, -PERR_RESTARTED);
    ccoip_socket_address_t to;
    char err[64];
    CHECK(addr_parse("127.0.0.1:9", 1, 0, &to, err, sizeof err) == 0);
    uint8_t uuid[16] = {1};
    bw_result_t r;
    CHECK(bw_measure(&to, uuid, NULL, NULL, BW_CLIENT_SENDS, 100, 1, 1000, &w, &r) == -PERR_RESTARTED);
    pwait_destroy(&w);
    pthread_mutex_destroy(&mu);
}

/* A client that asks to send for 5 s and then sends nothing: the server would wait out 10 s of silence. */
static void test_cancelled_service_ends_at_once(void) {
    int client, server;
    ccoip_socket_address_t to;
    connected_pair(&client, &server, &to);
    uint8_t req[5] = {BW_CLIENT_SENDS};
    wire_put_u32(req + 1, 5000);
    CHECK(net_send_all(client, req, sizeof req) == 0);
    canceller_t k;
    canceller_start(&k, 300);
    double t0 = now_s();
    bw_serve_connection(NULL, server, 10000, 10000, 0, &k.w);
    double dt = now_s() - t0;
    canceller_end(&k);
    CHECK(dt < 2.0);
    close(client);
    close(server);
}

static void *serve_fd(void *p) {
    int fd = (int)(intptr_t)p;
    bw_serve_connection(NULL, fd, 3000, 5000, 0, NULL);
    close(fd);
    return NULL;
}

/* Pings are echoed byte for byte, then the measurement is served on the same connection; a request for more
 * than BW_MAX_PINGS is refused (closed) before any echo. */
static void test_pings_then_measure(void) {
    int client, server;
    ccoip_socket_address_t to;
    connected_pair(&client, &server, &to);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, serve_fd, (void *)(intptr_t)server) == 0);
    uint8_t req[5] = {BW_PING};
    wire_put_u32(req + 1, 3);
    CHECK(net_send_all(client, req, sizeof req) == 0);
    for (int i = 0; i < 3; i++) {
        uint8_t ping[8], echo[8];
        memset(ping, 0x40 + i, sizeof ping);
        CHECK(net_send_all(client, ping, sizeof ping) == 0);
        CHECK(net_recv_all(client, echo, sizeof echo) == 0 && memcmp(ping, echo, sizeof ping) == 0);
    }
    req[0] = BW_CLIENT_SENDS;
    wire_put_u32(req + 1, 50);
    uint8_t data[1000] = {0}, res[16];
    CHECK(net_send_all(client, req, sizeof req) == 0 && net_send_all(client, data, sizeof data) == 0);
    shutdown(client, SHUT_WR);
    CHECK(net_recv_all(client, res, sizeof res) == 0 && wire_get_u64(res) == sizeof data);
    pthread_join(th, NULL);
    close(client);

    connected_pair(&client, &server, &to);
    CHECK(pthread_create(&th, NULL, serve_fd, (void *)(intptr_t)server) == 0);
    req[0] = BW_PING;
    wire_put_u32(req + 1, BW_MAX_PINGS + 1);
    uint8_t ping[8] = {1}, echo[8];
    CHECK(net_send_all(client, req, sizeof req) == 0 && net_send_all(client, ping, sizeof ping) == 0);
    CHECK(net_recv_all(client, echo, sizeof echo) != 0); /* closed, nothing echoed */
    pthread_join(th, NULL);
    close(client);
}

/* A connection that never says hello: p2p_greet would wait SEC_HS_TIMEOUT_MS. */
static void test_cancelled_greeting_ends_at_once(void) {
    int client, server;
    ccoip_socket_address_t to;
    connected_pair(&client, &server, &to);
    canceller_t k;
    canceller_start(&k, 300);
    uint8_t self[16] = {2};
    p2p_intro_t who;
    sec_link_t *link = NULL;
    char err[160];
    double t0 = now_s();
    int rc = p2p_greet(server, NULL, self, &k.w, &who, &link, err, sizeof err);
    double dt = now_s() - t0;
    canceller_end(&k);
    CHECK(rc == -PERR_CANCELLED);
    CHECK(dt < 2.0 && dt < SEC_HS_TIMEOUT_MS / 1000.0);
    CHECK(link == NULL);
    close(client);
    close(server);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_streams_measure);
    RUN_TEST(test_failed_stream_ends_the_others);
    RUN_TEST(test_bad_arguments);
    RUN_TEST(test_cancelled_probe_ends_at_once);
    RUN_TEST(test_probe_under_a_cancelled_wait);
    RUN_TEST(test_cancelled_service_ends_at_once);
    RUN_TEST(test_cancelled_greeting_ends_at_once);
    RUN_TEST(test_pings_then_measure);
    TEST_MAIN_END();
}
