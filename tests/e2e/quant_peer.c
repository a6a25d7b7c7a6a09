/*
 * quant_peer.c - one peer of the quantized all-reduce tests (test_quant.sh, test_quant_low.sh).
 * Usage: quant_peer PORT RANK WORLD OUT [low]
 * For every source dtype x algorithm x quantized dtype that pccl supports and
 * every reduce op, all-reduces data that mixes the edge cases (random, all
 * equal, all negative, NaN/Inf, denormals) at counts 1, 3 (< world size) and
 * 20011, alternately in place and out of place, with three tags in flight.
 * Checks every finite element against the exact float64 reduction within the
 * documented bound (docs/quantization.md) and non-finite ones exactly, and
 * writes "tag hash" lines to OUT: the harness compares them across peers
 * (bit-identity). With "low" the quantized dtypes are 4 and 2 bits (pccl_compress.h), and then come a
 * quantized reduce-scatter of every (algorithm, width) whose blocks are all-gathered and hashed, and a
 * mismatch: rank 0 asks for 4 bits, the others for 2, which every peer must see rejected (the harness
 * looks for the master's reason in the logs). Exits 0 when every check passed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_coll.h"
#include "pccl_compress.h"
#include "pccl_kernels.h"

static int g_rank, g_world, failures;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}
static double unit(int rank, size_t i, uint64_t salt) { /* [0, 1), same on every peer */
    return (double)(mix(((uint64_t)rank << 40) ^ (i * 0x9E3779B97F4A7C15ull) ^ salt) >> 11) / 9007199254740992.0;
}

/* Contribution of rank at element i: segments of 2000 elements cycle through the edge cases. */
static double contrib(int rank, size_t i, pcclRedOp_t op) {
    double u = unit(rank, i, 1);
    double scale = op == pcclProd ? 0.5 : 1.0; /* keep products of 4 factors away from overflow and zero */
    switch ((i / 2000) % 5) {
    case 0: return op == pcclProd ? 0.5 + u : (u * 2 - 1) * 3;
    case 1: return 0.75;
    case 2: return -1 - u * 2 * scale;
    case 3:
        if (i % 397 == 11 && rank == (int)(i % (size_t)g_world)) return i % 2 ? INFINITY : NAN;
        if (i % 397 == 200 && rank == 0) return -INFINITY;
        return op == pcclProd ? 0.5 + u : u * 10 - 5;
    default: return op == pcclProd ? 0.5 + u : (u - 0.5) * 1e-40;
    }
}

static void store(void *buf, size_t i, pcclDataType_t dt, double v) {
    if (dt == pcclFloat) ((float *)buf)[i] = (float)v;
    else if (dt == pcclDouble) ((double *)buf)[i] = v;
    else if (dt == pcclFloat16) ((uint16_t *)buf)[i] = pccl_float_to_half((float)v);
    else ((uint16_t *)buf)[i] = pccl_float_to_bf16((float)v);
}
static double load(const void *buf, size_t i, pcclDataType_t dt) {
    if (dt == pcclFloat) return ((const float *)buf)[i];
    if (dt == pcclDouble) return ((const double *)buf)[i];
    if (dt == pcclFloat16) return pccl_half_to_float(((const uint16_t *)buf)[i]);
    return pccl_bf16_to_float(((const uint16_t *)buf)[i]);
}
static double as_stored(double v, pcclDataType_t dt) {
    uint64_t tmp;
    store(&tmp, 0, dt, v);
    return load(&tmp, 0, dt);
}

/* Relative precision of one encode (quantized dtype) or one rounding to the source dtype. */
static double rel_step(pcclDataType_t dt, pcclDataType_t qdt) {
    double q = qdt == pcclFloat16 ? 0x1p-10 : 1.0 / ((qdt == pcclUint16 ? 65536.0 : 256.0) - 4);
    /* 4 bits: step / 2 <= A / 10 (zero-point with specials, 5 codes a side); 2 bits: a group with specials
     * keeps one code for its finite values, off by at most A. */
    if (qdt == pcclExtUint4) q = 0.1;
    if (qdt == pcclExtUint2) q = 1.0;
    double s = dt == pcclFloat ? 0x1p-23 : dt == pcclDouble ? 0x1p-52 : dt == pcclFloat16 ? 0x1p-10 : 0x1p-7;
    return q > s ? q : s;
}

/* Zero-point encodes a finite partial product below half a step of its block as exactly 0 (2 bits: any below
 * amax / 2), and 0 times Inf is NaN, so in products an expected Inf may come out NaN (docs/quantization.md);
 * which partial products are encoded depends on the algorithm's order, the same on every member. */
static int g_ternary;

static void check(const void *res, size_t n, pcclDataType_t dt, pcclDataType_t qdt, pcclRedOp_t op,
                  const char *what) {
    /* A: the largest magnitude any partial result can reach (sum of |x|, or product of max(|x|, 1)). */
    double A = 0;
    for (size_t i = 0; i < n; i++) {
        double a = op == pcclProd ? 1 : 0;
        for (int r = 0; r < g_world; r++) {
            double v = fabs(as_stored(contrib(r, i, op), dt));
            if (!isfinite(v)) continue;
            a = op == pcclProd ? a * (v > 1 ? v : 1) : a + v;
        }
        A = a > A ? a : A;
    }
    /* Each of the world_size + 1 encodes and roundings errs by at most A * rel (range <= 2A, half a step);
     * for products an error is multiplied by the remaining factors (<= A) once more. */
    double tol = (g_world + 1) * A * rel_step(dt, qdt) * (op == pcclProd ? A : 1);
    for (size_t i = 0; i < n; i++) {
        double acc = as_stored(contrib(0, i, op), dt);
        for (int r = 1; r < g_world; r++) {
            double v = as_stored(contrib(r, i, op), dt);
            if (op == pcclSum || op == pcclAvg) acc += v;
            else if (op == pcclProd) acc *= v;
            else if (isnan(v) || isnan(acc)) acc = NAN;
            else acc = op == pcclMax ? fmax(acc, v) : fmin(acc, v);
        }
        if (op == pcclAvg) acc /= g_world;
        double got = load(res, i, dt), t = op == pcclAvg ? tol / g_world : tol;
        int ok = isfinite(acc) ? fabs(got - acc) <= t : isnan(acc) ? isnan(got) : got == acc;
        ok |= isinf(acc) && isnan(got) && op == pcclProd && g_ternary && (qdt == pcclExtUint2 || qdt == pcclExtUint4);
        if (!ok) {
            failures++;
            fprintf(stderr, "rank %d: FAILED: %s element %zu: got %.9g want %.9g (bound %.3g)\n", g_rank, what, i,
                    got, acc, t);
            return;
        }
    }
}

/* Every source x algorithm x tgts[t] x reduce op, three counts in flight; "tag hash" lines to out.
 * @return the number of all-reduces, or -1 when one could not be launched. */
static int run_allreduces(pcclComm_t *comm, const pcclDataType_t *tgts, size_t ntgts, FILE *out) {
    int cases = 0;
    const pcclDataType_t srcs[] = {pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16};
    const pcclQuantizationAlgorithm_t algos[] = {pcclQuantMinMax, pcclQuantZeroPointScale};
    const size_t counts[] = {1, 3, 20011};
    uint64_t tag = 1000;
    for (size_t s = 0; s < 4; s++)
        for (size_t a = 0; a < 2; a++)
            for (size_t t = 0; t < ntgts; t++) {
                if (algos[a] == pcclQuantMinMax && tgts[t] == pcclFloat16) continue; /* rejected, see below */
                for (int op = pcclSum; op <= pcclMin; op++) {
                    pcclAsyncReduceOp_t h[3];
                    void *bufs[3], *outs[3];
                    for (size_t c = 0; c < 3; c++) { /* three tags in flight */
                        size_t n = counts[c], esz = pccl_dtype_size(srcs[s]);
                        bufs[c] = malloc(n * esz);
                        outs[c] = c == 1 ? malloc(n * esz) : bufs[c];
                        for (size_t i = 0; i < n; i++) store(bufs[c], i, srcs[s], contrib(g_rank, i, (pcclRedOp_t)op));
                        pcclReduceDescriptor_t d = {
                            .count = n, .op = (pcclRedOp_t)op, .tag = tag + c,
                            .src_descriptor = {.datatype = srcs[s], .distribution_hint = pcclDistributionNormal},
                            .quantization_options = {.quantized_datatype = tgts[t], .algorithm = algos[a]}};
                        pcclResult_t r = pcclAllReduceAsync(bufs[c], outs[c], &d, comm, &h[c]);
                        if (r != pcclSuccess) {
                            fprintf(stderr, "rank %d: FAILED: launch: %s\n", g_rank, pcclResultString(r));
                            return -1;
                        }
                    }
                    for (size_t c = 0; c < 3; c++) {
                        pcclReduceInfo_t info;
                        pcclResult_t r = pcclAwaitAsyncReduce(&h[c], &info);
                        char what[96];
                        snprintf(what, sizeof what, "%s->%s algo %d op %d n %zu", pccl_dtype_name(srcs[s]),
                                 pccl_dtype_name(tgts[t]), (int)algos[a], op, counts[c]);
                        if (r != pcclSuccess) {
                            failures++;
                            fprintf(stderr, "rank %d: FAILED: %s: %s\n", g_rank, what, pcclResultString(r));
                        } else {
                            g_ternary = algos[a] == pcclQuantZeroPointScale;
                            check(outs[c], counts[c], srcs[s], tgts[t], (pcclRedOp_t)op, what);
                            fprintf(out, "%llu %016llx %s\n", (unsigned long long)(tag + c),
                                    (unsigned long long)pccl_simplehash(outs[c], counts[c] * pccl_dtype_size(srcs[s])),
                                    what);
                        }
                        if (outs[c] != bufs[c]) free(outs[c]);
                        free(bufs[c]);
                        cases++;
                    }
                    tag += 3;
                }
            }
    return cases;
}

/* Quantized reduce-scatters of 4 and 2 bits (float sum and avg): the blocks, all-gathered, are within the bound
 * and hashed to out; then a mismatch (rank 0: 4 bits, the others: 2) that every peer must see rejected, and a
 * correct all-reduce after it. @return the number of operations. */
static int low_extras(pcclComm_t *comm, FILE *out) {
    const pcclDataType_t lows[] = {pcclExtUint4, pcclExtUint2};
    const pcclQuantizationAlgorithm_t algos[] = {pcclQuantMinMax, pcclQuantZeroPointScale};
    const size_t n = 20011;
    float *send = malloc(n * sizeof(float)), *block = malloc(n * sizeof(float)), *full = malloc(n * sizeof(float));
    uint64_t counts[16], tag = 50000;
    int cases = 0;
    for (size_t t = 0; t < 2; t++)
        for (size_t a = 0; a < 2; a++)
            for (int op = pcclSum; op <= pcclAvg; op++) {
                for (size_t i = 0; i < n; i++) send[i] = (float)contrib(g_rank, i, (pcclRedOp_t)op);
                pcclExtCollDescriptor_t d = {.kind = pcclExtCollReduceScatter, .tag = tag++, .sendbuf = send,
                                             .recvbuf = block, .count = n, .recv_capacity = n, .datatype = pcclFloat,
                                             .op = (pcclRedOp_t)op,
                                             .quantization_options = {.quantized_datatype = lows[t], .algorithm = algos[a]}};
                pcclExtCollInfo_t in;
                char what[96];
                snprintf(what, sizeof what, "reduce_scatter float->%s algo %d op %d n %zu", pccl_dtype_name(lows[t]),
                         (int)algos[a], op, n);
                pcclResult_t r = pcclExtCollective(&d, comm, &in);
                if (r == pcclSuccess)
                    r = pcclExtAllGatherV(block, in.count, full, n, counts, 16, pcclFloat, tag++, comm, NULL);
                if (r != pcclSuccess) {
                    failures++;
                    fprintf(stderr, "rank %d: FAILED: %s: %s\n", g_rank, what, pcclResultString(r));
                    continue;
                }
                check(full, n, pcclFloat, lows[t], (pcclRedOp_t)op, what);
                fprintf(out, "%llu %016llx %s\n", (unsigned long long)d.tag,
                        (unsigned long long)pccl_simplehash(full, n * sizeof(float)), what);
                cases++;
            }
    /* Different widths on different peers: rejected on every peer (the master names both in its reason). */
    for (size_t i = 0; i < n; i++) send[i] = (float)contrib(g_rank, i, pcclSum);
    pcclReduceDescriptor_t d = {.count = n, .op = pcclSum, .tag = tag++, .src_descriptor = {.datatype = pcclFloat},
                                .quantization_options = {.quantized_datatype = g_rank == 0 ? pcclExtUint4 : pcclExtUint2,
                                                         .algorithm = pcclQuantMinMax}};
    pcclResult_t r = pcclAllReduce(send, full, &d, comm, NULL);
    if (r != pcclInvalidUsage) failures++, fprintf(stderr, "rank %d: FAILED: mismatch gave %s\n", g_rank, pcclResultString(r));
    d.tag = tag++;
    d.quantization_options.quantized_datatype = pcclExtUint4;
    r = pcclAllReduce(send, full, &d, comm, NULL);
    if (r != pcclSuccess) failures++, fprintf(stderr, "rank %d: FAILED: after the mismatch: %s\n", g_rank, pcclResultString(r));
    else check(full, n, pcclFloat, pcclExtUint4, pcclSum, "after the mismatch");
    /* Not meaningful locally: an integer source, a width that does not exist. */
    d.tag = tag++;
    d.src_descriptor.datatype = pcclInt32;
    if (pcclAllReduce(send, full, &d, comm, NULL) != pcclInvalidArgument) failures++, fprintf(stderr, "int32 to uint4 accepted\n");
    d.src_descriptor.datatype = pcclFloat;
    d.quantization_options.quantized_datatype = (pcclDataType_t)66;
    if (pcclAllReduce(send, full, &d, comm, NULL) != pcclInvalidArgument) failures++, fprintf(stderr, "width 66 accepted\n");
    free(send);
    free(block);
    free(full);
    return cases + 2;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) return 2;
    g_rank = atoi(argv[2]);
    g_world = atoi(argv[3]);
    FILE *out = fopen(argv[4], "w");
    if (!out) return 2;
    pcclComm_t *comm = e2e_connect(argv[1], 0, 3);
    if (!comm) return 1;
    int ws = 0;
    for (int tries = 0; tries < 1200 && ws < g_world; tries++) { /* bounded: up to 60 s */
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
        if (ws < g_world) {
            pcclUpdateTopology(comm);
            usleep(50000);
        }
    }
    if (ws != g_world) {
        fprintf(stderr, "rank %d: world size %d, want %d\n", g_rank, ws, g_world);
        return 1;
    }
    const pcclDataType_t tgts8[] = {pcclUint8, pcclInt8, pcclUint16, pcclFloat16}, tgts_low[] = {pcclExtUint4, pcclExtUint2};
    const int low = argc == 6 && !strcmp(argv[5], "low");
    int cases = low ? run_allreduces(comm, tgts_low, 2, out) : run_allreduces(comm, tgts8, 4, out);
    if (cases < 0) return 1;
    if (low) cases += low_extras(comm, out);
    /* Combinations that are not meaningful fail locally with pcclInvalidArgument. */
    float x[4] = {1, 2, 3, 4};
    pcclReduceDescriptor_t bad = {.count = 4, .op = pcclSum, .tag = 1,
                                  .src_descriptor = {.datatype = pcclFloat},
                                  .quantization_options = {.quantized_datatype = pcclFloat16, .algorithm = pcclQuantMinMax}};
    if (pcclAllReduce(x, x, &bad, comm, NULL) != pcclInvalidArgument) failures++, fprintf(stderr, "minmax->float16 accepted\n");
    bad.src_descriptor.datatype = pcclInt32;
    bad.quantization_options = (pcclQuantizationOptions_t){.quantized_datatype = pcclUint8, .algorithm = pcclQuantMinMax};
    if (pcclAllReduce(x, x, &bad, comm, NULL) != pcclInvalidArgument) failures++, fprintf(stderr, "int32 source accepted\n");
    bool pending;
    pcclArePeersPending(comm, &pending); /* nobody leaves while others still reduce */
    pcclDestroyCommunicator(comm);
    fclose(out);
    fprintf(stderr, "rank %d: %d cases, %s (%d failures)\n", g_rank, cases, failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
