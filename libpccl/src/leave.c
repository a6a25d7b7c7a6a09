/*
 * leave.c - pcclExtLeave and pcclExtGetDeparture (pccl_leave.h): a clean
 * departure between operations. The peer sends LEAVE only with no collective
 * in flight; the master removes it and closes the control connection, which
 * the reader takes as the end of the run (no reconnect, because `leaving` is
 * set before LEAVE goes out).
 */
#include <sys/socket.h>

#include "comm.h"
#include "log.h"
#include "net.h"
#include "pccl_leave.h"

/* Waits until the reader saw the master close the connection, at most until deadline (net_now_ms). */
static int await_close(pcclComm_t *c, uint64_t deadline) {
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->master_lost) && net_now_ms() < deadline) comm_cv_wait_50ms(c);
    int closed = atomic_load(&c->master_lost);
    pthread_mutex_unlock(&c->mu);
    return closed;
}

pcclResult_t pcclExtLeave(pcclComm_t *c) {
    if (!pccl__initialized()) return pcclNotInitialized;
    if (!c) return pcclInvalidArgument;
    if (!atomic_load(&c->registered) || atomic_load(&c->leaving)) return pcclInvalidUsage;
    if (atomic_load(&c->master_lost)) return pcclMasterConnectionFailed;
    if (comm_ops_outstanding(c)) return pcclPendingAsyncOps;
    /* LEAVE must reach the master that knows this peer: during an outage wait for the new connection,
     * and send again if the master changed in between. */
    int sent = 0;
    for (int attempt = 0; attempt < 16 && !sent; attempt++) {
        unsigned ep;
        if (comm_begin(c, &ep) != COMM_OK) return pcclMasterConnectionFailed;
        atomic_store(&c->leaving, 1);
        wire_msg_t m = {.type = C2M_LEAVE};
        int rc = comm_send(c, ep, &m);
        if (rc == COMM_OK) sent = 1;
        else if (rc != COMM_RESTARTED) return pcclMasterConnectionFailed;
        else atomic_store(&c->leaving, 0); /* the reader may re-register with the new master */
    }
    if (!sent) return pcclMasterConnectionFailed;
    atomic_store(&c->left, 1);
    if (!await_close(c, net_now_ms() + (uint64_t)c->connect_timeout_ms)) {
        /* The master did not close in time: this peer is gone for it anyway once the connection ends. */
        PLOG_WARN(c->log_name, "the master did not confirm the leave within %d ms", c->connect_timeout_ms);
        pthread_mutex_lock(&c->send_mu);
        shutdown(c->master_fd, SHUT_RDWR);
        pthread_mutex_unlock(&c->send_mu);
    }
    return pcclSuccess;
}

pcclResult_t pcclExtGetDeparture(const pcclComm_t *c, pcclExtDeparture_t *out) {
    if (!c || !out) return pcclInvalidArgument;
    *out = atomic_load(&c->left)     ? pcclExtLeft
           : atomic_load(&c->kicked) ? pcclExtKicked
           : atomic_load(&c->master_lost) ? pcclExtMasterLost
                                           : pcclExtInRun;
    return pcclSuccess;
}
