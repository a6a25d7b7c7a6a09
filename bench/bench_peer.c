/* bench_peer.c - see bench_peer.h. */
#include "bench_peer.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/master_internal.h"

double bench_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void bench_stats(const double *times, int world, int reps, int stride, int q, double *med, double *mn, double *mx) {
    double v[BENCH_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double m = 0;
        for (int k = 0; k < world; k++) {
            double x = times[((size_t)k * (size_t)reps + (size_t)r) * (size_t)stride + (size_t)q];
            if (x > m) m = x;
        }
        v[r] = m;
    }
    qsort(v, (size_t)reps, sizeof *v, cmp_double);
    *med = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
    *mn = v[0];
    *mx = v[reps - 1];
}

pcclComm_t *bench_connect(const uint8_t ip[4], uint16_t port, int rank, int world, uint32_t pool) {
    pcclInit();
    pcclCommCreateParams_t params = {.master_address = {.inet.protocol = inetIPv4, .port = port},
                                     .peer_group = 0, .p2p_connection_pool_size = pool};
    memcpy(params.master_address.inet.ipv4.data, ip, 4);
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess || pcclConnect(comm) != pcclSuccess) {
        fprintf(stderr, "rank %d: cannot connect\n", rank);
        return NULL;
    }
    int ws = 0;
    for (int tries = 0; tries < 1000; tries++) {
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &ws);
        if (ws >= world) break;
        pcclUpdateTopology(comm);
    }
    if (ws != world) {
        fprintf(stderr, "rank %d: world size %d, want %d\n", rank, ws, world);
        pcclDestroyCommunicator(comm);
        return NULL;
    }
    /* PCCL_BENCH_OPTIMIZE=1: every peer optimizes the topology once, so the master has measured the links'
     * bandwidths and round trips (its algorithm choice uses them) before the timed operations. */
    const char *opt = getenv("PCCL_BENCH_OPTIMIZE");
    if (opt && strcmp(opt, "1") == 0 && world >= 3) {
        pcclResult_t r = pcclTopologyOptimizationFailed;
        for (int tries = 0; tries < 3 && r != pcclSuccess; tries++) r = pcclOptimizeTopology(comm);
        if (r != pcclSuccess) fprintf(stderr, "rank %d: optimize topology failed: %s\n", rank, pcclResultString(r));
    }
    return comm;
}

int bench_barrier(pcclComm_t *comm) {
    bool pending;
    return pcclArePeersPending(comm, &pending) == pcclSuccess ? 0 : -1;
}

int bench_split_master(const char *ip) {
    ccoip_socket_address_t la = {.inet.protocol = inetIPv4, .port = 0};
    if (inet_pton(AF_INET, ip, la.inet.ipv4.data) != 1) return 2;
    pcclInit();
    pcclMasterInstance_t *m;
    if (pcclCreateMaster(la, &m) != pcclSuccess) return 1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the master's thread inherits the mask */
    pcclRunMaster(m);
    printf("PORT %u\n", (unsigned)pccl__master_port(m));
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return 0;
}

int bench_fork_peers(int world, int (*peer)(int rank, uint16_t port, void *arg), void *arg) {
    if (world < 1 || world > BENCH_MAX_PEERS) return -1;
    pcclInit();
    ccoip_socket_address_t la = {.inet.protocol = inetIPv4, .inet.ipv4.data = {127, 0, 0, 1}, .port = 0};
    pcclMasterInstance_t *m;
    if (pcclCreateMaster(la, &m) != pcclSuccess) {
        fprintf(stderr, "cannot create master\n");
        return -1;
    }
    uint16_t port = pccl__master_port(m);
    /* Fork before the master's thread exists. */
    pid_t pids[BENCH_MAX_PEERS];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(peer(r, port, arg));
    }
    pcclRunMaster(m);
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int status;
        if (pids[r] < 0 || waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    return failed ? -1 : 0;
}

double *bench_shared_times(int world, int reps, int stride) {
    size_t bytes = (size_t)world * (size_t)reps * (size_t)stride * sizeof(double);
    double *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return t == MAP_FAILED ? NULL : t;
}
