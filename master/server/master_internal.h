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

#include "base/base.h"
#include "sm/sm.h"
#include "pccl.h"
#include "sec/sec.h"

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
    /* Stopping ends the run (pccl__master_end_run): every peer is told SHUTDOWN before the close.
     * end_reason is written before end_run is set and read on the loop thread after it. */
    atomic_int end_run;
    char end_reason[128];
    int draining; /* loop thread: SHUTDOWN is being flushed; the last connection closed ends the loop */
    msm_t *sm;
    struct mconn *conns;
    uint64_t next_conn_id;
    uint16_t port;
    int last_error;
    uint64_t bytes_sent, packets_received;
    /* connections refused (not kicks; loop thread): a malformed or misdirected frame, a failed key handshake or
     * frame authentication; the state machine counts protocol version and magic (msm_stats_t) */
    uint64_t refused_malformed, refused_handshake;
    struct pccl_master_admin *admin;
    gate_t gate;             /* strangers: connections before their first message (libpccl/src/base/gate.h) */
    uint64_t gate_logged[3];  /* the gate's refused, evicted, expired counts last logged */
    int resume_held;          /* some stranger is held for the RESUME state the state machine keeps */
    sec_cfg_t sec; /* run key and encryption (PCCL_KEY_FILE, PCCL_ENCRYPT, or pccl__master_set_security) */
    void (*tick_hook)(void *ctx, uint64_t now_ms); /* pccl__master_set_tick_hook */
    void *tick_hook_ctx;
    char *allow_keys_path;   /* pccl__master_set_allow_keys (master_allow.c); NULL: every key is admitted */
    uv_async_t allow_reload; /* initialized with allow_keys_path */
};

/* Dials conn's advertised p2p address once (master_probe.c) and tells the state machine whether it connected
 * (msm_on_reachable); loop thread, after the peer registered. */
void master_probe_start(pcclMasterInstance_t *m, uint64_t conn);

/* Port the master listens on (useful after binding port 0). */
uint16_t pccl__master_port(const pcclMasterInstance_t *m);
/* Vote deadline in ms (0: none; see msm_set_vote_timeout); before pcclRunMaster. pcclCreateMaster sets it
 * from PCCL_VOTE_TIMEOUT_MS, default MSM_VOTE_TIMEOUT_MS (10 minutes). */
void pccl__master_set_vote_timeout(pcclMasterInstance_t *m, uint64_t timeout_ms);
/* The relays peers meet at when an edge can neither be dialled nor punched (pccl master --relay; msm_set_relays);
 * before pcclRunMaster. @return 0, or -PERR_INVALID (no master, running already, more than MSM_RELAYS_MAX). */
int pccl__master_set_relays(pcclMasterInstance_t *m, const ccoip_socket_address_t *relays, uint32_t n);
/* Sets the run key and encryption, replacing what the environment said; before pcclRunMaster.
 * @return 0, or -PERR_INVALID (no master, running already, or encryption without a key). */
int pccl__master_set_security(pcclMasterInstance_t *m, const sec_cfg_t *sec);
/* The run key from the key file at path (NULL: PCCL_KEY_FILE) and whether every connection is encrypted, for
 * `pccl master`; before pcclRunMaster. @return 0; -PERR_MISUSE (encryption without a key) or the key file's
 * -PERR_<NAME>, with the reason in err. */
int pccl__master_set_key_file(pcclMasterInstance_t *m, const char *path, int encrypt, char *err, size_t errlen);

/* Admits only the public keys listed in the file at path (pccl master --allow-keys); before pcclRunMaster.
 * @return 0; -PERR_INVALID (no master or path, running already, or set before); -PERR_NOMEM; ident_keys_load's
 *         code (unreadable or malformed file). A failure leaves a reason in err. */
int pccl__master_set_allow_keys(pcclMasterInstance_t *m, const char *path, char *err, size_t errlen);
/* Reads the allow-keys file again on the loop thread (SIGHUP); peers whose key left it are kicked, and a
 * file that no longer reads keeps the old list. Async-signal-safe; nothing without an allow-keys file. */
void pccl__master_reload_allow_keys(pcclMasterInstance_t *m);
/* Loop thread (or the destroying thread of a never-run master): closes the reload handle. */
void pccl__allow_on_stop(pcclMasterInstance_t *m);

/*
 * Admin port (master_admin.c, admin.c). Not started by pcclCreateMaster: the
 * `pccl master` command enables it between pcclCreateMaster and pcclRunMaster.
 * addr: where to serve HTTP (port 0 = any); token: bearer token for kick and
 * shutdown, NULL = refused; hosts: Host names it answers besides loopback and
 * addr (admin_host.h), NULL = none. @return 0; -PERR_INVALID (no master, enabled
 * before, running already, or addr of no family); -PERR_NOMEM; -PERR_FAILED (the
 * port cannot be bound: logged).
 */
struct admin_host_rules;
int pccl__master_enable_admin(pcclMasterInstance_t *m, ccoip_socket_address_t addr, const char *token,
                                       const struct admin_host_rules *hosts);
/* Bound admin port, 0 if not enabled. */
uint16_t pccl__master_admin_port(const pcclMasterInstance_t *m);
/* Calls fn(ctx, loop time in ms) on the loop thread at the end of every tick (250 ms): a stalled event loop
 * stops calling it, which is what `pccl master` reports as systemd's watchdog. Before pcclRunMaster. */
void pccl__master_set_tick_hook(pcclMasterInstance_t *m, void (*fn)(void *ctx, uint64_t now_ms), void *ctx);
/* Stops the master and ends the run: every connected peer gets SHUTDOWN(reason) and stops for good
 * instead of waiting for a restarted master (pcclInterruptMaster keeps the run: the peers reconnect).
 * Async-signal-safe; no effect once the master was interrupted. */
void pccl__master_end_run(pcclMasterInstance_t *m, const char *reason);
/* Whether pcclInterruptMaster was called (also by an admin shutdown). */
int pccl__master_interrupted(pcclMasterInstance_t *m);
/* Loop thread (or the destroying thread of a never-run master): stops HTTP, closes the handles. */
void pccl__admin_on_stop(pcclMasterInstance_t *m);
/* After the loop has ended. */
void pccl__admin_free(pcclMasterInstance_t *m);

#endif
