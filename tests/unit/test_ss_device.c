/* test_ss_device.c - streaming of shared-state tensors (libpccl/src/ss/ss_device.c)
 * over a local socket pair: exact round trip of an odd-sized tensor in chunks,
 * a silent reader or writer ends the transfer within the socket timeout
 * (tx counts only what went out), device checks, and the hash. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/net.h"
#include "pccl_kernels.h"
#include "ss/ss_device.h"
#include "tinytest.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct {
    int fd;
    pcclTensorInfo_t t;
    atomic_uint_fast64_t tx;
    int rc;
} sender_t;

static void *send_thread(void *arg) {
    sender_t *s = arg;
    ss_staging_t stg = {0};
    s->rc = ss_send_tensor(NULL, s->fd, &s->t, &stg, &s->tx);
    ss_staging_free(&stg);
    return NULL;
}

static void test_round_trip(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    net_set_timeouts(sv[0], 5000);
    net_set_timeouts(sv[1], 5000);
    size_t count = (SS_CHUNK * 2 + 6) / 2; /* two full chunks and a short one, float16 */
    uint16_t *a = malloc(count * 2), *b = calloc(count, 2);
    for (size_t i = 0; i < count; i++) a[i] = (uint16_t)(i * 2654435761u >> 7);
    sender_t s = {.fd = sv[0], .t = {.name = "h", .data = a, .count = count, .datatype = pcclFloat16}};
    atomic_init(&s.tx, 0);
    pthread_t th;
    pthread_create(&th, NULL, send_thread, &s);
    pcclTensorInfo_t r = {.name = "h", .data = b, .count = count, .datatype = pcclFloat16};
    uint16_t *land = malloc(count * 2);
    CHECK(ss_recv_bytes(NULL, sv[1], land, count * 2) == 0);
    pthread_join(th, NULL);
    CHECK(s.rc == 0);
    CHECK_EQ_U64(atomic_load(&s.tx), count * 2);
    CHECK(memcmp(a, land, count * 2) == 0);
    /* received bytes reach the tensor only when landed */
    CHECK(b[0] == 0 && b[count - 1] == 0);
    CHECK(ss_land(&r, land) == 0);
    CHECK(memcmp(a, b, count * 2) == 0);
    free(land);
    uint64_t h1 = 0, h2 = 0;
    CHECK(ss_hash(&s.t, &h1) == 0 && ss_hash(&r, &h2) == 0 && h1 == h2 && h1 == pccl_simplehash(a, count * 2));
    close(sv[0]);
    close(sv[1]);
    free(a);
    free(b);
}

static void test_silent_peer(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    net_set_timeouts(sv[0], 300);
    net_set_timeouts(sv[1], 300);
    size_t n = SS_CHUNK * 8;
    uint8_t *a = calloc(n, 1);
    pcclTensorInfo_t t = {.name = "big", .data = a, .count = n, .datatype = pcclUint8};
    /* nobody reads sv[1]: the send gives up after the timeout; tx counts only whole chunks that went out */
    atomic_uint_fast64_t tx;
    atomic_init(&tx, 0);
    ss_staging_t stg = {0};
    double t0 = now_s();
    CHECK(ss_send_tensor(NULL, sv[0], &t, &stg, &tx) == -PERR_TIMEOUT);
    double dt = now_s() - t0;
    CHECK(dt < 5.0);
    CHECK(atomic_load(&tx) < n && atomic_load(&tx) % SS_CHUNK == 0);
    /* nobody writes sv[0] (drain what is buffered first): the receive gives up after the timeout */
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    net_set_timeouts(sp[1], 300);
    CHECK(write(sp[0], a, 100) == 100);
    t0 = now_s();
    CHECK(ss_recv_bytes(NULL, sp[1], a, n) == -PERR_TIMEOUT);
    dt = now_s() - t0;
    CHECK(dt >= 0.25 && dt < 5.0);
    /* a peer that closes mid-tensor ends it at once */
    close(sp[0]);
    CHECK(ss_recv_bytes(NULL, sp[1], a, n) == -PERR_IO);
    ss_staging_free(&stg);
    close(sp[1]);
    close(sv[0]);
    close(sv[1]);
    free(a);
}

static void test_device_check(void) {
    float x[4] = {0};
    pcclTensorInfo_t t = {.name = "x", .data = x, .count = 4, .datatype = pcclFloat, .device_type = pcclDeviceCpu};
    CHECK(ss_device_check(&t) == 0);
    t.device_type = pcclDeviceCuda;
#ifdef PCCL_HAS_CUDA
    CHECK(ss_device_check(&t) == (pccl_cuda_available() ? 0 : -PERR_INVALID));
#else
    CHECK(ss_device_check(&t) == -PERR_INVALID); /* built without CUDA: refused with a logged reason */
#endif
    t.device_type = (pcclDeviceType_t)7;
    CHECK(ss_device_check(&t) == -PERR_INVALID);
    CHECK_EQ_U64(ss_tensor_bytes(&(pcclTensorInfo_t){.count = 5, .datatype = pcclDouble}), 40);
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_silent_peer);
    RUN_TEST(test_device_check);
    TEST_MAIN_END();
}
