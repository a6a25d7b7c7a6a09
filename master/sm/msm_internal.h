/*
 * msm_internal.h - data of the master state machine shared by its parts:
 * master_sm.c (registry, dispatch, departures), msm_ops.c and msm_kinds.c
 * (operation records and their kinds, see msm_ops.h), msm_topology.c (accept
 * rounds, pending votes), msm_optimize.c, msm_shared_state.c, msm_collective.c.
 */
#ifndef PCCL_MSM_INTERNAL_H
#define PCCL_MSM_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>

#include "sec/sec.h"
#include "sm/master_sm.h"
#include "sm/msm_ops.h"

typedef struct msm_peer {
    uint64_t conn;
    uint8_t uuid[16]; /* derived from pubkey once registered */
    uint8_t nonce[32]; /* the CHALLENGE its HELLO or RESUME must sign */
    uint8_t pubkey[32];
    char name[WIRE_NAME_MAX + 1];
    ccoip_inet_address_t ip; /* where neighbours dial it: the advertised address, else the connection's */
    ccoip_inet_address_t local_ip; /* the master's address this peer's connection reached */
    uint16_t p2p_port;
    uint32_t group;
    uint32_t pool;
    uint64_t last_seen; /* ms, msm clock */
    int hello;    /* HELLO received: registered */
    int accepted; /* phase PEER_ACCEPTED */
    /* P2P_ESTABLISHED reports still owed for rounds that ended before this peer reported: they
     * arrive later and are dropped, not taken for the next round's report. */
    int stale_reports;
    int wiring_owed;       /* it owes a P2P_ESTABLISHED report (this round's or a stale one) ... */
    uint64_t wiring_since; /* ... since its last ESTABLISH_P2P (msm_deadline.c) */
    uint64_t ss_revision; /* the revision of its last shared-state sync (views) */
    /* re-registered with a restarted master (msm_resume.c): MSM_RS_COLLECT while the rebuild waits for the
     * others, MSM_RS_WIRING while its rebuilt ring is proven; 0 otherwise */
    int resumed;
    int resume_has_rev;
    uint64_t resume_rev;
    uint8_t resume_digest[16]; /* of its last sync's entries (keys, dtypes, counts, hashes) */
    uint32_t resume_nring;
    uint8_t (*resume_ring)[16];
    uint32_t resume_nops;
    wire_op_outcome_t *resume_ops; /* its collectives of the lost master without a verdict */
    int resume_ops_lost;           /* out of memory storing them: every waiting op of its group aborts */
    int unheard; /* taken as a newcomer from a RESUME, no HEARTBEAT since: not in accept rounds yet */
    /* holds its group's revision (a completed sync, or the rebuilt one): a group whose last holder
     * is gone forgets its revision (msm_shared_state.c) */
    int holds_rev;
    /* its revision or hashes disagreed with the rebuilt group's: its next sync receives */
    int outdated;
    /* sent LEAVE while a member of a running operation: it departs when that operation ends */
    int leaving;
    /* NAT traversal (msm_rendezvous.c): where its control connection came from, whether the master could
     * dial its p2p address (WIRE_REACH_*), its RENDEZVOUS requests in the current rate window, and how its
     * p2p connections were made (its last EDGES report) */
    ccoip_inet_address_t obs_ip;
    uint16_t obs_port;
    uint8_t reach;
    uint64_t rdv_window;
    uint32_t rdv_count;
    uint32_t nedges;
    wire_edge_t *edges;
} msm_peer_t;

typedef struct msm_bw {
    uint64_t from, to; /* conns */
    double mbps;
    double rtt_us; /* the probe's least round trip, microseconds; 0: not measured */
} msm_bw_t;

typedef struct msm_group {
    uint32_t id;
    uint64_t *ring; /* accepted conns in ring order */
    int ring_len, ring_cap;
    int wired; /* p2p connections match the ring */
    int has_revision;
    uint64_t last_revision;
    uint64_t collectives_completed; /* of this group, for its rates on the admin port */
    uint64_t reduced_bytes;         /* sum of the buffer sizes (count x dtype) of its completed reducing collectives */
    msm_coll_stats_t by_kind[MSM_COLL_NKINDS]; /* its collectives by kind */
    uint64_t epoch;       /* bumped on every membership change of the ring */
    uint64_t *moon_conns; /* background search result: a ring of these conns (NULL: none) */
    int moon_n;
    uint64_t moon_epoch;
    uint64_t last_tag; /* the tag of its last completed collective, when has_last_tag (msm_grant.c) */
    int has_last_tag;
} msm_group_t;

struct msm {
    msm_io_t io;
    msm_peer_t *peers;
    int npeers, cap_peers;
    msm_group_t *groups;
    int ngroups, cap_groups;
    msm_op_t *ops; /* operations in flight, oldest first (msm_ops.h) */
    msm_op_t *grants; /* collectives pre-commenced by a verdict that no member voted for yet (msm_grant.c) */
    msm_bw_t *bw; /* bandwidth store: measured directed pairs, with their round trips */
    int nbw, cap_bw;
    uint64_t next_op_seq;
    int in_reevaluate, reevaluate_pending;
    uint64_t now, peer_timeout;
    uint64_t vote_timeout, wiring_timeout; /* msm_deadline.c; 0: none */
    uint64_t stripe_min_bytes; /* msm_set_stripe */
    int stripe_local;
    int stuck_seen;       /* the last tick found every peer blocked in votes that cannot complete ... */
    uint64_t stuck_since; /* ... continuously since this time (msm_stuck.c) */
    msm_stats_t stats;
    msm_moonshot_t moon_req; /* pending request for a background search (moon_req.n == 0: none) */
    struct { uint64_t reporter, target; } *reports; /* "could not reach" reports between ring neighbours */
    int nreports, cap_reports;
    int rebuilding;           /* MSM_RB_COLLECT: peers re-register with this (restarted) master; MSM_RB_WIRING */
    uint64_t started;         /* the first msm_set_time: the master's start (the restart window opens) */
    int started_set;
    int nresuming;            /* peers in MSM_RS_COLLECT */
    uint64_t resume_ring_total; /* ring entries they reported */
    struct msm_rewire *rewire; /* rebuilt rings being proven, one per group (msm_resume.c) */
    int nrewire;
    int in_rebuild;
    int rebuilt_peers;        /* accepted by the rebuild so far */
    uint64_t boot_grace, born; /* msm_set_boot_grace; time of the first connection (0: none yet) */
    int booting;               /* the grace has not passed yet */
    uint64_t rebuild_started; /* time of the first RESUME */
    int allow_on;             /* msm_set_allowed_keys: only these public keys may register */
    ident_keys_t allow;
    uint64_t rebuild_floor;   /* msm_set_rebuild_floor */
    uint8_t rdv_nonce[16];    /* msm_set_rendezvous_nonce: the next relay pair's */
    ccoip_socket_address_t relays[MSM_RELAYS_MAX]; /* msm_set_relays */
    uint32_t nrelays;
    struct {
        uint64_t lo, hi; /* the pair's control connections, lo < hi (0: a free slot) */
        uint64_t used;   /* punch_uses when last given an index: the least recent is replaced */
        uint8_t next;    /* the index its next punch gets */
    } punch_pairs[MSM_PUNCH_PAIRS];
    uint64_t punch_uses;
};

msm_peer_t *msm_find(msm_t *m, uint64_t conn);
/* RENDEZVOUS from a registered peer p (msm_rendezvous.c): answers both sides, or p alone with a refusal. */
void msm_on_rendezvous(msm_t *m, msm_peer_t *p, const wire_msg_t *msg);
/* What the ring solver takes a relayed edge's measured bandwidth for (docs/nat.md "Edge kinds"): a little less,
 * so that of rings equal otherwise it picks the one with fewer relayed edges. */
#define MSM_RELAYED_BW_FACTOR 0.9
/* Scales the entries of bw (n x n, Mbit/s, indexed by g's ring positions) of pairs either side reported
 * relayed (EDGES) by MSM_RELAYED_BW_FACTOR. */
void msm_penalize_relayed(msm_t *m, const msm_group_t *g, double *bw, int n);
/* EDGES from a registered peer p: replaces what it reported before. */
void msm_on_edges(msm_t *m, msm_peer_t *p, const wire_msg_t *msg);
/* p's name for log lines (see msm_conn_name); returns buf. */
const char *msm_peer_name(const msm_peer_t *p, char buf[MSM_NAME_MAX]);
/* Checks the identity of a HELLO or RESUME on *pp (msm_identity.c): its signature over the connection's
 * challenge, the allow-list, and for a RESUME that uuid is the key's. A registered peer with the same
 * uuid is a stale connection of the same peer: it is kicked and the newcomer takes its place. Then
 * records key, uuid and name. @return 0 (*pp updated: the table may have moved), or -PERR_REFUSED (*pp
 * kicked). */
int msm_check_identity(msm_t *m, msm_peer_t **pp, uint16_t type, const wire_identity_t *id, const uint8_t *uuid);
/* Checks a HELLO's or RESUME's magic, version and p2p port. @return 0, or -PERR_REFUSED (p kicked). */
int msm_check_hello(msm_t *m, msm_peer_t *p, uint32_t magic, uint16_t version, uint16_t p2p_port);
/* Marks p registered (group, p2p port, pool size clamped to [1, 64]). */
/* How `to` dials q: q's address and p2p port, q's loopback address replaced by the master's address as `to`
 * reaches it when `to` is elsewhere (peers on the master's host and peers on others in one run). */
wire_peer_t msm_dial_entry(const msm_peer_t *to, const msm_peer_t *q);
/* adv: the address the peer's neighbours dial instead of the one its connection came from (NULL: that one). */
void msm_register(msm_t *m, msm_peer_t *p, uint32_t group, uint16_t p2p_port, uint32_t pool,
                  const ccoip_inet_address_t *adv);
msm_group_t *msm_group(msm_t *m, uint32_t id, int create);
void msm_send(msm_t *m, uint64_t conn, const wire_msg_t *msg);
void msm_kick(msm_t *m, msm_peer_t *p, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* msm_kick for a connection refused before it registered: counted in *counter (a refusal), not as a kick. */
void msm_refuse(msm_t *m, msm_peer_t *p, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void msm_world(const msm_t *m, uint32_t group, wire_world_t *w);
/* Appends conn to g's ring. @return 0, or -PERR_NOMEM. */
int msm_ring_append(msm_group_t *g, uint64_t conn);

/* Removes the peers that sent LEAVE and are in no running operation any more (after every event). */
void msm_finish_leaves(msm_t *m);

/* A peer registered (HELLO): with nobody accepted it bootstraps at once. */
void msm_topo_on_registered(msm_t *m);
/* Starts the wiring round of optimize op for the current rings (accepted peers only). */
void msm_topo_start_rewire(msm_t *m, msm_op_t *op);
/* A wiring round ends early: the reports its members still owe are dropped when they arrive. */
void msm_topo_abandon_reports(msm_t *m, msm_op_t *op);

double msm_bw_get(const msm_t *m, uint64_t from, uint64_t to);
void msm_opt_forget_conn(msm_t *m, uint64_t conn);
void msm_report_unreachable(msm_t *m, msm_peer_t *reporter, const uint8_t uuid[16]);
/* Forgets reports involving conn (departure), or of group g's members (a collective of g succeeded). */
void msm_reports_forget_conn(msm_t *m, uint64_t conn);
void msm_reports_forget_group(msm_t *m, uint32_t group);
/* Fails votes that can never complete because peers called different operations (msm_stuck.c). */
void msm_check_stuck(msm_t *m);
/* Kicks the peers an operation waits on past the vote or wiring deadline (msm_deadline.c). */
void msm_check_deadlines(msm_t *m);

enum { MSM_RS_COLLECT = 1, MSM_RS_WIRING = 2 };
enum { MSM_RB_COLLECT = 1, MSM_RB_WIRING = 2 };
void msm_on_resume(msm_t *m, msm_peer_t *p, const wire_msg_t *msg);
/* A resumed peer reported its rebuilt ring's wiring. */
void msm_resume_on_established(msm_t *m, msm_peer_t *p, const wire_msg_t *msg);
/* p is being removed: forgets it in the rebuild. */
void msm_resume_on_departure(msm_t *m, msm_peer_t *p);
/* Whether the resumed peers of group are being wired into its rebuilt ring. */
int msm_resume_wiring(const msm_t *m, uint32_t group);
/* Frees the rebuild's state (msm_destroy). */
void msm_resume_free(msm_t *m);
/* Whether the boot grace still holds back the first accept round. */
int msm_booting(const msm_t *m);
/* Moves the rebuild along: ends the collection once every named peer is back (checked on every call when the
 * reported rings are small, else only from_tick) or MSM_REBUILD_MS passed; ends wiring rounds. */
void msm_rebuild_check(msm_t *m, int from_tick);
void msm_resume_forget(msm_peer_t *p);

#endif
