/*
 * pccl_leave.h - extension calls beyond PCCL 1.0's API (pccl.h): leaving a
 * run cleanly, and how a communicator's part in the run ended.
 *
 * A peer that stops without leaving (exit, crash, lost network) is a
 * departure: a collective it is in fails for every member (they retry). A
 * peer that calls pcclExtLeave between operations departs without failing
 * anyone's operation: the master removes it from its group's ring, and the
 * others' next operations run without it (docs/protocol.md, "Leave").
 */
#ifndef PCCL_LEAVE_H
#define PCCL_LEAVE_H

#include "pccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How this peer's part in the run ended. */
typedef enum pcclExtDeparture_t {
    pcclExtInRun = 0,      /**< still in the run, or not connected yet */
    pcclExtLeft = 1,       /**< pcclExtLeave succeeded */
    pcclExtKicked = 2,     /**< the master removed this peer (a timeout, an out-of-state message, an admin's kick) */
    pcclExtMasterLost = 3, /**< the master was lost (past PCCL_MASTER_RECONNECT_MS) or refused this peer */
} pcclExtDeparture_t;

/**
 * Leaves the run: tells the master this peer is leaving, and waits (at most PCCL_CONNECT_TIMEOUT_MS)
 * until the master has removed it and closed the connection. A phase call: every collective must
 * have been awaited, so no operation of this peer is in flight and none of the others' is aborted.
 * Afterwards the communicator's calls return pcclInvalidUsage; pcclDestroyCommunicator follows.
 * @return pcclSuccess; pcclInvalidArgument; pcclNotInitialized; pcclPendingAsyncOps (collectives
 *         not awaited: nothing was sent); pcclInvalidUsage (not connected, or already left);
 *         pcclMasterConnectionFailed (the master is gone: this peer is out of the run anyway).
 */
PCCL_EXPORT pcclResult_t pcclExtLeave(pcclComm_t *communicator);

/**
 * How this peer's part in the run ended (pcclExtInRun while it goes on): tells a program whose call
 * returned pcclMasterConnectionFailed whether the master kicked it or was lost.
 * @return pcclSuccess; pcclInvalidArgument.
 */
PCCL_EXPORT pcclResult_t pcclExtGetDeparture(const pcclComm_t *communicator, pcclExtDeparture_t *departure_out);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_LEAVE_H */
