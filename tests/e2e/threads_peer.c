/*
 * threads_peer.c - one peer of test_threads.sh: PCCL 1.0's thread rules.
 * Usage: threads_peer PORT alone
 *          the only peer of the run: every all-reduce call, the async launch
 *          included, returns pcclTooFewPeers at once, and nothing is left in flight.
 *        threads_peer PORT run END
 *          the loop of PCCL 1.0's stress programs: each step a worker thread runs
 *          pcclAllReduceMultipleWithRetry over NT tensors while the main thread
 *          votes pcclArePeersPending and polls pcclGetAttribute; a peer that
 *          asks to join is accepted (worker joined first, then
 *          pcclUpdateTopology). Runs until the shared state reaches revision END.
 * Every result is checked exactly: each element's sum is the world size, and the
 * shared state is the same on every peer. Prints "done REVISION POLLS CHECKSUM".
 * Exit 0 on success, 1 on a failed check or after 60 s.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

#define NT 4    /* tensors reduced per step */
#define N 4096  /* elements per tensor */

static float grads[NT][N], weights[N];
static pcclComm_t *comm;

typedef struct {
    pcclResult_t result;
    pcclReduceInfo_t info;
    atomic_int done;
} reduce_job_t;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int attr(pcclAttribute_t a) {
    int v = -1;
    return pcclGetAttribute(comm, a, &v) == pcclSuccess ? v : -1;
}

static pcclReduceDescriptor_t desc(uint64_t tag) {
    pcclReduceDescriptor_t d = {.count = N, .op = pcclSum, .tag = tag};
    d.src_descriptor.datatype = pcclFloat;
    return d;
}

static void *reduce_main(void *arg) {
    reduce_job_t *job = arg;
    pcclReduceOpDescriptor_t ops[NT];
    for (int t = 0; t < NT; t++) ops[t] = (pcclReduceOpDescriptor_t){grads[t], grads[t], desc((uint64_t)t)};
    job->result = pcclAllReduceMultipleWithRetry(ops, NT, comm, &job->info, NT);
    atomic_store(&job->done, 1);
    return NULL;
}

static int connect_to(int port) {
    pcclCommCreateParams_t params = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                        .port = (uint16_t)port},
                                     .p2p_connection_pool_size = NT};
    if (pcclInit() != pcclSuccess || pcclCreateCommunicator(&params, &comm) != pcclSuccess) return -1;
    return pcclConnect(comm) == pcclSuccess ? 0 : -1;
}

static int run_alone(void) {
    float x[N] = {0};
    pcclReduceDescriptor_t d = desc(1);
    pcclAsyncReduceOp_t h;
    pcclResult_t r = pcclAllReduceAsync(x, x, &d, comm, &h);
    if (r != pcclTooFewPeers) {
        fprintf(stderr, "async launch alone: %s, want pcclTooFewPeers\n", pcclResultString(r));
        return 1;
    }
    if ((r = pcclAllReduce(x, x, &d, comm, NULL)) != pcclTooFewPeers) {
        fprintf(stderr, "blocking all-reduce alone: %s\n", pcclResultString(r));
        return 1;
    }
    pcclReduceOpDescriptor_t op = {x, x, d};
    if ((r = pcclAllReduceMultipleWithRetry(&op, 1, comm, NULL, 1)) != pcclTooFewPeers) {
        fprintf(stderr, "multiple-with-retry alone: %s\n", pcclResultString(r));
        return 1;
    }
    /* Nothing may be left in flight: a topology update would report pcclPendingAsyncOps. */
    if ((r = pcclUpdateTopology(comm)) != pcclSuccess) {
        fprintf(stderr, "update topology after refused launches: %s\n", pcclResultString(r));
        return 1;
    }
    printf("done alone %d\n", attr(PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE));
    return 0;
}

/* Joins the worker; the main thread polls attributes meanwhile. Returns -1 on a wrong result. */
static int finish_step(pthread_t th, reduce_job_t *job, int world, long *polls) {
    while (!atomic_load(&job->done)) {
        if (attr(PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE) < 1 || attr(PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE) < 1) return -1;
        (*polls)++;
        usleep(100);
    }
    pthread_join(th, NULL);
    if (job->result != pcclSuccess) {
        fprintf(stderr, "all-reduce on the worker thread: %s\n", pcclResultString(job->result));
        return -1;
    }
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < N; i++)
            if (grads[t][i] != (float)world) {
                fprintf(stderr, "tensor %d element %d is %g, want the world size %d\n", t, i, grads[t][i], world);
                return -1;
            }
    for (int i = 0; i < N; i++) weights[i] += grads[i % NT][i] / (float)world;
    return 0;
}

static int run_loop(uint64_t end) {
    pcclTensorInfo_t info = {.name = "weights", .data = weights, .count = N, .datatype = pcclFloat,
                             .device_type = pcclDeviceCpu};
    pcclSharedState_t state = {.revision = 0, .count = 1, .infos = &info};
    long polls = 0;
    int pending_seen = 0;
    bool pending = false;
    long long deadline = now_ms() + 60000;
    while (state.revision < end) {
        if (now_ms() > deadline) {
            fprintf(stderr, "revision %llu of %llu after 60 s\n", (unsigned long long)state.revision,
                    (unsigned long long)end);
            return 1;
        }
        if (pending) {
            pcclResult_t r = pcclUpdateTopology(comm);
            if (r != pcclSuccess) {
                fprintf(stderr, "update topology: %s (retrying)\n", pcclResultString(r));
                continue;
            }
        }
        int world = attr(PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE);
        if (world < 2) {
            usleep(50 * 1000);
            pending = true; /* alone: vote on newcomers on the next pass */
            continue;
        }
        pcclResult_t r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
                                                    NULL);
        if (r != pcclSuccess) {
            fprintf(stderr, "sync: %s\n", pcclResultString(r));
            return 1;
        }
        for (int t = 0; t < NT; t++)
            for (int i = 0; i < N; i++) grads[t][i] = 1.0f;
        reduce_job_t job = {.result = pcclInternalError};
        pthread_t th;
        if (pthread_create(&th, NULL, reduce_main, &job) != 0) return 1;
        /* The vote runs while this peer's all-reduces are in flight on the worker thread. */
        r = pcclArePeersPending(comm, &pending);
        if (finish_step(th, &job, world, &polls) != 0) return 1;
        if (r != pcclSuccess) {
            fprintf(stderr, "are peers pending: %s\n", pcclResultString(r));
            return 1;
        }
        pending_seen += pending;
        state.revision++;
        if (state.revision % 20 == 0) printf("revision %llu world %d\n", (unsigned long long)state.revision, world);
    }
    double sum = 0;
    for (int i = 0; i < N; i++) sum += weights[i];
    printf("done %llu %ld %.1f %d\n", (unsigned long long)state.revision, polls, sum, pending_seen);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "run") == 0 && argc != 4)) {
        fprintf(stderr, "usage: threads_peer PORT alone | threads_peer PORT run END\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (connect_to(atoi(argv[1])) != 0) {
        fprintf(stderr, "cannot join the run\n");
        return 1;
    }
    int rc = strcmp(argv[2], "alone") == 0 ? run_alone() : run_loop(strtoull(argv[3], NULL, 10));
    pcclDestroyCommunicator(comm);
    return rc;
}
