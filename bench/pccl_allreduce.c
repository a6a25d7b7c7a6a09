/*
 * pccl_allreduce.c - pccl all-reduce benchmark driver (bench/run.sh).
 *
 * usage: pccl_allreduce ar|oop PEERS BYTES REPS [WARMUP]
 *        pccl_allreduce conc PEERS BYTES REPS CONC
 *        pccl_allreduce pool PEERS BYTES REPS POOL
 *        pccl_allreduce lat  PEERS COUNT REPS
 *
 * The parent process creates a master on 127.0.0.1:0 (C API), forks PEERS
 * peer processes that connect to it over loopback, waits until the world size
 * is PEERS, then runs WARMUP untimed and REPS timed operations. Before every
 * repetition the peers meet in a joint pcclArePeersPending call (barrier).
 * Each peer writes its own per-repetition times into shared memory; the
 * parent takes, per repetition, the max over ranks, then the median (and min,
 * max) over repetitions.
 *
 *  ar:   one in-place float sum all-reduce of BYTES bytes per repetition.
 *        Throughput = BYTES / time (implementation-agnostic, seed 003 6.1).
 *  oop:  as ar, out of place (input and result buffers differ): pccl then
 *        takes no backup and copies nothing. Reported as impl=pccl-oop mode=ar.
 *  conc: p2p_connection_pool_size CONC, CONC concurrent all-reduces of BYTES
 *        each (pcclAllReduceAsync x CONC, then await all); effective
 *        throughput = CONC * BYTES / time (seed 003 6.3.2).
 *  pool: p2p_connection_pool_size POOL, one in-place all-reduce of BYTES per repetition, no
 *        warm-up (the master stripes it over the free pool: docs/architecture.md); reported as
 *        mode=pool conc=POOL.
 *  lat:  PCCL report section 2.6: per-call latency of pcclUpdateTopology,
 *        pcclSynchronizeSharedState (one float tensor of COUNT elements,
 *        revision + 1 each step; includes hashing), pcclAllReduceAsync (the
 *        launch) and pcclAwaitAsyncReduce for COUNT floats.
 *
 * Output: one line "RESULT key=value ..." per measured quantity on stdout.
 * PCCL_BENCH_QUANT=ALGO:TYPE (minmax/zps : uint8/int8/uint16/float16) quantizes the all-reduces.
 *
 * Split mode (bench/wan.sh, peers in other network namespaces):
 *        pccl_allreduce master IP          prints "PORT n", serves until SIGTERM/SIGINT
 *        pccl_allreduce peer IP PORT RANK WORLD ar|conc|pool|lat ARG REPS EXTRA
 *                                          prints "TIMES RANK t0 t1 ..." (seconds)
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"
#include "pccl.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"

#define NQ 4 /* quantities per repetition (lat mode uses 4, others 1) */

/* PCCL_BENCH_QUANT=minmax:TYPE or zps:TYPE quantizes every all-reduce (bench/run.sh). */
static pcclQuantizationOptions_t bench_quant(void) {
    pcclQuantizationOptions_t q = {.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone};
    const char *e = getenv("PCCL_BENCH_QUANT");
    if (e && *e && pccl_quant_parse(e, &q) != 0) {
        fprintf(stderr, "pccl_allreduce: bad PCCL_BENCH_QUANT '%s' (minmax:uint8, zps:int8, minmax:uint4, ...)\n", e);
        exit(2);
    }
    return q;
}

static pcclReduceDescriptor_t fdesc(size_t count, uint64_t tag) {
    pcclReduceDescriptor_t d = {.count = count, .op = pcclSum, .tag = tag,
                                .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                                .quantization_options = bench_quant()};
    return d;
}

/* times[(rank * reps + rep) * NQ + q] */
static double *g_times;
static int g_reps;

static int peer_main(const char *mode, const uint8_t ip[4], uint16_t port, int rank, int world, size_t arg,
                     int reps, int extra) {
    int one_op_pool = strcmp(mode, "pool") == 0;
    uint32_t pool = strcmp(mode, "conc") == 0 || one_op_pool ? (uint32_t)extra : 1;
    pcclComm_t *comm = bench_connect(ip, port, rank, world, pool);
    if (!comm) return 1;
    uint64_t tag = 1;
    double *t = g_times + (size_t)rank * (size_t)reps * NQ;

    if (strcmp(mode, "ar") == 0 || strcmp(mode, "oop") == 0 || one_op_pool) {
        size_t count = arg / sizeof(float);
        float *buf = malloc(count * sizeof(float));
        float *out = strcmp(mode, "oop") == 0 ? malloc(count * sizeof(float)) : buf;
        if (!buf || !out) return 1;
        for (size_t i = 0; i < count; i++) buf[i] = (float)((i + (size_t)rank) % 17);
        int warm = one_op_pool ? 0 : extra;
        for (int r = -warm; r < reps; r++) {
            if (bench_barrier(comm)) return 1;
            pcclReduceDescriptor_t d = fdesc(count, tag++);
            double t0 = bench_now_s();
            pcclResult_t res = pcclAllReduce(buf, out, &d, comm, NULL);
            double dt = bench_now_s() - t0;
            if (res != pcclSuccess) {
                fprintf(stderr, "rank %d: all-reduce: %s\n", rank, pcclResultString(res));
                return 1;
            }
            if (r >= 0) t[r * NQ] = dt;
        }
        if (out != buf) free(out);
        free(buf);
    } else if (strcmp(mode, "conc") == 0) {
        int k = extra;
        size_t count = arg / sizeof(float);
        float **bufs = calloc((size_t)k, sizeof *bufs);
        pcclAsyncReduceOp_t *h = calloc((size_t)k, sizeof *h);
        for (int j = 0; j < k; j++) {
            bufs[j] = malloc(count * sizeof(float));
            if (!bufs[j]) return 1;
            for (size_t i = 0; i < count; i++) bufs[j][i] = (float)((i + (size_t)rank + (size_t)j) % 17);
        }
        for (int r = -1; r < reps; r++) {
            if (bench_barrier(comm)) return 1;
            double t0 = bench_now_s();
            for (int j = 0; j < k; j++) {
                pcclReduceDescriptor_t d = fdesc(count, tag++);
                if (pcclAllReduceAsync(bufs[j], bufs[j], &d, comm, &h[j]) != pcclSuccess) return 1;
            }
            for (int j = 0; j < k; j++) {
                pcclResult_t res = pcclAwaitAsyncReduce(&h[j], NULL);
                if (res != pcclSuccess) {
                    fprintf(stderr, "rank %d: await: %s\n", rank, pcclResultString(res));
                    return 1;
                }
            }
            if (r >= 0) t[r * NQ] = bench_now_s() - t0;
        }
    } else { /* lat */
        size_t count = arg;
        float *w = malloc(count * sizeof(float)), *g = malloc(count * sizeof(float));
        if (!w || !g) return 1;
        for (size_t i = 0; i < count; i++) w[i] = (float)(i % 13) * 0.5f;
        pcclTensorInfo_t info = {.name = "weights", .data = w, .count = count, .datatype = pcclFloat,
                                 .device_type = pcclDeviceCpu, .allow_content_inequality = false};
        pcclSharedState_t st = {.revision = 0, .count = 1, .infos = &info};
        for (int r = -2; r < reps; r++) {
            double t0 = bench_now_s();
            pcclResult_t res = pcclUpdateTopology(comm);
            double t1 = bench_now_s();
            if (res == pcclSuccess) res = pcclSynchronizeSharedState(comm, &st, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL);
            double t2 = bench_now_s();
            for (size_t i = 0; i < count; i++) g[i] = (float)((i + (size_t)st.revision) % 7);
            pcclReduceDescriptor_t d = fdesc(count, tag++);
            pcclAsyncReduceOp_t h;
            double t3 = bench_now_s();
            if (res == pcclSuccess) res = pcclAllReduceAsync(g, g, &d, comm, &h);
            double t4 = bench_now_s();
            if (res == pcclSuccess) res = pcclAwaitAsyncReduce(&h, NULL);
            double t5 = bench_now_s();
            if (res != pcclSuccess) {
                fprintf(stderr, "rank %d: lat step: %s\n", rank, pcclResultString(res));
                return 1;
            }
            for (size_t i = 0; i < count; i++) w[i] -= 0.01f * g[i];
            st.revision++;
            if (r >= 0) {
                t[r * NQ + 0] = t1 - t0;
                t[r * NQ + 1] = t2 - t1;
                t[r * NQ + 2] = t4 - t3;
                t[r * NQ + 3] = t5 - t4;
            }
        }
    }
    bench_barrier(comm); /* nobody leaves while others still run */
    pcclDestroyCommunicator(comm);
    return 0;
}

struct fork_args {
    const char *mode;
    size_t arg;
    int reps, extra, world;
};

static int fork_peer(int rank, uint16_t port, void *p) {
    static const uint8_t lo[4] = {127, 0, 0, 1};
    const struct fork_args *a = p;
    return peer_main(a->mode, lo, port, rank, a->world, a->arg, a->reps, a->extra);
}

static int split_peer(int argc, char **argv) {
    if (argc != 10) return 2;
    uint8_t ip[4];
    if (inet_pton(AF_INET, argv[2], ip) != 1) return 2;
    int rank = atoi(argv[4]), world = atoi(argv[5]), reps = atoi(argv[8]), extra = atoi(argv[9]);
    if (reps < 1 || world < 2 || rank < 0 || rank >= world) return 2;
    g_reps = reps;
    g_times = calloc((size_t)world * (size_t)reps * NQ, sizeof(double));
    if (!g_times) return 1;
    int rc = peer_main(argv[6], ip, (uint16_t)atoi(argv[3]), rank, world, (size_t)strtoull(argv[7], NULL, 10), reps,
                       extra);
    if (rc == 0) {
        printf("TIMES %d", rank);
        for (int r = 0; r < reps; r++) printf(" %.6f", g_times[((size_t)rank * (size_t)reps + (size_t)r) * NQ]);
        printf("\n");
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "master") == 0) return bench_split_master(argv[2]);
    if (argc > 1 && strcmp(argv[1], "peer") == 0) return split_peer(argc, argv);
    if (argc < 5) {
        fprintf(stderr, "usage: %s ar|oop|conc|pool|lat PEERS BYTES|COUNT REPS [WARMUP|CONC|POOL]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    int world = atoi(argv[2]);
    size_t arg = (size_t)strtoull(argv[3], NULL, 10);
    int reps = atoi(argv[4]);
    int extra = argc > 5 ? atoi(argv[5]) : (strcmp(mode, "conc") == 0 ? 1 : 1);
    if (world < 2 || world > BENCH_MAX_PEERS || reps < 1 || reps > BENCH_MAX_REPS || arg == 0 ||
        (strcmp(mode, "ar") && strcmp(mode, "oop") && strcmp(mode, "conc") && strcmp(mode, "pool") && strcmp(mode, "lat"))) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    g_reps = reps;
    g_times = bench_shared_times(world, reps, NQ);
    if (!g_times) return 1;
    struct fork_args fa = {mode, arg, reps, extra, world};
    int failed = bench_fork_peers(world, fork_peer, &fa) != 0;
    const char *impl = strcmp(mode, "oop") == 0 ? "pccl-oop" : "pccl";
    if (strcmp(mode, "oop") == 0) mode = "ar";
    if (failed) {
        printf("RESULT impl=%s mode=%s peers=%d bytes=%zu status=FAILED\n", impl, mode, world, arg);
        return 1;
    }
    double med, mn, mx;
    if (strcmp(mode, "lat") == 0) {
        const char *names[4] = {"pcclUpdateTopology", "pcclSynchronizeSharedState", "pcclAllReduceAsync",
                                "pcclAwaitAsyncReduce"};
        for (int q = 0; q < 4; q++) {
            bench_stats(g_times, world, reps, NQ, q, &med, &mn, &mx);
            printf("RESULT impl=pccl mode=lat peers=%d count=%zu call=%s median_ms=%.4f min_ms=%.4f max_ms=%.4f\n",
                   world, arg, names[q], med * 1e3, mn * 1e3, mx * 1e3);
        }
    } else {
        bench_stats(g_times, world, reps, NQ, 0, &med, &mn, &mx);
        double total = (double)arg * (strcmp(mode, "conc") == 0 ? extra : 1);
        const char *q = getenv("PCCL_BENCH_QUANT"); /* tags the quantization series of run.sh */
        printf("RESULT impl=%s mode=%s peers=%d bytes=%zu conc=%d reps=%d median_s=%.6f min_s=%.6f max_s=%.6f "
               "GBps=%.4f%s%s\n",
               impl, mode, world, arg, strcmp(mode, "conc") == 0 || strcmp(mode, "pool") == 0 ? extra : 1, reps, med, mn, mx, total / med / 1e9,
               q ? " quant=" : "", q ? q : "");
    }
    return 0;
}
