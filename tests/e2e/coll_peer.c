/*
 * coll_peer.c - one peer of the collectives' end-to-end tests (test_coll*.sh).
 * Usage: coll_peer PORT ID WORLD MODE [KIND]
 * ID (0..WORLD-1) is given by the harness, not by pccl, so every expected result is computed here from the
 * contributions e2e_contrib(id, i) of the members, independently of the library.
 *  all    every collective, in place and out of place (mixed across the members of one operation), every dtype,
 *         every reduce op of the reduce-scatter (and a quantized one); ranks ordered by rank keys (key 100 - ID: rank r is ID WORLD-1-r)
 *         and by ring position (learned from the info); a shared-sources broadcast; async operations of several
 *         kinds at once; the with-retry form.
 *  keyed  a few operations of every kind (the run is keyed: PCCL_KEY_FILE).
 *  gather the all-gathers alone (one count and variable counts), every dtype, in place and out of place.
 *  barrier  barriers only: a late member holds the others back; ranked and unranked; several async at once.
 *  bad    bad input: no root, two roots, counts or dtypes that differ, outputs too small for the world, rank keys
 *         on some members or equal, an unknown kind: each a clear error on every member, buffers unchanged, and a
 *         correct operation afterwards.
 *  kill   KIND (broadcast, all_gather, all_gather_v, reduce_scatter): operations of that kind in a loop on one
 *         tag among the WORLD first members, ID 0 in place and the others out of place (a broadcast's root is
 *         ID 2), while the harness kills ID 1 in the middle of one and starts ID WORLD (which joins) afterwards;
 *         a failed operation must leave the caller's buffer restored (in place) or its input untouched (out of
 *         place), its retry must be correct for the world it ran in (contents that name their members), and the
 *         peers stop after ROUNDS operations of WORLD members with the joiner in them. Ranked by the IDs as rank
 *         keys (ID 0 last in the all-gathers, so its block moves), or with PCCL_TEST_RANK_BY_POSITION=1 by ring
 *         position (where recursive halving and doubling applies).
 *  pipe   all-reduces in a loop on one tag, run under the master's grants (docs/protocol.md "Pipelined
 *         collectives"), in place on ID 0, out of place on the others; in the middle ID 1 passes another count: a
 *         mismatch rejected on every member with the reason, buffers and inputs unchanged; then the loop goes on.
 * Exits 0 when every check passed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2e_dtype.h"
#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_coll.h"
#include "pccl_kernels.h"

static int failures;
static int g_rank; /* the harness's ID (e2e_dtype.h's EXPECT prints it) */
static int g_world;
static pcclComm_t *g_comm;
static uint64_t g_tag = 100;

static const pcclDataType_t k_dts[] = {pcclUint8,  pcclInt8,  pcclUint16, pcclInt16,  pcclUint32,  pcclInt32,
                                       pcclUint64, pcclInt64, pcclFloat,  pcclDouble, pcclFloat16, pcclBFloat16};
#define NDTS (sizeof k_dts / sizeof k_dts[0])

/* With rank keys 100 - ID, rank r is ID g_world-1-r; ranked by ring position (mode gather), the ID learned at
 * rank r. */
static int g_by_position, g_id_at[8];
static int id_of_rank(uint32_t r) { return g_by_position ? g_id_at[r] : g_world - 1 - (int)r; }

static pcclExtCollDescriptor_t mk(pcclExtCollKind_t kind, const void *send, void *recv, uint64_t count,
                                  uint64_t cap, pcclDataType_t dt) {
    pcclExtCollDescriptor_t d = {.kind = kind, .tag = g_tag++, .sendbuf = send, .recvbuf = recv, .count = count,
                                 .recv_capacity = cap, .datatype = dt, .op = pcclSum,
                                 .quantization_options = {.quantized_datatype = dt, .algorithm = pcclQuantNone},
                                 .flags = g_by_position ? 0 : PCCL_EXT_COLL_RANKED, .rank_key = 100 - (uint64_t)g_rank};
    return d;
}

static void fill(void *buf, size_t n, pcclDataType_t dt, int id, size_t from) {
    for (size_t i = 0; i < n; i++) store(buf, i, dt, e2e_contrib(id, from + i, dt));
}

/* buf[0..n) holds id's contribution from element `from` on; else counts a failure naming what. */
static int holds_contrib(const void *buf, size_t n, pcclDataType_t dt, int id, size_t from, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (load(buf, i, dt) != e2e_contrib(id, from + i, dt)) {
            EXPECT(0, "%s %s element %zu: got %g want %g (ID %d)", what, pccl_dtype_name(dt), i, load(buf, i, dt),
                   e2e_contrib(id, from + i, dt), id);
            return 0;
        }
    return 1;
}

static void expect_ok(pcclResult_t r, const pcclExtCollDescriptor_t *d, const char *what) {
    EXPECT(r == pcclSuccess, "%s %s tag %llu: %s", what, pccl_dtype_name(d->datatype), (unsigned long long)d->tag,
           pcclResultString(r));
}

static void *garbage(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    memset(p, 0xA5, bytes);
    return p;
}

/* ---- mode all ---- */

static void check_info(const pcclExtCollInfo_t *in, uint64_t count, const char *what) {
    EXPECT(in->world_size == (uint32_t)g_world && id_of_rank(in->rank) == g_rank && in->count == count,
           "%s info: rank %u world %u count %llu (want world %d, count %llu)", what, in->rank, in->world_size,
           (unsigned long long)in->count, g_world, (unsigned long long)count);
}

static void check_broadcast(pcclDataType_t dt, size_t n, int inplace, int root, int shared) {
    size_t esz = pccl_dtype_size(dt);
    int is_root = g_rank == root, holder = is_root || (shared && g_rank % 2 == root % 2);
    uint8_t *send = garbage(n * esz), *recv = garbage(n * esz);
    if (is_root) fill(inplace ? recv : send, n, dt, root, 0);
    else if (holder) fill(recv, n, dt, root, 0);
    pcclExtCollDescriptor_t d = mk(pcclExtCollBroadcast, inplace ? NULL : send, recv, n, n, dt);
    d.flags |= (is_root ? PCCL_EXT_COLL_ROOT : 0) | (shared ? PCCL_EXT_COLL_SHARED_SOURCES : 0);
    pcclExtCollInfo_t in;
    pcclResult_t r = pcclExtCollective(&d, g_comm, &in);
    expect_ok(r, &d, shared ? "shared-sources broadcast" : "broadcast");
    if (r == pcclSuccess) {
        holds_contrib(recv, n, dt, root, 0, "broadcast output");
        if (is_root && !inplace) holds_contrib(send, n, dt, root, 0, "broadcast root's input");
        check_info(&in, n, "broadcast");
        EXPECT(id_of_rank(in.root) == root, "broadcast root rank %u, want ID %d", in.root, root);
        /* a member that holds the data (the root, and with shared sources those equal to it) receives none */
        EXPECT(holder ? in.rx_bytes == 0 : in.rx_bytes == n * esz, "broadcast: ID %d (%s) received %llu bytes", g_rank,
               holder ? "a holder" : "not a holder", (unsigned long long)in.rx_bytes);
    }
    free(send);
    free(recv);
}

/* All-gather (counts NULL: n from everyone) or all-gather-v (count_of(ID) from each). Blocks by rank. */
static size_t count_of(int id, size_t base) { return base + (size_t)id * 3; }

static void check_allgather(pcclDataType_t dt, size_t base, int inplace, int variable) {
    size_t esz = pccl_dtype_size(dt), mine = variable ? count_of(g_rank, base) : base, total = 0, slack = 5;
    for (int id = 0; id < g_world; id++) total += variable ? count_of(id, base) : base;
    uint8_t *send = garbage(mine * esz), *recv = garbage((total + slack) * esz);
    fill(inplace ? recv : send, mine, dt, g_rank, 0);
    uint64_t counts[8] = {0};
    pcclExtCollDescriptor_t d = mk(variable ? pcclExtCollAllGatherV : pcclExtCollAllGather, inplace ? NULL : send,
                                   recv, mine, total + slack, dt);
    d.counts = variable ? counts : NULL;
    d.counts_capacity = variable ? 8 : 0;
    pcclExtCollInfo_t in;
    pcclResult_t r = pcclExtCollective(&d, g_comm, &in);
    expect_ok(r, &d, variable ? "all_gather_v" : "all_gather");
    if (r == pcclSuccess) {
        size_t off = 0;
        for (uint32_t rk = 0; rk < (uint32_t)g_world; rk++) {
            size_t c = variable ? count_of(id_of_rank(rk), base) : base;
            if (variable) EXPECT(counts[rk] == c, "all_gather_v counts[%u] %llu want %zu", rk,
                                 (unsigned long long)counts[rk], c);
            if (!holds_contrib(recv + off * esz, c, dt, id_of_rank(rk), 0, "all-gather block")) break;
            off += c;
        }
        for (size_t b = total * esz; b < (total + slack) * esz; b++)
            if (recv[b] != 0xA5) {
                EXPECT(0, "all-gather wrote past its output (byte %zu)", b);
                break;
            }
        if (!inplace) holds_contrib(send, mine, dt, g_rank, 0, "all-gather input");
        check_info(&in, total, variable ? "all_gather_v" : "all_gather");
    }
    free(send);
    free(recv);
}

static double reduced(size_t i, pcclDataType_t dt, pcclRedOp_t op) { return e2e_reduced(i, dt, op, g_world); }

/* Rank r's block of n elements over w members (pccl_coll.h's split). */
static void block_of(uint64_t n, uint64_t w, uint64_t r, uint64_t *off, uint64_t *len) {
    *off = r * (n / w) + (r < n % w ? r : n % w);
    *len = n / w + (r < n % w);
}

static void check_reduce_scatter(pcclDataType_t dt, pcclRedOp_t op, size_t n, int inplace, int ranked) {
    size_t esz = pccl_dtype_size(dt);
    uint8_t *send = garbage(n * esz), *recv = garbage(n * esz);
    fill(inplace ? recv : send, n, dt, g_rank, 0);
    pcclExtCollDescriptor_t d = mk(pcclExtCollReduceScatter, inplace ? NULL : send, recv, n, n, dt);
    d.op = op;
    if (!ranked) d.flags = 0;
    pcclExtCollInfo_t in;
    pcclResult_t r = pcclExtCollective(&d, g_comm, &in);
    expect_ok(r, &d, "reduce_scatter");
    if (r == pcclSuccess) {
        uint64_t off, len;
        block_of(n, (uint64_t)g_world, in.rank, &off, &len);
        EXPECT(in.offset == off && in.count == len && in.world_size == (uint32_t)g_world,
               "reduce_scatter info: offset %llu count %llu, want %llu %llu", (unsigned long long)in.offset,
               (unsigned long long)in.count, (unsigned long long)off, (unsigned long long)len);
        if (ranked) EXPECT(id_of_rank(in.rank) == g_rank, "reduce_scatter rank %u", in.rank);
        const uint8_t *out = inplace ? recv + off * esz : recv;
        for (uint64_t j = 0; j < len; j++)
            if (load(out, j, dt) != reduced(off + j, dt, op)) {
                EXPECT(0, "reduce_scatter %s op %d element %llu: got %g want %g", pccl_dtype_name(dt), (int)op,
                       (unsigned long long)(off + j), load(out, j, dt), reduced(off + j, dt, op));
                break;
            }
        if (!inplace) holds_contrib(send, n, dt, g_rank, 0, "reduce_scatter input");
        if (inplace) /* the rest of the input is untouched */
            EXPECT(holds_contrib(recv, off, dt, g_rank, 0, "reduce_scatter input before the block") &&
                       holds_contrib(recv + (off + len) * esz, n - off - len, dt, g_rank, off + len,
                                     "reduce_scatter input after the block"),
                   "in-place reduce_scatter wrote outside its block");
    }
    free(send);
    free(recv);
}

/* A quantized reduce-scatter (min-max to uint8 on the wire, reduced in float at each hop): within the
 * quantization error of the exact sum. */
static void check_quantized_reduce_scatter(size_t n) {
    float *send = malloc(n * sizeof(float)), *recv = malloc(n * sizeof(float));
    fill(send, n, pcclFloat, g_rank, 0);
    pcclExtCollDescriptor_t d = mk(pcclExtCollReduceScatter, send, recv, n, n, pcclFloat);
    d.quantization_options = (pcclQuantizationOptions_t){.quantized_datatype = pcclUint8,
                                                         .algorithm = pcclQuantMinMax};
    pcclExtCollInfo_t in;
    pcclResult_t r = pcclExtCollective(&d, g_comm, &in);
    expect_ok(r, &d, "quantized reduce_scatter");
    for (uint64_t j = 0; r == pcclSuccess && j < in.count; j++)
        if (fabs(recv[j] - reduced(in.offset + j, pcclFloat, pcclSum)) > 1.0) {
            EXPECT(0, "quantized reduce_scatter element %llu: got %g want %g", (unsigned long long)(in.offset + j),
                   recv[j], reduced(in.offset + j, pcclFloat, pcclSum));
            break;
        }
    free(send);
    free(recv);
}

/* Ranks by ring position: an all-gather of the IDs is a permutation with this member's ID at its rank. */
static int check_ring_ranks(uint32_t ids[8]) {
    uint32_t me = (uint32_t)g_rank;
    pcclExtCollDescriptor_t d = mk(pcclExtCollAllGather, &me, ids, 1, 8, pcclUint32);
    d.flags = 0;
    pcclExtCollInfo_t in;
    pcclResult_t r = pcclExtCollective(&d, g_comm, &in);
    expect_ok(r, &d, "unranked all_gather");
    if (r != pcclSuccess) return 0;
    unsigned seen = 0;
    for (int k = 0; k < g_world; k++) seen |= 1u << ids[k];
    EXPECT(seen == (1u << g_world) - 1 && ids[in.rank] == me, "ring ranks: ID %u at rank %u, seen %#x", me, in.rank,
           seen);
    return seen == (1u << g_world) - 1;
}

static void check_barrier(void) {
    pcclExtCollInfo_t in;
    pcclResult_t r = pcclExtBarrier(g_tag++, g_comm, &in);
    EXPECT(r == pcclSuccess && in.world_size == (uint32_t)g_world && in.count == 0, "barrier: %s, world %u",
           pcclResultString(r), in.world_size);
}

/* Several kinds in flight at once (async), awaited in reverse; then the with-retry form. */
static void check_async(void) {
    enum { N = 20000 };
    float *in[4], *out[4];
    pcclExtAsyncCollOp_t h[5];
    pcclExtCollDescriptor_t d[5];
    for (int k = 0; k < 4; k++) {
        in[k] = malloc(N * sizeof(float));
        out[k] = malloc((size_t)g_world * N * sizeof(float));
        fill(in[k], N, pcclFloat, g_rank, 0);
    }
    d[0] = mk(pcclExtCollAllGather, in[0], out[0], N, (uint64_t)g_world * N, pcclFloat);
    d[1] = mk(pcclExtCollReduceScatter, in[1], out[1], N, N, pcclFloat);
    d[2] = mk(pcclExtCollBroadcast, in[2], out[2], N, N, pcclFloat);
    d[2].flags |= g_rank == 0 ? PCCL_EXT_COLL_ROOT : 0;
    d[3] = mk(pcclExtCollAllGather, in[3], out[3], N, (uint64_t)g_world * N, pcclFloat);
    d[4] = mk(pcclExtCollBarrier, NULL, NULL, 0, 0, pcclFloat);
    for (int k = 0; k < 5; k++)
        EXPECT(pcclExtCollectiveAsync(&d[k], g_comm, &h[k]) == pcclSuccess, "async launch %d", k);
    EXPECT(pcclExtCollectiveAsync(&d[0], g_comm, &h[0]) == pcclInvalidUsage, "a tag in flight twice accepted");
    for (int k = 4; k >= 0; k--) {
        pcclExtCollInfo_t info;
        EXPECT(pcclExtAwaitCollective(&h[k], &info) == pcclSuccess, "await %d", k);
    }
    EXPECT(pcclExtAwaitCollective(&h[0], NULL) == pcclInvalidArgument, "an awaited handle awaited again");
    for (uint32_t rk = 0; rk < (uint32_t)g_world; rk++)
        holds_contrib(out[0] + rk * N, N, pcclFloat, id_of_rank(rk), 0, "async all_gather");
    holds_contrib(out[2], N, pcclFloat, 0, 0, "async broadcast");
    /* with retry: the same descriptors on new tags */
    for (int k = 0; k < 5; k++) d[k].tag = g_tag++;
    pcclExtCollInfo_t infos[5];
    EXPECT(pcclExtCollectiveMultipleWithRetry(d, 5, g_comm, infos, 2) == pcclSuccess, "multiple with retry");
    for (uint32_t rk = 0; rk < (uint32_t)g_world; rk++)
        holds_contrib(out[3] + rk * N, N, pcclFloat, id_of_rank(rk), 0, "with-retry all_gather");
    EXPECT(infos[0].count == (uint64_t)g_world * N && infos[4].world_size == (uint32_t)g_world, "with-retry infos");
    for (int k = 0; k < 4; k++) {
        free(in[k]);
        free(out[k]);
    }
}

static void mode_all(void) {
    for (size_t t = 0; t < NDTS; t++) {
        pcclDataType_t dt = k_dts[t];
        int inplace = (int)((t + (size_t)g_rank) % 2); /* members differ in mode within one operation */
        for (int pass = 0; pass < 2; pass++, inplace = !inplace) {
            size_t n = pass ? 1003 : 7;
            check_broadcast(dt, n, inplace, (int)(t % (size_t)g_world), 0);
            check_allgather(dt, n, inplace, 0);
            check_allgather(dt, n, inplace, 1);
            for (int op = pcclSum; op <= pcclMin; op++) check_reduce_scatter(dt, (pcclRedOp_t)op, n, inplace, 1);
        }
    }
    check_broadcast(pcclFloat, 300007, 0, 1, 1);
    check_broadcast(pcclFloat, 300007, 1, 0, 1);
    check_reduce_scatter(pcclInt32, pcclSum, 2, 0, 1); /* fewer elements than members: empty blocks */
    check_reduce_scatter(pcclInt32, pcclSum, 100003, g_rank % 2, 0);
    check_quantized_reduce_scatter(100003);
    uint32_t ids[8];
    check_ring_ranks(ids);
    check_barrier();
    check_async();
    check_allgather(pcclFloat, 200000, 1, 1);
}

/* The all-gathers and reduce-scatters ranked by ring position (learned first: whose ID is at each rank), every
 * dtype, in place and out of place, of one count and of variable counts; the reduce-scatters with every reduce op
 * (the product in float). */
static void mode_gather(void) {
    uint32_t ids[8];
    if (!check_ring_ranks(ids)) return;
    for (int k = 0; k < g_world; k++) g_id_at[k] = (int)ids[k];
    g_by_position = 1;
    /* a product of 6 members' contributions leaves the narrow types' range (or exact bfloat16) */
    const pcclRedOp_t no_prod[] = {pcclSum, pcclAvg, pcclMax, pcclMin};
    for (size_t t = 0; t < NDTS; t++)
        for (int pass = 0; pass < 2; pass++) {
            int inplace = (int)((t + (size_t)g_rank + (size_t)pass) % 2);
            check_allgather(k_dts[t], pass ? 1003 : 7, inplace, 0);
            check_allgather(k_dts[t], pass ? 1003 : 7, inplace, 1);
            check_reduce_scatter(k_dts[t], no_prod[(t + (size_t)pass) % 4], pass ? 1003 : 7, inplace, 1);
        }
    for (int op = pcclSum; op <= pcclMin; op++) check_reduce_scatter(pcclFloat, (pcclRedOp_t)op, 30011, g_rank % 2, 1);
    check_reduce_scatter(pcclInt32, pcclSum, 2, 0, 1); /* fewer elements than members: empty blocks */
    check_allgather(pcclFloat, 200000, 1, 1);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void mode_barrier(void) {
    check_barrier();
    /* ID 0 enters 600 ms late: nobody leaves before it entered */
    if (g_rank == 0) usleep(600000);
    uint64_t t0 = now_ms();
    check_barrier();
    EXPECT(g_rank == 0 || now_ms() - t0 >= 400, "a barrier returned %llu ms after entry, before the late member",
           (unsigned long long)(now_ms() - t0));
    pcclExtCollDescriptor_t d[4];
    pcclExtAsyncCollOp_t h[4];
    for (int k = 0; k < 4; k++) {
        d[k] = mk(pcclExtCollBarrier, NULL, NULL, 0, 0, pcclFloat);
        if (k % 2) d[k].flags = 0;
        EXPECT(pcclExtCollectiveAsync(&d[k], g_comm, &h[k]) == pcclSuccess, "async barrier %d", k);
    }
    for (int k = 0; k < 4; k++) {
        pcclExtCollInfo_t in;
        EXPECT(pcclExtAwaitCollective(&h[k], &in) == pcclSuccess && in.world_size == (uint32_t)g_world,
               "await barrier %d", k);
        if (k == 0) EXPECT(id_of_rank(in.rank) == g_rank, "barrier rank %u", in.rank);
    }
    for (int k = 0; k < 4; k++) d[k].tag = g_tag++;
    EXPECT(pcclExtCollectiveMultipleWithRetry(d, 4, g_comm, NULL, 4) == pcclSuccess, "barriers with retry");
}

static void mode_keyed(void) {
    check_broadcast(pcclFloat, 100003, g_rank % 2, 0, 0);
    check_allgather(pcclBFloat16, 50001, 1, 0);
    check_allgather(pcclInt32, 1000, 0, 1);
    check_reduce_scatter(pcclFloat, pcclSum, 100003, 1, 1);
    check_reduce_scatter(pcclDouble, pcclMax, 1001, 0, 1);
    check_barrier();
}

/* ---- mode bad ---- */

/* Runs d expecting want, with recvbuf (recv_bytes) unchanged. */
static void expect_refused(const pcclExtCollDescriptor_t *d, size_t recv_bytes, pcclResult_t want, const char *what) {
    uint8_t *before = malloc(recv_bytes ? recv_bytes : 1);
    if (recv_bytes) memcpy(before, d->recvbuf, recv_bytes);
    pcclResult_t r = pcclExtCollective(d, g_comm, NULL);
    EXPECT(r == want, "%s: %s, want %s", what, pcclResultString(r), pcclResultString(want));
    EXPECT(!recv_bytes || memcmp(before, d->recvbuf, recv_bytes) == 0, "%s: the receive buffer changed", what);
    free(before);
}

static void mode_bad(void) {
    enum { N = 64 };
    size_t cap = (size_t)g_world * (N + 1), bytes = cap * sizeof(float);
    float *send = malloc(N * sizeof(float)), *recv = malloc(bytes);
    fill(send, N, pcclFloat, g_rank, 0);
    fill(recv, cap, pcclFloat, g_rank, 5);
    uint64_t counts[8];
    pcclExtCollDescriptor_t d = mk(pcclExtCollBroadcast, NULL, recv, N, cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidUsage, "a broadcast without a root");
    d = mk(pcclExtCollBroadcast, NULL, recv, N, cap, pcclFloat);
    d.flags |= g_rank < 2 ? PCCL_EXT_COLL_ROOT : 0;
    expect_refused(&d, bytes, pcclInvalidUsage, "a broadcast with two roots");
    d = mk(pcclExtCollAllGather, send, recv, g_rank == 0 ? N - 1 : N, cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidUsage, "an all-gather of different counts");
    d = mk(pcclExtCollReduceScatter, send, recv, N, cap, g_rank == 0 ? pcclInt32 : pcclFloat);
    expect_refused(&d, bytes, pcclInvalidUsage, "a reduce-scatter of different dtypes");
    d = mk(pcclExtCollReduceScatter, send, recv, N, cap, pcclFloat);
    d.op = g_rank == 0 ? pcclMax : pcclSum;
    expect_refused(&d, bytes, pcclInvalidUsage, "a reduce-scatter of different reduce ops");
    d = mk(pcclExtCollAllGather, send, recv, N, g_rank == 0 ? (uint64_t)(g_world - 1) * N : cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidUsage, "an all-gather output too small for the world");
    d = mk(pcclExtCollAllGatherV, send, recv, N, cap, pcclFloat);
    d.counts = counts;
    d.counts_capacity = g_rank == 0 ? (uint32_t)g_world - 1 : 8;
    expect_refused(&d, bytes, pcclInvalidUsage, "an all-gather-v counts array too small for the world");
    d = mk(pcclExtCollReduceScatter, send, recv, N, g_rank == 0 ? 1 : cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidUsage, "a reduce-scatter output too small for the block");
    d = mk(pcclExtCollAllGather, send, recv, N, cap, pcclFloat);
    if (g_rank == 0) d.flags = 0;
    expect_refused(&d, bytes, pcclInvalidUsage, "rank keys from only some members");
    d = mk(pcclExtCollAllGather, send, recv, N, cap, pcclFloat);
    d.rank_key = 7;
    expect_refused(&d, bytes, pcclInvalidUsage, "equal rank keys");
    /* refused here, before any vote */
    d = mk((pcclExtCollKind_t)9, send, recv, N, cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidArgument, "an unknown kind");
    d = mk(pcclExtCollAllReduce, send, recv, N, cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidArgument, "an all-reduce through pcclExtCollective");
    d = mk(pcclExtCollAllGather, send, recv, N, N - 1, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidArgument, "a receive buffer smaller than the input");
    d = mk(pcclExtCollAllGather, send, recv, N, cap, pcclFloat);
    d.flags |= PCCL_EXT_COLL_ROOT;
    expect_refused(&d, bytes, pcclInvalidArgument, "a root flag on an all-gather");
    d = mk(pcclExtCollReduceScatter, send, recv, N, cap, pcclFloat);
    d.op = (pcclRedOp_t)99;
    expect_refused(&d, bytes, pcclInvalidArgument, "an unknown reduce op");
    d = mk(pcclExtCollAllGather, recv + 1, recv, N, cap, pcclFloat);
    expect_refused(&d, bytes, pcclInvalidArgument, "overlapping buffers");
    d = mk(pcclExtCollAllGather, send, NULL, N, cap, pcclFloat);
    expect_refused(&d, 0, pcclInvalidArgument, "no receive buffer");
    EXPECT(pcclExtCollective(NULL, g_comm, NULL) == pcclInvalidArgument, "a NULL descriptor accepted");
    /* nothing was lost: the run goes on */
    check_allgather(pcclFloat, 1000, 0, 0);
    check_barrier();
    free(send);
    free(recv);
}

/* ---- mode kill ---- */

/* Rank keys are the IDs here (unless ranked by ring position): ranks ascend with the IDs of whoever is a member.
 * Contents name their members:
 * all-gather blocks start with their member's ID; reduce-scatter inputs carry 1 << ID in the high half. */
static int64_t rs_value(int id, size_t i) { return (int64_t)((1ull << id) << 32 | ((i * 7 + (size_t)id) & 0xff)); }

static void kill_fill(pcclExtCollKind_t kind, void *buf, size_t n) {
    if (kind == pcclExtCollReduceScatter) {
        for (size_t i = 0; i < n; i++) ((int64_t *)buf)[i] = rs_value(g_rank, i);
        return;
    }
    fill(buf, n, pcclFloat, kind == pcclExtCollBroadcast ? 0 : g_rank, 0);
    if (kind != pcclExtCollBroadcast && n) ((float *)buf)[0] = (float)g_rank;
}

static size_t kill_count(pcclExtCollKind_t kind, int id) {
    switch (kind) {
    case pcclExtCollBroadcast: return 8u << 20;
    case pcclExtCollAllGather: return 3u << 20;
    case pcclExtCollAllGatherV: return (2u << 20) + (size_t)id * 1000;
    default: return 4u << 20;
    }
}

/* A successful kill-mode op's output: correct for the members it names. Returns the member mask. */
/* The rank key of ID id in kill mode: its ID, but ID 0 (in place) takes the last rank of the all-gathers, so its
 * block moves from the buffer's start to its rank's place and a failure must move it back. */
static uint64_t kill_key(pcclExtCollKind_t kind, int id) {
    return (kind == pcclExtCollAllGather || kind == pcclExtCollAllGatherV) && id == 0 ? 1000 : (uint64_t)id;
}

static unsigned kill_verify(pcclExtCollKind_t kind, const void *recv, const pcclExtCollInfo_t *in,
                            const uint64_t *counts) {
    if (kind == pcclExtCollBroadcast) {
        holds_contrib(recv, kill_count(kind, 0), pcclFloat, 0, 0, "broadcast after a kill");
        return 0;
    }
    if (kind == pcclExtCollReduceScatter) {
        const int64_t *o = recv;
        unsigned mask = (unsigned)((uint64_t)o[0] >> 32);
        uint64_t off, len;
        block_of(kill_count(kind, 0), in->world_size, in->rank, &off, &len);
        EXPECT(in->offset == off && in->count == len, "reduce_scatter after a kill: rank %u holds %llu+%llu", in->rank,
               (unsigned long long)in->offset, (unsigned long long)in->count);
        for (uint64_t j = 0; j < in->count; j++) {
            int64_t want = (int64_t)mask << 32;
            for (int id = 0; id < 8; id++)
                if (mask >> id & 1) want += (int64_t)((in->offset + j) * 7 + (uint64_t)id) & 0xff;
            if (o[j] != want) {
                EXPECT(0, "reduce_scatter after a kill: element %llu", (unsigned long long)(in->offset + j));
                break;
            }
        }
        EXPECT((mask >> g_rank & 1) && (unsigned)__builtin_popcount(mask) == in->world_size, "members %#x", mask);
        return mask;
    }
    const float *o = recv;
    unsigned mask = 0;
    int last = -1;
    size_t off = 0;
    for (uint32_t r = 0; r < in->world_size; r++) {
        float head = o[off];
        int id = head >= 0 && head < 8 ? (int)head : -1;
        /* by ring position ranks need not ascend with the IDs: each ID once */
        if (id < 0 || (g_by_position ? (mask >> id & 1) != 0 : last >= 0 && kill_key(kind, id) <= kill_key(kind, last)) ||
            (r == in->rank && id != g_rank)) {
            EXPECT(0, "rank %u holds ID %g", r, head);
            break;
        }
        size_t c = kill_count(kind, id);
        if (kind == pcclExtCollAllGatherV) EXPECT(counts[r] == c, "counts[%u] %llu", r, (unsigned long long)counts[r]);
        holds_contrib(o + off + 1, c - 1, pcclFloat, id, 1, "all-gather block after a kill");
        mask |= 1u << id;
        last = id;
        off += c;
    }
    EXPECT(in->count == off, "all-gather count %llu, want %zu", (unsigned long long)in->count, off);
    return mask;
}

static const char *kind_names[] = {"all_reduce", "broadcast", "all_gather", "all_gather_v", "reduce_scatter",
                                   "barrier"};

static void mode_kill(pcclExtCollKind_t kind, int rounds) {
    int gather = kind == pcclExtCollAllGather || kind == pcclExtCollAllGatherV;
    /* an all-gather's output holds the WORLD + 1 blocks of every member there ever is (IDs 0..WORLD) */
    size_t esz = kind == pcclExtCollReduceScatter ? 8 : 4, n = kill_count(kind, g_rank);
    size_t cap = gather ? (kill_count(kind, g_world) + 1) * (size_t)(g_world + 1) : n;
    int inplace = g_rank == 0, full = 0, failed = 0;
    /* a broadcast's root is ID 2 (out of place): ID 0, in place, holds its own bytes, which a failure restores */
    int root = kind == pcclExtCollBroadcast && g_rank == 2;
    uint8_t *send = malloc(n * esz), *recv = malloc(cap * esz), *snap = malloc(cap * esz);
    uint64_t counts[8];
    uint64_t until = now_ms() + 40000; /* bounded in time too: a joiner that never comes fails the test early */
    for (int iter = 0; iter < 2000 && full < rounds && now_ms() < until; iter++) {
        /* the joiner was accepted by the others' topology update: it starts where they go on, at the operation */
        bool pending = false;
        if ((g_rank != g_world || iter > 0) && pcclArePeersPending(g_comm, &pending) == pcclSuccess && pending)
            pcclUpdateTopology(g_comm);
        memset(recv, 0x5A, cap * esz);
        if (kind != pcclExtCollBroadcast || !inplace) kill_fill(kind, inplace ? recv : send, n);
        memcpy(snap, inplace ? recv : send, (inplace ? cap : n) * esz);
        pcclExtCollDescriptor_t d = mk(kind, inplace ? NULL : send, recv, n, cap,
                                       kind == pcclExtCollReduceScatter ? pcclInt64 : pcclFloat);
        d.tag = 7;
        d.rank_key = kill_key(kind, g_rank);
        d.flags |= root ? PCCL_EXT_COLL_ROOT : 0;
        d.counts = counts;
        d.counts_capacity = 8;
        pcclExtCollInfo_t in = {0};
        pcclResult_t r = pcclExtCollective(&d, g_comm, &in);
        if (r == pcclRankConnectionLost) {
            EXPECT(memcmp(snap, inplace ? recv : send, (inplace ? cap : n) * esz) == 0,
                   "%s failed and left its %s changed", kind_names[kind], inplace ? "buffer" : "input");
            printf("op failed: %s restored\n", inplace ? "buffer" : "input");
            failed++;
            continue;
        }
        EXPECT(r == pcclSuccess, "%s: %s", kind_names[kind], pcclResultString(r));
        if (r != pcclSuccess) break;
        const uint8_t *out = recv + (kind == pcclExtCollReduceScatter && inplace ? in.offset * esz : 0);
        unsigned mask = kill_verify(kind, out, &in, counts);
        int joined = g_rank == g_world || (failed && in.world_size == (uint32_t)g_world);
        EXPECT(!joined || kind == pcclExtCollBroadcast || (mask >> g_world & 1), "the joiner is not a member: %#x",
               mask);
        full += joined;
        printf("op ok world %u members %#x\n", in.world_size, mask);
        fflush(stdout);
    }
    EXPECT(full == rounds, "%d operations with the joiner, want %d", full, rounds);
    free(send);
    free(recv);
    free(snap);
}

static void mode_pipe(void) {
    enum { N = 1024, ROUNDS = 14, BAD = 7 };
    float *send = malloc((N + 1) * sizeof *send), *recv = malloc((N + 1) * sizeof *recv);
    float *snap = malloc((N + 1) * sizeof *snap);
    int inplace = g_rank == 0;
    for (int round = 0; round < ROUNDS; round++) {
        size_t n = round == BAD && g_rank == 1 ? N + 1 : N;
        float *in = inplace ? recv : send;
        for (size_t i = 0; i <= N; i++) in[i] = (float)((g_rank + 1) * (int)(i % 7 + (size_t)round));
        memcpy(snap, in, (N + 1) * sizeof *snap);
        pcclReduceDescriptor_t d = {.count = n, .op = pcclSum, .tag = 9,
                                    .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                                    .quantization_options = {.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone}};
        pcclResult_t r = pcclAllReduce(inplace ? recv : send, recv, &d, g_comm, NULL);
        if (round == BAD) {
            EXPECT(r == pcclInvalidUsage, "mismatch under a grant: %s", pcclResultString(r));
            EXPECT(memcmp(snap, in, (N + 1) * sizeof *snap) == 0, "the rejected all-reduce changed its %s",
                   inplace ? "buffer" : "input");
            printf("op rejected\n");
            continue;
        }
        EXPECT(r == pcclSuccess, "all-reduce round %d: %s", round, pcclResultString(r));
        int sum = g_world * (g_world + 1) / 2, bad = 0;
        for (size_t i = 0; i < N && r == pcclSuccess; i++) bad += recv[i] != (float)(sum * (int)(i % 7 + (size_t)round));
        EXPECT(bad == 0, "round %d: %d wrong elements", round, bad);
        printf("op ok round %d\n", round);
    }
    free(send);
    free(recv);
    free(snap);
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_rank = atoi(argv[2]);
    g_world = atoi(argv[3]);
    const char *mode = argv[4];
    g_comm = e2e_connect(argv[1], 0, 2);
    if (!g_comm) {
        fprintf(stderr, "ID %d: could not join\n", g_rank);
        return 3;
    }
    int ws = 0;
    for (int tries = 0; tries < 1200 && strcmp(mode, "kill") != 0; tries++) {
        pcclGetAttribute(g_comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        if (ws >= g_world) break;
        pcclUpdateTopology(g_comm);
        usleep(50000);
    }
    if (strcmp(mode, "all") == 0) mode_all();
    else if (strcmp(mode, "keyed") == 0) mode_keyed();
    else if (strcmp(mode, "gather") == 0) mode_gather();
    else if (strcmp(mode, "barrier") == 0) mode_barrier();
    else if (strcmp(mode, "bad") == 0) mode_bad();
    else if (strcmp(mode, "pipe") == 0) mode_pipe();
    else if (strcmp(mode, "kill") == 0 && argc == 6) {
        int k = 1;
        while (k < 5 && strcmp(kind_names[k], argv[5]) != 0) k++;
        if (k == 5) return 2;
        /* the WORLD first members wait for each other; the joiner is accepted by the survivors' topology update */
        const char *bp = getenv("PCCL_TEST_RANK_BY_POSITION");
        g_by_position = bp && atoi(bp) > 0;
        for (int tries = 0; tries < 1200 && g_rank < g_world; tries++) {
            pcclGetAttribute(g_comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
            if (ws >= g_world) break;
            pcclUpdateTopology(g_comm);
            usleep(50000);
        }
        mode_kill((pcclExtCollKind_t)k, 3);
    } else return 2;
    bool pending;
    EXPECT(pcclArePeersPending(g_comm, &pending) == pcclSuccess, "final barrier");
    pcclDestroyCommunicator(g_comm);
    fprintf(stderr, "ID %d: %s (%d failures)\n", g_rank, failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
