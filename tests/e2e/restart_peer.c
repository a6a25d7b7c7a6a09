/*
 * restart_peer.c - one peer of test_master_restart.sh: PCCL's canonical loop
 * (update topology, sync, all-reduce with retry, a deterministic update) that
 * must run through master restarts without being restarted itself.
 * Usage: restart_peer PORT END STEP_MS [HOLD_DIR]
 *   runs until the shared state reaches revision END, sleeping STEP_MS per step
 *   (so a test can kill the master mid-run); prints "revision R world W" per
 *   step and "done R CHECKSUM" at the end. Exit 0, or 1 on an error a
 *   restart must not cause (any call failing with pcclMasterConnectionFailed)
 *   or after 120 s. With HOLD_DIR: once HOLD_DIR/pause exists, the peer prints
 *   "paused" between two steps and waits (no call under way) for HOLD_DIR/outage
 *   (the harness killed the master meanwhile); then it launches one all-reduce
 *   during the outage and prints "held RESULT" when that returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

#define N 8192

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fatal(const char *what, pcclResult_t r) {
    fprintf(stderr, "%s: %s\n", what, pcclResultString(r));
    return r == pcclMasterConnectionFailed || r == pcclInvalidArgument || r == pcclInternalError;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: restart_peer PORT END STEP_MS [HOLD_DIR]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t end = strtoull(argv[2], NULL, 10);
    int step_ms = atoi(argv[3]);
    pcclCommCreateParams_t params = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                        .port = (uint16_t)atoi(argv[1])},
                                     .p2p_connection_pool_size = 2};
    pcclComm_t *comm;
    if (pcclInit() != pcclSuccess || pcclCreateCommunicator(&params, &comm) != pcclSuccess ||
        pcclConnect(comm) != pcclSuccess) {
        fprintf(stderr, "cannot join the run\n");
        return 1;
    }
    static float weights[N], grad[N];
    for (int i = 0; i < N; i++) weights[i] = (float)(i % 17);
    pcclTensorInfo_t info = {.name = "weights", .data = weights, .count = N, .datatype = pcclFloat,
                             .device_type = pcclDeviceCpu};
    pcclSharedState_t state = {.revision = 0, .count = 1, .infos = &info};
    long long deadline = now_ms() + 120000;
    int first = 1, rc = 0;
    pcclResult_t r;
    const char *hold = argc == 5 ? argv[4] : NULL;
    char pause_path[512] = "", outage_path[512] = "";
    if (hold) {
        snprintf(pause_path, sizeof pause_path, "%s/pause", hold);
        snprintf(outage_path, sizeof outage_path, "%s/outage", hold);
    }
    while (state.revision < end && !rc) {
        if (hold && access(pause_path, F_OK) == 0) {
            printf("paused\n");
            while (access(outage_path, F_OK) != 0 && now_ms() < deadline) usleep(10 * 1000);
            pcclReduceOpDescriptor_t op = {.sendbuf = grad, .recvbuf = grad,
                                           .descriptor = {.count = N, .op = pcclAvg, .tag = 0,
                                                          .src_descriptor = {.datatype = pcclFloat}}};
            printf("held %d\n", (int)pcclAllReduceMultipleWithRetry(&op, 1, comm, NULL, 1));
            hold = NULL;
        }
        if (now_ms() > deadline) {
            fprintf(stderr, "revision %llu after 120 s\n", (unsigned long long)state.revision);
            rc = 1;
            break;
        }
        if (step_ms) usleep((useconds_t)step_ms * 1000);
        if (!first && (r = pcclUpdateTopology(comm)) != pcclSuccess) {
            rc = fatal("update topology", r);
            continue;
        }
        first = 0;
        int world = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
        if (world < 2) continue;
        if ((r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL)) !=
            pcclSuccess) {
            rc = fatal("sync", r);
            continue;
        }
        for (int i = 0; i < N; i++) grad[i] = (float)((i + state.revision) % 5);
        pcclReduceOpDescriptor_t op = {.sendbuf = grad, .recvbuf = grad,
                                       .descriptor = {.count = N, .op = pcclAvg, .tag = 0,
                                                      .src_descriptor = {.datatype = pcclFloat}}};
        if ((r = pcclAllReduceMultipleWithRetry(&op, 1, comm, NULL, 1)) != pcclSuccess) {
            rc = fatal("all-reduce", r);
            continue;
        }
        for (int i = 0; i < N; i++) weights[i] = weights[i] * 0.5f + grad[i]; /* the same on every peer */
        state.revision++;
        printf("revision %llu world %d\n", (unsigned long long)state.revision, world);
    }
    double sum = 0;
    for (int i = 0; i < N; i++) sum += weights[i] * (double)(i % 7 + 1);
    if (!rc) printf("done %llu %.6f\n", (unsigned long long)state.revision, sum);
    pcclDestroyCommunicator(comm);
    return rc;
}
