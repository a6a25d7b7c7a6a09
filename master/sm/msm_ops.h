/*
 * msm_ops.h - consensus operations as records, and the table of their kinds.
 *
 * Every consensus the master runs (an accept round, a peers-pending vote, an
 * optimize, a group's shared-state sync, the collective of one tag) is one
 * msm_op_t on m->ops: kind, scope (group, tag), op sequence, phase, members
 * (each with its vote, an owed report and that report's outcome) and start
 * time (msm clock). The kinds table (msm_kinds.c) says per kind which message
 * votes for it and which report in it, which kinds a voter may not be in at
 * the same time (the one-major-operation-per-peer rule, enforced only in
 * msm_ops.c), whether a vote waits or is refused while the scope's operation
 * runs, whether losing a member fails it, and its handlers. An operation ends
 * by msm_op_complete (its kind already answered) or msm_op_fail (the kind
 * tells the members, by cause); both free the record. Loop thread only.
 */
#ifndef PCCL_MSM_OPS_H
#define PCCL_MSM_OPS_H

#include <stdint.h>

#include "sm/msm_admin.h"
#include "sm/msm_coll_kinds.h"
#include "base/base.h"

typedef enum msm_op_kind {
    MSM_OP_ACCEPT,
    MSM_OP_PENDING,
    MSM_OP_OPTIMIZE,
    MSM_OP_SYNC,
    MSM_OP_COLLECTIVE,
    MSM_OP_NKINDS
} msm_op_kind_t;
#define MSM_BIT(k) (1u << (k))

typedef enum msm_phase { MSM_PHASE_VOTING, MSM_PHASE_RUNNING } msm_phase_t;

typedef enum msm_fail {
    MSM_FAIL_CONFLICT, /* peers called different operations (msm_stuck.c) */
    MSM_FAIL_MISMATCH, /* collective: the voters' parameters differ */
    MSM_FAIL_TOO_FEW,  /* collective: fewer than 2 members */
    MSM_FAIL_LOST,     /* a member left or reported failure */
    MSM_FAIL_SHUTDOWN, /* the master is going away: nothing is sent */
} msm_fail_t;

typedef struct msm_member {
    uint64_t conn;
    uint8_t voted; /* its vote arrived (the newcomers of an accept round never vote) */
    uint8_t owes;  /* running: a report is still owed */
    uint8_t ok;    /* the outcome it reported */
    uint8_t pipelined; /* collective: it voted under the op's grant and runs its ring already */
    /* shared-state sync: the offer */
    uint8_t strategy;
    uint64_t revision;
    uint32_t ntensors;
    wire_tensor_t *tensors;
    msm_coll_vote_t coll; /* collective: its COLL_INIT */
} msm_member_t;

/* A holder of a collective's grant and the vote it cast in the operation that made the grant. */
typedef struct msm_prior {
    uint64_t conn;
    msm_coll_vote_t coll;
} msm_prior_t;

typedef struct msm_op {
    msm_op_kind_t kind;
    uint32_t group; /* MSM_RUN_WIDE for the run-wide kinds */
    uint64_t tag;   /* collective; 0 otherwise */
    uint64_t op_seq; /* collective: assigned when it commences */
    msm_phase_t phase;
    int wiring; /* accept / optimize: the running phase is a wiring round (ESTABLISH_P2P sent) */
    int failed; /* a member left or a report failed: it ends failed */
    uint64_t started; /* msm clock */
    uint64_t first_report; /* running: when the tick first saw a member report while others owe (msm_deadline.c) */
    msm_member_t *members;
    int nmembers, cap_members;
    /* collective */
    uint8_t coll_kind;      /* the first voter's pcclExtCollKind_t (views, stats) */
    uint64_t payload_bytes; /* running: its data's bytes (msm_coll_payload_bytes) */
    uint8_t algo;           /* running: the algorithm its COMMENCE named (WIRE_ALGO_*; a grant: its op's) */
    uint64_t slots; /* running: its connection-pool slots (bit i = slot i), one stripe each */
    char detail[MSM_COLL_DETAIL_MAX]; /* voting: why it is rejected (COLL_REJECT's detail) */
    /* collective pre-commenced by the verdict of its tag's previous operation (msm_grant.c): op_seq and slots
     * were fixed by the grant, for these holders and votes, this ring and this world */
    int granted;
    msm_prior_t *prior;
    int nprior;
    uint64_t *grant_ring;
    int grant_ring_len;
    wire_world_t grant_world;
    /* shared-state sync */
    uint64_t target;
    struct msm_op *next;
} msm_op_t;


struct msm_peer;
struct msm_group;

typedef struct msm_kind {
    const char *name; /* in views and in docs/protocol.md section 3 */
    int run_wide;     /* scope: every accepted peer (else the accepted members of one group) */
    uint16_t vote;    /* the message that votes for it */
    uint16_t reports[2]; /* messages that report in its running phase (0: none) */
    unsigned conflicts;  /* kinds whose operation a voter may not be a member of (its own kind: same tag) */
    int refused_while_running; /* a vote while the scope's operation runs is a kick (else it waits) */
    int departure_fails;       /* losing a member in the running phase fails it */
    const char *state_voting, *state_running; /* a member's state in the peer view */
    uint64_t (*tag_of)(const wire_msg_t *vote);                 /* NULL: tag 0 */
    /* 0, or -PERR_REFUSED: the vote is consumed (p kicked, or the vote dropped) */
    int (*check)(msm_t *m, struct msm_peer *p, const wire_msg_t *vote);
    void (*on_vote)(msm_t *m, struct msm_peer *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote);
    void (*on_report)(msm_t *m, struct msm_peer *p, const wire_msg_t *msg);
    void (*progress)(msm_t *m); /* re-evaluates its operations after a departure */
    void (*fail)(msm_t *m, msm_op_t *op, msm_fail_t why); /* tells the members */
} msm_kind_t;

extern const msm_kind_t msm_kinds[MSM_OP_NKINDS];

/* The oldest operation of this kind and scope, or the one still voting; NULL if none. */
msm_op_t *msm_op_find(msm_t *m, msm_op_kind_t kind, uint32_t group, uint64_t tag);
msm_op_t *msm_op_voting(msm_t *m, msm_op_kind_t kind, uint32_t group, uint64_t tag);
msm_op_t *msm_op_open(msm_t *m, msm_op_kind_t kind, uint32_t group, uint64_t tag);
msm_member_t *msm_op_member(const msm_op_t *op, uint64_t conn);
msm_member_t *msm_op_add(msm_op_t *op, uint64_t conn); /* NULL: out of memory */
void msm_op_remove(msm_op_t *op, uint64_t conn);
int msm_op_owed(const msm_op_t *op); /* reports still owed */
/* Every peer of the scope (accepted peers, or group ring) voted; 0 for an empty scope. */
int msm_op_all_voted(msm_t *m, const msm_op_t *op);
void msm_op_complete(msm_t *m, msm_op_t *op);
void msm_op_fail(msm_t *m, msm_op_t *op, msm_fail_t why);
/* The first operation conn is a member of among the kinds in mask, or NULL. */
msm_op_t *msm_op_of_peer(msm_t *m, uint64_t conn, unsigned mask);

/* Votes and reports of every kind; kicks the peer on anything else. */
void msm_ops_on_packet(msm_t *m, struct msm_peer *p, const wire_msg_t *msg);
/* conn departed (left: by LEAVE, else lost): it leaves every operation at once (running ones of kinds that need it
 * are marked failed; a granted one still voting only when conn was lost). */
void msm_ops_on_departure(msm_t *m, uint64_t conn, int left);
/* Re-evaluates every kind's operations (after departures). */
void msm_ops_progress(msm_t *m);
/* The peer's state for its view, from the operations it is in. */
const char *msm_ops_peer_state(const msm_t *m, uint64_t conn);

/* Handlers of the kinds (msm_topology.c, msm_optimize.c, msm_shared_state.c, msm_collective.c). */
void msm_topo_on_vote(msm_t *m, struct msm_peer *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote);
void msm_topo_on_established(msm_t *m, struct msm_peer *p, const wire_msg_t *msg);
void msm_topo_progress(msm_t *m);
void msm_topo_fail(msm_t *m, msm_op_t *op, msm_fail_t why);
void msm_pending_on_vote(msm_t *m, struct msm_peer *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote);
void msm_pending_progress(msm_t *m);
void msm_pending_fail(msm_t *m, msm_op_t *op, msm_fail_t why);
void msm_opt_on_vote(msm_t *m, struct msm_peer *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote);
void msm_opt_on_result(msm_t *m, struct msm_peer *p, const wire_msg_t *msg);
void msm_opt_progress(msm_t *m);
void msm_opt_fail(msm_t *m, msm_op_t *op, msm_fail_t why);
/* A sync vote's strategy is one the master knows. @return 0, or -PERR_REFUSED (p kicked). */
int msm_ss_check(msm_t *m, struct msm_peer *p, const wire_msg_t *vote);
void msm_ss_on_vote(msm_t *m, struct msm_peer *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote);
void msm_ss_on_dist_done(msm_t *m, struct msm_peer *p, const wire_msg_t *msg);
void msm_ss_progress(msm_t *m);
void msm_ss_fail(msm_t *m, msm_op_t *op, msm_fail_t why);
uint64_t msm_coll_tag_of(const wire_msg_t *vote);
void msm_coll_on_init(msm_t *m, struct msm_peer *p, msm_op_t *op, msm_member_t *mb, const wire_msg_t *vote);
void msm_coll_on_done(msm_t *m, struct msm_peer *p, const wire_msg_t *msg);
void msm_coll_progress(msm_t *m);
void msm_coll_fail(msm_t *m, msm_op_t *op, msm_fail_t why);
/* The vote of a COLL_INIT as the master keeps it, and whether two are equal. */
msm_coll_vote_t msm_coll_vote_of(const wire_msg_t *vote);
int msm_coll_vote_equal(const msm_coll_vote_t *a, const msm_coll_vote_t *b);

/* msm_grant.c: pipelined collectives (docs/protocol.md "Pipelined collectives"). */
/* A COLL_INIT under a grant joins the granted operation when the voter holds it and votes what it voted
 * last time, with the ring and world unchanged; else the grant is revoked and the vote dropped (the peer
 * votes again on the COLL_REVOKE). A plain vote revokes its tag's grant. 0, or -PERR_REFUSED (consumed). */
int msm_coll_check_init(msm_t *m, struct msm_peer *p, const wire_msg_t *vote);
/* Fills COMPLETE's grant for c's tag (or the next tag) when c's kind may run pipelined, and records it. */
void msm_grant_issue(msm_t *m, struct msm_group *g, const msm_op_t *c, wire_msg_t *complete);
/* A granted operation still voting becomes a plain vote: COLL_REVOKE to every holder, the votes cast under
 * the grant dropped (those members vote again); why is logged. 1 when that left no vote and c was freed. */
int msm_grant_unpipeline(msm_t *m, msm_op_t *c, const char *why);
/* A granted operation failed: COLL_REVOKE to the holders that had not voted under it. */
void msm_grant_notify_idle(msm_t *m, const msm_op_t *c);
/* Revokes every grant whose ring or world changed, and aborts the granted operations whose members run under such
 * a grant (after every event). */
void msm_grants_check(msm_t *m);
/* Slots held by the group's unused grants; revokes its oldest one (0 when it has none). */
uint64_t msm_grant_slots(const msm_t *m, uint32_t group);
int msm_grant_revoke_oldest(msm_t *m, uint32_t group);
void msm_grants_free(msm_t *m);

#endif /* PCCL_MSM_OPS_H */
