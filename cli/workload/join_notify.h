/*
 * join_notify.h - `pccl join` under a systemd unit of Type=notify (cli/sd_notify.h): READY=1 once the run accepted
 * this peer, WATCHDOG=1 from a thread while the peer is alive, STOPPING=1 when it leaves. Outside systemd
 * (no $NOTIFY_SOCKET) nothing is sent and no thread runs.
 *
 * Alive means: the communicator's lock can be taken (a wedged library stops the pings) and the run still counts
 * this peer. A peer whose master is lost is alive while it reconnects (PCCL_MASTER_RECONNECT_MS): it keeps its
 * state for the master's return. Kicked, or the master gone past that window, it is not: `pccl join` is about to
 * exit, and if it does not, the watchdog ends it.
 */
#ifndef PCCL_JOIN_NOTIFY_H
#define PCCL_JOIN_NOTIFY_H

#include <pthread.h>
#include <stdint.h>

#include "pccl.h"

typedef struct join_notify {
    pcclComm_t *comm;
    uint64_t every_ms; /* WATCHDOG=1 period: half of WATCHDOG_USEC */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* wakes the thread to quit */
    int quit;          /* guarded by mu */
} join_notify_t;

/* After pcclConnect succeeded: READY=1, and the watchdog thread when systemd asked for one. n is zeroed here. */
void join_notify_start(join_notify_t *n, pcclComm_t *comm);
/* The peer is leaving the run (a stop signal): STOPPING=1. */
void join_notify_stopping(void);
/* Stops the watchdog thread; before pcclDestroyCommunicator. Safe on a zeroed or never-started n. */
void join_notify_end(join_notify_t *n);

#endif
