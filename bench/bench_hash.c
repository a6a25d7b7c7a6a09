/*
 * bench_hash.c - SimpleHash throughput against memcpy of the same buffer.
 *
 * usage: bench_hash [MiB ...]   (default: 256)
 * For each size: memcpy and SimpleHash with 1 thread and with all threads
 * (memcpy split across the same threads), median of RUNS runs each.
 * GB/s = bytes of the buffer / seconds (memcpy moves each byte once).
 */
#include "pccl_kernels.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 7

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Each thread copies one contiguous slice, as the hash splits its chunks. */
static void memcpy_threads(unsigned char *dst, const unsigned char *src, size_t n, int threads)
{
#pragma omp parallel num_threads(threads)
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t per = (n + nt - 1) / nt, lo = t * per;
        if (lo < n)
            memcpy(dst + lo, src + lo, n - lo < per ? n - lo : per);
    }
}

static volatile uint64_t sink;

static void bench_size(size_t mib, int max_threads)
{
    size_t n = mib << 20;
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst) {
        fprintf(stderr, "bench_hash: cannot allocate 2 x %zu MiB\n", mib);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) /* touches every page of both buffers */
        src[i] = (unsigned char)(i * 131 + 7);
    memset(dst, 0, n);

    int counts[2] = {1, max_threads};
    for (int k = 0; k < (max_threads > 1 ? 2 : 1); k++) {
        int threads = counts[k];
        double tc[RUNS], th[RUNS];
        omp_set_num_threads(threads);
        uint64_t h = pccl_simplehash(src, n); /* warm-up; also the reported value */
        for (int r = 0; r < RUNS; r++) {
            double t0 = now_s();
            memcpy_threads(dst, src, n, threads);
            tc[r] = now_s() - t0;
            sink += dst[(size_t)r * 4099 % n];
            t0 = now_s();
            sink += pccl_simplehash(src, n);
            th[r] = now_s() - t0;
        }
        double mc = (double)n / median(tc, RUNS) / 1e9, mh = (double)n / median(th, RUNS) / 1e9;
        printf("%8zu  %7d  %12.2f  %14.2f  %6.2f  %016llx\n", mib, threads, mc, mh, mh / mc,
               (unsigned long long)h);
    }
    free(src);
    free(dst);
}

int main(int argc, char **argv)
{
    int max_threads = omp_get_num_procs();
    printf("SimpleHash vs memcpy, median of %d runs, %d threads max\n", RUNS, max_threads);
    printf("%8s  %7s  %12s  %14s  %6s  %s\n", "MiB", "threads", "memcpy GB/s", "SimpleHash GB/s",
           "ratio", "hash");
    if (argc < 2) {
        bench_size(256, max_threads);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        long mib = strtol(argv[i], NULL, 10);
        if (mib <= 0) {
            fprintf(stderr, "usage: %s [MiB ...]\n", argv[0]);
            return 2;
        }
        bench_size((size_t)mib, max_threads);
    }
    return 0;
}
