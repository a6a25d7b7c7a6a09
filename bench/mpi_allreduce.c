/*
 * mpi_allreduce.c - OpenMPI comparator for bench/run.sh.
 *
 * usage: mpirun -np PEERS [...] mpi_allreduce BYTES REPS [WARMUP]
 * In-place MPI_Allreduce (MPI_SUM of floats) of BYTES bytes; an MPI_Barrier
 * before each repetition; per repetition the max over ranks of the time
 * (MPI_Reduce MAX), then median/min/max over repetitions, printed by rank 0
 * as one "RESULT ..." line. Throughput = BYTES / time.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_stats.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: mpi_allreduce BYTES REPS [WARMUP]\n");
        MPI_Finalize();
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[1], NULL, 10);
    int reps = atoi(argv[2]), warm = argc > 3 ? atoi(argv[3]) : 1;
    size_t count = bytes / sizeof(float);
    float *buf = malloc(count * sizeof(float));
    double *t = malloc((size_t)reps * sizeof(double));
    if (!buf || !t) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < count; i++) buf[i] = (float)((i + (size_t)rank) % 17);
    /* MPI counts are int: a GiB of floats (268M) fits. */
    for (int r = -warm; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        if (r >= 0) t[r] = dt;
    }
    double med = 0, mn = 0, mx = 0;
    if (mpi_time_stats(t, reps, &med, &mn, &mx) > 0) {
        printf("RESULT impl=mpi mode=ar peers=%d bytes=%zu conc=1 reps=%d median_s=%.6f min_s=%.6f max_s=%.6f "
               "GBps=%.4f\n",
               world, bytes, reps, med, mn, mx, (double)bytes / med / 1e9);
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
