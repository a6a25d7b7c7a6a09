/*
 * bench_peer.h - what the pccl benchmark drivers share (pccl_allreduce.c, pccl_coll.c): the clock, the
 * statistics over ranks and repetitions, a peer's connect and barrier, the split-mode master
 * (bench/wan.sh) and the loopback harness that forks the peers against one in-process master.
 */
#ifndef PCCL_BENCH_PEER_H
#define PCCL_BENCH_PEER_H

#include <stdint.h>

#include "pccl.h"

#define BENCH_MAX_PEERS 64
#define BENCH_MAX_REPS 4096

double bench_now_s(void);

/* Per repetition the max over ranks of times[(rank * reps + rep) * stride + q] (a collective ends when
 * its slowest member does), then the median, min and max over the repetitions. */
void bench_stats(const double *times, int world, int reps, int stride, int q, double *med, double *mn, double *mx);

/* Creates a communicator with the given pool size, connects to the master at ip:port and waits until
 * the group has world peers; with PCCL_BENCH_OPTIMIZE=1 (and 3 peers or more) then optimizes the topology
 * (the master measures every peer's links). NULL (with a message naming rank) on failure. */
pcclComm_t *bench_connect(const uint8_t ip[4], uint16_t port, int rank, int world, uint32_t pool);

/* A joint pcclArePeersPending: every peer returns once all called it. 0 or -1. */
int bench_barrier(pcclComm_t *comm);

/* Split mode: a master on ip, "PORT n" on stdout, serving until SIGTERM or SIGINT. Exit status. */
int bench_split_master(const char *ip);

/* Loopback: a master on 127.0.0.1:0, then world forked processes each running peer(rank, port, arg)
 * (its return value is the exit status). Returns 0 when every peer exited 0. */
int bench_fork_peers(int world, int (*peer)(int rank, uint16_t port, void *arg), void *arg);

/* Shared memory for the peers' times: world * reps * stride doubles, zeroed; NULL on failure. */
double *bench_shared_times(int world, int reps, int stride);

#endif /* PCCL_BENCH_PEER_H */
