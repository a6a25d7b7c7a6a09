/* test_ring_sealed.c - both rings over encrypted links (an encrypted run's ring connections):
 * back-to-back operations on the same links give exact sums (plain ring) and bit-identical
 * results on every rank (quantized ring), and each operation's stream ends exactly where the
 * next one's header begins, however the sealed frames met full sockets. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pccl_quant.h"
#include "ring/ring.h"
#include "sec/sec_link.h"
#include "sec_pair.h"
#include "tinytest.h"

enum { N = 3 };

typedef struct rank {
    ring_io_t io;
    float *buf;
    uint8_t *wire;
    size_t count;
    uint32_t r;
    int quant, rc;
    uint64_t seq;
} rank_t;

static void *run(void *p) {
    rank_t *a = p;
    a->rc = a->quant ? ring_allreduce_quant(&a->io, a->buf, a->count, pcclFloat, pcclSum, pcclQuantMinMax, pcclUint8,
                                            a->wire, a->r, N, a->seq)
                     : ring_allreduce(&a->io, NULL, a->buf, a->count, pcclFloat, pcclSum, a->r, N, a->seq);
    return NULL;
}

/* A link from rank i to rank i+1: a socket pair and the two ends of one session. */
static void make_link(int fds[2], sec_link_t **tx, sec_link_t **rx) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    /* Small buffers: a sealed frame (256 KiB) always meets a full socket, so the send side has
     * bytes waiting while it decides what else to send. */
    int small = 16384;
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sec_session_t a, b;
    CHECK(session_pair_of("ring-sealed-test-key-0123456789abcdef0123", &a, &b) == 0);
    *tx = sec_link_new(&a);
    *rx = sec_link_new(&b);
}

static void test_back_to_back(void) {
    const size_t count = 3 * 300001; /* chunks of several frames, quantized or not */
    int fds[N][2];
    sec_link_t *tx[N], *rx[N];
    for (int i = 0; i < N; i++) make_link(fds[i], &tx[i], &rx[i]);
    int efd = eventfd(0, EFD_NONBLOCK);
    rank_t a[N];
    size_t wire_bytes = ring_quant_wire_bytes(count, pcclUint8, N);
    for (uint32_t r = 0; r < N; r++) {
        a[r] = (rank_t){.count = count, .r = r, .buf = malloc(count * sizeof(float)), .wire = malloc(wire_bytes)};
        a[r].io = (ring_io_t){.tx_fd = fds[r][0], .rx_fd = fds[(r + N - 1) % N][1], .abort_fd = efd,
                              .timeout_ms = 10000, .staging = malloc(65536), .staging_size = 65536,
                              .tx_link = tx[r], .rx_link = rx[(r + N - 1) % N]};
    }
    /* plain, quantized, quantized, plain, plain: every switch and repeat on the same streams */
    static const int quant[] = {0, 1, 1, 0, 0};
    for (size_t op = 0; op < sizeof quant / sizeof quant[0]; op++) {
        pthread_t t[N];
        for (uint32_t r = 0; r < N; r++) {
            for (size_t i = 0; i < count; i++) a[r].buf[i] = (float)((i * 7 + r + op) % 13);
            a[r].quant = quant[op];
            a[r].seq = 100 + op;
            pthread_create(&t[r], NULL, run, &a[r]);
        }
        for (uint32_t r = 0; r < N; r++) pthread_join(t[r], NULL);
        size_t bad = 0, differ = 0;
        for (uint32_t r = 0; r < N; r++) {
            CHECK(a[r].rc == 0);
            for (size_t i = 0; i < count; i++) {
                float want = 0;
                for (uint32_t q = 0; q < N; q++) want += (float)((i * 7 + q + op) % 13);
                /* the quantized sum is within a few steps of 36/255 of the exact one */
                bad += quant[op] ? fabsf(a[r].buf[i] - want) > 0.6f : a[r].buf[i] != want;
                differ += memcmp(&a[r].buf[i], &a[0].buf[i], sizeof(float)) != 0;
            }
        }
        CHECK(bad == 0);
        CHECK(differ == 0);
    }
    for (int i = 0; i < N; i++) {
        CHECK(sec_link_pending(tx[i]) == 0);
        CHECK(rx[i]->plen == 0 && rx[i]->rend == rx[i]->rstart); /* nothing sent beyond the last op */
        sec_link_free(tx[i]);
        sec_link_free(rx[i]);
        close(fds[i][0]);
        close(fds[i][1]);
    }
    for (uint32_t r = 0; r < N; r++) {
        free(a[r].buf);
        free(a[r].wire);
        free(a[r].io.staging);
    }
    close(efd);
}

int main(void) {
    RUN_TEST(test_back_to_back);
    TEST_MAIN_END();
}
