/*
 * p2p/ - peer-to-peer connections of a communicator: the connection table and its acceptor thread (p2p.h),
 * the greeting every p2p stream opens with (p2p_hello.h), the bandwidth probe (bandwidth.h), and connections
 * through a relay of last resort (relay_client.h). The acceptor
 * thread owns the listening socket; the table is guarded by c->p2p.mu. Shared-state requests are handed to
 * c->p2p.serve_ss, which the layer above sets. Depends on comm/, sec/ and base/.
 *
 * Each peer listens, over IPv4 and IPv6, on an ephemeral port or PCCL_P2P_PORT, announced to the master (or
 * the advertised one: comm_addr.c). Ring
 * connections are keyed by (neighbour uuid, direction, slot): a peer opens TX
 * connections to its ring successor, and accepts RX connections from its
 * predecessor; slot k serves one all-reduce at a time (the master assigns
 * slots). Shared-state requests arrive on the same port with their own kind.
 * Connections are created on demand and dropped after any failure, so a
 * retry always starts on fresh streams. A TX connection may own a pipe
 * through which large all-reduces splice the caller's pages into the socket
 * (p2p_tx_pipe); it is closed with the connection.
 */
#ifndef PCCL_P2P_H
#define PCCL_P2P_H

#include "base/base.h"
#include "comm/comm.h"
#include "p2p/bandwidth.h"
#include "p2p/p2p_hello.h"
#include "p2p/relay_client.h"

/* Listens for p2p connections and starts the acceptor: 0, -PERR_IO (cannot listen; errno says why) or
 * -PERR_FAILED (no wake pipe or thread). */
int p2p_start(pcclComm_t *c);
void p2p_stop(pcclComm_t *c);
/* Replaces the known peers (own group) and closes connections to peers no longer in it. */
void p2p_set_peers(pcclComm_t *c, const wire_peer_t *peers, uint32_t n);
/* Address of a known peer; returns 0 and fills out, or -PERR_INVALID (not a known peer). */
int p2p_lookup(pcclComm_t *c, const uint8_t uuid[16], wire_peer_t *out);
/* TX connection to uuid for slot, connecting if needed (connect and handshake bounded by
 * timeout_ms; cancelling w, which may be NULL, ends them early: its eventfd joins their polls). NULL on failure. */
p2p_conn_t *p2p_get_tx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot, int timeout_ms, const pwait_t *w);
/* The live TX connection to uuid for slot when there is one (a reference, as p2p_get_tx), else NULL: never
 * connects. */
p2p_conn_t *p2p_find_tx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot);
/* RX connection from uuid for slot, waiting for it to arrive up to timeout_ms, or until w (may be NULL) is
 * cancelled (whoever cancels it calls p2p_wake) or the communicator is destroyed. NULL on failure. */
p2p_conn_t *p2p_get_rx(pcclComm_t *c, const uint8_t uuid[16], uint32_t slot, int timeout_ms, const pwait_t *w);
/* Wakes every p2p_get_rx so that it looks at its wait again (after a cancel; takes p2p.mu). */
void p2p_wake(pcclComm_t *c);
/* The TX connection's pipe for zero-copy ring sends, created on first use ({read, write}); NULL
 * when no pipe can be made (the ring then copies with send()). Closed with the connection. */
const int *p2p_tx_pipe(p2p_conn_t *conn);
/* Applies the unsent-bytes cap (TCP_NOTSENT_LOWAT, PCCL_LOCAL_NOTSENT_BYTES) to a TX connection
 * when its successor is on this host; otherwise restores the kernel's default. Cheap when nothing
 * changes. */
void p2p_pace_tx(pcclComm_t *c, p2p_conn_t *tx);
/* A same-host edge where the host has at least two CPUs per local peer splices from this size
 * (bytes) when PCCL_ZEROCOPY_MIN_BYTES is unset: the smallest size at which spliced sends won
 * consistently with cores to spare (bench/analysis.md, "A machine with cores to spare"). */
#define P2P_SPLICE_SPARE_MIN_BYTES (4L << 20)
/* A same-host edge of a one-way kind (P2P_SPLICE_ONE_WAY) splices from this size (bytes) while the
 * host has a CPU per local peer, when PCCL_ZEROCOPY_MIN_BYTES is unset (bench/analysis.md,
 * "Broadcast, all-gather and reduce-scatter"). */
#define P2P_SPLICE_ONE_WAY_MIN_BYTES (16L << 20)
/* How an op's kind may splice its sends (pccl_op_t.splices). A one-way kind (broadcast, all-gather)
 * sends bytes it never reads again and its sender may do more work per byte than its receiver (an
 * out-of-place root copies its input besides sending it), so handing the send's copy to the
 * receiver pays from a smaller size than in the all-reduce, whose members are alike. */
enum { P2P_SPLICE_NEVER = 0, P2P_SPLICE_ALL_REDUCE = 1, P2P_SPLICE_ONE_WAY = 2 };
/* The smallest op, in bytes, whose sends on an edge splice for a kind that splices `how`; -1: none.
 * Set, PCCL_ZEROCOPY_MIN_BYTES applies as given to every edge. Unset: a remote edge 48 MiB; a
 * same-host edge 4 MiB (P2P_SPLICE_SPARE_MIN_BYTES) while the host has at least twice as many CPUs
 * as local peers, 48 MiB (16 MiB one way) while it has at least as many, never while the peers
 * outnumber the CPUs (copying is faster there: bench/analysis.md, "Large all-reduces"). how
 * P2P_SPLICE_NEVER: the all-reduce's threshold (a kind that copies still bounds its receive
 * buffers there, p2p_bound_rx). */
long p2p_splice_min(pcclComm_t *c, int same_host, int how);
/* Whether an op of `bytes` bytes whose kind splices `how` splices its sends on tx (p2p_tx_pipe):
 * never for P2P_SPLICE_NEVER or on an encrypted link, else from p2p_splice_min of its edge. */
int p2p_splices(pcclComm_t *c, const p2p_conn_t *tx, size_t bytes, int how);
/* Bounds the receive buffer of a ring stream from a peer on this host (net_bound_local_rcvbuf) before
 * an op of `bytes` bytes whose kind splices `how` (its predecessor splices its sends): at or above
 * the same-host p2p_splice_min, no encrypted link, and the host's peers no more than its CPUs.
 * Smaller ops keep the kernel's autotuned window until then; SO_RCVBUF cannot hand the buffer back
 * to autotuning, so the stream keeps the bound from that op on. */
void p2p_bound_rx(pcclComm_t *c, p2p_conn_t *rx, size_t bytes, int how);
/* Whether the group's peers on this host (this one included) are no more than its CPUs: the
 * condition for the bounded receive buffer of same-host ring streams (p2p_bound_rx) and, by default,
 * for spliced sends to a peer on this host (p2p_splice_min). */
int p2p_local_peers_fit(pcclComm_t *c);
/* NAT traversal (p2p_punch.c, docs/nat.md). Dials peer directly (unless the master found it unreachable) and,
 * when that connect fails, through a rendezvous of the master (a punch); then introduces this side as
 * p2p_dial does. @return p2p_dial's codes; *how the edge's kind (WIRE_EDGE_*). */
int p2p_dial_peer(pcclComm_t *c, const wire_peer_t *peer, const p2p_intro_t *me, int timeout_ms,
                  const net_cancel_t *cancel, sec_link_t **link, int *how, char *err, size_t errlen);
/* The reader thread's routing of M2C_RENDEZVOUS: 1 (taken and freed: a target's half started, or a waiting
 * dialer answered), 0 (another message). */
int p2p_route_rendezvous(pcclComm_t *c, wire_msg_t *msg);
/* The acceptor's check of a new connection from `from`: 1 when it is a punch this peer waits for as dialer
 * (fd now belongs to that dial). */
int p2p_punch_claim(pcclComm_t *c, const ccoip_socket_address_t *from, int fd);
/* The bandwidth probe of optimize topology towards peer (bw_measure, this peer sending for duration_ms), its
 * streams dialled by p2p_dial_peer: punched and relayed edges are measured as they are. */
int p2p_measure(pcclComm_t *c, const wire_peer_t *peer, int duration_ms, pwait_t *w, bw_result_t *out);
/* Sends EDGES (how each p2p connection was made) to the master in epoch (after a ring wiring); best effort. */
void p2p_report_edges(pcclComm_t *c, unsigned epoch);
/* Drops a reference; kill also removes it from the table and closes the socket. */
void p2p_release(pcclComm_t *c, p2p_conn_t *conn, int kill);

/* The acceptor (p2p_accept.c): limits on what arrives at the p2p port. The master assigns ring
 * slots below min(pool, 64) (msm_collective.c). A peer's port receives probes only (the master's
 * probes send to the peer measured), of at most P2P_BENCH_MAX_MS. */
#define P2P_SLOTS_MAX 64
#define P2P_SERVERS_MAX 16 /* shared-state transfers and bandwidth probes served at once; more wait */
#define P2P_BENCH_MAX_MS 2000
/* Starts the acceptor thread on c->p2p.listen_fd (c->p2p.acceptor). @return 0 or -PERR_FAILED (no thread). */
int p2p_acceptor_start(pcclComm_t *c);
/* Registers a connected and greeted stream (the table takes fd and link); a stream of the same
 * neighbour, direction and slot is replaced: the other side reconnected, its old stream is dead. */
void p2p_insert(pcclComm_t *c, int fd, sec_link_t *link, const uint8_t uuid[16], int dir, uint32_t slot, int how);


#endif
