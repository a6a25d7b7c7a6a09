/*
 * comm.h - the communicator (struct pcclComm_t) and what its parts share.
 *
 * Threads of one communicator:
 *  - the user's threads: phase calls one at a time, collectives and
 *    attribute reads from any thread (the rules are in pccl.h);
 *  - the control reader (comm.c): reads master packets, routes collective
 *    messages to their operation by tag, everything else to the inbox;
 *  - the heartbeat thread (comm.c): a HEARTBEAT to the master every
 *    PCCL_HEARTBEAT_MS so a hung peer is told apart from a busy one;
 *  - the p2p acceptor (p2p.c): accepts ring connections and shared-state requests;
 *  - all-reduce workers (allreduce.c): a pool created lazily, one thread per
 *    concurrently running async all-reduce, parked between operations and
 *    joined on destroy; the blocking pcclAllReduce runs on the caller's thread;
 *  - one short-lived server thread per shared-state request (shared_state.c).
 * Locking: mu guards the inbox, ops list, work queue, world and flags; p2p.mu
 * guards the connection table. Never hold mu while doing network I/O.
 * Wake-ups: cv is for inbox waiters and the heartbeat only; each all-reduce has
 * its own condition variable (signalled by the reader for that op's messages)
 * and the worker pool has work_cv, so a collective message wakes one thread.
 */
#ifndef PCCL_COMM_H
#define PCCL_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bufpool.h"
#include "pccl.h"
#include "wire.h"

typedef struct inbox_item {
    wire_msg_t msg;
    struct inbox_item *next;
} inbox_item_t;

/* A p2p connection; refcounted because ops hold it while the table may replace it. */
typedef struct p2p_conn {
    int fd;
    int refs;
    int dead;
    int dir; /* P2P_TX (we connected to uuid) or P2P_RX (uuid connected to us) */
    uint8_t uuid[16];
    uint32_t slot;
    int pipe[2];  /* TX: the ring's splice pipe (p2p_tx_pipe), valid when has_pipe */
    int has_pipe; /* 0 not tried, 1 open, -1 unavailable */
    int same_host;   /* TX: the successor runs on this host */
    int notsent_cap; /* TX: TCP_NOTSENT_LOWAT now set on fd in bytes; 0: the kernel's default */
    struct p2p_conn *next;
} p2p_conn_t;

enum { P2P_TX = 0, P2P_RX = 1 };

typedef struct p2p_state {
    int listen_fd;
    uint16_t port;
    pthread_t acceptor;
    int acceptor_started;
    int wake_pipe[2]; /* wakes the acceptor for shutdown */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when an RX connection arrives */
    p2p_conn_t *conns;
    wire_peer_t *peers; /* own group's peers in ring order (addresses) */
    uint32_t npeers;
    uint32_t local_peers; /* peers of the group on this host, this one included */
    atomic_int handlers; /* live shared-state server threads */
} p2p_state_t;

struct pccl_op;

/* Shared state being served while this peer is inside pcclSynchronizeSharedState. */
typedef struct ss_serving {
    pcclSharedState_t *state;
    int refs;
    atomic_uint_fast64_t tx_bytes;
} ss_serving_t;

struct pcclComm_t {
    pcclCommCreateParams_t params;
    uint32_t pool_size;
    int timeout_ms;         /* silent-peer timeout for p2p I/O */
    int connect_timeout_ms; /* master connect + handshake */

    int master_fd;
    pthread_mutex_t send_mu; /* one writer at a time on master_fd */
    pthread_t reader;
    int reader_started;
    pthread_t heartbeat;
    int heartbeat_started;
    int heartbeat_ms;
    int local_notsent_bytes; /* unsent-bytes cap of same-host ring sends (p2p_pace_tx); 0: none */
    int ncpus;               /* CPUs this process may run on */
    int zerocopy_min_bytes; /* plain all-reduces of at least this many bytes splice their sends; -1: never */
    atomic_int connected, accepted, master_lost, shutting_down;
    uint8_t uuid[16];
    char log_name[24]; /* "peer:xxxxxxxx" */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    inbox_item_t *inbox_head, *inbox_tail;
    struct pccl_op *ops;
    /* all-reduce worker pool (allreduce.c), guarded by mu */
    pthread_cond_t work_cv;               /* queued work or stop */
    struct pccl_op *work_head, *work_tail; /* launched async ops not yet picked up */
    uint32_t work_queued, workers_idle, nworkers, workers_cap;
    pthread_t *workers;
    int workers_stop;
    struct pccl_op *op_free; /* recycled op records (keep their eventfd and condvar) */
    uint32_t nop_free;
    wire_world_t world;
    ss_serving_t *serving;

    p2p_state_t p2p;
    bufpool_t buffers; /* staging and backup buffers of all-reduces */
};

/* Sends one control message to the master; -1 if the master is gone. */
int comm_send(pcclComm_t *c, const wire_msg_t *m);
/*
 * Waits for the next inbox message whose type is one of types[0..ntypes).
 * timeout_ms < 0 waits until the master connection is lost.
 * @return 0 (msg filled, caller frees), -1 master lost, -2 timeout.
 */
int comm_wait(pcclComm_t *c, const uint16_t *types, int ntypes, int timeout_ms, wire_msg_t *msg);
void comm_set_world(pcclComm_t *c, const wire_world_t *w);
int comm_ops_outstanding(pcclComm_t *c);
/* Checks common preconditions of main-thread API calls. */
pcclResult_t comm_check_ready(const pcclComm_t *c);
int comm_env_int(const char *name, int def, int min, int max);
/* Establishes ring connections for a new peer list (ESTABLISH_P2P); 0 on success. */
int comm_establish(pcclComm_t *c, const wire_msg_t *establish);

#endif
