/*
 * ring_driver.c - one peer of the WAN topology scenario (scripts/netns/topology_scenario.sh).
 *
 * Usage: ring_driver MASTER_IP MASTER_PORT WORLD MIB [REPS]
 *
 * Connects, waits until WORLD peers are in the run (the harness starts the peers one after the
 * other, so the initial ring is the join order), times REPS all-reduces (sum, float32) of MIB MiB,
 * calls pcclOptimizeTopology (retrying on pcclTopologyOptimizationFailed), times the same
 * all-reduces again and prints one JSON line on stdout:
 *   {"before_s":..,"after_s":..,"speedup":..,"optimize_s":..,"optimize_tries":..,"ok":true}
 * before_s / after_s are the median of the REPS timings. The result of every all-reduce is checked
 * (every peer contributes 1.0 + rank-independent pattern, so the sum is WORLD times it).
 * Exits 0 on success.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t g_tag = 1;

/* Times one all-reduce of buf (n floats); retries on failure (a retry starts from the same input).
 * Returns seconds of the successful attempt, or -1. */
static double timed_allreduce(pcclComm_t *comm, float *buf, size_t n, int world) {
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i % 7);
    for (int attempt = 0; attempt < 5; attempt++) {
        pcclReduceDescriptor_t d = {.count = n, .op = pcclSum, .tag = g_tag++,
                                    .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                                    .quantization_options = {.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone}};
        double t0 = now_s();
        pcclResult_t r = pcclAllReduce(buf, buf, &d, comm, NULL);
        double t = now_s() - t0;
        if (r != pcclSuccess) {
            fprintf(stderr, "ring_driver: all-reduce failed: %s (attempt %d)\n", pcclResultString(r), attempt);
            continue;
        }
        for (size_t i = 0; i < n; i += 4099)
            if (buf[i] != (float)(world * (int)(i % 7))) {
                fprintf(stderr, "ring_driver: wrong result at %zu: %g\n", i, buf[i]);
                return -1;
            }
        return t;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MASTER_IP MASTER_PORT WORLD MIB [REPS]\n", argv[0]);
        return 2;
    }
    int world = atoi(argv[3]), reps = argc > 5 ? atoi(argv[5]) : 1;
    size_t n = (size_t)(atof(argv[4]) * 1024 * 1024) / sizeof(float);
    if (world < 2 || n == 0 || reps < 1 || reps > 16) return 2;
    pcclCommCreateParams_t params = {.master_address = {.inet.protocol = inetIPv4, .port = (uint16_t)atoi(argv[2])},
                                     .peer_group = 0, .p2p_connection_pool_size = 1};
    if (inet_pton(AF_INET, argv[1], params.master_address.inet.ipv4.data) != 1) return 2;
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess || pcclConnect(comm) != pcclSuccess) {
        fprintf(stderr, "ring_driver: cannot connect to the master\n");
        return 1;
    }
    int ws = 0;
    double deadline = now_s() + 120;
    for (;;) {
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
        if (ws >= world) break;
        if (now_s() > deadline) {
            fprintf(stderr, "ring_driver: world size %d after 120 s, want %d\n", ws, world);
            return 1;
        }
        if (pcclUpdateTopology(comm) != pcclSuccess) nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    float *buf = malloc(n * sizeof *buf);
    if (!buf) return 1;
    double before[16], after[16];
    /* Warm-up: a small all-reduce so the first timed one does not pay for connection setup. */
    if (timed_allreduce(comm, buf, 1024, world) < 0) return 1;
    for (int r = 0; r < reps; r++)
        if ((before[r] = timed_allreduce(comm, buf, n, world)) < 0) return 1;
    double t0 = now_s();
    int tries = 0;
    pcclResult_t res;
    do {
        res = pcclOptimizeTopology(comm);
        tries++;
    } while (res == pcclTopologyOptimizationFailed && tries < 20);
    double opt_s = now_s() - t0;
    if (res != pcclSuccess) {
        fprintf(stderr, "ring_driver: pcclOptimizeTopology: %s after %d tries\n", pcclResultString(res), tries);
        return 1;
    }
    if (timed_allreduce(comm, buf, 1024, world) < 0) return 1;
    for (int r = 0; r < reps; r++)
        if ((after[r] = timed_allreduce(comm, buf, n, world)) < 0) return 1;
    double b = median(before, reps), a = median(after, reps);
    printf("{\"before_s\":%.4f,\"after_s\":%.4f,\"speedup\":%.3f,\"optimize_s\":%.3f,\"optimize_tries\":%d,"
           "\"mib\":%g,\"reps\":%d,\"ok\":true}\n",
           b, a, b / a, opt_s, tries, atof(argv[4]), reps);
    fflush(stdout);
    /* A final joint call so nobody leaves while others still run the last collective. */
    bool pending;
    pcclArePeersPending(comm, &pending);
    pcclDestroyCommunicator(comm);
    free(buf);
    return 0;
}
