/*
 * master_internal.h - the master instance (pcclMasterInstance_t): libuv loop,
 * listener, connections and the state machine it drives. Only the loop thread
 * touches these fields after pcclRunMaster, except the atomics.
 */
#ifndef PCCL_MASTER_INTERNAL_H
#define PCCL_MASTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <uv.h>

#include "master_sm.h"
#include "pccl.h"

struct mconn;

struct pcclMasterInstanceState_t {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_async_t stop_async;
    uv_timer_t tick; /* silent-peer check */
    pthread_t thread;
    atomic_int running, interrupted, joined;
    msm_t *sm;
    struct mconn *conns;
    uint64_t next_conn_id;
    uint16_t port;
    int last_error;
    uint64_t bytes_sent, packets_received;
};

/* Port the master listens on (useful after binding port 0). */
uint16_t pccl__master_port(const pcclMasterInstance_t *m);

#endif
