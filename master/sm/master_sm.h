/*
 * master_sm.h - the master's consensus state machine (pure: events in, actions out).
 *
 * Owns: the registry of peers (registered vs accepted), each peer group's ring
 * order, shared-state revision and per-tag collective operations, and every
 * micro-consensus (accept new peers, are-peers-pending, optimize topology,
 * shared-state sync, collective initiate/complete). It performs no I/O: the
 * caller feeds connection events and decoded packets, and the state machine
 * answers through the two callbacks in msm_io_t (send a message, close a
 * connection). It never calls back into itself from a callback, never blocks
 * and is single-threaded (the master's event loop owns it).
 *
 * Illegal input (a packet that is out of state for that peer) kicks that peer:
 * a KICK message with the reason, then close. Everyone else is unaffected.
 *
 * A LEAVE is a clean departure between operations: a peer in no running
 * operation is removed at once (votes it was in go on without it, nothing is
 * aborted); a member of a running operation is removed when that operation
 * ends, reports it still owes included. The state machine then closes its
 * connection.
 */
#ifndef PCCL_MASTER_SM_H
#define PCCL_MASTER_SM_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct msm_io {
    void *ctx;
    void (*send)(void *ctx, uint64_t conn, const wire_msg_t *msg);
    /* After close the state machine has forgotten conn; do not report it again. */
    void (*close)(void *ctx, uint64_t conn, const char *reason);
} msm_io_t;

typedef struct msm msm_t;

msm_t *msm_create(msm_io_t io);
void msm_destroy(msm_t *m);

/* How long (ms of msm_set_time's clock) votes must look stuck before msm_on_tick breaks them: a
 * peer's async all-reduces send their votes from worker threads in any order, so for a moment
 * every peer can be waiting on a tag another has not voted for yet. */
#define MSM_STUCK_GRACE_MS 1000

/* How long (ms) a restarted master waits for the peers named in re-registered rings before it rebuilds
 * the run from those that came back (msm_resume.c). Peers retry every 250 ms or faster. */
#define MSM_REBUILD_MS 3000

/* A RESUME joins a rebuild only this long (ms) after the master started (its first msm_set_time), or while
 * a rebuild collects RESUMEs: peers of a run the master lost retry every 250 ms or faster, so they are back
 * within it. Any other RESUME is taken as a HELLO (RESUMED with ok 0: a newcomer). */
#define MSM_RESUME_WINDOW_MS 5000
/* Caps of a rebuild: resuming peers, the ring a RESUME may report (as many), the collectives without a
 * verdict it may list. A RESUME beyond them is taken as a HELLO. */
#define MSM_RESUME_MAX_PEERS 512
#define MSM_RESUME_MAX_OPS 256
/* Resuming peers are accepted only once their rebuilt ring is wired: each reports within this (ms; the
 * peers' default connect timeout is 10 s) or is kicked; a round that failed is tried again without the
 * peers that failed, at most this many rounds in all. */
#define MSM_REBUILD_WIRING_MS 15000
#define MSM_REBUILD_WIRING_ROUNDS 3

/* A rebuild whose named peers are all back still collects RESUMEs until floor_ms after its first one, so
 * that a RESUME naming only itself cannot end it before the run's peers (retrying every 250 ms or faster)
 * are back. Default 0. */
void msm_set_rebuild_floor(msm_t *m, uint64_t floor_ms);

/* Current time in ms (monotonic), set by the caller before each event: the state machine reads no clock. */
void msm_set_time(msm_t *m, uint64_t now_ms);
/* A peer silent for longer than this (no packet, heartbeats included) is kicked; 0 disables. */
void msm_set_peer_timeout(msm_t *m, uint64_t timeout_ms);
/* A fresh master accepts its first peers (bootstrap) only grace_ms after its first connection, so that
 * the peers of a run it lost (a restart) re-register before newcomers found a new run. Default 0. */
void msm_set_boot_grace(msm_t *m, uint64_t grace_ms);

/* Default of msm_set_vote_timeout: 10 minutes, longer than the compute between two collective calls
 * of DiLoCo-style runs (an inner loop of hundreds of steps), short enough that a hung peer whose
 * heartbeats go on does not hold a run for hours. */
#define MSM_VOTE_TIMEOUT_MS 600000
/* Default of msm_set_wiring_timeout: three times the peers' default connect timeout (10 s). */
#define MSM_WIRING_TIMEOUT_MS 30000
/* Peers of a vote's scope that have not voted when it is this old (ms) are kicked; so are members
 * that owe a sync or collective report this long after another member reported. 0: no deadline. */
void msm_set_vote_timeout(msm_t *m, uint64_t timeout_ms);
/* A peer that owes its ring-wiring report this long after ESTABLISH_P2P is kicked. 0: no deadline. */
void msm_set_wiring_timeout(msm_t *m, uint64_t timeout_ms);

/* Most relays a run announces (pccl master --relay). */
#define MSM_RELAYS_MAX 8
/* The relays of last resort (pccl master --relay; docs/relay.md) where two peers meet for an edge that can neither
 * be dialled nor punched: relays[0, n) replace the list. @return 0, or -PERR_INVALID (n > MSM_RELAYS_MAX, or
 * relays NULL with n > 0; the list is unchanged). */
int msm_set_relays(msm_t *m, const ccoip_socket_address_t *relays, uint32_t n);
/* The relays set, in the order given; *n of them (0: none). */
const ccoip_socket_address_t *msm_relays(const msm_t *m, uint32_t *n);

/* Default of msm_set_stripe: a stripe per MiB of the op at most (a smaller slice is latency-bound). */
#define MSM_STRIPE_MIN_BYTES ((uint64_t)1 << 20)
/* How a collective is striped over the connection pool (msm_collective.c): at most one stripe per
 * min_bytes of its buffer; rings whose peers all share one host are striped only with local set
 * (loopback has no window to fill and the stripes' threads would share the cores). */
void msm_set_stripe(msm_t *m, uint64_t min_bytes, int local);

/* Periodic check of silent peers, of deadlines (msm_deadline.c) and of votes that can never complete
 * (after MSM_STUCK_GRACE_MS). */
void msm_on_tick(msm_t *m);

/* A control connection was accepted from ip to the master's address local (IPv4 or IPv6; an IPv4-mapped address
 * given as IPv4); nonce is fresh and random: the state machine sends it as CHALLENGE, and the connection's
 * HELLO or RESUME must sign it (docs/protocol.md "Identity"). */
void msm_on_connect(msm_t *m, uint64_t conn, const ccoip_inet_address_t *ip, const ccoip_inet_address_t *local,
                    const uint8_t nonce[32]);
/* The port the control connection conn came from (its address is msm_on_connect's ip): with the address, the
 * peer's observed address, which punches dial (docs/nat.md). */
void msm_set_observed_port(msm_t *m, uint64_t conn, uint16_t port);
/* Whether the master's dial of conn's advertised p2p address at its registration connected (the server's
 * reachability probe): shown in /v1/status and sent with the peer lists (wire_peer_t.reach). */
void msm_on_reachable(msm_t *m, uint64_t conn, int reachable);
/* The address the server's reachability probe dials: conn's advertised p2p address once registered.
 * @return 0, or -PERR_INVALID (unknown or not registered). */
int msm_probe_addr(const msm_t *m, uint64_t conn, ccoip_socket_address_t *out);
/* RENDEZVOUS requests a peer may send per MSM_RDV_WINDOW_MS; more are refused (docs/nat.md). */
#define MSM_RDV_PER_WINDOW 32
#define MSM_RDV_WINDOW_MS 10000
/* How long after receiving a punch answer both sides dial (ms): long enough for both answers to arrive. */
#define MSM_RDV_DELAY_MS 200
/* Punch indexes per pair (docs/nat.md "Several connections per pair"): a pair's punches take 0, 1, ...,
 * MSM_PUNCH_INDEXES - 1, then 0 again; MSM_PUNCH_PAIRS pairs are remembered, the least recently used forgotten. */
#define MSM_PUNCH_INDEXES 16
#define MSM_PUNCH_PAIRS 256
/* A RENDEZVOUS_REQUEST whose punch failed (or of a pair without observed addresses) is answered with a relay
 * when the run has one (msm_set_relays): the answers carry the nonce last set here in the first 16 bytes of
 * their token, and the server mints the token both sides present from it (relay_token_make) before sending.
 * The server sets a fresh random nonce before each RENDEZVOUS_REQUEST it feeds. */
void msm_set_rendezvous_nonce(msm_t *m, const uint8_t nonce[16]);
/* Admits only peers whose public key is one of keys[0..n) (pccl master --allow-keys); keys NULL: everyone.
 * A registered peer whose key is not in a new list is kicked. @return 0, or -PERR_NOMEM (unchanged). */
int msm_set_allowed_keys(msm_t *m, const uint8_t (*keys)[32], int n);
/* A decoded peer->master packet arrived on conn. */
void msm_on_packet(msm_t *m, uint64_t conn, const wire_msg_t *msg);
/* conn closed or failed (not after msm_io_t.close for it). */
void msm_on_disconnect(msm_t *m, uint64_t conn);
/*
 * Ends the run (the master stops and the peers must not wait for another): every operation ends
 * without a verdict, every connection gets SHUTDOWN(reason) and is closed, and the state machine
 * forgets them all. Returns how many connections were told.
 */
int msm_end_run(msm_t *m, const char *reason);

/*
 * Background ("moonshot") ring search. When a quick solve is not proven
 * optimal, the state machine leaves a request: the caller takes it, runs the
 * solver with a long budget off the loop thread, and hands the ring back. It is
 * adopted at the next optimize if the group's membership did not change
 * (same epoch) and it is better; otherwise it is discarded.
 */
typedef struct msm_moonshot {
    uint32_t group;
    uint64_t epoch;
    int n;
    uint64_t *conns; /* n conns; matrix indices refer to them */
    double *bw;      /* n x n Mbit/s */
} msm_moonshot_t;
/* Moves the pending request (if any) to *out (caller frees conns and bw); returns 1 if there was one. */
int msm_take_moonshot(msm_t *m, msm_moonshot_t *out);
/* Result for a request: order[i] indexes req_conns. */
void msm_on_moonshot_result(msm_t *m, uint32_t group, uint64_t epoch, const uint64_t *req_conns, const int *order,
                            int n);

/* Longest name msm_conn_name writes, with its NUL. */
#define MSM_NAME_MAX 160
/* How the master's log lines name the peer on conn: "peer 3fa2c1d0 \"worker-3\" (10.0.0.5:48149)" (its uuid's
 * first 8 hex digits, its name when it has one, and its address, ip:p2p_port) once registered; "peer conn=N (10.0.0.5)" before its HELLO or RESUME;
 * "conn=N" when the state machine has no record of conn. Returns buf (MSM_NAME_MAX bytes). */
const char *msm_conn_name(const msm_t *m, uint64_t conn, char buf[MSM_NAME_MAX]);

/* Bytes the state machine holds for conn's RESUME while the rebuild collects (0: none): the server counts
 * them against its budget for unregistered connections until then. */
size_t msm_resume_held(const msm_t *m, uint64_t conn);
/* Whether a rebuild collects RESUMEs (msm_resume_held may be non-zero for some connection). */
int msm_resume_collecting(const msm_t *m);

/* Read-only views for the admin port and tests. */
typedef struct msm_peer_view {
    uint64_t conn;
    uint8_t uuid[16];
    const char *name;    /* as the peer announced it (may be empty); valid until the next event */
    ccoip_inet_address_t ip;
    uint16_t p2p_port;
    uint32_t group;
    int accepted;
    const char *state;   /* e.g. "idle", "vote_accept", "establishing", "sync", "collective", "resuming" */
    uint64_t revision;   /* last revision reported in a shared-state sync */
    uint64_t last_seen_ms; /* time of its last packet (msm_set_time clock) */
    ccoip_inet_address_t obs_ip; /* where its control connection came from */
    uint16_t obs_port;
    uint8_t reach;       /* WIRE_REACH_* */
    uint32_t nedges;     /* how its p2p connections were made (EDGES); valid until the next event */
    const wire_edge_t *edges;
} msm_peer_view_t;

/* The collective kinds (pcclExtCollKind_t of pccl_coll.h, 0 .. MSM_COLL_NKINDS - 1; names in msm_coll_kind_name). */
#define MSM_COLL_NKINDS 6
/* Collective operations of one kind: finished by result, and the bytes of the completed ones' data (the payload:
 * the buffer of an all-reduce, reduce-scatter or broadcast, the output of an all-gather). */
typedef struct msm_coll_stats {
    uint64_t completed, aborted, rejected, bytes;
} msm_coll_stats_t;

/* Completed collectives by the algorithm their COMMENCE named, indexed by its WIRE_ALGO_* value (RING 1, RHD 2,
 * RD 3; 0, auto, never runs); names in msm_algo_name. */
#define MSM_ALGO_SLOTS 4

typedef struct msm_stats {
    uint32_t registered, accepted, groups;
    uint64_t collectives_completed, collectives_aborted, syncs_completed, peers_kicked;
    uint64_t collectives_rejected; /* REJECT sent (parameters differ, too few peers, conflicting calls) */
    msm_coll_stats_t by_kind[MSM_COLL_NKINDS]; /* a rejection whose kind is unknown counts in the total only */
    uint64_t by_algo[MSM_ALGO_SLOTS];          /* completed collectives by algorithm (MSM_ALGO_SLOTS) */
    uint64_t peers_left; /* clean departures (LEAVE) */
    uint64_t reregistrations, rebuilds; /* RESUMEs received; runs rebuilt from them */
    /* HELLO or RESUME refused for the protocol (not kicks): another protocol version, or not pccl's magic */
    uint64_t refused_version, refused_magic;
} msm_stats_t;

int msm_peer_count(const msm_t *m);
/* The index-th peer (0 .. msm_peer_count - 1). @return 0, or -PERR_INVALID for an index out of range. */
int msm_peer_view(const msm_t *m, int index, msm_peer_view_t *out);
void msm_get_stats(const msm_t *m, msm_stats_t *out);
/* Ring of group g as conn ids; returns the count written (at most max). */
int msm_group_ring(const msm_t *m, uint32_t group, uint64_t *conns, int max);

#endif /* PCCL_MASTER_SM_H */
