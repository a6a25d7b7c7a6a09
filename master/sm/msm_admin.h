/*
 * msm_admin.h - read-only views of the state machine's groups and operations,
 * and the operator's kick, for the admin port. Loop thread only, like every
 * other msm_* call.
 */
#ifndef PCCL_MSM_ADMIN_H
#define PCCL_MSM_ADMIN_H

#include <stdint.h>

#include "sm/master_sm.h"

typedef struct msm_group_view {
    uint32_t id;
    int ring_len;
    int has_revision;
    uint64_t last_revision;
    uint64_t collectives_completed; /* completed collectives of this group */
    uint64_t reduced_bytes;         /* their buffer sizes (count x dtype size), summed, of the reducing kinds */
    msm_coll_stats_t by_kind[MSM_COLL_NKINDS]; /* its collectives by kind */
} msm_group_view_t;

#define MSM_RUN_WIDE UINT32_MAX /* group of a run-wide operation (accept round, votes of all accepted peers) */

/* One operation record in flight (msm_ops.h). */
typedef struct msm_op_view {
    const char *kind; /* "collective", "shared_state_sync", "update_topology", "peers_pending", "optimize_topology" */
    uint32_t group;   /* MSM_RUN_WIDE for the run-wide kinds */
    uint64_t tag;     /* collective only */
    const char *collective; /* collective only: its kind's name (the first voter's); NULL otherwise or unknown */
    int running;     /* 0: voting, 1: running (commenced, distributing, measuring or wiring) */
    uint64_t op_seq; /* running collective only */
    int members;     /* voters so far (voting) or members (running) */
    uint64_t started_ms; /* when its record was opened (msm_set_time's clock) */
} msm_op_view_t;

/* The name of a collective kind (pcclExtCollKind_t): "all_reduce", "broadcast", "all_gather", "all_gather_v",
 * "reduce_scatter", "barrier"; NULL for any other value. */
const char *msm_coll_kind_name(unsigned kind);

/* Fills up to max views, oldest first; returns the total number (may exceed max). */
int msm_group_views(const msm_t *m, msm_group_view_t *out, int max);
int msm_op_views(const msm_t *m, msm_op_view_t *out, int max);
/* Members (conns) of the index-th operation of msm_op_views. @return their number, or -PERR_INVALID if no such
 * operation. */
int msm_op_view_members(const msm_t *m, int index, uint64_t *conns, int max);
/*
 * The peers (conns) the index-th operation waits on: while voting, the peers of its scope (accepted peers, or the
 * group's ring) whose vote has not arrived; while running, the members that still owe their report. @return their
 * number (may exceed max), or -PERR_INVALID if no such operation.
 */
int msm_op_view_waiting(const msm_t *m, int index, uint64_t *conns, int max);

/* A measured directed link (optimize topology's bandwidth store), by conn id. */
typedef struct msm_bw_view {
    uint64_t from, to;
    double mbps;
    double rtt_us; /* the link's round trip, microseconds; 0: not measured */
} msm_bw_view_t;

int msm_bw_views(const msm_t *m, msm_bw_view_t *out, int max);

/* Kicks the peer with this uuid through the normal kick path. @return 0 if kicked, -PERR_INVALID if unknown. */
int msm_kick_uuid(msm_t *m, const uint8_t uuid[16], const char *reason);

#endif
