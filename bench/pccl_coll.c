/*
 * pccl_coll.c - pccl broadcast, all-gather, reduce-scatter and barrier benchmark driver (bench/coll.sh,
 * bench/barrier.sh).
 *
 * usage: pccl_coll oop|ip KIND PEERS BYTES REPS [WARMUP]
 *        pccl_coll peer IP PORT RANK WORLD KIND BYTES REPS POOL   (split mode, bench/wan.sh WAN_COLL=KIND)
 *        pccl_coll sink IP | pccl_coll send IP PORT STREAMS BYTES REPS (one link, see link_send)
 *
 * KIND is broadcast, all_gather, reduce_scatter (pccl_coll.h's typed forms, float, reduce op sum) or barrier
 * (pcclExtBarrier: BYTES is ignored and may be 0; the check is the world size it reports).
 * BYTES is the collective's size as nccl-tests counts it: the broadcast buffer, the all-gather's output,
 * the reduce-scatter's input; each member's block of the last two is BYTES / PEERS. Throughput =
 * BYTES / time. Rank 0 of the fork order (RANK 0 in split mode) is the broadcast root.
 *
 * As pccl_allreduce: the parent creates a master on 127.0.0.1:0 and forks PEERS peers; every repetition
 * starts with a joint pcclArePeersPending (barrier); time per repetition = max over members, then median,
 * min, max over repetitions, printed as "RESULT impl=pccl mode=coll coll=KIND ...". oop: input and output
 * buffers differ (no backup, input untouched); ip: in place (reported as impl=pccl-ip; the input is
 * refilled before each repetition, untimed, so every repetition does the same work). After the last
 * repetition every member checks its output against values computed here; a wrong result fails the run.
 *
 * Split mode runs out of place with no warm-up and prints "TIMES RANK t0 t1 ..." (seconds), as
 * pccl_allreduce's peers do; pccl_allreduce master serves as the master.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_link.h"
#include "bench_peer.h"
#include "pccl.h"
#include "pccl_coll.h"

static const char *const KINDS[] = {"broadcast", "all_gather", "reduce_scatter", "barrier"};
enum { K_BCAST, K_AG, K_RS, K_BAR, K_COUNT };

struct run {
    int kind, world, reps, warm, in_place;
    uint32_t pool;
    size_t bytes;
    double *times; /* times[rank * reps + rep] */
};

struct bufs {
    float *in, *out;
    size_t count;    /* elements of BYTES */
    size_t block;    /* all-gather: this member's elements; reduce-scatter: capacity of out */
    size_t out_len;  /* elements out holds */
};

/* The members' inputs: all-gather blocks carry their sender (k * 32 + j % 31, exact in float) so the
 * output shows which member sent which block; reduce-scatter sums of (i + k) % 17 stay exact. */
static float ag_val(int k, size_t j) { return (float)(k * 32 + (int)(j % 31)); }
static float rs_val(int k, size_t i) { return (float)((i + (size_t)k) % 17); }
static float bc_val(size_t i) { return (float)(i % 251) + 0.5f; }

static void fill_input(const struct run *ru, struct bufs *b, int rank) {
    if (ru->kind == K_BAR) return;
    if (ru->kind == K_BCAST) {
        if (rank != 0) return;
        float *src = ru->in_place ? b->out : b->in;
        for (size_t i = 0; i < b->count; i++) src[i] = bc_val(i);
    } else if (ru->kind == K_AG) {
        float *src = ru->in_place ? b->out : b->in;
        for (size_t j = 0; j < b->block; j++) src[j] = ag_val(rank, j);
    } else {
        float *src = ru->in_place ? b->out : b->in;
        for (size_t i = 0; i < b->count; i++) src[i] = rs_val(rank, i);
    }
}

static int alloc_bufs(const struct run *ru, struct bufs *b) {
    size_t w = (size_t)ru->world;
    if (ru->kind == K_BAR) return 0;
    b->count = ru->bytes / sizeof(float);
    b->block = ru->kind == K_RS ? b->count / w + 1 : b->count / w;
    b->out_len = ru->kind == K_RS && !ru->in_place ? b->block : ru->kind == K_AG ? b->block * w : b->count;
    size_t in_len = ru->kind == K_AG ? b->block : b->count;
    b->out = malloc(b->out_len * sizeof(float));
    /* A non-root's broadcast input is never read: malloc'd, never touched, it costs no memory. */
    b->in = ru->in_place ? NULL : malloc(in_len * sizeof(float));
    if (!b->out || (!ru->in_place && !b->in)) return -1;
    memset(b->out, 0, b->out_len * sizeof(float));
    return 0;
}

static pcclResult_t run_op(const struct run *ru, struct bufs *b, int rank, uint64_t tag, const pcclComm_t *comm,
                           pcclExtCollInfo_t *info) {
    const void *in = ru->in_place ? NULL : b->in;
    switch (ru->kind) {
    case K_BCAST:
        return pcclExtBroadcast(in, b->out, b->count, pcclFloat, rank == 0, tag, comm, info);
    case K_BAR:
        return pcclExtBarrier(tag, comm, info);
    case K_AG:
        return pcclExtAllGather(in, b->out, b->block, b->out_len, pcclFloat, tag, comm, info);
    default:
        return pcclExtReduceScatter(in, b->out, b->count, b->out_len, pcclFloat, pcclSum, tag, comm, info);
    }
}

/* 0 when the output of the last operation is what the kind promises, else -1 with a message. */
static int check_output(const struct run *ru, const struct bufs *b, int rank, const pcclExtCollInfo_t *info) {
    size_t bad = SIZE_MAX;
    if (ru->kind == K_BAR) {
        if (info->world_size == (uint32_t)ru->world && info->rank < info->world_size) return 0;
        fprintf(stderr, "rank %d: barrier: rank %u of %u, want a world of %d\n", rank, info->rank, info->world_size,
                ru->world);
        return -1;
    }
    if (ru->kind == K_BCAST) {
        for (size_t i = 0; i < b->count && bad == SIZE_MAX; i++)
            if (b->out[i] != bc_val(i)) bad = i;
    } else if (ru->kind == K_AG) {
        unsigned char seen[BENCH_MAX_PEERS] = {0};
        for (size_t r = 0; r < (size_t)ru->world && bad == SIZE_MAX; r++) {
            const float *blk = b->out + r * b->block;
            int k = (int)blk[0] / 32;
            if (k < 0 || k >= ru->world || seen[k]++ || (r == info->rank && k != rank)) bad = r * b->block;
            for (size_t j = 0; j < b->block && bad == SIZE_MAX; j++)
                if (blk[j] != ag_val(k, j)) bad = r * b->block + j;
        }
    } else {
        const float *blk = b->out + (ru->in_place ? info->offset : 0);
        for (size_t j = 0; j < info->count && bad == SIZE_MAX; j++) {
            float want = 0;
            for (int k = 0; k < ru->world; k++) want += rs_val(k, info->offset + j);
            if (blk[j] != want) bad = j;
        }
    }
    if (bad == SIZE_MAX) return 0;
    fprintf(stderr, "rank %d: %s: wrong output at element %zu (rank %u of %u)\n", rank, KINDS[ru->kind], bad,
            info->rank, info->world_size);
    return -1;
}

static int peer_main(const struct run *ru, const uint8_t ip[4], uint16_t port, int rank) {
    pcclComm_t *comm = bench_connect(ip, port, rank, ru->world, ru->pool);
    struct bufs b = {0};
    if (!comm || alloc_bufs(ru, &b)) return 1;
    double *t = ru->times + (size_t)rank * (size_t)ru->reps;
    pcclExtCollInfo_t info = {0};
    uint64_t tag = 1;
    if (!ru->in_place) fill_input(ru, &b, rank);
    for (int r = -ru->warm; r < ru->reps; r++) {
        if (ru->in_place) fill_input(ru, &b, rank);
        if (bench_barrier(comm)) return 1;
        double t0 = bench_now_s();
        pcclResult_t res = run_op(ru, &b, rank, tag++, comm, &info);
        double dt = bench_now_s() - t0;
        if (res != pcclSuccess) {
            fprintf(stderr, "rank %d: %s: %s\n", rank, KINDS[ru->kind], pcclResultString(res));
            return 1;
        }
        if (r >= 0) t[r] = dt;
    }
    int rc = check_output(ru, &b, rank, &info) ? 1 : 0;
    bench_barrier(comm); /* nobody leaves while others still run */
    pcclDestroyCommunicator(comm);
    free(b.in);
    free(b.out);
    return rc;
}

static int parse_kind(const char *s) {
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(s, KINDS[k]) == 0) return k;
    return -1;
}

static int fork_peer(int rank, uint16_t port, void *p) {
    static const uint8_t lo[4] = {127, 0, 0, 1};
    return peer_main(p, lo, port, rank);
}

static int split_peer(int argc, char **argv) {
    uint8_t ip[4];
    if (argc != 10 || inet_pton(AF_INET, argv[2], ip) != 1) return 2;
    int rank = atoi(argv[4]);
    struct run ru = {.kind = parse_kind(argv[6]), .world = atoi(argv[5]), .reps = atoi(argv[8]),
                     .pool = (uint32_t)atoi(argv[9]), .bytes = (size_t)strtoull(argv[7], NULL, 10)};
    if (ru.kind < 0 || ru.reps < 1 || ru.reps > BENCH_MAX_REPS || ru.world < 2 || ru.world > BENCH_MAX_PEERS ||
        rank < 0 || rank >= ru.world || ru.pool < 1 || (ru.kind != K_BAR && ru.bytes < sizeof(float) * (size_t)ru.world))
        return 2;
    ru.times = calloc((size_t)ru.world * (size_t)ru.reps, sizeof(double));
    if (!ru.times) return 1;
    int rc = peer_main(&ru, ip, (uint16_t)atoi(argv[3]), rank);
    if (rc == 0) {
        printf("TIMES %d", rank);
        for (int r = 0; r < ru.reps; r++) printf(" %.6f", ru.times[(size_t)rank * (size_t)ru.reps + (size_t)r]);
        printf("\n");
    }
    free(ru.times);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "peer") == 0) return split_peer(argc, argv);
    if (argc > 1 && (strcmp(argv[1], "sink") == 0 || strcmp(argv[1], "send") == 0)) return link_main(argc, argv);
    if (argc < 6 || (strcmp(argv[1], "oop") && strcmp(argv[1], "ip"))) {
        fprintf(stderr, "usage: %s oop|ip broadcast|all_gather|reduce_scatter|barrier PEERS BYTES REPS [WARMUP]\n", argv[0]);
        return 2;
    }
    struct run ru = {.kind = parse_kind(argv[2]), .world = atoi(argv[3]), .bytes = (size_t)strtoull(argv[4], NULL, 10),
                     .reps = atoi(argv[5]), .warm = argc > 6 ? atoi(argv[6]) : 1, .pool = 1,
                     .in_place = strcmp(argv[1], "ip") == 0};
    if (ru.kind < 0 || ru.world < 2 || ru.world > BENCH_MAX_PEERS || ru.reps < 1 || ru.reps > BENCH_MAX_REPS ||
        ru.warm < 0 || (ru.kind != K_BAR && ru.bytes < sizeof(float) * (size_t)ru.world)) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    ru.times = bench_shared_times(ru.world, ru.reps, 1);
    if (!ru.times) return 1;
    const char *impl = ru.in_place ? "pccl-ip" : "pccl";
    if (bench_fork_peers(ru.world, fork_peer, &ru) != 0) {
        printf("RESULT impl=%s mode=coll coll=%s peers=%d bytes=%zu status=FAILED\n", impl, KINDS[ru.kind], ru.world,
               ru.bytes);
        return 1;
    }
    double med, mn, mx;
    bench_stats(ru.times, ru.world, ru.reps, 1, 0, &med, &mn, &mx);
    printf("RESULT impl=%s mode=coll coll=%s peers=%d bytes=%zu reps=%d median_s=%.6f min_s=%.6f max_s=%.6f "
           "GBps=%.4f\n",
           impl, KINDS[ru.kind], ru.world, ru.bytes, ru.reps, med, mn, mx, (double)ru.bytes / med / 1e9);
    return 0;
}
