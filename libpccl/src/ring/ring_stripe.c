/*
 * ring_stripe.c - one all-reduce over several connection pairs per ring edge (see ring.h).
 *
 * Over a long fat pipe one TCP connection reaches a fraction of the link (its window grows slowly
 * and every loss halves it); k connections each carrying a contiguous slice of every chunk add
 * their windows. Each stripe is a whole ring of its own (ring.c or ring_quant.c with io->stripe
 * set) on a thread of its own: a stripe waits on the network, not on the CPU, so k blocking
 * loops cost k mostly sleeping threads and keep the single-ring code unchanged. The chunks, their
 * owners and the order each element is reduced in are those of one ring, so the result is
 * bit-identical to pool 1 (the quantized ring slices whole blocks, so its blocks are too).
 */
#include "ring/ring.h"
#include "ring/ring_flow.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "pccl_kernels.h"

typedef struct stripe_group stripe_group_t;
typedef struct stripe_run {
    ring_io_t *io;
    stripe_group_t *g;
    int rc;
} stripe_run_t;

struct stripe_group {
    ring_io_t *ios;
    uint32_t n;
    atomic_int failed; /* first failure shuts every stripe's sockets down once */
    int (*fn)(ring_io_t *io, void *arg);
    void *arg;
    void (*shut)(void *ctx); /* NULL: the stripes' own sockets */
    void *shut_ctx;
};

/* A stripe that failed leaves its siblings' rings with no way to finish (the neighbours' stripes
 * fail too once they see the broken streams): shutting the sockets down wakes every poll on them
 * here and at both neighbours now instead of after the progress timeout. The connections are
 * dropped after a failed op anyway. */
static void fail_all(stripe_group_t *g) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g->failed, &expected, 1)) return;
    if (g->shut) {
        g->shut(g->shut_ctx);
        return;
    }
    for (uint32_t s = 0; s < g->n; s++) {
        shutdown(g->ios[s].tx_fd, SHUT_RDWR);
        shutdown(g->ios[s].rx_fd, SHUT_RDWR);
    }
}

static void *stripe_main(void *arg) {
    stripe_run_t *r = arg;
    r->rc = r->g->fn(r->io, r->g->arg);
    if (r->rc != 0) fail_all(r->g);
    return NULL;
}

int ring_run_stripes(ring_io_t *ios, uint32_t n, int (*fn)(ring_io_t *io, void *arg), void *arg, int *rcs) {
    return ring_run_stripes_shut(ios, n, fn, arg, NULL, NULL, rcs);
}

int ring_run_stripes_shut(ring_io_t *ios, uint32_t n, int (*fn)(ring_io_t *io, void *arg), void *arg,
                          void (*shut)(void *ctx), void *shut_ctx, int *rcs) {
    enum { MAX_STRIPES = 64 };
    if (n < 1 || n > MAX_STRIPES) {
        snprintf(ios[0].err, sizeof ios[0].err, "%u stripes (1..%d)", n, MAX_STRIPES);
        return -PERR_PROTOCOL;
    }
    stripe_group_t g = {.ios = ios, .n = n, .fn = fn, .arg = arg, .shut = shut, .shut_ctx = shut_ctx};
    stripe_run_t runs[MAX_STRIPES];
    pthread_t threads[MAX_STRIPES];
    int started[MAX_STRIPES] = {0};
    for (uint32_t s = 0; s < n; s++) {
        ios[s].stripe = s;
        ios[s].nstripes = n;
        runs[s] = (stripe_run_t){.io = &ios[s], .g = &g, .rc = -PERR_IO};
    }
    for (uint32_t s = 1; s < n; s++) {
        started[s] = pthread_create(&threads[s], NULL, stripe_main, &runs[s]) == 0;
        if (!started[s]) {
            snprintf(ios[s].err, sizeof ios[s].err, "cannot start the thread of stripe %u", s);
            fail_all(&g);
        }
    }
    stripe_main(&runs[0]);
    int rc = runs[0].rc;
    for (uint32_t s = 1; s < n; s++) {
        if (started[s]) pthread_join(threads[s], NULL);
        /* The reason worth reporting is the first real one, not a sibling's shut-down socket. */
        if (rc == 0 && runs[s].rc != 0) {
            rc = runs[s].rc;
            memcpy(ios[0].err, ios[s].err, sizeof ios[0].err);
        }
        ios[0].tx_bytes += ios[s].tx_bytes;
        ios[0].rx_bytes += ios[s].rx_bytes;
    }
    for (uint32_t s = 0; rcs && s < n; s++) rcs[s] = runs[s].rc;
    return rc;
}

static int allreduce_stripe(ring_io_t *io, void *arg) {
    ring_ar_args_t *g = arg;
    return g->algo == pcclQuantNone
               ? ring_allreduce(io, g->src, g->buf, g->count, g->dt, g->op, g->pos, g->world, g->op_seq)
               : ring_allreduce_quant(io, g->buf, g->count, g->dt, g->op, g->algo, g->qdt, g->wire, g->pos,
                                      g->world, g->op_seq);
}

int ring_allreduce_striped(ring_io_t *ios, uint32_t n, const void *src, void *buf, size_t count,
                           pcclDataType_t dt, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                           uint8_t *wire, uint32_t rank, uint32_t world, uint64_t op_seq) {
    ring_ar_args_t g = {.src = src, .buf = buf, .count = count, .dt = dt, .qdt = qdt, .op = op,
                        .algo = algo, .wire = wire, .pos = rank, .world = world, .op_seq = op_seq};
    int rcs[64];
    int rc = ring_run_stripes(ios, n, allreduce_stripe, &g, rcs);
    if (rc != 0 && n >= 1 && n <= 64 && algo == pcclQuantNone && ios[0].backup && (!src || src == buf))
        /* A failed stripe restored what it modified; a finished one holds results to put back. */
        for (uint32_t s = 0; s < n; s++)
            if (rcs[s] == 0) ring_restore_stripe(&ios[s], buf, count, pccl_dtype_size(dt), world);
    return rc;
}
