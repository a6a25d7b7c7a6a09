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

#include "e2e_dtype.h"
#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_kernels.h"

static int failures;

static int g_rank, g_world;

static double expected(size_t i, pcclDataType_t dt, pcclRedOp_t op) { return e2e_reduced(i, dt, op, g_world); }

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
                for (size_t i = 0; i < n; i++) store(in, i, dts[d], e2e_contrib(g_rank, i, dts[d]));
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
                            if (load(in, i, dts[d]) != e2e_contrib(g_rank, i, dts[d])) {
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
        for (size_t i = 0; i < M; i++) bufs[k][i] = (float)e2e_contrib(g_rank, i + (size_t)k, pcclFloat);
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
            for (int r = 0; r < g_world; r++) want += e2e_contrib(r, i + (size_t)k, pcclFloat);
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
