/* test_master_wait.c - a peer's waits on its master link end at once when the peer leaves: a master that accepts
 * the connection and never sends its CHALLENGE (or never answers a handshake) holds pcclConnect only until
 * pcclExtLeave, not until PCCL_CONNECT_TIMEOUT_MS. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pccl.h"
#include "pccl_leave.h"
#include "base/net.h"
#include "tinytest.h"

typedef struct {
    pcclComm_t *c;
    pcclResult_t r;
    uint64_t done_ms;
} connect_arg_t;

static void *do_connect(void *p) {
    connect_arg_t *a = p;
    a->r = pcclConnect(a->c);
    a->done_ms = net_now_ms();
    return NULL;
}

/* pcclConnect against a listener that accepts into its backlog and never speaks: it must end within a second of
 * pcclExtLeave although the connect timeout is 30 s. */
static void silent_master_then_leave(const char *key_file) {
    uint16_t port = 0;
    int ls = net_listen_any(0, &port);
    CHECK(ls >= 0);
    setenv("PCCL_CONNECT_TIMEOUT_MS", "30000", 1);
    if (key_file) setenv("PCCL_KEY_FILE", key_file, 1);
    else unsetenv("PCCL_KEY_FILE");
    CHECK(pcclInit() == pcclSuccess);
    pcclCommCreateParams_t p = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                   .port = port}};
    connect_arg_t a = {.r = pcclSuccess};
    CHECK(pcclCreateCommunicator(&p, &a.c) == pcclSuccess);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, do_connect, &a) == 0);
    int fd = accept(ls, NULL, NULL); /* the connect went through: the peer now waits for the master */
    CHECK(fd >= 0);
    usleep(300 * 1000);
    uint64_t left = net_now_ms();
    CHECK(pcclExtLeave(a.c) == pcclSuccess);
    pthread_join(t, NULL);
    CHECK(a.r == pcclMasterConnectionFailed);
    CHECK(a.done_ms - left < 1000 * TT_SLOWDOWN);
    CHECK(pcclDestroyCommunicator(a.c) == pcclSuccess);
    close(fd);
    close(ls);
}

static void test_leave_ends_the_challenge_wait(void) { silent_master_then_leave(NULL); }

static void test_leave_ends_the_handshake_wait(void) {
    char path[] = "/tmp/pccl_test_master_wait_XXXXXX";
    int kfd = mkstemp(path);
    CHECK(kfd >= 0);
    const char key[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n";
    CHECK(write(kfd, key, sizeof key - 1) == (ssize_t)(sizeof key - 1));
    close(kfd);
    silent_master_then_leave(path);
    unlink(path);
}

int main(void) {
    RUN_TEST(test_leave_ends_the_challenge_wait);
    RUN_TEST(test_leave_ends_the_handshake_wait);
    TEST_MAIN_END();
}
