/*
 * master_internal.h - the master instance (pcclMasterInstance_t): libuv loop,
 * listener, connections and the state machine it drives. Only the loop thread
 * touches these fields after pcclRunMaster, except the atomics.
 */
#ifndef PCCL_MASTER_INTERNAL_H
#define PCCL_MASTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "gate.h"
#include "master_sm.h"
#include "pccl.h"
#include "sec_key.h"

struct mconn;
struct pccl_master_admin; /* master_admin.c; NULL unless pccl__master_enable_admin was called */

struct pcclMasterInstanceState_t {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_async_t stop_async;
    uv_timer_t tick; /* silent-peer check, background-search launch */
    /* Background ("moonshot") ring search: at most one thread at a time. */
    uv_async_t moon_async;
    pthread_t moon_thread;
    int moon_running;
    atomic_bool moon_cancel;
    msm_moonshot_t moon_req;
    int *moon_order; /* result, valid when moon_ok */
    int moon_ok;
    pthread_t thread;
    atomic_int running, interrupted, joined;
    msm_t *sm;
    struct mconn *conns;
    uint64_t next_conn_id;
    uint16_t port;
    int last_error;
    uint64_t bytes_sent, packets_received;
    struct pccl_master_admin *admin;
    gate_t gate;             /* strangers: connections before their first message (libpccl/src/gate.h) */
    uint64_t gate_logged[3];  /* the gate's refused, evicted, expired counts last logged */
    int resume_held;          /* some stranger is held for the RESUME state the state machine keeps */
    sec_cfg_t sec; /* run key and encryption (PCCL_KEY_FILE, PCCL_ENCRYPT, or pccl__master_set_security) */
};

/* Port the master listens on (useful after binding port 0). */
uint16_t pccl__master_port(const pcclMasterInstance_t *m);
/* Vote deadline in ms (0: none; see msm_set_vote_timeout); before pcclRunMaster. pcclCreateMaster sets it
 * from PCCL_VOTE_TIMEOUT_MS, default MSM_VOTE_TIMEOUT_MS (10 minutes). */
void pccl__master_set_vote_timeout(pcclMasterInstance_t *m, uint64_t timeout_ms);
/* Sets the run key and encryption, replacing what the environment said; before pcclRunMaster. */
pcclResult_t pccl__master_set_security(pcclMasterInstance_t *m, const sec_cfg_t *sec);

/*
 * Admin port (master_admin.c, admin.c). Not started by pcclCreateMaster: the
 * `pccl master` command enables it between pcclCreateMaster and pcclRunMaster.
 * addr: where to serve HTTP (port 0 = any); token: bearer token for kick and
 * shutdown, NULL = refused. Fails if the port cannot be bound.
 */
pcclResult_t pccl__master_enable_admin(pcclMasterInstance_t *m, ccoip_socket_address_t addr, const char *token);
/* Bound admin port, 0 if not enabled. */
uint16_t pccl__master_admin_port(const pcclMasterInstance_t *m);
/* Whether pcclInterruptMaster was called (also by an admin shutdown). */
int pccl__master_interrupted(pcclMasterInstance_t *m);
/* Loop thread (or the destroying thread of a never-run master): stops HTTP, closes the handles. */
void pccl__admin_on_stop(pcclMasterInstance_t *m);
/* After the loop has ended. */
void pccl__admin_free(pcclMasterInstance_t *m);

#endif
