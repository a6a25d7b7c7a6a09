/* net.c - see net.h. */
#include "base/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/wait.h"

uint64_t net_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void net_set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int net_same_host(const ccoip_inet_address_t *me, const ccoip_inet_address_t *peer) {
    return addr_ip_is_loopback(peer) || addr_ip_equal(me, peer);
}

int net_fd_same_host(int fd) {
    struct sockaddr_storage me, peer;
    socklen_t lm = sizeof me, lp = sizeof peer;
    ccoip_socket_address_t a, b;
    return getsockname(fd, (struct sockaddr *)&me, &lm) == 0 && getpeername(fd, (struct sockaddr *)&peer, &lp) == 0 &&
           addr_from_sockaddr((struct sockaddr *)&me, &a) == 0 && addr_from_sockaddr((struct sockaddr *)&peer, &b) == 0 &&
           net_same_host(&a.inet, &b.inet);
}

/* On one host there is no bandwidth-delay product to cover, and an autotuned window (megabytes)
 * lets a sender queue data that has left the cache by the time a receiver sharing the cores reads
 * it: the receive copy then costs twice as much (bench/analysis.md, "Same-host connections"). Only
 * while each receiver has a core of its own, and for spliced sends: the caller decides (p2p_bound_rx). */
int net_bound_local_rcvbuf(int fd) {
    if (!net_fd_same_host(fd)) return 0;
    int v = NET_LOCAL_RCVBUF;
    return setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0;
}

int net_set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) != 0) return -PERR_IO;
    return 0;
}

void net_set_timeouts(int fd, int ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int listen_on(const ccoip_socket_address_t *a, int v6only, int shared, uint16_t *port_out) {
    struct sockaddr_storage ss;
    socklen_t len = addr_to_sockaddr(a, &ss);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -PERR_IO;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (shared) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 512) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -PERR_IO;
    }
    ccoip_socket_address_t bound;
    addr_from_sockaddr((struct sockaddr *)&ss, &bound);
    *port_out = bound.port;
    return fd;
}

static int listen_dual(const ccoip_socket_address_t *a, int shared, uint16_t *port_out) {
    ccoip_socket_address_t v6, v4;
    if (addr_listen_dual(a, &v6, &v4)) {
        int fd = listen_on(&v6, 0, shared, port_out);
        /* A host without IPv6 (a kernel built without it, ipv6.disable=1) listens on IPv4 alone. */
        if (fd >= 0 || (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL)) return fd;
        return listen_on(&v4, 1, shared, port_out);
    }
    return listen_on(a, 1, shared, port_out);
}

int net_listen(const ccoip_socket_address_t *a, uint16_t *port_out) { return listen_dual(a, 0, port_out); }

int net_listen_any(uint16_t port, uint16_t *port_out) {
    ccoip_socket_address_t any = {.inet.protocol = inetIPv4, .port = port};
    return listen_dual(&any, 1, port_out);
}

int net_wait_until(int fd, short events, uint64_t deadline_ms, const net_cancel_t *cancel) {
    const pwait_t *w = cancel ? cancel->wait : NULL;
    for (;;) {
        if (w && pwait_result(w)) {
            errno = ECANCELED;
            return -PERR_CANCELLED;
        }
        uint64_t now = net_now_ms();
        if (now >= deadline_ms) {
            errno = ETIMEDOUT;
            return -PERR_TIMEOUT;
        }
        uint64_t left = deadline_ms - now;
        int step = (int)(left > INT32_MAX ? INT32_MAX : left);
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = w ? w->fd : -1, .events = POLLIN}};
        int n = poll(p, 2, step);
        if (n > 0 && p[0].revents) return 0;
        if (n < 0 && errno != EINTR) return -PERR_IO;
    }
}

/* Binds fd (of family) to local_port on every address, sharing the port with the p2p listener. */
static int bind_shared(int fd, int family, uint16_t local_port) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    ccoip_socket_address_t any = {.inet.protocol = family == AF_INET6 ? inetIPv6 : inetIPv4, .port = local_port};
    struct sockaddr_storage ss;
    socklen_t len = addr_to_sockaddr(&any, &ss);
    return bind(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : -PERR_IO;
}

int net_connect_cancellable(const ccoip_socket_address_t *to, int timeout_ms, const net_cancel_t *cancel) {
    return net_connect_from(to, 0, timeout_ms, cancel);
}

int net_connect_from(const ccoip_socket_address_t *to, uint16_t local_port, int timeout_ms, const net_cancel_t *cancel) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    struct sockaddr_storage sa;
    socklen_t salen = addr_to_sockaddr(to, &sa);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -PERR_IO;
    int rc = local_port ? bind_shared(fd, sa.ss_family, local_port) : 0;
    if (rc != 0) goto fail;
    rc = connect(fd, (struct sockaddr *)&sa, salen);
    if (rc != 0 && errno != EINPROGRESS) {
        rc = -PERR_IO;
        goto fail;
    }
    if (rc != 0) {
        if ((rc = net_wait_until(fd, POLLOUT, deadline, cancel)) != 0) goto fail;
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            errno = err;
            rc = -PERR_IO;
            goto fail;
        }
    }
    net_set_nonblock(fd, 0);
    net_set_nodelay(fd);
    return fd;
fail:;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int net_connect(const ccoip_socket_address_t *to, int timeout_ms) { return net_connect_cancellable(to, timeout_ms, NULL); }

int net_connect_first(const ccoip_socket_address_t *to, int n, int timeout_ms, const net_cancel_t *cancel,
                      int *which) {
    return net_connect_first_from(to, n, 0, timeout_ms, cancel, which);
}

int net_connect_first_from(const ccoip_socket_address_t *to, int n, uint16_t local_port, int timeout_ms,
                           const net_cancel_t *cancel, int *which) {
    uint64_t deadline = net_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int rc = -PERR_IO;
    for (int i = 0; i < n; i++) {
        uint64_t now = net_now_ms();
        /* What is left is shared among the addresses not tried yet: one that never answers leaves the rest
         * their turn; a refused one costs nothing. */
        int share = now < deadline ? (int)((deadline - now) / (uint64_t)(n - i)) : 0;
        rc = net_connect_from(&to[i], local_port, share > 0 ? share : 1, cancel);
        /* The port is taken towards this address (a closed connection's TIME_WAIT): an ephemeral one. */
        if (rc == -PERR_IO && local_port && (errno == EADDRINUSE || errno == EADDRNOTAVAIL))
            rc = net_connect_from(&to[i], 0, share > 0 ? share : 1, cancel);
        if (rc >= 0) {
            if (which) *which = i;
            return rc;
        }
        if (rc == -PERR_CANCELLED) break;
    }
    return rc;
}

int net_send_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? -PERR_TIMEOUT : -PERR_IO;
        if (n == 0) return -PERR_IO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int net_recv_all(int fd, void *buf, size_t len) {
    uint8_t *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? -PERR_TIMEOUT : -PERR_IO;
        if (n == 0) return -PERR_IO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

