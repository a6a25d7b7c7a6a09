/* ring_coll_harness.h - W ring members on threads over socket pairs (K stripes per edge, optionally sealed
 * links) running ring_allgather / ring_reduce_scatter / ring_broadcast, for test_ring_coll*.c. */
#ifndef PCCL_TEST_RING_COLL_HARNESS_H
#define PCCL_TEST_RING_COLL_HARNESS_H

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ring/ring.h"
#include "sec/sec_link.h"
#include "sec_pair.h"
#include "tinytest.h"

enum { MAXW = 5, MAXK = 3 };
typedef enum { KIND_AG, KIND_RS, KIND_BC } kind_t;

typedef struct net {
    uint32_t W, K;
    int links[MAXK][MAXW][2]; /* stripe s: position p sends on [s][p][0], position p+1 receives on [s][p][1] */
    sec_link_t *tx[MAXK][MAXW], *rx[MAXK][MAXW];
    int efd;
    atomic_int abort_flag;
} net_t;

typedef struct member {
    ring_io_t io[MAXK];
    kind_t kind;
    uint32_t K, pos, W;
    uint64_t seq;
    const uint32_t *rank_of;
    const void *src;
    void *buf; /* all-gather and broadcast output; reduce-scatter out */
    const uint64_t *counts;
    size_t esz, count, bytes;
    pcclDataType_t dt;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t algo;
    uint8_t *wire;
    const uint8_t *holds;
    int rc;
} member_t;

static void nonblock_fd(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* Opens W x K links; sealed: each carries one encrypted session (small socket buffers, as test_ring_sealed). */
static void net_open(net_t *n, uint32_t W, uint32_t K, int sealed) {
    memset(n, 0, sizeof *n);
    n->W = W;
    n->K = K;
    n->efd = eventfd(0, EFD_NONBLOCK);
    for (uint32_t s = 0; s < K; s++)
        for (uint32_t p = 0; p < W; p++) {
            CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, n->links[s][p]) == 0);
            nonblock_fd(n->links[s][p][0]);
            nonblock_fd(n->links[s][p][1]);
            if (!sealed) continue;
            int small = 16384;
            setsockopt(n->links[s][p][0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
            setsockopt(n->links[s][p][1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
            sec_session_t a, b;
            CHECK(session_pair_of("ring-coll-test-key-0123456789abcdef012345", &a, &b) == 0);
            n->tx[s][p] = sec_link_new(&a);
            n->rx[s][p] = sec_link_new(&b);
        }
}

static void net_close(net_t *n) {
    for (uint32_t s = 0; s < n->K; s++)
        for (uint32_t p = 0; p < n->W; p++) {
            close(n->links[s][p][0]);
            close(n->links[s][p][1]);
            if (n->tx[s][p]) sec_link_free(n->tx[s][p]);
            if (n->rx[s][p]) sec_link_free(n->rx[s][p]);
        }
    close(n->efd);
}

/* Member at position p: its K connection pairs, a staging buffer each. */
static void member_init(member_t *m, net_t *n, kind_t kind, uint32_t p, size_t staging) {
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->K = n->K;
    m->pos = p;
    m->W = n->W;
    m->seq = 7;
    uint32_t prev = (p + n->W - 1) % n->W;
    for (uint32_t s = 0; s < n->K; s++)
        m->io[s] = (ring_io_t){.tx_fd = n->links[s][p][0], .rx_fd = n->links[s][prev][1], .abort_fd = n->efd,
                               .abort_flag = &n->abort_flag, .timeout_ms = 10000, .staging = malloc(staging),
                               .staging_size = staging, .tx_link = n->tx[s][p], .rx_link = n->rx[s][prev]};
}

static void member_free(member_t *m) {
    for (uint32_t s = 0; s < m->K; s++) free(m->io[s].staging);
}

static void *member_main(void *arg) {
    member_t *m = arg;
    switch (m->kind) {
    case KIND_AG:
        m->rc = ring_allgather(m->io, m->K, m->src, m->buf, m->counts, m->esz, m->rank_of, m->pos, m->W, m->seq);
        break;
    case KIND_RS:
        m->rc = ring_reduce_scatter(m->io, m->K, m->src, m->buf, m->count, m->dt, m->op, m->algo, pcclUint8, m->wire,
                                    m->rank_of, m->pos, m->W, m->seq);
        break;
    case KIND_BC:
        m->rc = ring_broadcast(m->io, m->K, m->src, m->buf, m->bytes, m->holds, m->pos, m->W, m->seq);
        break;
    }
    return NULL;
}

/* Runs members[0..n) on threads of their own and waits for all. */
static void run_members(member_t *m, uint32_t n) {
    pthread_t t[MAXW];
    for (uint32_t i = 0; i < n; i++) CHECK(pthread_create(&t[i], NULL, member_main, &m[i]) == 0);
    for (uint32_t i = 0; i < n; i++) pthread_join(t[i], NULL);
}

/* A permutation of 0..W-1 that moves rank 0 for every W > 1: (m p + 1) mod W with m coprime to W. */
static void perm_of(uint32_t *rank_of, uint32_t W) {
    uint32_t m = W % 3 ? 3 : 2;
    for (uint32_t p = 0; p < W; p++) rank_of[p] = (m * p + 1) % W;
}

#endif
