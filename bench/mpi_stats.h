/* mpi_stats.h - the times of the MPI comparators (mpi_allreduce.c, mpi_coll.c): per repetition the max
 * over ranks, then the median, min and max over repetitions, known on rank 0. */
#ifndef PCCL_BENCH_MPI_STATS_H
#define PCCL_BENCH_MPI_STATS_H

#include <mpi.h>
#include <stdlib.h>

static int mpi_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Collective over MPI_COMM_WORLD; t holds this rank's reps times. Returns 1 on rank 0 (med, mn, mx
 * set), else 0; -1 when out of memory. */
static int mpi_time_stats(const double *t, int reps, double *med, double *mn, double *mx) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double *tmax = malloc((size_t)reps * sizeof(double));
    if (!tmax) return -1;
    MPI_Reduce(t, tmax, reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(tmax, (size_t)reps, sizeof *tmax, mpi_cmp_double);
        *med = reps % 2 ? tmax[reps / 2] : 0.5 * (tmax[reps / 2 - 1] + tmax[reps / 2]);
        *mn = tmax[0];
        *mx = tmax[reps - 1];
    }
    free(tmax);
    return rank == 0;
}

#endif /* PCCL_BENCH_MPI_STATS_H */
