/*
 * leave.c - pcclExtLeave and pcclExtGetDeparture (pccl_leave.h). A leave may
 * come from any thread while another is inside a call (a signal-handling
 * thread of `pccl join`): it first marks the communicator stopping, which ends
 * every wait that could last (connects, the reconnect loop, waits for a lost
 * master, shared-state transfers), then, when the master connection is up,
 * sends LEAVE. The master removes the peer between operations and closes the
 * control connection; the reader takes that close as the end of the run (no
 * reconnect, because `leaving` is set before LEAVE goes out) and every wait
 * on the master ends with it. Votes are no longer sent once `leaving` is set
 * (comm_send), so the master never sees a vote after LEAVE.
 */
#include <sys/socket.h>

#include "op/op.h"
#include "api/api.h"
#include "base/base.h"
#include "pccl_leave.h"

/* Waits until the reader saw the master connection end, at most until deadline (net_now_ms). */
static int await_close(pcclComm_t *c, uint64_t deadline) {
    pthread_mutex_lock(&c->mu);
    /* Not one of the communicator's waits (the leave ended those): the reader's end wakes c->cv. */
    while (!comm_ended(c) && pwait_cond_sleep(&c->cv, &c->mu, deadline) == 0) {
    }
    int closed = comm_ended(c);
    pthread_mutex_unlock(&c->mu);
    return closed;
}

/* Ends this peer's side of the master connection (the reader then stops: leaving or stopping is set). */
static void close_master(pcclComm_t *c) {
    pthread_mutex_lock(&c->send_mu);
    if (c->master_fd >= 0) shutdown(c->master_fd, SHUT_RDWR);
    pthread_mutex_unlock(&c->send_mu);
}

pcclResult_t pcclExtLeave(pcclComm_t *c) {
    if (!pccl__initialized()) return pcclNotInitialized;
    if (!c) return pcclInvalidArgument;
    /* Decided under send_mu: the reader re-registers with a restarted master, and pcclConnect
     * publishes its connection, under it too, so LEAVE goes out exactly when the master knows us. */
    pthread_mutex_lock(&c->send_mu);
    peer_state_t was = comm_state(c);
    if (was == PEER_CREATED || was == PEER_LEAVING || atomic_load(&c->stopping)) {
        pthread_mutex_unlock(&c->send_mu);
        return pcclInvalidUsage;
    }
    if (was == PEER_ENDED) {
        pthread_mutex_unlock(&c->send_mu);
        return comm_lost_result(c);
    }
    comm_stop(c, &c->stopping);
    int up = (PEER_REGISTERED_UP & PEER_BIT(was)) && c->master_fd >= 0;
    int sent = 0;
    if (up) {
        comm_transition(c, PEER_REGISTERED_UP, PEER_LEAVING);
        wire_msg_t m = {.type = C2M_LEAVE};
        sent = link_send_msg(c->master_link, c->master_fd, &m) == 0;
    }
    /* A connect, a registration in progress or a failed send: nothing more will come on it. */
    if (!sent && c->master_fd >= 0) shutdown(c->master_fd, SHUT_RDWR);
    pthread_mutex_unlock(&c->send_mu);
    atomic_fetch_or(&c->departed, DEPARTED_LEFT);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv); /* waits for the master, the reconnect and connect backoffs */
    pthread_mutex_unlock(&c->mu);
    if (was == PEER_CONNECTING) return pcclSuccess; /* pcclConnect ends on its own (it was cancelled) */
    if (!sent) {
        /* Between masters: the reconnect loop ends at once, and a restarted master rebuilds without this peer. */
        PLOG_INFO(c->log_name, "left the run while the master was unreachable");
        await_close(c, net_now_ms() + (uint64_t)c->connect_timeout_ms);
        return pcclSuccess;
    }
    if (!await_close(c, net_now_ms() + PCCL_EXT_LEAVE_GRACE_MS)) {
        /* The master keeps a member of a running operation until it ends: what still runs here past the
         * grace is aborted, and closing the connection makes this peer a departure. */
        PLOG_WARN(c->log_name, "the master did not remove this peer within %d ms; departing without it",
                  PCCL_EXT_LEAVE_GRACE_MS);
        allreduce_abort_all(c, -PERR_CANCELLED);
        close_master(c);
        await_close(c, net_now_ms() + (uint64_t)c->connect_timeout_ms);
    }
    return pcclSuccess;
}

pcclResult_t pcclExtGetDeparture(const pcclComm_t *c, pcclExtDeparture_t *out) {
    if (!c || !out) return pcclInvalidArgument;
    int why = atomic_load(&c->departed);
    *out = why & DEPARTED_LEFT        ? pcclExtLeft
           : why & DEPARTED_KICKED    ? pcclExtKicked
           : why & DEPARTED_SHUT_DOWN ? pcclExtShutDown
           : comm_ended(c)            ? pcclExtMasterLost
                                      : pcclExtInRun;
    return pcclSuccess;
}
