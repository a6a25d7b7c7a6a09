/*
 * msm_kinds.c - the table of operation kinds (see msm_ops.h): per kind, the
 * message that votes for it, the reports it takes, what a voter may not be in
 * at the same time, what a vote during the running phase does, whether a
 * departure fails it, and its handlers. docs/protocol.md section 3's
 * conflict table is checked against this table (tests/unit/test_msm_conflicts.c).
 */
#include "sm/msm_internal.h"

#define MAJOR (MSM_BIT(MSM_OP_ACCEPT) | MSM_BIT(MSM_OP_OPTIMIZE) | MSM_BIT(MSM_OP_SYNC) | MSM_BIT(MSM_OP_COLLECTIVE))

const msm_kind_t msm_kinds[MSM_OP_NKINDS] = {
    [MSM_OP_ACCEPT] = {.name = "update_topology",
                       .run_wide = 1,
                       .vote = C2M_UPDATE_TOPOLOGY,
                       .reports = {C2M_P2P_ESTABLISHED},
                       .conflicts = MAJOR,
                       .refused_while_running = 1,
                       .departure_fails = 1,
                       .state_voting = "vote_accept",
                       .state_running = "establishing",
                       .on_vote = msm_topo_on_vote,
                       .on_report = msm_topo_on_established,
                       .progress = msm_topo_progress,
                       .fail = msm_topo_fail},
    /* May overlap everything: a thread votes it while collectives run (PCCL 1.0's thread rules). */
    [MSM_OP_PENDING] = {.name = "peers_pending",
                        .run_wide = 1,
                        .vote = C2M_PEERS_PENDING,
                        .conflicts = MSM_BIT(MSM_OP_PENDING),
                        .state_voting = "vote_pending",
                        .state_running = "vote_pending",
                        .on_vote = msm_pending_on_vote,
                        .progress = msm_pending_progress,
                        .fail = msm_pending_fail},
    /* Its wiring round's P2P_ESTABLISHED reports go through the accept kind's handler (one wiring code). */
    [MSM_OP_OPTIMIZE] = {.name = "optimize_topology",
                         .run_wide = 1,
                         .vote = C2M_OPTIMIZE_TOPOLOGY,
                         .reports = {C2M_BENCH_RESULT},
                         .conflicts = MAJOR,
                         .refused_while_running = 1,
                         .departure_fails = 1,
                         .state_voting = "vote_optimize",
                         .state_running = "optimize",
                         .on_vote = msm_opt_on_vote,
                         .on_report = msm_opt_on_result,
                         .progress = msm_opt_progress,
                         .fail = msm_opt_fail},
    /* A vote while the group distributes (a refused peer retrying) waits for the next sync; the
     * members still distributing finish without a member that left (its fetchers report failure). */
    [MSM_OP_SYNC] = {.name = "shared_state_sync",
                     .vote = C2M_SYNC_SHARED_STATE,
                     .reports = {C2M_SS_DIST_DONE},
                     .conflicts = MAJOR,
                     .state_voting = "sync",
                     .state_running = "sync",
                     .check = msm_ss_check,
                     .on_vote = msm_ss_on_vote,
                     .on_report = msm_ss_on_dist_done,
                     .progress = msm_ss_progress,
                     .fail = msm_ss_fail},
    [MSM_OP_COLLECTIVE] = {.name = "collective",
                           .vote = C2M_COLL_INIT,
                           .reports = {C2M_COLL_DONE},
                           .conflicts = MAJOR,
                           .refused_while_running = 1,
                           .departure_fails = 1,
                           .state_voting = "collective",
                           .state_running = "collective",
                           .tag_of = msm_coll_tag_of,
                           .check = msm_coll_check_init,
                           .on_vote = msm_coll_on_init,
                           .on_report = msm_coll_on_done,
                           .progress = msm_coll_progress,
                           .fail = msm_coll_fail},
};
