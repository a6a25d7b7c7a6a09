/*
 * pccl_leave.h - extension calls beyond PCCL 1.0's API (pccl.h): leaving a
 * run cleanly, how a communicator's part in the run ended, and the result a
 * run that was shut down returns.
 *
 * A peer that stops without leaving (exit, crash, lost network) is a
 * departure: a collective it is in fails for every member (they retry). A
 * peer that calls pcclExtLeave departs without failing anyone's collective:
 * the master removes it from its group's ring, and the others' next
 * operations run without it (docs/protocol.md, "Leave").
 *
 * A master stopped with `pccl shutdown` (or `pccl master --on-signal end-run`)
 * ends the run: it sends SHUTDOWN to every peer, whose calls then return
 * pcclExtRunShutDown and which never reconnect. A master that merely dies
 * keeps the run: its peers reconnect for PCCL_MASTER_RECONNECT_MS.
 */
#ifndef PCCL_LEAVE_H
#define PCCL_LEAVE_H

#include "pccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The result every call of a communicator returns once its master ended the run (SHUTDOWN): the run is
 * over, not lost; nothing reconnects. Not a PCCL 1.0 value (those are 0..12); it lies within the range
 * of PCCL 1.0's enumeration, so C++ callers may hold it in a pcclResult_t too. pcclResultString names it.
 */
#define pcclExtRunShutDown ((pcclResult_t)15)

/** How this peer's part in the run ended. */
typedef enum pcclExtDeparture_t {
    pcclExtInRun = 0,      /**< still in the run, or not connected yet */
    pcclExtLeft = 1,       /**< pcclExtLeave succeeded */
    pcclExtKicked = 2,     /**< the master removed this peer (a timeout, an out-of-state message, an admin's kick) */
    pcclExtMasterLost = 3, /**< the master was lost (past PCCL_MASTER_RECONNECT_MS) or refused this peer */
    pcclExtShutDown = 4,   /**< the master ended the run (SHUTDOWN: `pccl shutdown`); calls return pcclExtRunShutDown */
} pcclExtDeparture_t;

/**
 * Leaves the run, and ends every wait of the communicator; callable from any thread at any time after
 * pcclConnect began (a signal-handling thread may call it while another thread is inside a call):
 *  - connected: tells the master (LEAVE) and waits until it has removed this peer and closed the
 *    connection, at most PCCL_EXT_LEAVE_GRACE_MS. Votes in flight are withdrawn (the master decides
 *    them without this peer; the calls return pcclMasterConnectionFailed); a collective whose ring
 *    runs finishes first, so nobody's collective fails. Past the grace, what still runs here is
 *    aborted and the connection closed: a departure, as if the process had exited.
 *  - waiting for a lost master (PCCL_MASTER_RECONNECT_MS): stops reconnecting at once; a restarted
 *    master rebuilds the run without this peer.
 *  - inside pcclConnect (connecting, retrying, waiting for the welcome): cancels it; pcclConnect
 *    returns pcclMasterConnectionFailed.
 * A shared-state transfer in progress stops (this peer's own sync fails; a peer fetching from it
 * takes the rest from the other holders). Afterwards the communicator's calls return
 * pcclInvalidUsage or pcclMasterConnectionFailed; pcclDestroyCommunicator follows.
 * @return pcclSuccess; pcclInvalidArgument; pcclNotInitialized; pcclInvalidUsage (pcclConnect was not
 *         called, or a leave was already asked for); pcclMasterConnectionFailed or pcclExtRunShutDown
 *         (the run had already ended for this peer).
 */
PCCL_EXPORT pcclResult_t pcclExtLeave(pcclComm_t *communicator);

/** How long pcclExtLeave waits for the master to remove a leaving peer before it departs on its own. */
#define PCCL_EXT_LEAVE_GRACE_MS 1200

/**
 * How this peer's part in the run ended (pcclExtInRun while it goes on): tells a program whose call
 * returned pcclMasterConnectionFailed whether it left, the master kicked it or was lost.
 * @return pcclSuccess; pcclInvalidArgument.
 */
PCCL_EXPORT pcclResult_t pcclExtGetDeparture(const pcclComm_t *communicator, pcclExtDeparture_t *departure_out);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_LEAVE_H */
