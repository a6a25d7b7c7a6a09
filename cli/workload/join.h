/*
 * join.h - what `pccl join` runs once connected: the canonical PCCL loop
 * (update topology, sync shared state, all-reduce, deterministic update)
 * around a workload.
 */
#ifndef PCCL_JOIN_H
#define PCCL_JOIN_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "mnist.h"
#include "pccl.h"

/* Exit codes of `pccl join` (man/pccl-join.1.scd, EXIT STATUS). */
enum {
    JOIN_EXIT_OK = 0,      /* the run reached --steps or was shut down, or this peer left on SIGTERM/SIGINT */
    JOIN_EXIT_FAILED = 1,  /* the run failed for this peer: master lost past the reconnect window, ... */
    JOIN_EXIT_USAGE = CLI_EXIT_USAGE,
    JOIN_EXIT_KICKED = 3,  /* the master removed this peer */
    JOIN_EXIT_CONFIG = 4,  /* the local configuration cannot work (checked before contacting the master) */
    JOIN_EXIT_WRONG = 5,   /* synthetic: an all-reduce result was wrong */
};

/* The workloads and the defaults of `pccl join`'s flags: cli/opts/join.def states them from here. */
#define JOIN_WORKLOAD_FASHION_MNIST "fashion-mnist"
#define JOIN_WORKLOAD_SYNTHETIC "synthetic"
#define JOIN_DEFAULT_STEPS 50
#define JOIN_DEFAULT_PEER_GROUP 0
#define JOIN_DEFAULT_SIZE 409600
#define JOIN_DEFAULT_TENSORS 1
#define JOIN_DEFAULT_INNER_STEPS 25
#define JOIN_DEFAULT_BATCH 128
#define JOIN_DEFAULT_INNER_LR 0.003
#define JOIN_DEFAULT_OUTER_LR 0.7
#define JOIN_DEFAULT_OUTER_MOMENTUM 0.9
#define JOIN_DEFAULT_MIN_WORLD 2
#define JOIN_DEFAULT_MAX_REJECTIONS 10
#define JOIN_DEFAULT_FRAGMENTS 1
#define JOIN_MAX_FRAGMENTS 1024

typedef struct join_opts {
    const char *workload; /* JOIN_WORKLOAD_FASHION_MNIST or JOIN_WORKLOAD_SYNTHETIC */
    uint64_t steps;       /* stop when the shared-state revision reaches this */
    uint32_t peer_group;
    const char *data_dir;
    int json;
    uint64_t size_bytes; /* synthetic: bytes all-reduced per step */
    uint32_t tensors;    /* synthetic: concurrent all-reduces per step */
    uint32_t pool;       /* p2p connection pool size */
    uint64_t seed;
    uint32_t inner_steps; /* DiLoCo H */
    uint32_t batch;
    float inner_lr, outer_lr, outer_momentum;
    uint32_t step_delay_ms; /* synthetic: pause per step (lets tests kill peers mid-run) */
    uint32_t min_world;     /* wait for this many peers before the first step (0: JOIN_DEFAULT_MIN_WORLD) */
    int optimize;           /* run pcclOptimizeTopology whenever the world changed */
    pcclQuantizationOptions_t quant; /* of every all-reduce (--quantize) */
    int out_of_place;       /* synthetic: reduce into a second buffer (--out-of-place) */
    uint32_t max_rejections; /* give up after this many rejected all-reduces in a row (--max-rejections) */
    uint32_t fragments;      /* fashion-mnist: Streaming DiLoCo fragments K (0 or 1: DiLoCo) */
    uint32_t overlap_steps;  /* fashion-mnist: inner steps between a fragment's launch and its wait (tau) */
    double sparse_fraction;  /* fashion-mnist --sparsify topk:FRACTION[:BITS]: 0 dense */
    int sparse_bits;         /* 0 (values as floats), 2 or 4 */
    float sparse_decay;      /* --sparse-decay: the residual's weight in the next selection, in [0, 1] */
} join_opts_t;

/* What a workload needs from this machine, loaded and checked before the master is contacted, so
 * that a peer that cannot work never joins (and leaves, and joins again under a restart loop). */
typedef struct join_data {
    mnist_set_t train, test; /* fashion-mnist */
} join_data_t;
/* Checks that the flag values work together and loads the data of o's workload; -1 with a one-line
 * reason in err (nothing to free then). */
int join_load_data(const join_opts_t *o, join_data_t *d, char *err, size_t errlen);
void join_data_free(join_data_t *d);

/*
 * SIGTERM and SIGINT ask the peer to leave: a thread of its own takes them and calls pcclExtLeave on the
 * communicator being watched, which ends the library call in progress (a wait for a lost master, a
 * connect, a vote) and tells the master; the workload then stops. A second signal ends the process at
 * once (exit 128 + signal). join_catch_stop_signals runs before any other thread starts; -1 if the
 * thread cannot start.
 */
int join_catch_stop_signals(void);
/* The communicator a stop request leaves (set it before pcclConnect, then check join_stop_requested;
 * NULL before pcclDestroyCommunicator, which waits for a leave in progress). */
void join_stop_watch(pcclComm_t *comm);
int join_stop_requested(void);
/* After a stop request: waits until its pcclExtLeave returned, and gives its result. */
pcclResult_t join_stop_finish(void);
/* Sleeps ms, or less when a stop is requested meanwhile. */
void join_sleep_ms(uint32_t ms);
/* Whether a call's result means the run ended for this peer (lost, left, kicked or shut down). */
int join_run_over(pcclResult_t r);

struct cJSON;
/* Prints one event (a JSON object) as one line: JSON with --json, else "key=value" pairs; frees obj. */
void join_emit(const join_opts_t *o, struct cJSON *obj);
/* Hex string of a 64-bit hash (static buffer per call site is not used: out must hold 17 bytes). */
void join_hex64(uint64_t v, char out[17]);

/* Accepts pending peers until that succeeds and the group has at least min_world peers.
 * *first marks the first call after pcclConnect. 0, or -1 if the master is gone or a stop was requested. */
int join_await_world(pcclComm_t *comm, const join_opts_t *o, int min_world, int *first);

/* A "step" event with what every workload reports (step, revision, world size, bytes, ms); the workload adds its
 * own fields and hands it to join_emit. */
struct cJSON *join_step_event(uint64_t step, uint64_t revision, const pcclReduceInfo_t *ri,
                              const pcclSharedStateSyncInfo_t *si, double ms);

/*
 * The start of every step of the canonical loop: accept pending peers (waiting for a world of 2),
 * then sync the shared state (ENFORCE_POPULAR; reports "sync_failed" events).
 * @return 0 go on with the step, 1 retry the step, JOIN_STEPS_DONE the synced revision reached --steps,
 * -1 the master is gone or a stop was requested.
 */
#define JOIN_STEPS_DONE 2
int join_begin_step(pcclComm_t *comm, const join_opts_t *o, pcclSharedState_t *ss, int *first,
                    pcclSharedStateSyncInfo_t *si);

void join_maybe_optimize(pcclComm_t *comm, const join_opts_t *o);

/*
 * Looks at a step's all-reduce result r for a rejection by the master (pcclInvalidUsage: another
 * peer passed a different count, dtype, op or quantization for the tag, or the peers are in
 * different operations), counting them in a row in *in_a_row and reporting each ("step_rejected").
 * @return 1 retry the step; 0 r is no rejection (*in_a_row restarts); -1 the limit is reached
 * (the reason is printed): end the run.
 */
int join_check_rejected(const join_opts_t *o, pcclResult_t r, uint32_t *in_a_row);
/*
 * What a step does after its all-reduce returned r: 0 goes on with the result; 1 discards the step (rejected, too
 * few peers or a lost neighbour: counted in *retries, and reported as discard_event unless that is NULL or it was a
 * rejection) and retries it; -1 ends the run with JOIN_EXIT_FAILED (a stop request, a run that is over, too many
 * rejections in a row, a failure, reported): `pccl join` then tells them apart.
 */
int join_reduce_outcome(const join_opts_t *o, pcclResult_t r, uint32_t *rejected, uint64_t *retries,
                        const char *discard_event);

/* Run the loop until --steps or a stop request: JOIN_EXIT_OK, JOIN_EXIT_FAILED or JOIN_EXIT_WRONG. */
int workload_synthetic(pcclComm_t *comm, const join_opts_t *o);
int workload_fashion_mnist(pcclComm_t *comm, const join_opts_t *o, const join_data_t *d);

#endif
