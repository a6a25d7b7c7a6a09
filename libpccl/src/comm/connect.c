/*
 * connect.c - a peer's first registration with its master (pcclConnect): connect,
 * prove the run key, CHALLENGE, the signed HELLO, WELCOME. A master that is not there yet (refused,
 * reset, closed during the handshake or before its WELCOME, no route, no answer
 * to the connect) is tried again with exponential backoff and jitter for
 * PCCL_CONNECT_RETRY_MS, each wait logged, so that peers started with their
 * master (or before it) join instead of failing. A master that accepted the
 * connection and then closed or reset it is busy (its limits on strangers while
 * hundreds of peers join at once, a restart): that is tried again for at least
 * PCCL_CONNECT_TIMEOUT_MS, even when PCCL_CONNECT_RETRY_MS is 0. A master that
 * refuses this peer (KICK: another version, no key; a proof of the key that
 * fails), ends the run (SHUTDOWN) or accepts a connection and never answers,
 * fails at once. pcclExtLeave and pcclDestroyCommunicator end the waits, the
 * connect and the handshake at once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "comm/comm.h"
#include "base/base.h"
#include "pccl_leave.h"

/* Backoff between attempts: doubling from the first to the last, each wait drawn from [d/2, d]. */
#define CONNECT_BACKOFF_FIRST_MS 250
#define CONNECT_BACKOFF_MAX_MS 5000


/* Whether a failed connect (-PERR_IO, errno the detail) may succeed later: nobody listens yet, the master
 * restarts, the route comes up (ETIMEDOUT: no answer to the connect). A refused proof of the key
 * (-PERR_REFUSED) or a master that accepted but never answers (-PERR_TIMEOUT) is a configuration to fix,
 * not a wait. */
static int retryable(int rc, int e) {
    return rc == -PERR_IO && (e == ECONNREFUSED || e == ECONNRESET || e == ECONNABORTED || e == EPIPE ||
                              e == EHOSTUNREACH || e == ENETUNREACH || e == ETIMEDOUT);
}

/* Whether a retryable failure came from a master that accepted the connection (then closed or reset it):
 * a busy master, not an absent one. */
static int closed_by_master(int e) { return e == ECONNRESET || e == ECONNABORTED || e == EPIPE; }

static void drop_fd(pcclComm_t *c) {
    pthread_mutex_lock(&c->send_mu);
    comm_close_master_locked(c);
    pthread_mutex_unlock(&c->send_mu);
}

/* Reads the master's answer to HELLO. 0 registered; -PERR_IO the connection closed first;
 * -PERR_REFUSED refused, the run is over, silence past the timeout, or a protocol error. */
static int await_welcome(pcclComm_t *c, char *why, size_t whylen) {
    wire_msg_t m;
    char err[160];
    /* Its deadline is the connect timeout: a master that accepts and never answers is no wait. */
    int got = comm_master_recv(c, c->master_fd, c->master_link, net_now_ms() + (uint64_t)c->connect_timeout_ms, &m,
                               err, sizeof err);
    if (got != 0) {
        int silent = got == -PERR_TIMEOUT;
        if (silent)
            snprintf(why, whylen, "it accepted the connection but did not answer within %d ms (PCCL_CONNECT_TIMEOUT_MS)",
                     c->connect_timeout_ms);
        else
            snprintf(why, whylen, "it closed the connection before welcoming this peer (%s)", err);
        return silent || comm_cancelled(c) ? -PERR_REFUSED : -PERR_IO;
    }
    int rc = -PERR_REFUSED;
    switch (m.type) {
    case M2C_WELCOME:
        comm_set_uuid(c, m.u.welcome.uuid);
        pthread_mutex_lock(&c->send_mu); /* pcclExtLeave decides under send_mu whether LEAVE can go out */
        comm_transition(c, PEER_BIT(PEER_CONNECTING), PEER_REGISTERED);
        pthread_mutex_unlock(&c->send_mu);
        rc = 0;
        break;
    case M2C_KICK:
        atomic_fetch_or(&c->departed, DEPARTED_KICKED);
        snprintf(why, whylen, "it refused this peer: %s", m.u.kick.reason);
        break;
    case M2C_SHUTDOWN:
        comm_note_shutdown(c, m.u.kick.reason);
        snprintf(why, whylen, "the run was shut down");
        break;
    default:
        snprintf(why, whylen, "it answered HELLO with %s", wire_type_name(m.type));
        break;
    }
    wire_msg_free(&m);
    return rc;
}

/* One attempt within timeout_ms: 0, -PERR_IO or -PERR_REFUSED, with the reason in why; *busy is set when the
 * master accepted the connection and closed it (-PERR_IO). */
static int try_register(pcclComm_t *c, int timeout_ms, int *busy, char *why, size_t whylen) {
    sec_link_t *link = NULL;
    *busy = 1;
    int fd = comm_connect_master(c, timeout_ms, &link);
    if (fd < 0) {
        int e = errno; /* the detail of -PERR_IO: ECONNRESET closed before its CHALLENGE */
        *busy = closed_by_master(e);
        if (fd == -PERR_REFUSED) snprintf(why, whylen, "the handshake failed (see above)");
        else if (fd == -PERR_IO && e == ECONNRESET)
            snprintf(why, whylen, "it closed the connection before welcoming this peer");
        else if (fd == -PERR_TIMEOUT)
            snprintf(why, whylen, "it accepted the connection but did not answer within %d ms (PCCL_CONNECT_TIMEOUT_MS)",
                     timeout_ms);
        else if (fd == -PERR_CANCELLED) snprintf(why, whylen, "cancelled");
        else snprintf(why, whylen, "%s", strerror(e));
        return retryable(fd, e) && !comm_cancelled(c) ? -PERR_IO : -PERR_REFUSED;
    }
    /* Published under send_mu so that pcclExtLeave and pcclDestroyCommunicator can end the wait below. */
    pthread_mutex_lock(&c->send_mu);
    c->master_fd = fd;
    c->master_link = link;
    int cancelled = comm_cancelled(c);
    pthread_mutex_unlock(&c->send_mu);
    if (cancelled) {
        snprintf(why, whylen, "cancelled");
        return -PERR_REFUSED;
    }
    net_set_timeouts(fd, c->connect_timeout_ms);
    wire_msg_t hello = {.type = C2M_HELLO};
    hello.u.hello.magic = WIRE_MAGIC;
    hello.u.hello.version = WIRE_VERSION;
    hello.u.hello.peer_group = c->params.peer_group;
    comm_addr_announce(c, &hello.u.hello.p2p_port, &hello.u.hello.has_adv, &hello.u.hello.adv_ip);
    hello.u.hello.pool_size = c->pool_size;
    if (comm_send_signed(c, fd, c->master_link, &hello) != 0) {
        snprintf(why, whylen, "sending HELLO failed: %s", strerror(errno));
        return comm_cancelled(c) ? -PERR_REFUSED : -PERR_IO;
    }
    return await_welcome(c, why, whylen);
}

/* A wait of about d ms: uniform in [d/2, d], so peers started together spread their attempts. */
static int jitter(int d) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint32_t)net_now_ms() * 2654435761u;
    return d / 2 + (int)(r % (uint32_t)(d / 2 + 1));
}

int comm_register_first(pcclComm_t *c) {
    char where[300], why[400] = "";
    comm_master_where(c, where, sizeof where);
    uint64_t start = net_now_ms(), window = start + (uint64_t)c->connect_retry_ms;
    /* A busy master (it accepted and closed) is worth the connect timeout at least. */
    uint64_t busy_window = c->connect_retry_ms > c->connect_timeout_ms ? window : start + (uint64_t)c->connect_timeout_ms;
    int delay = CONNECT_BACKOFF_FIRST_MS;
    for (int attempt = 1;; attempt++) {
        uint64_t now = net_now_ms();
        /* The first attempt gets the whole connect timeout; later ones what is left of the window. */
        int timeout = c->connect_timeout_ms;
        if (attempt > 1 && busy_window - now < (uint64_t)timeout)
            timeout = (int)(busy_window - now) > 100 ? (int)(busy_window - now) : 100;
        int busy = 0;
        int rc = try_register(c, timeout, &busy, why, sizeof why);
        if (rc == 0) return 0;
        drop_fd(c);
        if (comm_cancelled(c)) {
            PLOG_INFO(c->log_name, "connecting to the master at %s: cancelled", where);
            return -PERR_CANCELLED;
        }
        now = net_now_ms();
        uint64_t deadline = busy ? busy_window : window;
        if (rc == -PERR_REFUSED || now >= deadline) {
            if (rc == -PERR_IO && attempt > 1)
                PLOG_ERROR(c->log_name, "cannot connect to the master at %s: %s (gave up after %d attempts in %.1f s, "
                           "PCCL_CONNECT_RETRY_MS)", where, why, attempt, (double)(now - start) / 1000.0);
            else
                PLOG_ERROR(c->log_name, "cannot connect to the master at %s: %s", where, why);
            return rc;
        }
        int wait = jitter(delay);
        if ((uint64_t)wait > deadline - now) wait = (int)(deadline - now);
        PLOG_WARN(c->log_name, "the master at %s is not reachable (%s); attempt %d, next in %.1f s, giving up in %.0f s",
                  where, why, attempt, wait / 1000.0, (double)(deadline - now) / 1000.0);
        comm_pause(c, wait);
        delay = delay * 2 > CONNECT_BACKOFF_MAX_MS ? CONNECT_BACKOFF_MAX_MS : delay * 2;
    }
}
