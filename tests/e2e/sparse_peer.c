/*
 * sparse_peer.c - one peer of the sparse all-reduce's end-to-end tests (test_sparse*.sh).
 * Usage: sparse_peer PORT ID WORLD MODE [BITS FRACTION ROUNDS]
 * Inputs are integers (ID, round and index hashed to [-1000, 1000]) and the kept values of 0 or 2 bits are the
 * inputs' own values or a chunk's smallest or largest kept magnitude, so every sum is exact in any order: each
 * peer replays every member's selection and residual with the kernels (pccl_topk.h) and checks the output equals
 * the sum of the packs the members sent, and its residual what it did not send. Each round prints a hash of the
 * output bytes; the harness compares them across peers (bit-identical).
 *  run       ROUNDS rounds (odd rounds pcclAvg, even pcclSum; out of place, in place on ID 0).
 *  mismatch  ID 0 asks for another fraction, then for other bits: every member gets pcclInvalidUsage with recvbuf
 *            and residual unchanged; then one round with equal settings succeeds.
 *  kill      rounds on 4 Mi floats until ID 1 is killed inside one (the harness does it): the survivors see
 *            pcclRankConnectionLost with recvbuf and residual unchanged, retry, and finish ROUNDS rounds of two.
 * Exits 0 when every check passed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_kernels.h"
#include "pccl_sparse.h"
#include "pccl_topk.h"

static int failures, g_id, g_world;
static pcclComm_t *g_comm;
#define EXPECT(cond, ...)                                                                                         \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            fprintf(stderr, "ID %d: FAIL %s:%d: ", g_id, __FILE__, __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                                         \
            fputc('\n', stderr);                                                                                  \
            failures++;                                                                                           \
        }                                                                                                         \
    } while (0)

static float input_of(int id, int round, uint64_t i) {
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull ^ (uint64_t)round * 0xC2B2AE3D27D4EB4Full ^ i * 0x165667B1ull;
    h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 32;
    return (float)((int)(h % 2001) - 1000);
}

/* Every member's replayed residual and the expected output of one round. */
typedef struct replay {
    uint64_t n;
    float *res[4], *acc, *want;
    uint8_t *body;
} replay_t;

static void replay_init(replay_t *r, uint64_t n, const pccl_topk_cfg_t *c) {
    r->n = n;
    for (int j = 0; j < 4; j++) r->res[j] = calloc(n, sizeof(float));
    r->acc = malloc(n * sizeof(float));
    r->want = malloc(n * sizeof(float));
    r->body = malloc(pccl_topk_body_bytes(c, NULL));
}

/* Replays the round on every member of mask: want = sum of their packs (/world for avg), residuals advanced. */
static void replay_round(replay_t *r, const pccl_topk_cfg_t *c, unsigned mask, int round, pcclRedOp_t op) {
    memset(r->want, 0, r->n * sizeof(float));
    for (int j = 0; j < 4; j++) {
        if (!(mask >> j & 1)) continue;
        for (uint64_t i = 0; i < r->n; i++) r->acc[i] = input_of(j, round, i) + r->res[j][i];
        pccl_topk_encode(c, r->acc, r->body);
        pccl_topk_decode_add(c, r->body, r->want);
        memcpy(r->res[j], r->acc, r->n * sizeof(float));
    }
    if (op == pcclAvg) pccl_reduce_finalize_avg(r->want, r->n, pcclFloat, (uint32_t)__builtin_popcount(mask));
}

static uint64_t fnv(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

static uint64_t count_diff(const float *a, const float *b, uint64_t n) {
    uint64_t d = 0;
    for (uint64_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

/* One call; out of place except on ID 0. recv is filled with the input (in place) or a sentinel first. */
static pcclResult_t call(float *send, float *recv, uint64_t n, pcclRedOp_t op, double f, int bits,
                         pcclExtSparseResidual_t *res, int round, pcclExtSparseInfo_t *info) {
    int inplace = g_id == 0;
    for (uint64_t i = 0; i < n; i++) (inplace ? recv : send)[i] = input_of(g_id, round, i);
    if (!inplace) memset(recv, 0x7f, n * sizeof(float));
    return pcclExtSparseAllReduce(inplace ? NULL : send, recv, n, pcclFloat, op, f, bits, res, 9, g_comm,
                                  info);
}

/* The output and this member's residual after a succeeded round, against the replay; prints the round's hash. */
static void verify(const replay_t *r, const float *recv, const pcclExtSparseResidual_t *res, int round,
                   const pcclExtSparseInfo_t *info) {
    EXPECT(count_diff(recv, r->want, r->n) == 0, "round %d: %llu elements differ from the sum of the packs", round,
           (unsigned long long)count_diff(recv, r->want, r->n));
    EXPECT(count_diff(pcclExtSparseResidualData(res), r->res[g_id], r->n) == 0, "round %d: the residual differs",
           round);
    printf("round %d world %u hash %016llx tx %llu\n", round, info->world_size,
           (unsigned long long)fnv(recv, r->n * sizeof(float)), (unsigned long long)info->tx_bytes);
}

static unsigned all_mask(void) { return (1u << g_world) - 1; }

/* One mode's buffers, residual and replay. */
typedef struct state {
    pccl_topk_cfg_t c;
    replay_t r;
    float *send, *recv, *before;
    pcclExtSparseResidual_t *res;
    pcclExtSparseInfo_t info;
} state_t;

static void state_init(state_t *s, uint64_t n, int bits, double f) {
    s->c = (pccl_topk_cfg_t){.count = n, .bits = bits, .fraction = f};
    replay_init(&s->r, n, &s->c);
    s->send = malloc(n * sizeof(float)), s->recv = malloc(n * sizeof(float)), s->before = malloc(n * sizeof(float));
    EXPECT(pcclExtSparseResidualCreate(n, pcclFloat, &s->res) == pcclSuccess, "residual");
}

static void state_free(state_t *s) {
    pcclExtSparseResidualDestroy(s->res);
    for (int j = 0; j < 4; j++) free(s->r.res[j]);
    free(s->r.acc), free(s->r.want), free(s->r.body), free(s->send), free(s->recv), free(s->before);
}

/* A call of round with settings f and bits; the residual is saved first for expect_untouched. */
static pcclResult_t state_call(state_t *s, int round, pcclRedOp_t op, double f, int bits) {
    memcpy(s->before, pcclExtSparseResidualData(s->res), s->c.count * sizeof(float));
    return call(s->send, s->recv, s->c.count, op, f, bits, s->res, round, &s->info);
}

/* A succeeded call of round: replayed on the members of mask and checked. */
static void state_ok(state_t *s, int round, pcclRedOp_t op, unsigned mask) {
    replay_round(&s->r, &s->c, mask, round, op);
    verify(&s->r, s->recv, s->res, round, &s->info);
}

/* A failed call left the residual and the buffer (in place) or the input (out of place) as they were. */
static void expect_untouched(const state_t *s, int round, const char *what) {
    uint64_t n = s->c.count, changed = 0;
    EXPECT(count_diff(s->before, pcclExtSparseResidualData(s->res), n) == 0, "%s changed the residual", what);
    for (uint64_t i = 0; i < n; i++) changed += (g_id == 0 ? s->recv : s->send)[i] != input_of(g_id, round, i);
    EXPECT(changed == 0, "%s changed the %s", what, g_id == 0 ? "buffer" : "input");
}

static void mode_run(int bits, double f, int rounds) {
    state_t s;
    state_init(&s, 3 * 4096 + 1000, bits, f);
    for (int round = 0; round < rounds; round++) {
        pcclRedOp_t op = round % 2 ? pcclAvg : pcclSum;
        pcclResult_t rc = state_call(&s, round, op, f, bits);
        EXPECT(rc == pcclSuccess, "round %d: %s", round, pcclResultString(rc));
        if (rc != pcclSuccess) break;
        EXPECT(s.info.world_size == (uint32_t)g_world, "world %u", s.info.world_size);
        state_ok(&s, round, op, all_mask());
    }
    state_free(&s);
}

/* ID 0 differs in fraction, then in bits: refused everywhere, nothing written; then equal settings succeed. */
static void mode_mismatch(void) {
    state_t s;
    state_init(&s, 5000, 2, 0.05);
    /* one good round first, so the residual is not zero */
    EXPECT(state_call(&s, 0, pcclSum, 0.05, 2) == pcclSuccess, "the first round");
    state_ok(&s, 0, pcclSum, all_mask());
    for (int k = 0; k < 2; k++) {
        pcclResult_t rc = state_call(&s, 1, pcclSum, k == 0 && g_id == 0 ? 0.1 : 0.05, k == 1 && g_id == 0 ? 4 : 2);
        EXPECT(rc == pcclInvalidUsage, "mismatch %d: %s", k, pcclResultString(rc));
        expect_untouched(&s, 1, "a mismatch");
        printf("mismatch %d refused\n", k);
    }
    EXPECT(state_call(&s, 1, pcclSum, 0.05, 2) == pcclSuccess, "the round after the mismatches");
    state_ok(&s, 1, pcclSum, all_mask());
    state_free(&s);
}

/* Rounds until the harness kills ID 1 inside one; the survivors check the abort left everything, then go on. */
static void mode_kill(int rounds) {
    state_t s;
    state_init(&s, 2u << 20, 0, 1.0);
    int round = 0, after = 0, failed = 0;
    for (int iter = 0; iter < 400 && after < rounds; iter++) {
        pcclResult_t rc = state_call(&s, round, pcclSum, 1.0, 0);
        if (rc == pcclRankConnectionLost) {
            expect_untouched(&s, round, "the abort");
            printf("op failed: residual unchanged\n");
            failed++;
            continue;
        }
        EXPECT(rc == pcclSuccess, "round %d: %s", round, pcclResultString(rc));
        if (rc != pcclSuccess) break;
        state_ok(&s, round, pcclSum, s.info.world_size == 3 ? 7u : 5u);
        after += failed > 0 && s.info.world_size == 2;
        round++;
    }
    EXPECT(after == rounds, "%d rounds after the kill, want %d", after, rounds);
    state_free(&s);
}

int main(int argc, char **argv) {
    if (argc < 5) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_id = atoi(argv[2]);
    g_world = atoi(argv[3]);
    const char *mode = argv[4];
    if (!(g_comm = e2e_connect(argv[1], 0, 1))) {
        fprintf(stderr, "ID %d: could not join\n", g_id);
        return 3;
    }
    int ws = 0;
    for (int tries = 0; tries < 1200; tries++) {
        pcclGetAttribute(g_comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        if (ws >= g_world) break;
        pcclUpdateTopology(g_comm);
        usleep(50000);
    }
    if (strcmp(mode, "run") == 0 && argc == 8) mode_run(atoi(argv[5]), atof(argv[6]), atoi(argv[7]));
    else if (strcmp(mode, "mismatch") == 0) mode_mismatch();
    else if (strcmp(mode, "kill") == 0 && argc == 8) mode_kill(atoi(argv[7]));
    else return 2;
    pcclDestroyCommunicator(g_comm);
    fprintf(stderr, "ID %d: %s (%d failures)\n", g_id, failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
