/*
 * http_client.c - a minimal HTTP client for the master's admin port
 * (pccl status, kick, shutdown, bench-bandwidth --admin): one request,
 * Connection: close, every step bounded by one deadline.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "pccl_tools.h"
#include "cli.h"
#include "pccl.h"

#define MAX_RESPONSE (16u << 20)

static long ms_left(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms > 0 ? ms : 0;
}

/* Waits for fd to become ready for events before the deadline; 0 when ready. */
static int wait_fd(int fd, short events, const struct timespec *deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)ms_left(deadline));
        if (r > 0) return 0;
        if (r == 0 || errno != EINTR) return -1; /* EINTR: retry until the deadline */
    }
}

/*
 * METHOD path over HTTP/1.0 (so the body is never chunked) within timeout_ms in
 * total. Returns the body (malloc'd) and the status code, or NULL with err.
 */
char *cli_http_request(const ccoip_socket_address_t *addr, const char *method, const char *path, const char *token,
                       int timeout_ms, int *code, char *err, size_t errlen) {
    char req[1024], host[PCCL_TOOL_ADDR_STRLEN];
    /* The address dialled, as an IP literal: the master's admin port answers only Host names it knows
     * (DNS-rebinding protection), and the address it listens on is one of them. */
    pcclToolAddressString(addr, 1, host);
    int rl = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\nContent-Length: 0\r\n%s%s%s\r\n",
                      method, path, host, token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    if (rl < 0 || rl >= (int)sizeof req || strpbrk(path, "\r\n") || (token && strpbrk(token, "\r\n"))) {
        snprintf(err, errlen, "request too long or malformed");
        return NULL;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    struct sockaddr_storage sa;
    socklen_t salen = (socklen_t)pcclToolSockaddr(addr, &sa, sizeof sa);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return NULL;
    }
    char *resp = NULL;
    size_t len = 0, cap = 0;
    if (connect(fd, (struct sockaddr *)&sa, salen) != 0) {
        int soerr = errno;
        socklen_t sl = sizeof soerr;
        if (soerr == EINPROGRESS) {
            if (wait_fd(fd, POLLOUT, &deadline) != 0) {
                snprintf(err, errlen, "connect timed out");
                goto fail;
            }
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) soerr = errno;
        }
        if (soerr != 0) {
            snprintf(err, errlen, "cannot connect: %s", strerror(soerr));
            goto fail;
        }
    }
    for (int off = 0; off < rl;) {
        if (wait_fd(fd, POLLOUT, &deadline) != 0) {
            snprintf(err, errlen, "timed out sending the request");
            goto fail;
        }
        ssize_t n = send(fd, req + off, (size_t)(rl - off), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            snprintf(err, errlen, "send: %s", strerror(errno));
            goto fail;
        }
        if (n > 0) off += (int)n;
    }
    for (;;) {
        if (wait_fd(fd, POLLIN, &deadline) != 0) {
            snprintf(err, errlen, "timed out reading the response");
            goto fail;
        }
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            char *b = cap <= MAX_RESPONSE ? realloc(resp, cap + 1) : NULL;
            if (!b) {
                snprintf(err, errlen, "response too large");
                goto fail;
            }
            resp = b;
        }
        ssize_t n = recv(fd, resp + len, cap - len, 0);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            snprintf(err, errlen, "recv: %s", strerror(errno));
            goto fail;
        }
        len += (size_t)n;
    }
    close(fd);
    if (!resp) {
        snprintf(err, errlen, "empty response");
        return NULL;
    }
    resp[len] = 0;
    char *body = strstr(resp, "\r\n\r\n");
    if (strncmp(resp, "HTTP/1.", 7) != 0 || !body || sscanf(resp + 8, " %d", code) != 1) {
        /* A master's control port closes at once on an HTTP request (its first four bytes are a length far
         * over the limit), or answers a keyed handshake: say which port that probably was. */
        snprintf(err, errlen, "%s: probably the master's control port (`pccl join --master`), not its admin port "
                 "(`pccl master --admin`, default %d)", len ? "not an HTTP response" : "closed without an answer",
                 CLI_ADMIN_DEFAULT_PORT);
        free(resp);
        return NULL;
    }
    memmove(resp, body + 4, strlen(body + 4) + 1);
    return resp;
fail:
    close(fd);
    free(resp);
    return NULL;
}


char *cli_http_get(const ccoip_socket_address_t *addr, const char *path, int timeout_ms, int *code, char *err,
                   size_t errlen) {
    return cli_http_request(addr, "GET", path, NULL, timeout_ms, code, err, errlen);
}
