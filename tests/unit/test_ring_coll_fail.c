/* test_ring_coll_fail.c - the ring all-gather, reduce-scatter and broadcast over sealed (encrypted) links back to
 * back, with spliced sends, and how each fails: an abort mid-stream returns -PERR_CANCELLED promptly, a member
 * that goes away gives -PERR_IO, a predecessor on another op_seq gives -PERR_PROTOCOL (also on an edge that
 * carries no payload), no progress gives -PERR_TIMEOUT, and arguments that cannot work give -PERR_INVALID. In place
 * with a backup the broadcast saves buf as it receives into it: a run that fails after some bytes arrived leaves
 * buf bit for bit as it was, and one that succeeds leaves all of buf's input in the backup. */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <time.h>

#include "base/net.h"
#include "pccl_quant.h"
#include "ring/ring_flow.h"
#include "ring_coll_harness.h"

enum { COUNT = 3 * 40000 + 1 }; /* floats; blocks of several sealed frames */

typedef struct kit {
    member_t m[MAXW];
    uint32_t rank_of[MAXW];
    uint64_t counts[MAXW];
    uint8_t holds[MAXW];
    float *in[MAXW], *out[MAXW];
} kit_t;

/* Members of one kind at positions 0..W-1 (variant: a quantized reduce-scatter; a broadcast where every member
 * holds). The inputs depend on the position and round. */
static void kit_setup(kit_t *k, net_t *n, kind_t kind, int variant, uint64_t seq, int round, size_t staging) {
    const uint32_t W = n->W;
    perm_of(k->rank_of, W);
    for (uint32_t p = 0; p < W; p++) {
        k->counts[p] = COUNT / W + p;
        k->holds[p] = kind == KIND_BC && (variant || p == W - 1); /* the root: the last position */
    }
    for (uint32_t p = 0; p < W; p++) {
        member_t *m = &k->m[p];
        member_init(m, n, kind, p, staging);
        m->seq = seq;
        m->rank_of = k->rank_of;
        k->in[p] = malloc(COUNT * sizeof(float));
        k->out[p] = calloc(COUNT + W * W, sizeof(float));
        uint32_t q = k->holds[p] ? W - 1 : p; /* holders hold the root's data */
        for (size_t i = 0; i < COUNT; i++) k->in[p][i] = (float)((i * 7 + q * 3 + (size_t)round) % 13);
        m->src = k->in[p];
        m->buf = k->out[p];
        m->counts = k->counts;
        m->esz = sizeof(float);
        m->count = COUNT;
        m->dt = pcclFloat;
        m->op = pcclSum;
        m->algo = kind == KIND_RS && variant ? pcclQuantMinMax : pcclQuantNone;
        m->wire = m->algo != pcclQuantNone ? malloc(ring_quant_wire_bytes(COUNT, pcclUint8, W)) : NULL;
        m->bytes = COUNT * sizeof(float);
        m->holds = k->holds;
        if (kind == KIND_BC && !k->holds[p]) m->src = NULL;
    }
}

static void kit_free(kit_t *k, uint32_t W) {
    for (uint32_t p = 0; p < W; p++) {
        member_free(&k->m[p]);
        free(k->in[p]);
        free(k->out[p]);
        free(k->m[p].wire);
    }
}

/* Checks what every member got: all blocks by rank, its reduced block (exact, or within the quantization error),
 * or the holders' bytes. */
static void kit_check(const kit_t *k, uint32_t W, kind_t kind, int variant) {
    size_t bad = 0;
    for (uint32_t p = 0; p < W; p++) {
        CHECK(k->m[p].rc == 0);
        if (kind == KIND_AG) {
            size_t at = 0;
            for (uint32_t r = 0; r < W; r++) {
                uint32_t q = 0; /* the position of rank r */
                while (k->rank_of[q] != r) q++;
                bad += memcmp(k->out[p] + at, k->in[q], k->counts[r] * sizeof(float)) != 0;
                at += k->counts[r];
            }
        } else if (kind == KIND_RS) {
            uint32_t r = k->rank_of[p];
            size_t off = r * (COUNT / W) + (r < COUNT % W ? r : COUNT % W), len = COUNT / W + (r < COUNT % W);
            for (size_t i = 0; i < len; i++) {
                float want = 0;
                for (uint32_t q = 0; q < W; q++) want += k->in[q][off + i];
                bad += variant ? fabsf(k->out[p][i] - want) > 0.6f : k->out[p][i] != want;
            }
        } else {
            bad += memcmp(k->out[p], k->in[W - 1], COUNT * sizeof(float)) != 0;
        }
    }
    CHECK(bad == 0);
}

/* Every kind back to back on the same sealed links (one and two stripes): each operation's streams end where the
 * next one's header begins, and nothing is left in a link at the end. */
static void test_sealed_back_to_back(void) {
    static const struct { kind_t kind; int variant; } ops[] = {
        {KIND_AG, 0}, {KIND_RS, 0}, {KIND_RS, 1}, {KIND_BC, 0}, {KIND_BC, 1}, {KIND_AG, 0}, {KIND_RS, 1}};
    for (uint32_t K = 1; K <= 2; K++) {
        net_t n;
        net_open(&n, 3, K, 1);
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            kit_t k;
            kit_setup(&k, &n, ops[i].kind, ops[i].variant, 100 + i, (int)i, 65536);
            run_members(k.m, 3);
            kit_check(&k, 3, ops[i].kind, ops[i].variant);
            kit_free(&k, 3);
        }
        for (uint32_t s = 0; s < K; s++)
            for (uint32_t p = 0; p < 3; p++) {
                CHECK(sec_link_pending(n.tx[s][p]) == 0);
                CHECK(n.rx[s][p]->plen == 0 && n.rx[s][p]->rend == n.rx[s][p]->rstart);
            }
        net_close(&n);
    }
}

/* Spliced sends (io.tx_pipe): the all-gather and the broadcast send every element by reference, the
 * reduce-scatter its first. */
static void test_spliced(void) {
    static const kind_t kinds[] = {KIND_AG, KIND_RS, KIND_BC};
    for (size_t i = 0; i < 3; i++) {
        net_t n;
        net_open(&n, 4, 2, 0);
        kit_t k;
        kit_setup(&k, &n, kinds[i], 0, 7, 0, 4096);
        int pipes[MAXW][MAXK][2];
        for (uint32_t p = 0; p < 4; p++)
            for (uint32_t s = 0; s < 2; s++) {
                CHECK(pipe2(pipes[p][s], O_NONBLOCK) == 0);
                k.m[p].io[s].tx_pipe = pipes[p][s];
            }
        run_members(k.m, 4);
        kit_check(&k, 4, kinds[i], 0);
        kit_free(&k, 4);
        for (uint32_t p = 0; p < 4; p++)
            for (uint32_t s = 0; s < 2; s++) close(pipes[p][s][0]), close(pipes[p][s][1]);
        net_close(&n);
    }
}

/* Members 0 and 1 of 3 run (a broadcast from member 2); member 2 never comes (then abort: the eventfd is written and the flag set after
 * a moment) or goes away after a moment (its sockets shut down). */
static void partial_ring(kind_t kind, int variant, int abort_it, int want_rc) {
    net_t n;
    net_open(&n, 3, 1 + (uint32_t)variant, 0);
    kit_t k;
    kit_setup(&k, &n, kind, kind == KIND_BC ? 0 : variant, 7, 0, 4096);
    pthread_t t[2];
    uint64_t t0 = net_now_ms();
    for (int p = 0; p < 2; p++) CHECK(pthread_create(&t[p], NULL, member_main, &k.m[p]) == 0);
    poll(NULL, 0, 100);
    if (abort_it) {
        atomic_store(&n.abort_flag, 1);
        uint64_t one = 1;
        CHECK(write(n.efd, &one, sizeof one) == sizeof one);
    } else {
        for (uint32_t s = 0; s < n.K; s++) shutdown(n.links[s][2][0], SHUT_RDWR), shutdown(n.links[s][1][1], SHUT_RDWR);
    }
    for (int p = 0; p < 2; p++) pthread_join(t[p], NULL);
    CHECK(net_now_ms() - t0 < 3000); /* the progress timeout is 10 s */
    for (int p = 0; p < 2; p++) {
        if (k.m[p].rc != want_rc) fprintf(stderr, "kind %d variant %d member %d: %d\n", kind, variant, p, k.m[p].rc);
        CHECK(k.m[p].rc == want_rc);
    }
    kit_free(&k, 3);
    net_close(&n);
}

static void test_abort_mid_stream(void) {
    for (int v = 0; v <= 1; v++) {
        partial_ring(KIND_AG, v, 1, -PERR_CANCELLED);
        partial_ring(KIND_RS, v, 1, -PERR_CANCELLED);
        partial_ring(KIND_BC, v, 1, -PERR_CANCELLED);
    }
}

static void test_member_goes_away(void) {
    for (int v = 0; v <= 1; v++) {
        partial_ring(KIND_AG, v, 0, -PERR_IO);
        partial_ring(KIND_RS, v, 0, -PERR_IO);
        partial_ring(KIND_BC, v, 0, -PERR_IO);
    }
}

/* Two members on different operations: the predecessor's header is stale, also where no payload moves (a
 * broadcast between two holders). */
static void test_stale_op_seq(void) {
    static const struct { kind_t kind; int variant; } ops[] = {
        {KIND_AG, 0}, {KIND_RS, 0}, {KIND_RS, 1}, {KIND_BC, 0}, {KIND_BC, 1}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        net_t n;
        net_open(&n, 2, 1, 0);
        kit_t k;
        kit_setup(&k, &n, ops[i].kind, ops[i].variant, 7, 0, 4096);
        k.m[1].seq = 8;
        run_members(k.m, 2);
        /* Whoever finds it first fails and shuts its sockets down: the other finds the stale header too, or the
         * closed connection. */
        int stale = 0;
        for (int p = 0; p < 2; p++) {
            CHECK(k.m[p].rc == -PERR_PROTOCOL || k.m[p].rc == -PERR_IO);
            if (k.m[p].rc != -PERR_PROTOCOL) continue;
            stale++;
            CHECK(strstr(k.m[p].io[0].err, "another operation") != NULL);
        }
        CHECK(stale >= 1);
        kit_free(&k, 2);
        net_close(&n);
    }
}

static void test_no_progress_times_out(void) {
    net_t n;
    net_open(&n, 2, 1, 0);
    kit_t k;
    kit_setup(&k, &n, KIND_AG, 0, 7, 0, 4096);
    k.m[0].io[0].timeout_ms = 200;
    run_members(k.m, 1);
    CHECK(k.m[0].rc == -PERR_TIMEOUT);
    kit_free(&k, 2);
    net_close(&n);
}

static void test_invalid_arguments(void) {
    net_t n;
    net_open(&n, 3, 1, 0);
    kit_t k;
    kit_setup(&k, &n, KIND_BC, 0, 7, 0, 4096);
    memset(k.holds, 0, sizeof k.holds);
    run_members(k.m, 1);
    CHECK(k.m[0].rc == -PERR_INVALID); /* nobody holds the data */
    kit_free(&k, 3);
    kit_setup(&k, &n, KIND_RS, 1, 7, 0, 4096);
    k.m[0].dt = pcclInt32; /* integers do not quantize */
    k.rank_of[2] = 3;      /* no such rank */
    k.m[1].kind = KIND_AG;
    run_members(k.m, 2);
    CHECK(k.m[0].rc == -PERR_INVALID);
    CHECK(k.m[1].rc == -PERR_INVALID);
    kit_free(&k, 3);
    net_close(&n);
}

/* Bytes of every value 0..255 in an order that depends on seed (no two neighbours equal). */
static void fill_pattern(uint8_t *b, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

/* In place with a backup, position 1 of 2 receives part of the broadcast from a hand-made root (the header and up
 * to half of each stripe's slice, then nothing), is aborted, and must hold its input again bit for bit. */
static void restore_after_partial(uint32_t K, int seed) {
    enum { BC_MAGIC = 0x52424353u }; /* ring_bcast.c's header */
    const kind_t kind = KIND_BC;
    net_t n;
    net_open(&n, 2, K, 0);
    uint32_t rank_of[2] = {1, 0};
    uint64_t counts[2] = {COUNT / 2 + 3, COUNT / 2}; /* by rank */
    uint8_t holds[2] = {1, 0};
    size_t bytes = (counts[0] + counts[1]) * sizeof(float);
    uint8_t *buf = malloc(bytes), *orig = malloc(bytes), *backup = malloc(bytes), *junk = malloc(bytes);
    fill_pattern(orig, bytes, K + 2 * (uint32_t)seed);
    memcpy(buf, orig, bytes);
    memset(junk, 0xA5, bytes);
    member_t m;
    member_init(&m, &n, kind, 1, 4096);
    m.seq = 11;
    m.rank_of = rank_of;
    m.buf = buf;
    m.src = NULL; /* in place */
    m.counts = counts;
    m.esz = sizeof(float);
    m.bytes = bytes;
    m.holds = holds;
    for (uint32_t s = 0; s < K; s++) m.io[s].backup = backup;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, member_main, &m) == 0);
    for (uint32_t s = 0; s < K; s++) {
        ring_tx_t hdr;
        ring_tx_init(&hdr, BC_MAGIC, 2, 11);
        size_t off, len;
        ring_slice(bytes, s, K, &off, &len);
        size_t part = len / 2 < 60000 ? len / 2 : 60000;
        CHECK(write(n.links[s][0][0], hdr.hdr, RING_HDR) == RING_HDR);
        CHECK(write(n.links[s][0][0], junk, part) == (ssize_t)part);
    }
    /* Until position 1 has read all of it (bounded). */
    uint64_t t0 = net_now_ms();
    for (uint32_t s = 0; s < K; s++) {
        int pending = 1;
        while (pending > 0 && net_now_ms() - t0 < 5000) {
            CHECK(ioctl(n.links[s][0][1], FIONREAD, &pending) == 0);
            if (pending > 0) poll(NULL, 0, 2);
        }
        CHECK(pending == 0);
    }
    atomic_store(&n.abort_flag, 1);
    uint64_t one = 1;
    CHECK(write(n.efd, &one, sizeof one) == sizeof one);
    pthread_join(t, NULL);
    CHECK(m.rc == -PERR_CANCELLED);
    CHECK(m.io[0].rx_bytes > 0);               /* bytes did arrive into buf */
    CHECK(memcmp(buf, orig, bytes) == 0);      /* and buf is as it was */
    member_free(&m);
    free(buf), free(orig), free(backup), free(junk);
    net_close(&n);
}

/* A broadcast in place with backups that succeeds leaves all of each receiving member's input in its backup (what
 * the caller restores when the group aborts afterwards); a failed one leaves buf as it was. */
static void test_in_place_backup(void) {
    for (uint32_t K = 1; K <= 2; K++)
        for (int seed = 0; seed <= 1; seed++) restore_after_partial(K, seed);
    net_t n;
    net_open(&n, 3, 2, 0);
    kit_t k;
    kit_setup(&k, &n, KIND_BC, 0, 9, 3, 4096);
    uint8_t *orig[3], *backup[3];
    size_t bytes = COUNT * sizeof(float);
    for (uint32_t p = 0; p < 3; p++) {
        if (k.holds[p]) {
            memcpy(k.out[p], k.in[p], bytes);
            k.m[p].src = NULL; /* in place */
        } else {
            fill_pattern((uint8_t *)k.out[p], bytes, p);
        }
        orig[p] = malloc(bytes);
        backup[p] = malloc(bytes);
        memcpy(orig[p], k.out[p], bytes);
        for (uint32_t s = 0; s < 2; s++) k.m[p].io[s].backup = backup[p];
    }
    run_members(k.m, 3);
    kit_check(&k, 3, KIND_BC, 0);
    for (uint32_t p = 0; p < 3; p++) {
        if (!k.holds[p]) CHECK(memcmp(backup[p], orig[p], bytes) == 0);
        free(orig[p]), free(backup[p]);
    }
    kit_free(&k, 3);
    net_close(&n);
}

int main(void) {
    RUN_TEST(test_sealed_back_to_back);
    RUN_TEST(test_spliced);
    RUN_TEST(test_abort_mid_stream);
    RUN_TEST(test_member_goes_away);
    RUN_TEST(test_stale_op_seq);
    RUN_TEST(test_no_progress_times_out);
    RUN_TEST(test_invalid_arguments);
    RUN_TEST(test_in_place_backup);
    TEST_MAIN_END();
}
