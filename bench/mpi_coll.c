/*
 * mpi_coll.c - OpenMPI comparator of pccl_coll (bench/coll.sh).
 *
 * usage: mpirun -np PEERS [...] mpi_coll broadcast|all_gather|reduce_scatter|barrier BYTES REPS [WARMUP]
 * BYTES as pccl_coll counts it: the broadcast buffer, the all-gather's output, the reduce-scatter's
 * input (each rank's block BYTES / PEERS). MPI_Bcast from rank 0 (one buffer: MPI has no out-of-place
 * broadcast); MPI_Allgather and MPI_Reduce_scatter_block (MPI_SUM of floats) out of place. An
 * MPI_Barrier before each repetition (barrier: MPI_Barrier is the operation timed, BYTES ignored); per repetition the max over ranks of the time (MPI_Reduce MAX),
 * then median/min/max over repetitions, printed by rank 0 as one "RESULT impl=mpi mode=coll ..." line.
 * Every rank checks its output after the last repetition; a wrong result fails the run.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_stats.h"

static float val(int k, size_t i) { return (float)((i + (size_t)k) % 17); }

static void run(int kind, const float *in, float *out, size_t count, int world) {
    int block = (int)(count / (size_t)world);
    if (kind == 0) MPI_Bcast(out, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else if (kind == 3) MPI_Barrier(MPI_COMM_WORLD);
    else if (kind == 1) MPI_Allgather(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    else MPI_Reduce_scatter_block(in, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* Broadcast: rank 0's val(0, i); all-gather: block r holds val(r, j); reduce-scatter: block rank of the sums. */
static size_t check(int kind, const float *out, size_t count, int rank, int world) {
    if (kind == 3) return (size_t)-1;
    size_t block = count / (size_t)world, n = kind == 2 ? block : kind == 1 ? block * (size_t)world : count;
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        if (kind == 0) want = val(0, i);
        else if (kind == 1) want = val((int)(i / block), i % block);
        else
            for (int k = 0; k < world; k++) want += val(k, (size_t)rank * block + i);
        if (out[i] != want) return i;
    }
    return (size_t)-1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    static const char *const kinds[] = {"broadcast", "all_gather", "reduce_scatter", "barrier"};
    int kind = -1;
    for (int k = 0; argc > 1 && k < 4; k++)
        if (strcmp(argv[1], kinds[k]) == 0) kind = k;
    if (argc < 4 || kind < 0) {
        if (rank == 0) fprintf(stderr, "usage: mpi_coll broadcast|all_gather|reduce_scatter|barrier BYTES REPS [WARMUP]\n");
        MPI_Finalize();
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[2], NULL, 10);
    int reps = atoi(argv[3]), warm = argc > 4 ? atoi(argv[4]) : 1;
    size_t count = bytes / sizeof(float), block = count / (size_t)world;
    /* MPI counts are int: 256 MiB of floats (67M) fits. */
    size_t in_len = kind == 3 ? 1 : kind == 1 ? block : count, out_len = kind == 3 ? 1 : kind == 2 ? block : count;
    float *in = malloc(in_len * sizeof(float)), *out = calloc(out_len, sizeof(float));
    double *t = malloc((size_t)reps * sizeof(double));
    if (!in || !out || !t || reps < 1 || (block == 0 && kind != 3)) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < in_len; i++) in[i] = val(rank, i);
    for (int r = -warm; r < reps; r++) {
        if (kind == 0 && rank == 0) memcpy(out, in, count * sizeof(float)); /* untimed: the root's data */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        run(kind, in, out, count, world);
        double dt = MPI_Wtime() - t0;
        if (r >= 0) t[r] = dt;
    }
    size_t bad = check(kind, out, count, rank, world);
    if (bad != (size_t)-1) {
        fprintf(stderr, "mpi rank %d: %s: wrong output at element %zu\n", rank, kinds[kind], bad);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double med = 0, mn = 0, mx = 0;
    if (mpi_time_stats(t, reps, &med, &mn, &mx) > 0) {
        printf("RESULT impl=mpi mode=coll coll=%s peers=%d bytes=%zu reps=%d median_s=%.6f min_s=%.6f max_s=%.6f "
               "GBps=%.4f\n",
               kinds[kind], world, bytes, reps, med, mn, mx, (double)bytes / med / 1e9);
        fflush(stdout);
    }
    free(in);
    free(out);
    free(t);
    MPI_Finalize();
    return 0;
}
