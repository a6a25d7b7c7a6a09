/* relay_client.c - see relay_client.h. */
#include "p2p/relay_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Waits for the relay's status byte on fd until deadline. @return the status (>= 0), or a code with err set. */
static int await_status(int fd, const char *where, uint64_t deadline, const net_cancel_t *cancel, char *err,
                        size_t errlen) {
    for (;;) {
        int rc = net_wait_until(fd, POLLIN, deadline, cancel);
        if (rc == -PERR_TIMEOUT) snprintf(err, errlen, "relay %s: no partner paired in time", where);
        else if (rc == -PERR_CANCELLED) snprintf(err, errlen, "relay %s: cancelled", where);
        else if (rc != 0) snprintf(err, errlen, "relay %s: %s", where, strerror(errno));
        if (rc != 0) return rc;
        uint8_t st;
        ssize_t n = recv(fd, &st, 1, MSG_DONTWAIT);
        if (n == 1) return st;
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        snprintf(err, errlen, "relay %s: %s", where, n == 0 ? "closed the connection" : strerror(errno));
        return -PERR_IO;
    }
}

int relay_dial(const ccoip_socket_address_t *relay, const uint8_t token[RELAY_TOKEN_BYTES], int role,
               int timeout_ms, const net_cancel_t *cancel, char *err, size_t errlen) {
    char where[ADDR_STRLEN];
    addr_str(relay, where);
    if (role != RELAY_ROLE_DIALER && role != RELAY_ROLE_TARGET) {
        snprintf(err, errlen, "relay %s: bad role %d", where, role);
        return -PERR_INVALID;
    }
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int fd = net_connect_cancellable(relay, timeout_ms, cancel);
    if (fd < 0) {
        snprintf(err, errlen, "relay %s: %s", where,
                 fd == -PERR_TIMEOUT ? "connect timed out" : fd == -PERR_CANCELLED ? "cancelled" : strerror(errno));
        return fd;
    }
    uint8_t hello[RELAY_GREETING_BYTES];
    relay_greeting_encode(token, role, hello);
    /* A fresh connection's send buffer takes the greeting whole. */
    if (send(fd, hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof hello) {
        snprintf(err, errlen, "relay %s: cannot send the greeting: %s", where, strerror(errno));
        close(fd);
        return -PERR_IO;
    }
    int st = await_status(fd, where, deadline, cancel, err, errlen);
    if (st == RELAY_ST_PAIRED) return fd;
    close(fd);
    if (st < 0) return st;
    snprintf(err, errlen, "relay %s: %s", where, relay_status_str(st));
    return st == RELAY_ST_TIMEOUT ? -PERR_TIMEOUT : -PERR_REFUSED;
}
