/*
 * pccl_sparse.c - the sparse all-reduce with error feedback (pccl_sparse.h) against the dense ring all-reduce of
 * the same floats on loopback: bytes on the wire per peer and time.
 * usage: pccl_sparse WORLD COUNT FRACTION BITS REPS
 * Forks WORLD peers against an in-process master (bench_peer.h); each runs 2 warm-ups, then REPS timed sparse
 * all-reduces and REPS dense ones (pcclAllReduce, sum, out of place), a barrier before each. Prints one line:
 *   sparse world=W count=N fraction=F bits=B pack_bytes=P tx_per_peer=T dense_tx_per_peer=D wire_less=Xx
 *   vs_fp32=Yx sparse_ms=M dense_ms=M2
 * wire_less: dense ring bytes sent per peer / sparse bytes sent per peer; vs_fp32: the tensor's fp32 bytes / one
 * pack; times are the median over repetitions of the slowest member.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"
#include "pccl_sparse.h"

enum { Q_SPARSE, Q_DENSE, Q_TX, Q_DENSE_TX, Q_PACK, NQ };

typedef struct args {
    int world, reps, bits;
    uint64_t count;
    double fraction;
} args_t;

static double *g_times;

static int run_peer(int rank, uint16_t port, void *arg) {
    const args_t *a = arg;
    const uint8_t ip[4] = {127, 0, 0, 1};
    pcclComm_t *comm = bench_connect(ip, port, rank, a->world, 1);
    float *x = malloc(a->count * sizeof *x), *y = malloc(a->count * sizeof *y);
    pcclExtSparseResidual_t *res;
    if (!comm || !x || !y || pcclExtSparseResidualCreate(a->count, pcclFloat, &res) != pcclSuccess) return 1;
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1);
    for (uint64_t i = 0; i < a->count; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int rep = -2; rep < a->reps; rep++) {
        double *t = rep >= 0 ? &g_times[((size_t)rank * (size_t)a->reps + (size_t)rep) * NQ] : NULL;
        pcclExtSparseInfo_t si;
        pcclReduceInfo_t di;
        if (bench_barrier(comm)) return 1;
        double t0 = bench_now_s();
        if (pcclExtSparseAllReduce(x, y, a->count, pcclFloat, pcclSum, a->fraction, a->bits, res, 1, comm, &si))
            return 1;
        double t1 = bench_now_s();
        if (bench_barrier(comm)) return 1;
        pcclReduceDescriptor_t d = {.count = a->count, .op = pcclSum, .tag = 2,
                                    .src_descriptor = {.datatype = pcclFloat},
                                    .quantization_options = {.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone}};
        double t2 = bench_now_s();
        if (pcclAllReduce(x, y, &d, comm, &di) != pcclSuccess) return 1;
        double t3 = bench_now_s();
        if (t) t[Q_SPARSE] = t1 - t0, t[Q_DENSE] = t3 - t2, t[Q_TX] = (double)si.tx_bytes,
               t[Q_DENSE_TX] = (double)di.tx_bytes, t[Q_PACK] = (double)si.pack_bytes;
    }
    bench_barrier(comm);
    pcclExtSparseResidualDestroy(res);
    pcclDestroyCommunicator(comm);
    free(x);
    free(y);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: pccl_sparse WORLD COUNT FRACTION BITS REPS\n");
        return 2;
    }
    args_t a = {.world = atoi(argv[1]), .count = strtoull(argv[2], NULL, 10), .fraction = atof(argv[3]),
                .bits = atoi(argv[4]), .reps = atoi(argv[5])};
    if (a.world < 2 || a.world > BENCH_MAX_PEERS || a.count == 0 || a.reps < 1 || a.reps > BENCH_MAX_REPS) return 2;
    pcclInit();
    if (!(g_times = bench_shared_times(a.world, a.reps, NQ))) return 1;
    if (bench_fork_peers(a.world, run_peer, &a) != 0) return 1;
    double med[NQ], mn, mx;
    for (int q = 0; q < NQ; q++) bench_stats(g_times, a.world, a.reps, NQ, q, &med[q], &mn, &mx);
    printf("sparse world=%d count=%llu fraction=%g bits=%d pack_bytes=%.0f tx_per_peer=%.0f dense_tx_per_peer=%.0f "
           "wire_less=%.1fx vs_fp32=%.1fx sparse_ms=%.2f dense_ms=%.2f\n", a.world, (unsigned long long)a.count,
           a.fraction, a.bits, med[Q_PACK], med[Q_TX], med[Q_DENSE_TX], med[Q_DENSE_TX] / med[Q_TX],
           (double)a.count * 4 / med[Q_PACK], med[Q_SPARSE] * 1e3, med[Q_DENSE] * 1e3);
    return 0;
}
