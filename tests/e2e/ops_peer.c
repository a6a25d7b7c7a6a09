/*
 * ops_peer.c - one peer of the all-reduce correctness test (test_ops.sh).
 * Usage: ops_peer PORT RANK WORLD
 * Each peer knows its index RANK (given by the harness, not by pccl) so it can
 * compute the exact expected result of every op over every dtype from the
 * contributions f(rank, i) of all WORLD peers. Covers: every integer type,
 * float, double, float16 and bfloat16 x sum/avg/prod/max/min; in place and out of place (mixed
 * across the peers of one op); several
 * async all-reduces in flight on a pool; parameter mismatch -> pcclInvalidUsage
 * on every peer; unsupported dtypes/quantization -> pcclInvalidArgument;
 * attributes; are-peers-pending; a duplicate in-flight tag.
 * Exits 0 when every check passed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_kernels.h"

static int failures;
#define EXPECT(cond, ...)                                      \
    do {                                                       \
        if (!(cond)) {                                         \
            failures++;                                        \
            fprintf(stderr, "rank %d: FAILED: ", g_rank);      \
            fprintf(stderr, __VA_ARGS__);                      \
            fprintf(stderr, "\n");                             \
        }                                                      \
    } while (0)

static int g_rank, g_world;

/* Contribution of `rank` at element i, small enough that products never overflow. */
static int is_int(pcclDataType_t dt);

static double contrib(int rank, size_t i, pcclDataType_t dt) {
    int v = (int)((i * 31 + (size_t)rank * 17) % 5) + 1; /* 1..5 */
    if (dt == pcclInt8 || dt == pcclInt16 || dt == pcclInt32 || dt == pcclInt64 || !is_int(dt))
        if ((i + (size_t)rank) % 3 == 0) v = -v;
    return v;
}

static void store(void *buf, size_t i, pcclDataType_t dt, double v) {
    switch (dt) {
    case pcclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case pcclInt8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case pcclUint16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case pcclInt16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case pcclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case pcclInt32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case pcclUint64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case pcclInt64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case pcclFloat: ((float *)buf)[i] = (float)v; break;
    case pcclDouble: ((double *)buf)[i] = v; break;
    case pcclFloat16: ((uint16_t *)buf)[i] = pccl_float_to_half((float)v); break;
    case pcclBFloat16: ((uint16_t *)buf)[i] = pccl_float_to_bf16((float)v); break;
    default: break;
    }
}

static double load(const void *buf, size_t i, pcclDataType_t dt) {
    switch (dt) {
    case pcclUint8: return ((const uint8_t *)buf)[i];
    case pcclInt8: return ((const int8_t *)buf)[i];
    case pcclUint16: return ((const uint16_t *)buf)[i];
    case pcclInt16: return ((const int16_t *)buf)[i];
    case pcclUint32: return ((const uint32_t *)buf)[i];
    case pcclInt32: return ((const int32_t *)buf)[i];
    case pcclUint64: return (double)((const uint64_t *)buf)[i];
    case pcclInt64: return (double)((const int64_t *)buf)[i];
    case pcclFloat: return ((const float *)buf)[i];
    case pcclDouble: return ((const double *)buf)[i];
    case pcclFloat16: return pccl_half_to_float(((const uint16_t *)buf)[i]);
    case pcclBFloat16: return pccl_bf16_to_float(((const uint16_t *)buf)[i]);
    default: return NAN;
    }
}

static int is_int(pcclDataType_t dt) {
    return dt != pcclFloat && dt != pcclDouble && dt != pcclFloat16 && dt != pcclBFloat16;
}

static double expected(size_t i, pcclDataType_t dt, pcclRedOp_t op) {
    double acc = contrib(0, i, dt);
    for (int r = 1; r < g_world; r++) {
        double v = contrib(r, i, dt);
        switch (op) {
        case pcclSum: case pcclAvg: acc += v; break;
        case pcclProd: acc *= v; break;
        case pcclMax: acc = v > acc ? v : acc; break;
        case pcclMin: acc = v < acc ? v : acc; break;
        }
    }
    if (op == pcclAvg) acc = is_int(dt) ? trunc(acc / g_world) : acc / g_world;
    if (dt == pcclFloat) acc = (float)acc;
    if (dt == pcclFloat16) acc = pccl_half_to_float(pccl_float_to_half((float)acc));
    if (dt == pcclBFloat16) acc = pccl_bf16_to_float(pccl_float_to_bf16((float)acc));
    return acc;
}

static pcclReduceDescriptor_t desc(size_t count, pcclRedOp_t op, uint64_t tag, pcclDataType_t dt) {
    pcclReduceDescriptor_t d = {.count = count, .op = op, .tag = tag,
                                .src_descriptor = {.datatype = dt, .distribution_hint = pcclDistributionNone},
                                .quantization_options = {.quantized_datatype = dt, .algorithm = pcclQuantNone}};
    return d;
}

static void check_result(const void *res, size_t n, pcclDataType_t dt, pcclRedOp_t op, const char *what) {
    for (size_t i = 0; i < n; i++) {
        double want = expected(i, dt, op), got = load(res, i, dt);
        if (got != want) {
            EXPECT(0, "%s dtype %s op %d element %zu: got %g want %g", what, pccl_dtype_name(dt), (int)op, i, got,
                   want);
            return;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    g_rank = atoi(argv[2]);
    g_world = atoi(argv[3]);
    pcclComm_t *comm = e2e_connect(argv[1], 0, 4);
    if (!comm) return 1;
    int ws = 0;
    /* Bounded in time, not attempts: under sanitizers a peer may take seconds to start. */
    for (int tries = 0; tries < 1200; tries++) {
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
        if (ws >= g_world) break;
        pcclUpdateTopology(comm);
        usleep(50000);
    }
    EXPECT(ws == g_world, "world size %d, want %d", ws, g_world);
    int a = 0;
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &a);
    EXPECT(a == g_world, "group world size %d", a);
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS, &a);
    EXPECT(a == 1, "num groups %d", a);
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE, &a);
    EXPECT(a == g_world, "largest group %d", a);
    EXPECT(pcclGetAttribute(comm, (pcclAttribute_t)99, &a) == pcclInvalidArgument, "unknown attribute accepted");
    bool pending = true;
    EXPECT(pcclArePeersPending(comm, &pending) == pcclSuccess && !pending, "peers pending");

    const pcclDataType_t dts[] = {pcclUint8, pcclInt8,  pcclUint16, pcclInt16,   pcclUint32, pcclInt32,
                                  pcclUint64, pcclInt64, pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
    const size_t counts[] = {1, 2, 7, 1000, 100003};
    uint64_t tag = 100;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (int op = pcclSum; op <= pcclMin; op++) {
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                size_t n = counts[c], esz = pccl_dtype_size(dts[d]);
                uint8_t *in = malloc(n * esz), *out = malloc(n * esz);
                for (size_t i = 0; i < n; i++) store(in, i, dts[d], contrib(g_rank, i, dts[d]));
                pcclReduceDescriptor_t rd = desc(n, (pcclRedOp_t)op, tag++, dts[d]);
                pcclReduceInfo_t info;
                /* Neighbours differ in mode for the same op: each peer's path must not depend on the others'. */
                int inplace = (int)((c + (size_t)g_rank) % 2);
                pcclResult_t r = pcclAllReduce(in, inplace ? in : out, &rd, comm, &info);
                EXPECT(r == pcclSuccess, "all-reduce %s op %d n %zu: %s", pccl_dtype_name(dts[d]), op, n,
                       pcclResultString(r));
                if (r == pcclSuccess) {
                    check_result(inplace ? in : out, n, dts[d], (pcclRedOp_t)op, inplace ? "in-place" : "out-of-place");
                    EXPECT(info.local_world_size == (uint32_t)g_world, "local world size %u", info.local_world_size);
                    if (!inplace) /* the send buffer is untouched */
                        for (size_t i = 0; i < n; i++)
                            if (load(in, i, dts[d]) != contrib(g_rank, i, dts[d])) {
                                EXPECT(0, "send buffer modified");
                                break;
                            }
                }
                free(in);
                free(out);
            }
        }
    }

    /* Several async all-reduces in flight on a pool of 4 connections (and more ops than slots). */
    enum { K = 6, M = 200000 };
    float *bufs[K];
    pcclAsyncReduceOp_t h[K];
    for (int k = 0; k < K; k++) {
        bufs[k] = malloc(M * sizeof(float));
        for (size_t i = 0; i < M; i++) bufs[k][i] = (float)contrib(g_rank, i + (size_t)k, pcclFloat);
        pcclReduceDescriptor_t rd = desc(M, pcclSum, 1000 + (uint64_t)k, pcclFloat);
        EXPECT(pcclAllReduceAsync(bufs[k], bufs[k], &rd, comm, &h[k]) == pcclSuccess, "async launch %d", k);
    }
    pcclReduceDescriptor_t dup = desc(M, pcclSum, 1000, pcclFloat);
    pcclAsyncReduceOp_t hd;
    EXPECT(pcclAllReduceAsync(bufs[0], bufs[0], &dup, comm, &hd) == pcclInvalidUsage, "duplicate tag accepted");
    EXPECT(pcclUpdateTopology(comm) == pcclPendingAsyncOps, "update topology with ops in flight");
    for (int k = K - 1; k >= 0; k--) {
        pcclReduceInfo_t info;
        EXPECT(pcclAwaitAsyncReduce(&h[k], &info) == pcclSuccess, "await %d", k);
        for (size_t i = 0; i < M; i++) {
            double want = 0;
            for (int r = 0; r < g_world; r++) want += contrib(r, i + (size_t)k, pcclFloat);
            if (bufs[k][i] != (float)want) {
                EXPECT(0, "async op %d element %zu: %g vs %g", k, i, bufs[k][i], want);
                break;
            }
        }
        free(bufs[k]);
    }

    /* Mismatched parameters: rank 0 passes a different count; everyone gets pcclInvalidUsage. */
    float x[16] = {0}, y[16];
    memcpy(y, x, sizeof x);
    pcclReduceDescriptor_t mm = desc(g_rank == 0 ? 15 : 16, pcclSum, 5000, pcclFloat);
    EXPECT(pcclAllReduce(x, x, &mm, comm, NULL) == pcclInvalidUsage, "mismatched count not rejected");
    EXPECT(memcmp(x, y, sizeof x) == 0, "buffer changed by a rejected all-reduce");

    /* Locally invalid arguments never reach the master. */
    pcclReduceDescriptor_t bad = desc(16, pcclSum, 6000, (pcclDataType_t)12);
    EXPECT(pcclAllReduce(x, x, &bad, comm, NULL) == pcclInvalidArgument, "unknown dtype accepted");
    bad = desc(16, pcclSum, 6001, pcclFloat);
    bad.quantization_options.algorithm = pcclQuantMinMax;
    EXPECT(pcclAllReduce(x, x, &bad, comm, NULL) == pcclInvalidArgument, "quantization to float accepted");
    bad = desc(0, pcclSum, 6002, pcclFloat);
    EXPECT(pcclAllReduce(x, x, &bad, comm, NULL) == pcclInvalidArgument, "count 0 accepted");
    bad = desc(8, pcclSum, 6003, pcclFloat);
    EXPECT(pcclAllReduce(x, x + 4, &bad, comm, NULL) == pcclInvalidArgument, "overlapping buffers accepted");
    EXPECT(pcclAllReduce(NULL, x, &bad, comm, NULL) == pcclInvalidArgument, "NULL buffer accepted");

    /* A final joint call so nobody leaves while others still run the last collective. */
    EXPECT(pcclArePeersPending(comm, &pending) == pcclSuccess, "final barrier");
    pcclDestroyCommunicator(comm);
    fprintf(stderr, "rank %d: %s (%d failures)\n", g_rank, failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
