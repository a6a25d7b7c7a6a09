/*
 * api/ - the top of the library: the communicator's lifecycle (create, connect, destroy), the reader
 * thread that routes the master's messages to operations and to the inbox, the heartbeat thread, ring
 * wiring, the reconnect to a restarted master (resume.c), leaving, and the run-key extensions.
 *
 * Owns the communicator's threads (reader, heartbeat); destroy joins them after the p2p layer and the
 * operations are stopped. Everything below (comm/, p2p/, op/, ss/) is reached from here, never the other way.
 */
#ifndef PCCL_API_H
#define PCCL_API_H

#include "comm/comm.h"

/*
 * Cancelling is this one call: it ends every control wait of the communicator (c->waits) and aborts every
 * operation, with reason:
 *  -PERR_CANCELLED  pcclDestroyCommunicator: for good (shutting_down is set; a wait opened afterwards starts
 *                   cancelled);
 *  -PERR_RESTARTED  the master connection was lost (the reader, holding send_mu): in the same critical section
 *                   the peer moves to PEER_MASTER_DOWN, the epoch moves and the inbox is emptied, so the waits of
 *                   the lost connection end and those of the next one do not;
 *  -PERR_LOST       the run ended for this peer (the reader's end: the master closed, shut the run down, or did
 *                   not come back): the peer moves to PEER_ENDED.
 * A leave is not this call: it ends the control waits (comm_stop) but lets running operations finish, and aborts
 * them only past its grace (pcclExtLeave).
 */
void comm_cancel_all(pcclComm_t *c, int reason);
/* Re-establishes a lost master connection (resume.c); 0 when back, else the run is over for this peer:
 * -PERR_TIMEOUT (the window passed), -PERR_REFUSED, -PERR_CANCELLED (leave or destroy). Called by the reader
 * thread only. */
int comm_reconnect(pcclComm_t *c);
/* Establishes ring connections for a new peer list (ESTABLISH_P2P); 0 on success. Gives up when the
 * round's verdict arrived or the master is lost. */
int comm_establish(pcclComm_t *c, const wire_msg_t *establish);
/* The same while the master is down (the rebuild of a restarted master, resume.c): gives up only on shutdown. */
int comm_establish_resuming(pcclComm_t *c, const wire_msg_t *establish);

#endif
