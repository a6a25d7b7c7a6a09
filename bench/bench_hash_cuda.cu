/*
 * bench_hash_cuda.cu - SimpleHash of device memory against the technical
 * report's comparator (seed 003, appendix A.1: Thrust's reduce) and a
 * device-to-device copy of the same buffer.
 *
 * usage: bench_hash_cuda [MiB ...]   (default: 64 256 1024)
 * GB/s = bytes of the buffer / seconds, median of RUNS runs after a warm-up.
 * SimpleHash is timed as the library calls it (kernel, copy of the chunk
 * roots to the host, host-side join); the copy reads and writes each byte
 * once, so its GB/s counts the buffer once, like the others.
 * Exit 77 when no CUDA device is present.
 */
#include <cuda_runtime.h>
#include <thrust/device_ptr.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" {
#include "pccl_kernels.h"
}

#define RUNS 7

static double now_s()
{
    using clk = std::chrono::steady_clock;
    return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static void must(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_hash_cuda: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

__global__ void fill_kernel(uint32_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)(i * 2654435761u + 7u);
}

static void bench_size(size_t mib)
{
    const size_t n = mib << 20;
    void *src = nullptr, *dst = nullptr;
    must(cudaMalloc(&src, n), "cudaMalloc");
    must(cudaMalloc(&dst, n), "cudaMalloc");
    fill_kernel<<<1024, 256>>>((uint32_t *)src, n / 4);
    must(cudaDeviceSynchronize(), "fill");

    uint64_t h = 0;
    if (pccl_simplehash_cuda(src, n, &h) != 0) { /* warm-up; also the reported value */
        fprintf(stderr, "bench_hash_cuda: SimpleHash failed\n");
        exit(1);
    }
    thrust::device_ptr<const uint32_t> words((const uint32_t *)src);
    volatile unsigned long long sink = thrust::reduce(words, words + n / 4, 0ull);

    std::vector<double> tc, th, tr;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        must(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice), "cudaMemcpy");
        must(cudaDeviceSynchronize(), "copy");
        tc.push_back(now_s() - t0);

        t0 = now_s();
        uint64_t again = 0;
        if (pccl_simplehash_cuda(src, n, &again) != 0 || again != h) {
            fprintf(stderr, "bench_hash_cuda: SimpleHash differs between runs\n");
            exit(1);
        }
        th.push_back(now_s() - t0);

        t0 = now_s();
        sink = sink + thrust::reduce(words, words + n / 4, 0ull);
        tr.push_back(now_s() - t0);
    }
    (void)sink;
    double gc = n / median(tc) / 1e9, gh = n / median(th) / 1e9, gr = n / median(tr) / 1e9;
    printf("%8zu  %11.1f  %11.1f  %15.1f  %13.2f  %016llx\n", mib, gc, gr, gh, gh / gr, (unsigned long long)h);
    cudaFree(src);
    cudaFree(dst);
}

int main(int argc, char **argv)
{
    if (!pccl_cuda_available()) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    must(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("SimpleHash on %s (%d SMs), median of %d runs\n", prop.name, prop.multiProcessorCount, RUNS);
    printf("%8s  %11s  %11s  %15s  %13s  %s\n", "MiB", "D2D GB/s", "Thrust GB/s", "SimpleHash GB/s",
           "hash/Thrust", "hash");
    std::vector<size_t> sizes;
    for (int i = 1; i < argc; i++) {
        long mib = strtol(argv[i], nullptr, 10);
        if (mib <= 0) {
            fprintf(stderr, "usage: %s [MiB ...]\n", argv[0]);
            return 2;
        }
        sizes.push_back((size_t)mib);
    }
    if (sizes.empty())
        sizes = {64, 256, 1024};
    for (size_t s : sizes)
        bench_size(s);
    return 0;
}
