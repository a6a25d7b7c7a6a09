/*
 * hello_world.c - the canonical pccl training loop, written only against the
 * public C API (pccl.h): connect, then every step update the topology, sync
 * the shared state, all-reduce with retry, and advance the state
 * deterministically. Usage: example_hello_world MASTER_IP [PORT] [STEPS]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pccl.h"

#define N 1024

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MASTER_IP [PORT] [STEPS]\n", argv[0]);
        return 2;
    }
    ccoip_socket_address_t master = {.inet.protocol = inetIPv4,
                                     .port = argc > 2 ? (uint16_t)atoi(argv[2]) : CCOIP_PROTOCOL_PORT_MASTER};
    if (inet_pton(AF_INET, argv[1], master.inet.ipv4.data) != 1) return 2;
    int steps = argc > 3 ? atoi(argv[3]) : 10;

    pcclInit();
    pcclCommCreateParams_t params = {.master_address = master, .peer_group = 0, .p2p_connection_pool_size = 1};
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess || pcclConnect(comm) != pcclSuccess) {
        fprintf(stderr, "cannot join the run\n");
        return 1;
    }
    static float weights[N], grad[N];
    pcclTensorInfo_t info = {.name = "weights", .data = weights, .count = N, .datatype = pcclFloat,
                             .device_type = pcclDeviceCpu, .allow_content_inequality = false};
    pcclSharedState_t state = {.revision = 0, .count = 1, .infos = &info};
    int first = 1;
    while ((int)state.revision < steps) {
        if (!first && pcclUpdateTopology(comm) != pcclSuccess) continue; /* retry the accept vote */
        first = 0;
        int world = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
        if (world < 2) {
            sleep(1); /* wait for peers */
            continue;
        }
        pcclSharedStateSyncInfo_t sync;
        if (pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &sync) !=
            pcclSuccess)
            continue;
        for (int i = 0; i < N; i++) grad[i] = (float)((i + state.revision) % 7); /* "local gradients" */
        pcclReduceOpDescriptor_t op = {
            .sendbuf = grad, .recvbuf = grad,
            .descriptor = {.count = N, .op = pcclAvg, .tag = 0,
                           .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                           .quantization_options = {.algorithm = pcclQuantNone}}};
        pcclReduceInfo_t ri;
        if (pcclAllReduceMultipleWithRetry(&op, 1, comm, &ri, 1) != pcclSuccess) continue; /* world < 2 */
        for (int i = 0; i < N; i++) weights[i] -= 0.01f * grad[i]; /* same on every peer */
        state.revision++;
        printf("revision %llu world %u rx %llu B\n", (unsigned long long)state.revision, ri.local_world_size,
               (unsigned long long)sync.rx_bytes);
    }
    pcclDestroyCommunicator(comm);
    return 0;
}
