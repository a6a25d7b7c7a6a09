/*
 * async_diloco.c - async DiLoCo (PCCL technical report section 3.3) on a small
 * linear regression, written only against the public API (pccl.h).
 *
 * Usage: example_async_diloco MASTER_IP PORT STEPS [SEED [COMPUTE_MS]]
 * COMPUTE_MS pads each inner phase to simulate heavier compute (default 0).
 * Prints one JSON line per outer step: revision, FNV-1a hash of the shared
 * state, world size, local loss, bytes received by the shared-state syncs.
 *
 * Shared state: the outer parameters and the outer Nesterov momentum. Every
 * outer step t, on every peer, in this order (the joint calls are marked *):
 *   A* pcclArePeersPending - overlaps the all-reduce of step t-1 still running
 *      on the background thread;
 *   B  H inner SGD steps on local data from the outer parameters (also overlapping);
 *   C  await the all-reduce of step t-1 (the average pseudo-gradient g);
 *   D* only if peers are pending: pcclUpdateTopology (no collective may be in flight);
 *   E* shared-state sync, ENFORCE_POPULAR, at revision r: a newcomer gets the
 *      outer state its inner steps must start from (outdated peers never win
 *      popularity, so a crowd of newcomers cannot overwrite it);
 *   F  outer step with g: revision r+1 (newcomers have no g: they skip it);
 *   G* only when the topology changed: a second sync at r+1 where peers that did
 *      the outer step are SEND_ONLY and newcomers RECEIVE_ONLY, so newcomers
 *      "eavesdrop" on the result of the all-reduce they missed and their own
 *      state can never be distributed;
 *   H* launch the all-reduce of this step's pseudo-gradient on the background
 *      thread (the only thread besides main that calls pccl, and only the
 *      async pair, as the API requires).
 * A newcomer's first step starts at E and does its inner steps (B) between E
 * and G, from the same outer state the others started from, so its
 * pseudo-gradient is weight-compatible and joins the all-reduce at H.
 */
#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

#define DIM 64        /* parameters */
#define SAMPLES 512   /* local data set per peer */
#define INNER_STEPS 8 /* H */
#define BATCH 32
#define INNER_LR 0.02f
#define OUTER_LR 0.7f
#define OUTER_MOMENTUM 0.5f

typedef struct {
    float x[SAMPLES][DIM];
    float y[SAMPLES];
    uint64_t rng;
} data_t;

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
static float urand(uint64_t *s) { return (float)((rnd(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

/* Every peer fits the same hidden w_true, each on its own samples (seeded per peer). */
static void make_data(data_t *d, uint64_t seed) {
    uint64_t truth = 0x1234567, s = seed * 0x9E3779B97F4A7C15ull + 1;
    float w_true[DIM];
    for (int j = 0; j < DIM; j++) w_true[j] = urand(&truth);
    for (int i = 0; i < SAMPLES; i++) {
        float y = 0;
        for (int j = 0; j < DIM; j++) y += (d->x[i][j] = urand(&s)) * w_true[j];
        d->y[i] = y + 0.01f * urand(&s);
    }
    d->rng = s;
}

static float loss(const data_t *d, const float *w) {
    double l = 0;
    for (int i = 0; i < SAMPLES; i++) {
        float e = -d->y[i];
        for (int j = 0; j < DIM; j++) e += d->x[i][j] * w[j];
        l += (double)e * e;
    }
    return (float)(l / SAMPLES);
}

static int compute_ms;

static void inner_steps(data_t *d, float *w) {
    if (compute_ms > 0)
        nanosleep(&(struct timespec){.tv_sec = compute_ms / 1000, .tv_nsec = (compute_ms % 1000) * 1000000L}, NULL);
    for (int t = 0; t < INNER_STEPS; t++) {
        float g[DIM] = {0};
        for (int b = 0; b < BATCH; b++) {
            int i = (int)(rnd(&d->rng) % SAMPLES);
            float e = -d->y[i];
            for (int j = 0; j < DIM; j++) e += d->x[i][j] * w[j];
            for (int j = 0; j < DIM; j++) g[j] += 2.0f * e * d->x[i][j] / BATCH;
        }
        for (int j = 0; j < DIM; j++) w[j] -= INNER_LR * g[j];
    }
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
    return h;
}

/* ---------- the background all-reduce ---------- */

typedef struct {
    pcclComm_t *comm;
    float buf[DIM]; /* in: this peer's pseudo-gradient; out: the average */
    uint64_t tag;
    pcclResult_t result;
    pthread_t thread;
    int running;
} reduce_job_t;

static void *reduce_worker(void *arg) {
    reduce_job_t *j = arg;
    pcclReduceDescriptor_t d = {.count = DIM, .op = pcclAvg, .tag = j->tag,
                                .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                                .quantization_options = {.algorithm = pcclQuantNone}};
    /* A lost peer aborts the operation and leaves buf as it was: retry while a group remains. */
    for (int attempt = 0; attempt < 20; attempt++) {
        pcclAsyncReduceOp_t h;
        j->result = pcclAllReduceAsync(j->buf, j->buf, &d, j->comm, &h);
        if (j->result == pcclSuccess) j->result = pcclAwaitAsyncReduce(&h, NULL);
        if (j->result != pcclRankConnectionLost) break;
    }
    return NULL;
}

static void reduce_launch(reduce_job_t *j) {
    j->running = pthread_create(&j->thread, NULL, reduce_worker, j) == 0;
    if (!j->running) j->result = pcclInternalError;
}

/* Joins the background all-reduce; 1 if it produced an average. */
static int reduce_await(reduce_job_t *j) {
    if (!j->running) return 0;
    pthread_join(j->thread, NULL);
    j->running = 0;
    return j->result == pcclSuccess;
}

/* ---------- main loop ---------- */

static int sync_state(pcclComm_t *comm, pcclSharedState_t *st, pcclSharedStateSyncStrategy_t s, uint64_t *rx) {
    for (int attempt = 0; attempt < 5; attempt++) {
        pcclSharedStateSyncInfo_t info = {0};
        pcclResult_t r = pcclSynchronizeSharedState(comm, st, s, &info);
        *rx += info.rx_bytes;
        if (r == pcclSuccess) return 0;
        fprintf(stderr, "shared-state sync failed: %s\n", pcclResultString(r));
        if (r != pcclRankConnectionLost) return -1;
    }
    return -1;
}

/* pcclUpdateTopologyFailed means p2p wiring failed and the vote may simply be repeated. */
static void update_topology(pcclComm_t *comm) {
    for (int attempt = 0; attempt < 50 && pcclUpdateTopology(comm) == pcclUpdateTopologyFailed; attempt++) {
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MASTER_IP PORT STEPS [SEED [COMPUTE_MS]]\n", argv[0]);
        return 2;
    }
    ccoip_socket_address_t master = {.inet.protocol = inetIPv4, .port = (uint16_t)atoi(argv[2])};
    if (inet_pton(AF_INET, argv[1], master.inet.ipv4.data) != 1) return 2;
    uint64_t steps = strtoull(argv[3], NULL, 10), seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    compute_ms = argc > 5 ? atoi(argv[5]) : 0;

    static data_t data;
    make_data(&data, seed);
    static float outer[DIM], momentum[DIM], inner[DIM];
    static reduce_job_t job;
    /* Every peer starts from the same (zero) outer state, so a fresh run agrees at revision 0. */
    pcclTensorInfo_t infos[2] = {
        {.name = "outer", .data = outer, .count = DIM, .datatype = pcclFloat, .device_type = pcclDeviceCpu},
        {.name = "momentum", .data = momentum, .count = DIM, .datatype = pcclFloat, .device_type = pcclDeviceCpu},
    };
    pcclSharedState_t st = {.revision = 0, .count = 2, .infos = infos};

    pcclInit();
    pcclCommCreateParams_t params = {.master_address = master, .peer_group = 0, .p2p_connection_pool_size = 1};
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess || pcclConnect(comm) != pcclSuccess) {
        fprintf(stderr, "cannot join the run\n");
        return 1;
    }
    job.comm = comm;
    int newcomer = 1; /* first step after joining: starts at E */
    float g[DIM];
    while (st.revision < steps) {
        int world = 0, topo_changed = newcomer, have_g = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
        if (!newcomer && world < 2) {
            /* Alone: nothing to overlap with; accept peers until there is a group again. */
            if (reduce_await(&job)) memcpy(g, job.buf, sizeof g), have_g = 1;
            while (world < 2) {
                update_topology(comm);
                pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
                if (world < 2) nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
            }
            topo_changed = 1;
            memcpy(inner, outer, sizeof inner);
            inner_steps(&data, inner);
        } else if (!newcomer) {
            bool pending = false;
            if (pcclArePeersPending(comm, &pending) != pcclSuccess) pending = true; /* let update sort it out */
            memcpy(inner, outer, sizeof inner); /* B: overlaps the all-reduce of the previous step */
            inner_steps(&data, inner);
            if (reduce_await(&job)) memcpy(g, job.buf, sizeof g), have_g = 1; /* C */
            if (pending) { /* D */
                update_topology(comm);
                topo_changed = 1;
            }
        }
        uint64_t rx = 0;
        if (sync_state(comm, &st, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &rx) != 0) break; /* E */
        if (newcomer) { /* B for a newcomer: from the outer state the others started from */
            memcpy(inner, outer, sizeof inner);
            inner_steps(&data, inner);
        }
        float delta[DIM];
        for (int j = 0; j < DIM; j++) delta[j] = outer[j] - inner[j];
        if (have_g) { /* F: outer Nesterov SGD, element-wise, hence bit-identical on every peer */
            for (int j = 0; j < DIM; j++) {
                momentum[j] = OUTER_MOMENTUM * momentum[j] + g[j];
                outer[j] -= OUTER_LR * (g[j] + OUTER_MOMENTUM * momentum[j]);
            }
            st.revision++;
        }
        if (topo_changed) { /* G */
            /* Peers that were in the run hold the group's newest state: SEND_ONLY. A newcomer takes it
             * (RECEIVE_ONLY), except in a fresh run (revision 0 everywhere, no outer step yet), where all
             * hold the same initial state and may simply agree. */
            int fresh = st.revision == 0 && !have_g;
            pcclSharedStateSyncStrategy_t s = fresh      ? PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR
                                              : newcomer ? PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY
                                                         : PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY;
            if (sync_state(comm, &st, s, &rx) != 0) break;
        }
        newcomer = 0;
        uint64_t h = fnv1a(momentum, sizeof momentum, fnv1a(outer, sizeof outer, 0xcbf29ce484222325ull));
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
        printf("{\"event\":\"step\",\"revision\":%llu,\"hash\":\"%016llx\",\"world\":%d,\"loss\":%.6g,"
               "\"ss_rx_bytes\":%llu,\"topology_changed\":%d}\n",
               (unsigned long long)st.revision, (unsigned long long)h, world, loss(&data, outer),
               (unsigned long long)rx, topo_changed);
        fflush(stdout);
        if (st.revision >= steps || world < 2) continue; /* the loop ends, or waits for peers */
        memcpy(job.buf, delta, sizeof delta); /* H */
        job.tag = st.revision;
        reduce_launch(&job);
    }
    reduce_await(&job);
    pcclDestroyCommunicator(comm);
    printf("{\"event\":\"done\",\"revision\":%llu}\n", (unsigned long long)st.revision);
    return st.revision >= steps ? 0 : 1;
}
