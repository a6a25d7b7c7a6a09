/* test_p2p_connect.c - opening a ring (TX) connection: the handshake succeeds
 * against a successor that acks, ends at its deadline against one whose kernel
 * completes the connect but that never answers (a stopped process), and ends
 * at once when its wait is cancelled (the accept round it served is over). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm.h"
#include "base/net.h"
#include "p2p/p2p.h"
#include "tinytest.h"

static pcclComm_t *comm_stub(void) {
    pcclComm_t *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->p2p.mu, NULL);
    pwait_cond_init(&c->p2p.cv);
    memset(c->uuid, 1, 16);
    snprintf(c->log_name, sizeof c->log_name, "test");
    return c;
}

static void comm_stub_free(pcclComm_t *c) {
    for (p2p_conn_t *k = c->p2p.conns, *nx; k; k = nx) {
        nx = k->next;
        close(k->fd);
        free(k);
    }
    free(c->p2p.peers);
    pthread_cond_destroy(&c->p2p.cv);
    pthread_mutex_destroy(&c->p2p.mu);
    free(c);
}

/* A successor (uuid 2...2, in next) listening on 127.0.0.1: the kernel completes connects into its
 * backlog whether or not anyone accepts them. */
static int successor(pcclComm_t *c, int *ls, uint8_t next[16]) {
    const ccoip_inet_address_t lo = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}};
    wire_peer_t p[2] = {{.ip = lo}, {.ip = lo}};
    memset(p[0].uuid, 1, 16);
    memset(p[1].uuid, 2, 16);
    memset(next, 2, 16);
    if ((*ls = net_listen_any(0, &p[1].port)) < 0) return -1;
    p2p_set_peers(c, p, 2);
    return 0;
}

static void *ack_one(void *arg) {
    int ls = *(int *)arg, fd = accept(ls, NULL, NULL);
    uint8_t hello[WIRE_P2P_HELLO_LEN], ack = 1;
    if (fd >= 0 && net_recv_all(fd, hello, sizeof hello) == 0) net_send_all(fd, &ack, 1);
    /* keep the stream open until the test closes the listener's side of things */
    uint8_t b;
    if (fd >= 0) {
        net_set_timeouts(fd, 3000);
        (void)!recv(fd, &b, 1, 0);
        close(fd);
    }
    return NULL;
}

static void test_handshake_ok(void) {
    pcclComm_t *c = comm_stub();
    int ls;
    uint8_t next[16];
    CHECK(successor(c, &ls, next) == 0);
    pthread_t t;
    pthread_create(&t, NULL, ack_one, &ls);
    p2p_conn_t *k = p2p_get_tx(c, next, 0, 2000, NULL);
    CHECK(k != NULL);
    if (k) {
        CHECK(k->dir == P2P_TX && k->slot == 0);
        p2p_release(c, k, 1);
    }
    pthread_join(t, NULL);
    close(ls);
    comm_stub_free(c);
}

static void test_silent_successor_times_out(void) {
    pcclComm_t *c = comm_stub();
    int ls;
    uint8_t next[16];
    CHECK(successor(c, &ls, next) == 0);
    uint64_t t0 = net_now_ms();
    CHECK(p2p_get_tx(c, next, 0, 300, NULL) == NULL);
    uint64_t took = net_now_ms() - t0;
    CHECK(took >= 290 && took < 2000);
    CHECK(c->p2p.conns == NULL);
    close(ls);
    comm_stub_free(c);
}

typedef struct {
    pwait_t *w;
    int after_ms;
} canceller_t;

static void *cancel_later(void *arg) {
    canceller_t *k = arg;
    usleep((useconds_t)k->after_ms * 1000);
    pwait_cancel(k->w, -PERR_CANCELLED);
    return NULL;
}

static void test_cancel_ends_the_wait(void) {
    pcclComm_t *c = comm_stub();
    int ls;
    uint8_t next[16];
    CHECK(successor(c, &ls, next) == 0);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pwait_t w;
    CHECK(pwait_init(&w, &mu, NULL, 1) == 0);
    canceller_t k = {.w = &w, .after_ms = 150};
    pthread_t th;
    uint64_t t0 = net_now_ms();
    CHECK(pthread_create(&th, NULL, cancel_later, &k) == 0);
    CHECK(p2p_get_tx(c, next, 0, 10000, &w) == NULL);
    uint64_t took = net_now_ms() - t0;
    pthread_join(th, NULL);
    CHECK(pwait_result(&w) == -PERR_CANCELLED);
    /* the wait's eventfd is in the poll: it ends when cancelled, not at a slice's end */
    CHECK(took >= 140 && took < 150 + 100);
    CHECK(c->p2p.conns == NULL);
    /* already cancelled: no connection is even tried */
    t0 = net_now_ms();
    CHECK(p2p_get_tx(c, next, 0, 10000, &w) == NULL);
    CHECK(net_now_ms() - t0 < 200);
    pwait_destroy(&w);
    close(ls);
    comm_stub_free(c);
}

static void test_wait_until(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    errno = 0;
    CHECK(net_wait_until(sv[0], POLLIN, net_now_ms() + 50, NULL) == -PERR_TIMEOUT);
    CHECK(errno == ETIMEDOUT);
    CHECK(write(sv[1], "x", 1) == 1);
    CHECK(net_wait_until(sv[0], POLLIN, net_now_ms() + 5000, NULL) == 0);
    /* a wait's eventfd ends it at once, the fd's readiness is not mistaken for it */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pwait_t w;
    CHECK(pwait_init(&w, &mu, NULL, 1) == 0);
    net_cancel_t by_wait = {.wait = &w};
    char x;
    CHECK(read(sv[0], &x, 1) == 1);
    CHECK(net_wait_until(sv[0], POLLIN, net_now_ms() + 30, &by_wait) == -PERR_TIMEOUT);
    CHECK(pwait_cancel(&w, -PERR_ABORTED) == 1 && pwait_cancel(&w, -PERR_LOST) == 0);
    uint64_t t0 = net_now_ms();
    errno = 0;
    CHECK(net_wait_until(sv[0], POLLIN, net_now_ms() + 5000, &by_wait) == -PERR_CANCELLED && errno == ECANCELED);
    CHECK(net_now_ms() - t0 < 100 && pwait_result(&w) == -PERR_ABORTED);
    pwait_destroy(&w);
    close(sv[0]);
    close(sv[1]);
}

int main(void) {
    RUN_TEST(test_handshake_ok);
    RUN_TEST(test_silent_successor_times_out);
    RUN_TEST(test_cancel_ends_the_wait);
    RUN_TEST(test_wait_until);
    TEST_MAIN_END();
}
