/*
 * rogue_peer.c - a peer for test_join_rejected.sh that runs the loop of
 * `pccl join --workload synthetic` (same shared state, same contributions,
 * same update), except that its first K all-reduces pass one element fewer:
 * the master rejects each of them, for every peer, as a parameter mismatch.
 *
 * Usage: rogue_peer PORT SIZE_BYTES STEPS K
 * Prints one JSON line per all-reduce ("attempt": revision, count, result) and
 * a "done" line with the state's hash. Exits 0 at revision STEPS, 1 when the
 * run ends otherwise or 60 s pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "e2e_peer.h"
#include "pccl.h"
#include "pccl_kernels.h"

/* synthetic.c's contribution of element i at revision r */
static float contribution(size_t i, uint64_t r) { return (float)((i * 7 + r) % 13); }

/* As join_await_world: accept pending peers until the group has 2, but not right after
 * pcclConnect when it already has (the others' update accepted this peer). */
static int await_world(pcclComm_t *comm, int *first, time_t deadline) {
    int ws = 0;
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
    if (*first && ws >= 2) {
        *first = 0;
        return 0;
    }
    *first = 0;
    while (time(NULL) < deadline) {
        pcclResult_t r = pcclUpdateTopology(comm);
        if (r == pcclMasterConnectionFailed) return -1;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &ws);
        if (r == pcclSuccess && ws >= 2) return 0;
        usleep(100000);
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    size_t n = strtoull(argv[2], NULL, 10) / sizeof(float);
    uint64_t steps = strtoull(argv[3], NULL, 10), wrong = strtoull(argv[4], NULL, 10);
    if (n < 2) return 2;
    float *state = calloc(n, sizeof *state), *buf = malloc(n * sizeof *buf);
    if (!state || !buf) return 1;
    pcclTensorInfo_t info = {.name = "state", .data = state, .count = n, .datatype = pcclFloat,
                             .device_type = pcclDeviceCpu};
    pcclSharedState_t ss = {.revision = 0, .count = 1, .infos = &info};

    pcclComm_t *comm = e2e_connect(argv[1], 0, 1);
    if (!comm) return 1;
    time_t deadline = time(NULL) + 60;
    int first = 1, rc = 1;
    uint64_t attempts = 0;
    while (ss.revision < steps && time(NULL) < deadline) {
        if (await_world(comm, &first, deadline) != 0) break;
        if (pcclSynchronizeSharedState(comm, &ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL) != pcclSuccess)
            continue;
        for (size_t i = 0; i < n; i++) buf[i] = contribution(i, ss.revision);
        size_t count = attempts++ < wrong ? n - 1 : n;
        pcclReduceOpDescriptor_t d = {.sendbuf = buf, .recvbuf = buf,
                                      .descriptor = {.count = count, .op = pcclSum, .tag = 0,
                                                     .src_descriptor = {.datatype = pcclFloat},
                                                     .quantization_options = {.quantized_datatype = pcclFloat,
                                                                              .algorithm = pcclQuantNone}}};
        pcclResult_t r = pcclAllReduceMultipleWithRetry(&d, 1, comm, NULL, 1);
        printf("{\"event\":\"attempt\",\"revision\":%llu,\"count\":%zu,\"result\":%d}\n",
               (unsigned long long)ss.revision, count, r);
        fflush(stdout);
        if (r != pcclSuccess) continue;
        for (size_t i = 0; i < n; i++) state[i] += buf[i] * 0.5f;
        ss.revision++;
    }
    if (ss.revision >= steps) {
        /* `pccl join` ends with one more sync: take part so that it completes. */
        pcclResult_t r = pcclSynchronizeSharedState(comm, &ss, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL);
        printf("{\"event\":\"done\",\"revision\":%llu,\"hash\":\"%016llx\",\"final_sync\":%d}\n",
               (unsigned long long)ss.revision, (unsigned long long)pccl_simplehash(state, n * sizeof *state), r);
        rc = r == pcclSuccess ? 0 : 1;
    }
    pcclDestroyCommunicator(comm);
    free(state);
    free(buf);
    return rc;
}
