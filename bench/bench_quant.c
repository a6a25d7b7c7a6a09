/*
 * bench_quant.c - throughput of the quantization kernels (kernels/pccl_quant.h), one thread and all.
 * Usage: bench_quant [MIB] [REPS]   (default 16 MiB of float, 5 repetitions)
 * For min-max and zero-point to uint8, uint4 and uint2: encode (pccl_quantize), decode (pccl_dequantize) and
 * decode-and-sum (pccl_dequant_reduce_block per block, the ring's reduce-scatter step). Output: one line
 * "RESULT mode=qkernel ..." per point, GB/s of float input processed (median of REPS).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"
#include "pccl_compress.h"
#include "pccl_kernels.h"
#include "pccl_quant.h"

/* What one repetition runs: 0 encode, 1 decode, 2 decode and sum into the buffer, block by block. */
static void step(int what, float *x, float *y, size_t n, pcclQuantizationAlgorithm_t algo, pcclDataType_t qdt,
                 uint8_t *wire) {
    if (what == 0) pccl_quantize(x, n, pcclFloat, algo, qdt, wire);
    else if (what == 1) pccl_dequantize(wire, n, qdt, y, pcclFloat);
    else {
        const size_t bb = pccl_quant_block_bytes(qdt);
        for (size_t s = 0, b = 0; s < n; s += PCCL_QBLOCK_ELEMS, b++) {
            size_t m = n - s < PCCL_QBLOCK_ELEMS ? n - s : PCCL_QBLOCK_ELEMS;
            pccl_dequant_reduce_block(wire + b * bb, m, qdt, y + s, pcclFloat, pcclSum);
        }
    }
}

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16, n = mib << 18;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n == 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: bench_quant [MIB] [REPS]\n");
        return 2;
    }
    float *x = malloc(n * sizeof(float)), *y = calloc(n, sizeof(float));
    uint8_t *wire = malloc(pccl_quant_wire_bytes(n, pcclUint16));
    if (!x || !y || !wire) return 1;
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2 - 1);
    }
    const pcclDataType_t qdts[] = {pcclUint8, pcclExtUint4, pcclExtUint2};
    const pcclQuantizationAlgorithm_t algos[] = {pcclQuantMinMax, pcclQuantZeroPointScale};
    const char *whats[] = {"encode", "decode", "decode_sum"};
    const int threads[] = {1, omp_get_max_threads()};
    double t[100], med, mn, mx;
    for (int th = 0; th < (threads[1] > 1 ? 2 : 1); th++) {
        omp_set_num_threads(threads[th]);
        for (int a = 0; a < 2; a++)
            for (int q = 0; q < 3; q++)
                for (int w = 0; w < 3; w++) {
                    if (w == 2 && threads[th] > 1) continue; /* the block loop is the ring's: one thread */
                    step(0, x, y, n, algos[a], qdts[q], wire);
                    for (int k = 0; k < reps; k++) {
                        double t0 = bench_now_s();
                        step(w, x, y, n, algos[a], qdts[q], wire);
                        t[k] = bench_now_s() - t0;
                    }
                    bench_stats(t, 1, reps, 1, 0, &med, &mn, &mx);
                    printf("RESULT impl=pccl mode=qkernel algo=%s qdt=%s op=%s threads=%d bytes=%zu wire_bytes=%zu "
                           "median_s=%.6f GBps=%.3f\n", a ? "zps" : "minmax", pccl_dtype_name(qdts[q]), whats[w],
                           threads[th], n * sizeof(float), pccl_quant_wire_bytes(n, qdts[q]), med,
                           (double)(n * sizeof(float)) / med / 1e9);
                }
    }
    free(x);
    free(y);
    free(wire);
    return 0;
}
