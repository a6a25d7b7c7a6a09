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
 *  - collective workers (op/op_pool.c): a pool created lazily, one thread per
 *    concurrently running async collective (every kind), parked between operations
 *    and joined on destroy; a blocking collective runs on the caller's thread;
 *  - one short-lived server thread per shared-state request (shared_state.c).
 * Locking: mu guards the inbox, ops list, work queue, world, state and waits; p2p.mu
 * guards the connection table. Never hold mu while doing network I/O.
 * Waits: every blocking path waits through a pwait_t (base/wait.h); the control
 * waits are in waits, which one call cancels with the operations (comm_cancel_all in
 * api/: destroy, an outage, the end); a leave ends them alone (comm_stop).
 * Wake-ups: cv is for the control waits only; the heartbeat sleeps on hb_cv (woken
 * only to end), each collective has its own wait (signalled by the reader for that
 * op's messages) and the worker pool has work_cv, so a message wakes one thread.
 */
#ifndef PCCL_COMM_H
#define PCCL_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/base.h"
#include "sec/sec.h"
#include "pccl.h"

typedef struct inbox_item {
    wire_msg_t msg;
    struct inbox_item *next;
} inbox_item_t;

/* A p2p connection; refcounted because ops hold it while the table may replace it. */
typedef struct p2p_conn {
    int fd;
    sec_link_t *link; /* AEAD stream when the run encrypts, else NULL */
    int refs;
    int dead;
    int dir; /* P2P_TX (we connected to uuid) or P2P_RX (uuid connected to us) */
    uint8_t uuid[16];
    uint32_t slot;
    int pipe[2];  /* TX: the ring's splice pipe (p2p_tx_pipe), valid when has_pipe */
    int has_pipe; /* 0 not tried, 1 open, -1 unavailable */
    int same_host;   /* TX: the successor runs on this host */
    int notsent_cap; /* TX: TCP_NOTSENT_LOWAT now set on fd in bytes; 0: the kernel's default */
    int rcv_bound;   /* RX: 1 SO_RCVBUF bounded for good (p2p_bound_rx), -1 the peer is remote */
    int how;         /* WIRE_EDGE_*: dialed directly, punched or relayed (docs/nat.md) */
    struct p2p_conn *next;
} p2p_conn_t;

enum { P2P_TX = 0, P2P_RX = 1 };

typedef struct p2p_state {
    int listen_fd;
    uint16_t port;
    pthread_t acceptor;
    int acceptor_started;
    int wake_pipe[2]; /* wakes the acceptor for shutdown */
    /* Serves a shared-state request on an accepted connection (ss/, set at creation: the layer above
     * p2p/ that owns the state); takes fd and link (the AEAD stream when the run encrypts, else NULL). */
    void (*serve_ss)(pcclComm_t *c, sec_link_t *link, int fd);
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when an RX connection arrives */
    p2p_conn_t *conns;
    wire_peer_t *peers; /* own group's peers in ring order (addresses) */
    uint32_t npeers;
    uint32_t local_peers; /* peers of the group on this host, this one included */
    atomic_int handlers; /* live shared-state and probe server threads (at most P2P_SERVERS_MAX) */
    /* NAT traversal (p2p_punch.c): this peer's rendezvous in flight as dialer, connections made by a target's
     * half waiting for the acceptor (a 'h' on wake_pipe), and the target halves' threads */
    struct p2p_rdv *rdvs;
    struct { int fd, how; uint8_t uuid[16]; } handed[8]; /* how: WIRE_EDGE_*; uuid: the peer it must greet as */
    int nhanded;
    uint32_t rdv_next;
    atomic_int punchers;
} p2p_state_t;

struct pccl_op;
struct op_grant;

/* Shared state being served while this peer is inside pcclSynchronizeSharedState. */
typedef struct ss_serving {
    pcclSharedState_t *state;
    int refs;
    atomic_uint_fast64_t tx_bytes;
    int fds[16]; /* the connections of the servers holding a ref (at most P2P_SERVERS_MAX), -1 free: a leave
                  * shuts them down so the sync need not wait for a stalled requester */
} ss_serving_t;

/*
 * The peer's lifecycle (c->state). Transitions, each made by comm_transition under mu:
 *
 *   from                          to              when (who)
 *   CREATED                       CONNECTING      pcclConnect begins (user thread)
 *   CONNECTING, REGISTERED        CREATED         pcclConnect fails; it may be called again
 *   CONNECTING                    REGISTERED      the master's WELCOME (connect.c; under send_mu)
 *   REGISTERED, REJOINING         ACCEPTED        an accept round wired this peer (pcclConnect, pcclUpdateTopology)
 *   REGISTERED, ACCEPTED,         MASTER_DOWN     the master connection broke and the reconnect window is
 *     REJOINING                                   open (reader; under send_mu); before keeps the state left
 *   MASTER_DOWN                   before          re-registered (reader; under send_mu): ACCEPTED after RESUMED,
 *                                                 REJOINING if the restarted master rebuilt without this peer
 *   REGISTERED, ACCEPTED,         LEAVING         pcclExtLeave with the master up (under send_mu): no more votes,
 *     REJOINING                                   and the master's close ends the run instead of a reconnect
 *   every state the reader runs   ENDED           the master connection is closed for good (reader's end);
 *     in (REGISTERED and after)                   departed says why, before what it was; final
 */
typedef enum peer_state {
    PEER_CREATED = 0,
    PEER_CONNECTING,
    PEER_REGISTERED, /* welcomed: the master knows this peer (it may re-register), not yet in a ring */
    PEER_ACCEPTED,   /* a member of the run */
    PEER_REJOINING,  /* a restarted master rebuilt the run without this peer: it waits to be accepted again */
    PEER_MASTER_DOWN,
    PEER_LEAVING,
    PEER_ENDED,
} peer_state_t;

/* Why a run ended (c->departed bits; pcclExtGetDeparture reports the first of them in this order). */
enum { DEPARTED_LEFT = 1, DEPARTED_KICKED = 2, DEPARTED_SHUT_DOWN = 4 };

#define FAILED_OPS_MAX 256

struct pcclComm_t {
    pcclCommCreateParams_t params;
    uint32_t pool_size;
    int timeout_ms;         /* silent-peer timeout for p2p I/O */
    int connect_timeout_ms; /* master connect + handshake */
    /* Where other peers reach this one (comm_addr.c): the p2p listening port (PCCL_P2P_PORT; 0: an ephemeral
     * one) and the advertised address (PCCL_ADVERTISE_ADDRESS; adv.port 0: the listening port). */
    uint16_t p2p_listen_port;
    int has_adv;
    ccoip_socket_address_t adv;

    int master_fd;
    sec_link_t *master_link; /* AEAD stream of master_fd when the run encrypts, else NULL */
    pthread_mutex_t send_mu; /* one writer at a time on master_fd */
    pthread_t reader;
    int reader_started;
    pthread_t heartbeat;
    int heartbeat_started;
    int heartbeat_ms;
    int local_notsent_bytes; /* unsent-bytes cap of same-host ring sends (p2p_pace_tx); 0: none */
    int ncpus;               /* CPUs this process may run on */
    int zerocopy_min_bytes; /* plain all-reduces of at least this many bytes splice their sends; -1: never */
    int zerocopy_every_edge; /* 0: same-host edges follow the host's CPUs per local peer (p2p_splice_min) */
    uint8_t algo; /* PCCL_ALGO as WIRE_ALGO_AUTO, _RING, _RHD or _RD: sent in every COLL_INIT (docs/algorithms.md) */
    /* The run key (PCCL_KEY_FILE); encrypt is what the master announced in the handshake. Set before
     * pcclConnect and read-only afterwards. */
    sec_cfg_t sec;
    /* Where this peer is in its run: one value (peer_state_t), written under mu by comm_transition and read
     * anywhere through comm_state/comm_role. before: the state left for PEER_MASTER_DOWN (the one the peer
     * returns to once re-registered: what it tells the restarted master it is) or for PEER_ENDED. */
    atomic_int state, before;
    /* Why the run ended for this peer (DEPARTED_* bits, for pcclExtGetDeparture and comm_lost_result): set
     * once each by whoever learns it, independent of state (a KICK can come while connecting, a leave in
     * any state). */
    atomic_int departed;
    /* Cancellation requests (not states: set from any thread in any state, with every wait in waits ended for
     * good): stopping once pcclExtLeave was called (comm_stop), shutting_down once pcclDestroyCommunicator was
     * (comm_cancel_all; the heartbeat and the p2p acceptor end only then). */
    atomic_int stopping, shutting_down;
    /* The outstanding waits of the control path (comm_wait_open; guarded by mu): inbox waits, waits for the
     * master to come back, connects and handshakes to the master, backoffs, ring wiring, shared-state
     * fetches. A leave or destroy ends them all (sticky), a lost master connection those of its epoch
     * (-PERR_RESTARTED), the end of the run (-PERR_LOST) those still open. Operations have their own
     * wait (op/); comm_cancel_all (api/) ends both kinds at once. */
    pwait_set_t waits;
    pwait_t *wiring; /* the wait of the accept or optimize round's wiring, which its verdict ends (mu) */
    /* Master restarts (resume.c): the epoch counts lost master connections; a message of an older
     * epoch is never sent, and a wait that began in one ends when it moves. */
    atomic_uint master_epoch;
    int reconnect_ms;
    int connect_retry_ms; /* PCCL_CONNECT_RETRY_MS: how long pcclConnect retries an unreachable master */
    /* The master as "HOST[:PORT]" (pcclExtCommSetMasterHost; empty: params.master_address): resolved at each
     * connect, every address tried in getaddrinfo's order (comm_addr.c). Set before pcclConnect. */
    char master_host[272];
    uint64_t down_since_ms;
    uint8_t uuid[16];  /* derived from ident's public key; the master's WELCOME confirms it */
    char log_name[24]; /* "peer:xxxxxxxx" */
    /* Who this peer is (comm_identity.c): its key pair (PCCL_IDENTITY_FILE, pcclExtCommSetIdentityFile, or made
     * at creation) and name (PCCL_NAME, pcclExtCommSetName, or the host name); set before pcclConnect. */
    ident_t ident;
    char name[IDENT_NAME_MAX + 1];
    uint8_t master_nonce[IDENT_NONCE_BYTES]; /* the CHALLENGE of the current control connection */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t hb_cv; /* the heartbeat's: broadcast when the run ends or the communicator shuts down */
    inbox_item_t *inbox_head, *inbox_tail;
    struct pccl_op *ops;
    /* collective worker pool (op/op_pool.c), guarded by mu */
    pthread_cond_t work_cv;               /* queued work or stop */
    struct pccl_op *work_head, *work_tail; /* launched async ops not yet picked up */
    uint32_t work_queued, workers_idle, nworkers, workers_cap;
    pthread_t *workers;
    int workers_stop;
    struct pccl_op *op_free; /* recycled op records (keep their wait: eventfd and condvar) */
    struct op_grant *grants; /* collectives the master pre-commenced, by tag (op/op_grant.c) */
    uint32_t nop_free;
    wire_world_t world;
    ss_serving_t *serving;

    p2p_state_t p2p;
    bufpool_t buffers; /* staging, backup and work buffers of collectives */

    /* What this peer tells a restarted master (guarded by mu): its group's ring as last seen,
     * the revision and entries of its last completed sync. */
    uint8_t (*last_ring)[16];
    uint32_t last_nring;
    int has_revision;
    uint64_t last_revision;
    wire_tensor_t *last_tensors;
    uint32_t last_ntensors;
    /* Commenced collectives that failed here, newest last (a ring of FAILED_OPS_MAX, guarded by mu):
     * a RESUME lists those of the lost master as unfinished, since it may not have read their failure. */
    struct { uint64_t tag, op_seq; unsigned epoch; } failed_ops[FAILED_OPS_MAX];
    uint32_t nfailed_ops;
};

/* The peer's state (any thread). */
peer_state_t comm_state(const pcclComm_t *c);
/* The state, or while the master is down the state the peer returns to (its membership), or once ended
 * PEER_LEAVING if LEAVE went out (calls after it are misuse) and PEER_ENDED otherwise. */
peer_state_t comm_role(const pcclComm_t *c);
/* The master connection is closed for good (PEER_ENDED). */
int comm_ended(const pcclComm_t *c);
/* Moves to state to if the state is one of the bits (1 << PEER_*) of from; takes mu (the _locked variant: the
 * caller holds it) and wakes the inbox waiters. @return the state it left, or -PERR_INVALID (not moved). */
int comm_transition(pcclComm_t *c, unsigned from, peer_state_t to);
int comm_transition_locked(pcclComm_t *c, unsigned from, peer_state_t to);
#define PEER_BIT(s) (1u << (s))
/* The states in which the master knows this peer and the connection is up. */
#define PEER_REGISTERED_UP (PEER_BIT(PEER_REGISTERED) | PEER_BIT(PEER_ACCEPTED) | PEER_BIT(PEER_REJOINING))

/* Whether the communicator's waits must end: pcclExtLeave was called, or it is being destroyed. */
int comm_cancelled(const pcclComm_t *c);
/* SHUTDOWN arrived: the run is over (logged with the master's reason). */
void comm_note_shutdown(pcclComm_t *c, const char *reason);
/* What a call returns when the run ended for this peer: pcclExtRunShutDown after SHUTDOWN, else
 * pcclMasterConnectionFailed. */
pcclResult_t comm_lost_result(const pcclComm_t *c);
/* The API edge's mapping of a control call's rc (comm_begin, comm_send, comm_wait: 0 or -PERR_<NAME>), where
 * perr_result's default is wrong: 0 pcclSuccess; -PERR_RESTARTED (the master restarted meanwhile) the call's own
 * retryable failure, restarted; anything else the run ended for this peer (comm_lost_result). */
pcclResult_t comm_call_result(const pcclComm_t *c, int rc, pcclResult_t restarted);
/* Waits until ms passed or a leave or destroy (caller holds nothing). */
void comm_pause(pcclComm_t *c, int ms);
/* The first registration of pcclConnect (connect.c): connects, proves the key, sends HELLO and reads
 * the WELCOME, retrying an unreachable master for connect_retry_ms. @return 0 (master_fd is registered; no
 * thread reads it yet), -PERR_CANCELLED (a leave or destroy), or the last attempt's code once the master refused
 * or the window passed (the run is over for this peer: comm_lost_result says how). */
int comm_register_first(pcclComm_t *c);

/* comm_send, comm_wait and comm_begin return 0 or -PERR_<NAME>: -PERR_LOST (the master is gone for good, or the
 * peer is leaving or being destroyed), -PERR_RESTARTED (the master connection of the epoch was lost: a restarted
 * master knows nothing of the request), -PERR_TIMEOUT (comm_wait's deadline). */

/* Whether the group's peers on this host (this one included) are no more than its CPUs (p2p_local_peers_fit). */
int comm_local_peers_fit(pcclComm_t *c);
/* How long a wait for the master's answer spins (pwait_cond_sleep_spin) before it sleeps, where the local peers
 * fit the host's CPUs: a master round trip on one host and the lag of the other members, so a prompt answer
 * costs no wake-up. */
#define COMM_SPIN_US 200
/* The end of such a spin begun now (pwait_now_us clock), or 0 (no spin) where the local peers outnumber the
 * CPUs (there a spinning waiter would hold back the peers and the master it waits for) or are not known yet. */
uint64_t comm_spin_until(pcclComm_t *c);

/*
 * Waits until the master connection is up (while it is re-established, at most the reconnect
 * window) and gives its epoch: an operation sends and waits within one epoch.
 * @return 0, or -PERR_LOST (the master is gone for good or the peer is shutting down).
 */
int comm_begin(pcclComm_t *c, unsigned *epoch);
/* Opens w as one of the communicator's waits (cv and mu; with_fd: with an eventfd for poll()-based I/O):
 * it starts cancelled after a leave or destroy. @return 0, or -PERR_FAILED. */
int comm_wait_open(pcclComm_t *c, pwait_t *w, int with_fd);
/* Takes w out of the communicator's waits and releases it. */
void comm_wait_close(pcclComm_t *c, pwait_t *w);
/* A leave (flag &c->stopping): sets flag and ends every wait in waits for good; operations go on (destroy,
 * which ends them too, is comm_cancel_all). */
void comm_stop(pcclComm_t *c, atomic_int *flag);
/* Closes the master connection and frees its link (caller holds send_mu). */
void comm_close_master_locked(pcclComm_t *c);
/* Sends one control message in epoch; -PERR_RESTARTED (dropped) if the master changed since. */
int comm_send(pcclComm_t *c, unsigned epoch, const wire_msg_t *m);
/*
 * Waits for the next inbox message whose type is one of types[0..ntypes).
 * timeout_ms < 0 waits until the master connection is lost.
 * @return 0 (msg filled, caller frees), -PERR_LOST, -PERR_TIMEOUT, or -PERR_RESTARTED when the
 *         master connection of epoch was lost (a restarted master knows nothing of the request).
 */
int comm_wait(pcclComm_t *c, unsigned epoch, const uint16_t *types, int ntypes, int timeout_ms, wire_msg_t *msg);
/* comm_wait for an answer a leaving peer still owes a report on: the leave ended (for good) every wait of
 * comm_wait_open, so this one sleeps on cv alone, at most timeout_ms, and ends at the connection's end.
 * @return 0 (msg filled, caller frees), -PERR_LOST, -PERR_TIMEOUT or -PERR_RESTARTED. */
int comm_wait_owed(pcclComm_t *c, unsigned epoch, const uint16_t *types, int ntypes, int timeout_ms, wire_msg_t *msg);
/* Drops every queued master message (caller holds mu). */
void comm_inbox_clear(pcclComm_t *c);
/* Sets this peer's identity (and the log name derived from it). */
void comm_set_uuid(pcclComm_t *c, const uint8_t uuid[16]);
/* A copy of this peer's uuid, for threads other than the caller's and the reader (the acceptor's). */
void comm_uuid(pcclComm_t *c, uint8_t out[16]);
/* Records the group's ring (uuids in order) for a later RESUME. */
void comm_note_ring(pcclComm_t *c, const uint8_t (*ring)[16], uint32_t n);
/* Records a completed sync (revision and the entries voted) for a later RESUME. */
void comm_note_sync(pcclComm_t *c, uint64_t revision, const wire_tensor_t *t, uint32_t n);
/* Connects to the master within timeout_ms and, in a keyed run, runs the handshake, then reads its CHALLENGE;
 * every wait is one of the communicator's (a leave or destroy ends it at once). @return the fd (and in *link the
 * AEAD stream when the run encrypts, else NULL), or: -PERR_IO (no connection, or the master closed it before its
 * CHALLENGE: worth another try; errno set, ETIMEDOUT when the connect had no answer, ECONNRESET when it
 * closed), -PERR_TIMEOUT (it accepted and did not answer), -PERR_REFUSED (a refused proof of the key, a KICK,
 * or not a CHALLENGE; logged), -PERR_CANCELLED. */
int comm_connect_master(pcclComm_t *c, int timeout_ms, sec_link_t **link);
/* Reads one control message from the master on fd (not yet the reader's) by deadline_ms (net_now_ms clock),
 * waiting through one of the communicator's waits, so a leave or destroy ends it at once.
 * @return 0 (m filled, caller frees), -PERR_TIMEOUT, -PERR_CANCELLED, or link_recv_msg's code (reason in err). */
int comm_master_recv(pcclComm_t *c, int fd, sec_link_t *link, uint64_t deadline_ms, wire_msg_t *m, char *err,
                     size_t errlen);
/* Sets c's identity from PCCL_IDENTITY_FILE (or a fresh key pair) and its name from PCCL_NAME (or the host
 * name) at creation. @return 0, or -PERR_FAILED (logged). */
int comm_identity_init(pcclComm_t *c);
/* Reads the master's CHALLENGE on a new control connection into c->master_nonce by deadline_ms (comm_master_recv).
 * @return 0, or (logged) -PERR_REFUSED (a KICK, or not a CHALLENGE), -PERR_TIMEOUT (nothing came), -PERR_IO
 * (closed first), -PERR_CANCELLED. */
int comm_read_challenge(pcclComm_t *c, int fd, sec_link_t *link, uint64_t deadline_ms);
/* Sends HELLO or RESUME m with c's public key and name, signed over c->master_nonce. @return 0, or
 * ident_encode_signed's or link_send_all's code. */
int comm_send_signed(pcclComm_t *c, int fd, sec_link_t *link, wire_msg_t *m);
void comm_set_world(pcclComm_t *c, const wire_world_t *w);
/* pcclInit was called. */
int pccl__initialized(void);
/* Checks common preconditions of main-thread API calls. */
pcclResult_t comm_check_ready(const pcclComm_t *c);
int comm_env_int(const char *name, int def, int min, int max);
/* PCCL_ALGO (auto, ring, rhd; unset or empty: auto) as a WIRE_ALGO_* value: 0, or -PERR_INVALID (logged). */
int comm_algo_from_env(uint8_t *algo);
/* Reads PCCL_P2P_PORT and PCCL_ADVERTISE_ADDRESS into c; -PERR_INVALID (logged) when one is malformed or does
 * not resolve. */
int comm_addr_from_env(pcclComm_t *c);
/* The addresses to dial the master at, in order: every address of master_host as resolved now (its port, else
 * params.master_address's), or params.master_address alone. @return how many (at least 1), or -PERR_IO with
 * errno EHOSTUNREACH when the name does not resolve now (DNS may answer later: a retry's matter). */
int comm_master_addrs(const pcclComm_t *c, ccoip_socket_address_t out[ADDR_MAX_RESOLVED]);
/* "HOST:PORT" as given to pcclExtCommSetMasterHost, else params.master_address: the master in log lines. */
void comm_master_where(const pcclComm_t *c, char *out, size_t cap);
/* What HELLO and RESUME announce: the port other peers dial, and the address when one is advertised. */
void comm_addr_announce(const pcclComm_t *c, uint16_t *port, uint8_t *has_adv, ccoip_inet_address_t *adv_ip);

#endif
