/*
 * stripe_peer.c - one peer of the striped all-reduce test (test_stripe.sh).
 * Usage: stripe_peer PORT RANK WORLD POOL
 * The master stripes every op over the whole pool (PCCL_STRIPE_LOCAL=1, PCCL_STRIPE_MIN_BYTES=1).
 * Every dtype x (sum, avg, max), in place on even ranks and out of place on odd ones, with counts
 * below and above stripes x world (empty slices), checked exactly against contributions that
 * every peer computes. Then values whose sum rounds (random floats, and a quantized op) are
 * reduced and their FNV-1a hashes printed ("hash NAME VALUE"): the script checks that every peer
 * and every pool size got the same bits, i.e. that striping keeps pool 1's reduction order. Then a striped
 * reduce-scatter, all-gather of variable counts and broadcast (other_kinds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_dtype.h"
#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_coll.h"
#include "pccl_kernels.h"

static int failures, g_rank, g_world;

static int is_signed(pcclDataType_t dt) {
    return dt == pcclInt8 || dt == pcclInt16 || dt == pcclInt32 || dt == pcclInt64 || !is_int(dt);
}

/* 1..9, negative for a third of the elements of signed types: exact in every dtype. */
static double contrib(int rank, size_t i, pcclDataType_t dt) {
    int v = (int)((i * 31 + (size_t)rank * 17) % 9) + 1;
    return is_signed(dt) && (i + (size_t)rank) % 3 == 0 ? -v : v;
}

static double expected(size_t i, pcclDataType_t dt, pcclRedOp_t op) {
    double acc = contrib(0, i, dt);
    for (int r = 1; r < g_world; r++) {
        double v = contrib(r, i, dt);
        acc = op == pcclMax ? (v > acc ? v : acc) : acc + v;
    }
    return finish_expected(acc, dt, op, g_world);
}

static uint64_t fnv(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

/* Floats whose sums round differently in another order: a deterministic pseudo-random stream. */
static void fill_random(float *f, size_t n, int rank) {
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        f[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % 1000);
    }
}

/* The other collectives, ranked by ring position (as rhd needs) and striped alike: a reduce-scatter of rounding
 * floats (tag 9002), its blocks gathered by an all-gather of variable counts (9003: every member then holds the
 * whole sum, within rounding of the exact one, and hashes it), and a broadcast from ID 1 (9004). */
static void other_kinds(pcclComm_t *comm, int inplace) {
    enum { M = 100003 };
    float *f = malloc(M * sizeof *f), *block = malloc(M * sizeof *block), *all = malloc(M * sizeof *all);
    double *exact = calloc(M, sizeof *exact);
    for (int r = 0; r < g_world; r++) {
        fill_random(f, M, r);
        for (size_t i = 0; i < M; i++) exact[i] += f[i];
    }
    fill_random(f, M, g_rank);
    pcclExtCollDescriptor_t d = {.kind = pcclExtCollReduceScatter, .tag = 9002, .sendbuf = inplace ? NULL : f,
                                 .recvbuf = inplace ? f : block, .count = M, .recv_capacity = M,
                                 .datatype = pcclFloat, .op = pcclSum};
    pcclExtCollInfo_t in = {0};
    EXPECT(pcclExtCollective(&d, comm, &in) == pcclSuccess, "striped reduce-scatter");
    const float *mine = inplace ? f + in.offset : block;
    uint64_t counts[8] = {0};
    d = (pcclExtCollDescriptor_t){.kind = pcclExtCollAllGatherV, .tag = 9003, .sendbuf = mine, .recvbuf = all,
                                  .count = in.count, .recv_capacity = M, .datatype = pcclFloat, .counts = counts,
                                  .counts_capacity = 8};
    EXPECT(pcclExtCollective(&d, comm, &in) == pcclSuccess, "striped all-gather of the blocks");
    for (size_t i = 0; i < M; i++)
        if (fabs(all[i] - exact[i]) > 1e-5 * (1 + i % 1000) * g_world) {
            EXPECT(0, "reduce-scatter element %zu: got %g want %g", i, all[i], exact[i]);
            break;
        }
    printf("hash rs_sum %016llx\n", (unsigned long long)fnv(all, M * sizeof *all));
    fill_random(f, M, 1);
    if (g_rank != 1) memset(f, 0, M * sizeof *f);
    d = (pcclExtCollDescriptor_t){.kind = pcclExtCollBroadcast, .tag = 9004, .recvbuf = f, .count = M,
                                  .recv_capacity = M, .datatype = pcclFloat,
                                  .flags = g_rank == 1 ? PCCL_EXT_COLL_ROOT : 0};
    EXPECT(pcclExtCollective(&d, comm, NULL) == pcclSuccess, "striped broadcast");
    fill_random(all, M, 1);
    EXPECT(memcmp(f, all, M * sizeof *f) == 0, "broadcast: not the root's data");
    free(f);
    free(block);
    free(all);
    free(exact);
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    g_rank = atoi(argv[2]);
    g_world = atoi(argv[3]);
    pcclComm_t *comm = e2e_connect(argv[1], 0, (uint32_t)atoi(argv[4]));
    if (!comm) return 1;
    fprintf(stderr, "rank %d: joined\n", g_rank); /* the script starts the next rank now: a fixed ring order */
    int ws = 0;
    for (int tries = 0; tries < 1200 && ws < g_world; tries++) { /* bounded: 60 s */
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
        if (ws >= g_world) break;
        pcclUpdateTopology(comm);
        usleep(50000);
    }
    EXPECT(ws == g_world, "world size %d, want %d", ws, g_world);

    const pcclDataType_t dts[] = {pcclUint8, pcclInt8,  pcclUint16, pcclInt16,   pcclUint32, pcclInt32,
                                  pcclUint64, pcclInt64, pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
    const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclMax};
    const size_t counts[] = {5, 70001};
    uint64_t tag = 100;
    int inplace = g_rank % 2 == 0;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                size_t n = counts[c], esz = pccl_dtype_size(dts[d]);
                uint8_t *in = malloc(n * esz), *out = malloc(n * esz);
                for (size_t i = 0; i < n; i++) store(in, i, dts[d], contrib(g_rank, i, dts[d]));
                pcclReduceDescriptor_t rd = desc(n, ops[o], tag++, dts[d]);
                pcclResult_t r = pcclAllReduce(in, inplace ? in : out, &rd, comm, NULL);
                EXPECT(r == pcclSuccess, "%s op %d n %zu: %s", pccl_dtype_name(dts[d]), ops[o], n,
                       pcclResultString(r));
                const uint8_t *res = inplace ? in : out;
                for (size_t i = 0; r == pcclSuccess && i < n; i++)
                    if (load(res, i, dts[d]) != expected(i, dts[d], ops[o])) {
                        EXPECT(0, "%s op %d n %zu element %zu: got %g want %g", pccl_dtype_name(dts[d]), ops[o], n,
                               i, load(res, i, dts[d]), expected(i, dts[d], ops[o]));
                        break;
                    }
                for (size_t i = 0; !inplace && i < n; i++)
                    if (load(in, i, dts[d]) != contrib(g_rank, i, dts[d])) {
                        EXPECT(0, "send buffer modified");
                        break;
                    }
                free(in);
                free(out);
            }

    /* Rounding-sensitive values: the bits must equal pool 1's (compared by the script). */
    enum { M = 300007 };
    float *f = malloc(M * sizeof *f), *g = malloc(M * sizeof *g);
    fill_random(f, M, g_rank);
    pcclReduceDescriptor_t rd = desc(M, pcclSum, 9000, pcclFloat);
    EXPECT(pcclAllReduce(f, inplace ? f : g, &rd, comm, NULL) == pcclSuccess, "random float sum");
    printf("hash float_sum %016llx\n", (unsigned long long)fnv(inplace ? f : g, M * sizeof *f));
    fill_random(f, M, g_rank);
    rd = desc(M, pcclAvg, 9001, pcclFloat);
    rd.quantization_options = (pcclQuantizationOptions_t){.quantized_datatype = pcclUint8,
                                                          .algorithm = pcclQuantMinMax};
    EXPECT(pcclAllReduce(f, inplace ? f : g, &rd, comm, NULL) == pcclSuccess, "quantized avg");
    printf("hash quant_avg %016llx\n", (unsigned long long)fnv(inplace ? f : g, M * sizeof *f));
    free(f);
    free(g);
    other_kinds(comm, inplace);

    bool pending;
    EXPECT(pcclArePeersPending(comm, &pending) == pcclSuccess, "final barrier");
    pcclDestroyCommunicator(comm);
    fprintf(stderr, "rank %d: %s (%d failures)\n", g_rank, failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
