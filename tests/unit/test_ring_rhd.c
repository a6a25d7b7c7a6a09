/* test_ring_rhd.c - the all-reduce by recursive halving and doubling: its schedule for worlds 2..9 (partners are
 * mutual, folding pairs the first 2r positions, the kept and given blocks of partners are complementary, each
 * remaining member ends owning one block and every block has one owner), and the algorithm itself on W threads
 * over a full mesh of socket pairs, plain and sealed: results equal to the reduction, bit-identical on every
 * member, in place and out of place, quantized (every quantized dtype, within the bound) and striped (the bits
 * of one stripe), and failures (a member that goes away, an abort) end every member; the reduce-scatter by
 * recursive halving, the all-gather by recursive doubling of every world (folding where it is not a power of
 * two) and the tree broadcast, striped (the bits of one stripe). The all-reduce cases run again for the
 * all-reduce by recursive doubling (the same schedule), which must also give every member the same bits where
 * the operands' order matters (NaN payloads). */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pccl_compress.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"
#include "ring/ring.h"
#include "sec/sec_link.h"
#include "sec_pair.h"
#include "tinytest.h"

/* pccl_coll.h's split: block b of n over count elements starts here. */
static size_t ring_block_off_test(size_t count, uint32_t n, uint32_t b) {
    return count / n * b + (b < count % n ? b : count % n);
}

static void nonblock_fd(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

enum { RW = 9, RS = 4 };

static int g_rd; /* the all-reduce cases run ring_allreduce_rd (else ring_allreduce_rhd) */

/* Staging for a quantized all-reduce: recursive doubling decodes a whole block into it. */
static size_t quant_staging(void) { return g_rd ? PCCL_QBLOCK_ELEMS * sizeof(double) : 4096; }

static void test_schedule_pairs(void) {
    for (uint32_t W = 2; W <= RW; W++) {
        ring_rhd_sched_t s[RW];
        uint32_t p = 1, steps = 0;
        while (p * 2 <= W) p *= 2, steps++;
        uint32_t owners[RW] = {0};
        for (uint32_t i = 0; i < W; i++) {
            ring_rhd_schedule(i, W, &s[i]);
            CHECK_EQ_U64(s[i].p, p);
            CHECK_EQ_U64(s[i].r, W - p);
            CHECK_EQ_U64(s[i].steps, steps);
        }
        for (uint32_t i = 0; i < W; i++) {
            uint32_t f = ring_rhd_fold_partner(&s[i]);
            if (i < 2 * (W - p)) { /* folding pairs (0,1), (2,3), ...: the even one steps out */
                CHECK_EQ_U64(f, i ^ 1);
                CHECK(ring_rhd_fold_partner(&s[f]) == i);
                CHECK((s[i].vid == RING_RHD_FOLDED) == (i % 2 == 0));
            } else {
                CHECK(f == RING_RHD_FOLDED);
            }
            if (s[i].vid == RING_RHD_FOLDED) continue;
            CHECK(s[i].vid < p);
            CHECK_EQ_U64(ring_rhd_pos_of(&s[i], s[i].vid), i);
            uint32_t lo = 0, hi = p; /* the blocks this member holds partial sums of */
            for (uint32_t k = 0; k < steps; k++) {
                uint32_t q = ring_rhd_partner(&s[i], k), keep, give, len, pk, pg, pl;
                CHECK(q < W && q != i && s[q].vid != RING_RHD_FOLDED);
                CHECK_EQ_U64(ring_rhd_partner(&s[q], k), i);
                ring_rhd_blocks(&s[i], k, &keep, &give, &len);
                ring_rhd_blocks(&s[q], k, &pk, &pg, &pl);
                CHECK(pk == give && pg == keep && pl == len && len == p >> (k + 1));
                CHECK(keep >= lo && keep + len <= hi && give >= lo && give + len <= hi);
                lo = keep;
                hi = keep + len;
            }
            CHECK(lo == s[i].vid && hi == s[i].vid + 1);
            owners[s[i].vid]++;
        }
        for (uint32_t b = 0; b < p; b++) CHECK_EQ_U64(owners[b], 1);
    }
}

/* W members on threads over a full mesh: member a sends to b on mesh[a][b][0], b receives on mesh[a][b][1]. */
typedef struct mesh {
    uint32_t W, S; /* members, stripes */
    int fd[RS][RW][RW][2];
    sec_link_t *tx[RS][RW][RW], *rx[RS][RW][RW];
    int efd;
    atomic_int abort_flag, wake_failed;
} mesh_t;

typedef struct rmember {
    mesh_t *mesh;
    ring_io_t ios[RS];
    uint32_t pos;
    pcclQuantizationAlgorithm_t algo; /* the all-reduce quantized with qdt into wire */
    pcclDataType_t qdt;
    uint8_t *wire;
    const void *src;
    void *buf;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    uint64_t seq;
    int rs; /* the reduce-scatter into out (work: its partial sums) */
    int ag; /* the all-gather of counts into buf */
    int bc; /* the tree broadcast of count bytes from root */
    uint32_t root;
    const uint64_t *counts;
    void *out;
    uint8_t *work;
    size_t work_bytes;
    int quit_after_links; /* > 0: close this member's sockets once it linked this many partners */
    atomic_int links;
    int rc;
} rmember_t;

static void mesh_open_striped(mesh_t *m, uint32_t W, int sealed, uint32_t S) {
    memset(m, 0, sizeof *m);
    m->W = W;
    m->S = S;
    m->efd = eventfd(0, EFD_NONBLOCK);
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t a = 0; a < W; a++)
            for (uint32_t b = 0; b < W; b++) {
                if (a == b) continue;
                CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, m->fd[s][a][b]) == 0);
                nonblock_fd(m->fd[s][a][b][0]);
                nonblock_fd(m->fd[s][a][b][1]);
                if (!sealed) continue;
                sec_session_t x, y;
                CHECK(session_pair_of("ring-rhd-test-key-0123456789abcdef0123456", &x, &y) == 0);
                m->tx[s][a][b] = sec_link_new(&x);
                m->rx[s][a][b] = sec_link_new(&y);
            }
}
static void mesh_open(mesh_t *m, uint32_t W, int sealed) { mesh_open_striped(m, W, sealed, 1); }

static void mesh_close(mesh_t *m) {
    for (uint32_t s = 0; s < m->S; s++)
        for (uint32_t a = 0; a < m->W; a++)
            for (uint32_t b = 0; b < m->W; b++) {
                if (a == b) continue;
                close(m->fd[s][a][b][0]);
                close(m->fd[s][a][b][1]);
                if (m->tx[s][a][b]) sec_link_free(m->tx[s][a][b]);
                if (m->rx[s][a][b]) sec_link_free(m->rx[s][a][b]);
            }
    close(m->efd);
}

/* Shuts every connection of this member down, on every stripe. */
static void mesh_shut(void *ctx) {
    rmember_t *r = ctx;
    mesh_t *m = r->mesh;
    for (uint32_t s = 0; s < m->S; s++)
        for (uint32_t b = 0; b < m->W; b++)
            if (b != r->pos) shutdown(m->fd[s][r->pos][b][0], SHUT_RDWR), shutdown(m->fd[s][b][r->pos][1], SHUT_RDWR);
}

static int mesh_link(void *ctx, ring_io_t *io, uint32_t peer) {
    rmember_t *r = ctx;
    mesh_t *m = r->mesh;
    if (r->quit_after_links && atomic_fetch_add(&r->links, 1) + 1 > r->quit_after_links) {
        mesh_shut(r);
        snprintf(io->err, sizeof io->err, "went away");
        return -PERR_IO;
    }
    uint32_t s = io->stripe;
    io->tx_fd = m->fd[s][r->pos][peer][0];
    io->rx_fd = m->fd[s][peer][r->pos][1];
    io->tx_link = m->tx[s][r->pos][peer];
    io->rx_link = m->rx[s][peer][r->pos];
    return 0;
}

static void *rmember_main(void *arg) {
    rmember_t *r = arg;
    ring_rhd_net_t net = {.link = mesh_link, .shut = mesh_shut, .ctx = r, .pos = r->pos, .world = r->mesh->W,
                          .op_seq = r->seq};
    uint32_t S = r->mesh->S;
    if (r->bc)
        r->rc = ring_broadcast_tree(r->ios, S, &net, r->src, r->buf, r->count, r->root);
    else if (r->ag)
        r->rc = ring_allgather_rhd(r->ios, S, &net, r->src, r->buf, r->counts, sizeof(uint32_t));
    else if (r->rs)
        r->rc = ring_reduce_scatter_rhd(r->ios, S, &net, r->src, r->out, r->count, r->dt, r->op, r->work,
                                        r->work_bytes);
    else {
        ring_rhd_ar_t a = {.link = mesh_link, .shut = mesh_shut, .link_ctx = r,
                           .ar = {.src = r->src, .buf = r->buf, .count = r->count, .dt = r->dt, .qdt = r->qdt,
                                  .op = r->op, .algo = r->algo, .wire = r->wire, .pos = r->pos,
                                  .world = r->mesh->W, .op_seq = r->seq}};
        r->rc = g_rd ? ring_allreduce_rd(r->ios, r->mesh->S, &a) : ring_allreduce_rhd(r->ios, r->mesh->S, &a);
    }
    if (r->rc != 0 && !atomic_exchange(&r->mesh->abort_flag, 1)) { /* as the master aborts the op everywhere */
        uint64_t one = 1; /* checked after the join: the checks' counters belong to the test's thread */
        if (write(r->mesh->efd, &one, sizeof one) != sizeof one) atomic_store(&r->mesh->wake_failed, 1);
    }
    return NULL;
}

static void rmembers_init(rmember_t *r, mesh_t *m, size_t staging) {
    for (uint32_t p = 0; p < m->W; p++) {
        memset(&r[p], 0, sizeof r[p]);
        r[p].mesh = m;
        r[p].pos = p;
        r[p].seq = 11;
        for (uint32_t s = 0; s < m->S; s++)
            r[p].ios[s] = (ring_io_t){.abort_fd = m->efd, .abort_flag = &m->abort_flag, .timeout_ms = 10000,
                                      .staging = malloc(staging), .staging_size = staging};
    }
}

static void rmembers_run(rmember_t *r, uint32_t W) {
    pthread_t t[RW];
    for (uint32_t i = 0; i < W; i++) CHECK(pthread_create(&t[i], NULL, rmember_main, &r[i]) == 0);
    for (uint32_t i = 0; i < W; i++) pthread_join(t[i], NULL);
    CHECK(W == 0 || !atomic_load(&r[0].mesh->wake_failed));
    for (uint32_t i = 0; i < W; i++)
        for (uint32_t s = 0; s < r[i].mesh->S; s++) free(r[i].ios[s].staging);
}

/* Every world 2..9, float sum and avg and int32 max, in place and out of place, a count that leaves blocks of
 * unequal (and, for the smallest count, empty) lengths; a small staging buffer so elements straddle reads. */
static void run_case(uint32_t W, size_t count, pcclDataType_t dt, pcclRedOp_t op, int in_place, int sealed) {
    mesh_t m;
    mesh_open(&m, W, sealed);
    rmember_t r[RW];
    rmembers_init(r, &m, 4096 + 2);
    size_t esz = pccl_dtype_size(dt);
    uint8_t *in[RW], *out[RW], *expect = calloc(count, esz), *orig = malloc((size_t)W * count * esz);
    for (uint32_t p = 0; p < W; p++) {
        in[p] = malloc(count * esz);
        out[p] = malloc(count * esz);
        for (size_t i = 0; i < count; i++) {
            if (dt == pcclFloat) ((float *)in[p])[i] = (float)((i * 7 + p * 3) % 13) * 0.1f + (float)p * 1e-3f;
            else ((int32_t *)in[p])[i] = (int32_t)((i * 31 + p * 17) % 1001) - 500;
        }
        memcpy(orig + p * count * esz, in[p], count * esz);
        if (in_place) memcpy(out[p], in[p], count * esz);
        r[p].src = in_place ? out[p] : in[p];
        r[p].buf = out[p];
        r[p].count = count;
        r[p].dt = dt;
        r[p].op = op;
    }
    rmembers_run(r, W);
    memcpy(expect, in[0], count * esz);
    for (uint32_t p = 1; p < W; p++) pccl_reduce_into(expect, in[p], count, dt, op);
    if (op == pcclAvg) pccl_reduce_finalize_avg(expect, count, dt, W);
    int ok = 1;
    for (uint32_t p = 0; p < W; p++) {
        ok &= r[p].rc == 0;
        ok &= memcmp(out[p], out[0], count * esz) == 0; /* bit-identical on every member */
        for (size_t i = 0; i < count && dt == pcclFloat; i++)
            ok &= fabsf(((float *)out[p])[i] - ((float *)expect)[i]) < 1e-3f;
        if (dt != pcclFloat) ok &= memcmp(out[p], expect, count * esz) == 0;
        if (!in_place) ok &= memcmp(in[p], orig + p * count * esz, count * esz) == 0; /* src never written */
    }
    if (!ok) fprintf(stderr, "world %u count %zu dt %d op %d in_place %d sealed %d failed (rc %d: %s)\n", W, count,
                     (int)dt, (int)op, in_place, sealed, r[0].rc, r[0].ios[0].err);
    CHECK(ok);
    for (uint32_t p = 0; p < W; p++) free(in[p]), free(out[p]);
    free(expect);
    free(orig);
    mesh_close(&m);
}

static void test_allreduce_every_world(void) {
    for (uint32_t W = 2; W <= RW; W++) {
        run_case(W, 3, pcclFloat, pcclSum, 1, 0);
        run_case(W, 10007, pcclFloat, pcclSum, 0, 0);
        run_case(W, 10007, pcclFloat, pcclAvg, 1, 0);
        run_case(W, 4099, pcclInt32, pcclMax, 0, 0);
    }
}

static void test_allreduce_sealed(void) {
    run_case(3, 30011, pcclFloat, pcclSum, 1, 1);
    run_case(4, 30011, pcclInt32, pcclSum, 0, 1);
    run_case(6, 30011, pcclFloat, pcclAvg, 1, 1);
}

/* The quantized all-reduce (float, sum or avg) over S stripes: every member's bytes equal, each element within
 * the bound (log2 p + 2 <= W + 1 encodes, each off by at most A / codes), and the bytes equal to one stripe's
 * when S > 1. Returns member 0's result (malloc'd) for the caller to compare. */
static float *quant_case(uint32_t W, size_t count, pcclRedOp_t op, pcclQuantizationAlgorithm_t algo,
                         pcclDataType_t qdt, uint32_t S, int sealed) {
    mesh_t m;
    mesh_open_striped(&m, W, sealed, S);
    rmember_t r[RW];
    rmembers_init(r, &m, quant_staging());
    float *in[RW], *out[RW];
    for (uint32_t p = 0; p < W; p++) {
        in[p] = malloc(count * sizeof(float));
        out[p] = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++)
            in[p][i] = (float)(((i * 7919 + p * 104729) % 2003) / 1001.0 - 1.0) * (i % 5 == 0 ? 8.0f : 1.0f);
        r[p].src = in[p];
        r[p].buf = out[p];
        r[p].count = count;
        r[p].dt = pcclFloat;
        r[p].op = op;
        r[p].algo = algo;
        r[p].qdt = qdt;
        r[p].wire = malloc((g_rd ? ring_rd_quant_wire_bytes(count, qdt) : ring_rhd_quant_wire_bytes(count, qdt, W)) + 1);
    }
    rmembers_run(r, W);
    double codes = qdt == pcclExtUint4 ? 10.0 : qdt == pcclExtUint2 ? 1.0 : 252.0;
    int ok = 1;
    double A = 0; /* the largest partial result's magnitude bounds every block's range */
    for (size_t i = 0; i < count; i++) {
        double a = 0;
        for (uint32_t p = 0; p < W; p++) a += fabs(in[p][i]);
        A = a > A ? a : A;
    }
    double tol = (W + 1) * A / codes + 1e-5 * A;
    for (size_t i = 0; i < count; i++) {
        double exact = 0;
        for (uint32_t p = 0; p < W; p++) exact += in[p][i];
        if (op == pcclAvg) exact /= W;
        for (uint32_t p = 0; p < W && ok; p++) ok &= fabs(out[p][i] - exact) <= (op == pcclAvg ? tol / W : tol);
    }
    for (uint32_t p = 0; p < W; p++) ok &= r[p].rc == 0 && memcmp(out[p], out[0], count * sizeof(float)) == 0;
    if (!ok) fprintf(stderr, "quantized world %u count %zu op %d algo %d qdt %d stripes %u failed (rc %d: %s)\n", W,
                     count, (int)op, (int)algo, (int)qdt, S, r[0].rc, r[0].ios[0].err);
    CHECK(ok);
    for (uint32_t p = 0; p < W; p++) free(in[p]), free(r[p].wire), p ? free(out[p]) : (void)0;
    mesh_close(&m);
    return out[0];
}

/* Every quantized dtype (uint8/int8 min-max and zero-point, 4 and 2 bits), worlds 2..8 (folds included), one and
 * three stripes (the same bits), plain and sealed. */
static void test_allreduce_quantized(void) {
    const struct { pcclQuantizationAlgorithm_t a; pcclDataType_t q; } kinds[] = {
        {pcclQuantMinMax, pcclUint8}, {pcclQuantZeroPointScale, pcclInt8}, {pcclQuantMinMax, pcclExtUint4},
        {pcclQuantZeroPointScale, pcclExtUint4}, {pcclQuantMinMax, pcclExtUint2}, {pcclQuantZeroPointScale, pcclExtUint2}};
    const uint32_t worlds[] = {2, 3, 4, 5, 6, 8};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
            size_t count = w % 2 ? 5003 : 3;
            pcclRedOp_t op = k % 2 ? pcclAvg : pcclSum;
            float *one = quant_case(worlds[w], count, op, kinds[k].a, kinds[k].q, 1, 0);
            float *three = quant_case(worlds[w], count, op, kinds[k].a, kinds[k].q, 3, w == 2);
            CHECK(memcmp(one, three, count * sizeof(float)) == 0);
            free(one);
            free(three);
        }
}

/* The plain all-reduce over three stripes: the same bits as one stripe, on every member. */
static void test_allreduce_striped(void) {
    for (uint32_t W = 3; W <= 8; W += 5) {
        float *res[2];
        for (uint32_t S = 1; S <= 3; S += 2) {
            mesh_t m;
            mesh_open_striped(&m, W, S == 3, S);
            rmember_t r[RW];
            rmembers_init(r, &m, 4096 + 2);
            float *buf[RW];
            for (uint32_t p = 0; p < W; p++) {
                buf[p] = malloc(20011 * sizeof(float));
                for (size_t i = 0; i < 20011; i++) buf[p][i] = (float)((i * 13 + p * 7) % 101) * 0.37f + 1e-3f * (float)p;
                r[p].src = r[p].buf = buf[p];
                r[p].count = 20011;
                r[p].dt = pcclFloat;
                r[p].op = pcclAvg;
            }
            rmembers_run(r, W);
            for (uint32_t p = 0; p < W; p++) CHECK(r[p].rc == 0 && memcmp(buf[p], buf[0], 20011 * sizeof(float)) == 0);
            res[S / 2] = buf[0];
            for (uint32_t p = 1; p < W; p++) free(buf[p]);
            mesh_close(&m);
        }
        CHECK(memcmp(res[0], res[1], 20011 * sizeof(float)) == 0);
        free(res[0]);
        free(res[1]);
    }
}

/* A striped, quantized run where one member goes away: every member fails, none hangs. */
static void test_striped_member_goes_away(void) {
    mesh_t m;
    mesh_open_striped(&m, 5, 0, 3);
    rmember_t r[RW];
    rmembers_init(r, &m, quant_staging());
    float *buf[RW];
    for (uint32_t p = 0; p < 5; p++) {
        buf[p] = calloc(20000, sizeof(float));
        r[p].src = r[p].buf = buf[p];
        r[p].count = 20000;
        r[p].dt = pcclFloat;
        r[p].op = pcclSum;
        r[p].algo = pcclQuantMinMax;
        r[p].qdt = pcclUint8;
        r[p].wire = malloc(g_rd ? ring_rd_quant_wire_bytes(20000, pcclUint8) : ring_rhd_quant_wire_bytes(20000, pcclUint8, 5));
        for (uint32_t s = 0; s < 3; s++) r[p].ios[s].timeout_ms = 3000;
    }
    r[4].quit_after_links = 2;
    rmembers_run(r, 5);
    for (uint32_t p = 0; p < 5; p++) {
        CHECK(r[p].rc != 0);
        free(buf[p]);
        free(r[p].wire);
    }
    mesh_close(&m);
}

/* One member closes its sockets before its second partner: no member hangs (a failed member aborts the others, as
 * the master does), the leaver fails, and so does every member that needs its later steps. In the ring and in
 * halving and doubling that is every member. In rd each exchange carries the whole vector, so members that never
 * meet the leaver after its first exchange may complete before the abort reaches them: with the right sum. */
static void test_member_goes_away(void) {
    for (uint32_t W = 3; W <= 8; W += 5) {
        mesh_t m;
        mesh_open(&m, W, 0);
        rmember_t r[RW];
        rmembers_init(r, &m, 4096);
        float *buf[RW];
        for (uint32_t p = 0; p < W; p++) {
            buf[p] = malloc(20000 * sizeof(float));
            for (size_t i = 0; i < 20000; i++) buf[p][i] = (float)(p + 1);
            r[p].src = r[p].buf = buf[p];
            r[p].count = 20000;
            r[p].dt = pcclFloat;
            r[p].op = pcclSum;
            r[p].ios[0].timeout_ms = 3000;
        }
        uint32_t q = g_rd && W == 3 ? 1 : W - 1;
        r[q].quit_after_links = 1; /* a member with a second partner (rd: 1 step at 3) */
        rmembers_run(r, W);
        CHECK(r[q].rc != 0);
        for (uint32_t p = 0; p < W; p++) {
            if (!g_rd || W == 3) CHECK(r[p].rc != 0);
            int right = 1;
            for (size_t i = 0; i < 20000 && r[p].rc == 0; i++) right &= buf[p][i] == (float)(W * (W + 1) / 2);
            CHECK(right);
            free(buf[p]);
        }
        mesh_close(&m);
    }
}

/* The abort flag ends every member at once. */
static void test_abort(void) {
    mesh_t m;
    mesh_open(&m, 5, 0);
    rmember_t r[RW];
    rmembers_init(r, &m, 4096);
    float *buf[RW];
    atomic_store(&m.abort_flag, 1);
    for (uint32_t p = 0; p < 5; p++) {
        buf[p] = calloc(1000, sizeof(float));
        r[p].src = r[p].buf = buf[p];
        r[p].count = 1000;
        r[p].dt = pcclFloat;
        r[p].op = pcclSum;
    }
    rmembers_run(r, 5);
    for (uint32_t p = 0; p < 5; p++) {
        CHECK(r[p].rc == -PERR_CANCELLED);
        free(buf[p]);
    }
    mesh_close(&m);
}

/* Element i of the reduce-scatter as the schedule reduces it: the fold (odd (op) even), then at each halving step
 * the keeper's partial (op) its partner's, over the virtual ids; into dst (one element of dt). */
static void rs_tree(uint8_t *dst, uint8_t *const *in, uint32_t W, size_t i, pcclDataType_t dt, pcclRedOp_t op,
                    uint32_t vid, uint32_t k) {
    ring_rhd_sched_t s;
    ring_rhd_schedule(0, W, &s);
    size_t esz = pccl_dtype_size(dt);
    if (k == 0) {
        uint32_t pos = ring_rhd_pos_of(&s, vid);
        memcpy(dst, in[pos] + i * esz, esz);
        if (vid < s.r) pccl_reduce_into(dst, in[pos - 1] + i * esz, 1, dt, op);
        return;
    }
    uint8_t other[8];
    rs_tree(dst, in, W, i, dt, op, vid, k - 1);
    rs_tree(other, in, W, i, dt, op, vid ^ (s.p >> k), k - 1);
    pccl_reduce_into(dst, other, 1, dt, op);
}

/* The reduce-scatter of world W over S stripes: each member's block of the count split, bit-identical to the
 * schedule's tree (rs_tree) and equal to the reduction (int32 exactly, float within rounding), out in its block of
 * src (src otherwise unchanged) or elsewhere. Returns every member's block in one vector (malloc'd). */
static uint8_t *rs_case(uint32_t W, size_t count, pcclDataType_t dt, pcclRedOp_t op, int in_src, uint32_t S) {
    mesh_t m;
    mesh_open_striped(&m, W, S == 2, S);
    rmember_t r[RW];
    rmembers_init(r, &m, 4096 + 2);
    size_t esz = pccl_dtype_size(dt);
    uint8_t *in[RW] = {0}, *orig[RW] = {0}, *out[RW] = {0}, *expect = calloc(count, esz), *all = calloc(count + 1, esz);
    for (uint32_t p = 0; p < W; p++) {
        in[p] = malloc(count * esz);
        orig[p] = malloc(count * esz);
        out[p] = malloc(count * esz);
        for (size_t i = 0; i < count; i++) {
            if (dt == pcclFloat) ((float *)in[p])[i] = (float)((i * 5 + p * 3) % 11) * 0.37f + 1e-3f * (float)p + 0.5f;
            else ((int32_t *)in[p])[i] = (int32_t)((i * 13 + p * 7) % 999) - 400;
        }
        memcpy(orig[p], in[p], count * esz);
        size_t off = ring_block_off_test(count, W, p);
        r[p].rs = 1;
        r[p].src = in[p];
        r[p].out = in_src ? in[p] + off * esz : out[p];
        r[p].count = count;
        r[p].dt = dt;
        r[p].op = op;
        r[p].work_bytes = ring_reduce_scatter_rhd_work_bytes(count, dt, p, W);
        r[p].work = malloc(r[p].work_bytes + 1);
    }
    memcpy(expect, in[0], count * esz);
    for (uint32_t p = 1; p < W; p++) pccl_reduce_into(expect, in[p], count, dt, op);
    if (op == pcclAvg) pccl_reduce_finalize_avg(expect, count, dt, W);
    rmembers_run(r, W);
    ring_rhd_sched_t s;
    ring_rhd_schedule(0, W, &s);
    int ok = 1;
    for (uint32_t p = 0; p < W; p++) {
        size_t off = ring_block_off_test(count, W, p), len = ring_block_off_test(count, W, p + 1) - off;
        uint32_t vid = p < 2 * s.r ? p / 2 : p - s.r; /* the owner of the virtual block p's block is in */
        const uint8_t *got = r[p].out;
        ok &= r[p].rc == 0;
        for (size_t i = 0; i < len; i++) {
            uint8_t tree[8];
            rs_tree(tree, orig, W, off + i, dt, op, vid, s.steps);
            if (op == pcclAvg) pccl_reduce_finalize_avg(tree, 1, dt, W);
            ok &= memcmp(got + i * esz, tree, esz) == 0;
            float want = dt == pcclFloat ? ((float *)expect)[off + i] : 0;
            if (dt == pcclFloat) ok &= fabsf(((const float *)got)[i] - want) <= 1e-4f * fabsf(want) + 1e-4f;
        }
        if (dt != pcclFloat) ok &= memcmp(got, expect + off * esz, len * esz) == 0;
        memcpy(all + off * esz, got, len * esz);
        /* src unchanged outside the member's block */
        ok &= memcmp(in[p], orig[p], off * esz) == 0;
        ok &= memcmp(in[p] + (off + len) * esz, orig[p] + (off + len) * esz, (count - off - len) * esz) == 0;
        if (!in_src) ok &= memcmp(in[p], orig[p], count * esz) == 0;
    }
    for (uint32_t p = 0; p < W; p++) free(in[p]), free(orig[p]), free(out[p]), free(r[p].work);
    if (!ok) fprintf(stderr, "rs world %u count %zu dt %d op %d in_src %d stripes %u failed (rc %d: %s)\n", W, count,
                     (int)dt, (int)op, in_src, S, r[0].rc, r[0].ios[0].err);
    CHECK(ok);
    free(expect);
    mesh_close(&m);
    return all;
}

/* Worlds 2..8 (3, 5, 6 and 7 fold), every reduce op, counts that leave blocks empty; one to four stripes (two
 * sealed) give the same bits. */
static void test_reduce_scatter(void) {
    const pcclRedOp_t fops[] = {pcclSum, pcclAvg, pcclProd}; /* int32 takes sum, max and min */
    for (uint32_t W = 2; W <= 8; W++) {
        free(rs_case(W, 5, pcclInt32, pcclSum, 0, 1));
        free(rs_case(W, 4099, pcclInt32, pcclMax, 1, 1 + W % 4));
        free(rs_case(W, 4099, pcclInt32, pcclMin, 0, 1 + (W + 1) % 4));
        for (uint32_t o = 0; o < 3; o++) {
            uint8_t *one = rs_case(W, 10007, pcclFloat, fops[o], (int)(o + W) % 2, 1);
            for (uint32_t S = 2; S <= 4; S++) {
                if (W != 3 && W != 6 && S != 4) continue;
                uint8_t *more = rs_case(W, 10007, pcclFloat, fops[o], (int)(o + W + S) % 2, S);
                CHECK(memcmp(one, more, 10007 * sizeof(float)) == 0);
                free(more);
            }
            free(one);
        }
    }
    /* too small a work buffer is refused */
    mesh_t m;
    mesh_open(&m, 3, 0);
    rmember_t r[RW];
    rmembers_init(r, &m, 64);
    float a[6] = {0}, o[2];
    ring_rhd_net_t net = {.link = mesh_link, .shut = mesh_shut, .ctx = &r[1], .pos = 1, .world = 3, .op_seq = 1};
    CHECK(ring_reduce_scatter_rhd(r[1].ios, 1, &net, a, o, 6, pcclFloat, pcclSum, NULL, 0) == -PERR_INVALID);
    CHECK(ring_reduce_scatter_rhd_work_bytes(6, pcclFloat, 1, 3) == 6 * sizeof(float));
    CHECK(ring_reduce_scatter_rhd_work_bytes(6, pcclFloat, 0, 3) == 0);
    for (uint32_t p = 0; p < 3; p++) free(r[p].ios[0].staging);
    mesh_close(&m);
}

/* A striped reduce-scatter of a world that folds where a member goes away before its second partner: it and that
 * partner fail, and every member returns (the others finish or are aborted, as the master aborts them). */
static void test_reduce_scatter_member_goes_away(void) {
    mesh_t m;
    mesh_open_striped(&m, 5, 0, 2);
    rmember_t r[RW];
    rmembers_init(r, &m, 4096);
    float *buf[RW], out[RW][4000];
    for (uint32_t p = 0; p < 5; p++) {
        buf[p] = calloc(20000, sizeof(float));
        r[p].rs = 1;
        r[p].src = buf[p];
        r[p].out = out[p];
        r[p].count = 20000;
        r[p].dt = pcclFloat;
        r[p].op = pcclSum;
        r[p].work_bytes = ring_reduce_scatter_rhd_work_bytes(20000, pcclFloat, p, 5);
        r[p].work = malloc(r[p].work_bytes + 1);
        for (uint32_t s = 0; s < 2; s++) r[p].ios[s].timeout_ms = 3000;
    }
    r[4].quit_after_links = 2; /* position 4 (virtual id 3): its second step is with position 3 */
    rmembers_run(r, 5);
    CHECK(r[4].rc != 0 && r[3].rc != 0);
    for (uint32_t p = 0; p < 5; p++) free(buf[p]), free(r[p].work);
    mesh_close(&m);
}

/* The all-gather of worlds 2..8 (3, 5, 6 and 7 fold) with variable counts (one of them 0) over one to four stripes:
 * every member ends with every block in rank order, its own from its place in buf, from buf's start (src NULL) or
 * from elsewhere. */
static void test_all_gather(void) {
    for (uint32_t W = 2; W <= 8; W++)
        for (int mode = 0; mode < 3; mode++) {
            mesh_t m;
            uint32_t S = 1 + (W + mode) % 4;
            mesh_open_striped(&m, W, mode == 1, S);
            rmember_t r[RW];
            rmembers_init(r, &m, 64);
            uint64_t counts[RW], total = 0, off[RW];
            for (uint32_t p = 0; p < W; p++) counts[p] = p == 1 ? 0 : 3000 + p * 7, off[p] = total, total += counts[p];
            uint32_t *buf[RW], *mine[RW];
            for (uint32_t p = 0; p < W; p++) {
                buf[p] = calloc(total + 1, sizeof(uint32_t));
                mine[p] = malloc((counts[p] + 1) * sizeof(uint32_t));
                for (uint64_t i = 0; i < counts[p]; i++) mine[p][i] = (uint32_t)(p * 100000 + i);
                uint32_t *src = mode == 0 ? buf[p] + off[p] : mode == 1 ? NULL : mine[p];
                if (mode == 0) memcpy(buf[p] + off[p], mine[p], counts[p] * sizeof(uint32_t));
                if (mode == 1) memcpy(buf[p], mine[p], counts[p] * sizeof(uint32_t));
                r[p].ag = 1;
                r[p].src = src;
                r[p].buf = buf[p];
                r[p].counts = counts;
            }
            rmembers_run(r, W);
            int ok = 1;
            for (uint32_t p = 0; p < W; p++) {
                ok &= r[p].rc == 0;
                for (uint32_t q = 0; q < W; q++) ok &= memcmp(buf[p] + off[q], mine[q], counts[q] * 4) == 0;
            }
            if (!ok) fprintf(stderr, "all-gather world %u mode %d stripes %u failed (rc %d: %s)\n", W, mode, S, r[0].rc,
                             r[0].ios[0].err);
            CHECK(ok);
            for (uint32_t p = 0; p < W; p++) free(buf[p]), free(mine[p]);
            mesh_close(&m);
        }
}

/* The binomial tree: every member but the root has one parent, edges are mutual (a parent lists the child), the
 * depth is ceil(log2 W); and the broadcast itself for every world 2..9 and root, plain and sealed, over one to four
 * stripes. */
static void test_broadcast_tree(void) {
    for (uint32_t W = 2; W <= RW; W++)
        for (uint32_t root = 0; root < W; root++) {
            uint32_t depth = 0, need = 0;
            while ((1u << need) < W) need++;
            for (uint32_t p = 0; p < W; p++) {
                uint32_t part[33], n = ring_bcast_tree_partners(root, p, W, part), rel = (p + W - root) % W, d = 0;
                for (uint32_t x = rel; x; x &= x - 1) d++; /* hops from the root: the bits of rel */
                if (d > depth) depth = d;
                if (p == root) continue;
                CHECK(n >= 1 && part[0] != p);
                uint32_t q[33], m = ring_bcast_tree_partners(root, part[0], W, q), found = 0;
                for (uint32_t i = (part[0] == root ? 0 : 1); i < m; i++) found += q[i] == p;
                CHECK_EQ_U64(found, 1);
            }
            CHECK(depth <= need);
            mesh_t mm;
            uint32_t S = 1 + (W + root) % 4;
            mesh_open_striped(&mm, W, root % 2, S);
            rmember_t r[RW];
            rmembers_init(r, &mm, 64);
            uint8_t *buf[RW], data[3001];
            for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 31 + root);
            for (uint32_t p = 0; p < W; p++) {
                buf[p] = calloc(sizeof data, 1);
                r[p].bc = 1;
                r[p].root = root;
                r[p].count = sizeof data;
                r[p].src = p == root ? data : NULL;
                r[p].buf = buf[p];
            }
            rmembers_run(r, W);
            int ok = 1;
            for (uint32_t p = 0; p < W; p++) ok &= r[p].rc == 0 && memcmp(buf[p], data, sizeof data) == 0, free(buf[p]);
            if (!ok) fprintf(stderr, "broadcast world %u root %u stripes %u failed (rc %d: %s)\n", W, root, S, r[0].rc,
                             r[0].ios[0].err);
            CHECK(ok);
            mesh_close(&mm);
        }
}

/* Where an op's result depends on its operands' order (two NaNs of different payloads: max, min and sum keep one of
 * them; -0 against +0 for sum), every member still ends with the same bits: worlds 2..9, one and two stripes. */
static void test_operand_order(void) {
    const pcclRedOp_t ops[] = {pcclMax, pcclMin, pcclSum};
    for (uint32_t W = 2; W <= RW; W++)
        for (size_t o = 0; o < 3; o++) {
            uint32_t S = 1 + (W + (uint32_t)o) % 2;
            mesh_t m;
            mesh_open_striped(&m, W, 0, S);
            rmember_t r[RW];
            rmembers_init(r, &m, 4096 + 2);
            uint32_t *buf[RW];
            for (uint32_t p = 0; p < W; p++) {
                buf[p] = malloc(997 * sizeof(uint32_t));
                for (uint32_t i = 0; i < 997; i++) {
                    int nan = i % W == p || (i + 1) % W == p; /* two members hold a NaN at i */
                    buf[p][i] = nan ? 0x7fc00000u | (p + 1) << 4 | (i % 16) : i % 3 == 0 ? (p % 2) << 31 : 0x3f800000u + i;
                }
                r[p].src = r[p].buf = buf[p];
                r[p].count = 997;
                r[p].dt = pcclFloat;
                r[p].op = ops[o];
            }
            rmembers_run(r, W);
            int ok = 1;
            for (uint32_t p = 0; p < W; p++) ok &= r[p].rc == 0 && memcmp(buf[p], buf[0], 997 * sizeof(uint32_t)) == 0;
            if (!ok) fprintf(stderr, "operand order: world %u op %d stripes %u rd %d: members differ\n", W, (int)ops[o], S, g_rd);
            CHECK(ok);
            for (uint32_t p = 0; p < W; p++) free(buf[p]);
            mesh_close(&m);
        }
}

/* The all-reduce cases again, by recursive doubling. */
static void test_rd_allreduce(void) {
    g_rd = 1;
    test_allreduce_every_world();
    test_allreduce_sealed();
    test_allreduce_striped();
    test_operand_order();
    g_rd = 0;
}
static void test_rd_quantized(void) {
    g_rd = 1;
    test_allreduce_quantized();
    g_rd = 0;
}
static void test_rd_failures(void) {
    g_rd = 1;
    test_member_goes_away();
    test_striped_member_goes_away();
    test_abort();
    g_rd = 0;
}

int main(void) {
    RUN_TEST(test_schedule_pairs);
    RUN_TEST(test_allreduce_every_world);
    RUN_TEST(test_allreduce_sealed);
    RUN_TEST(test_allreduce_quantized);
    RUN_TEST(test_allreduce_striped);
    RUN_TEST(test_member_goes_away);
    RUN_TEST(test_striped_member_goes_away);
    RUN_TEST(test_abort);
    RUN_TEST(test_operand_order);
    RUN_TEST(test_rd_allreduce);
    RUN_TEST(test_rd_quantized);
    RUN_TEST(test_rd_failures);
    RUN_TEST(test_reduce_scatter);
    RUN_TEST(test_reduce_scatter_member_goes_away);
    RUN_TEST(test_all_gather);
    RUN_TEST(test_broadcast_tree);
    TEST_MAIN_END();
}
