/*
 * allreduce.h - what the communicator calls in op/: the operations of every kind (all-reduce and pccl_coll.h's
 * collectives; the names keep the all-reduce's, the first kind) (internal).
 *
 * An operation runs on the caller's thread (the blocking calls) or on a worker of the communicator's pool (the
 * async calls, whose launch only queues it): it votes COLL_INIT, waits for COMMENCE (which names the ring, the
 * ranks and the connection slots), moves its data, reports COLL_DONE and keeps a backup of what it wrote of the
 * caller's buffer (in place) until the master confirms COMPLETE for everyone; on ABORT (any member failed) the
 * buffer is restored, so a retry starts from the same input.
 */
#ifndef PCCL_ALLREDUCE_H
#define PCCL_ALLREDUCE_H

#include "comm/comm.h"

/* Called by the control reader: takes msg if it belongs to an operation (returns 1). */
int allreduce_route(pcclComm_t *c, wire_msg_t *msg);
/* Cancels every operation's wait with reason (-PERR_RESTARTED: the master connection was lost; -PERR_LOST:
 * for good; -PERR_CANCELLED: destroy, or a leave past its grace) and wakes the rings waiting for a connection.
 * The _locked variant (caller holds mu: comm_cancel_all) leaves that wake-up (p2p_wake) to the caller. */
void allreduce_abort_all(pcclComm_t *c, int reason);
void allreduce_abort_all_locked(pcclComm_t *c, int reason);
/* For a RESUME (caller holds mu): the all-reduces of the lost master (the epoch before the current
 * one) that have no verdict: finished 1 for those whose ring finished (they wait for the verdict),
 * 0 for those that commenced and did not finish. *out is malloc'd (NULL when none).
 * @return the count, or -PERR_NOMEM. */
int allreduce_unsettled_locked(pcclComm_t *c, wire_op_outcome_t **out);
/* The registration was answered and no verdict came for an op still waiting: it restores. */
void allreduce_settle_unanswered(pcclComm_t *c);
/* Operations launched and not yet awaited (no shared-state sync or topology change while there are any). */
int comm_ops_outstanding(pcclComm_t *c);
/* Awaits every async operation, then stops and joins the worker pool (destroy). */
void allreduce_join_all(pcclComm_t *c);

#endif
