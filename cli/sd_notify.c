/* sd_notify.c - sd_notify(3)'s datagram protocol, written in-process (sd_notify.h). */
#include "sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The address of $NOTIFY_SOCKET and its length; -1 if it is neither an absolute path nor '@'-abstract. */
static int notify_addr(const char *name, struct sockaddr_un *sa, socklen_t *len) {
    size_t n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n < 2 || n > sizeof sa->sun_path) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, name, n);
    if (name[0] == '@') sa->sun_path[0] = '\0'; /* abstract: the name's bytes, no terminator */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/' ? 1 : 0));
    if (*len > sizeof *sa) *len = sizeof *sa;
    return 0;
}

int sd_notify_send(const char *state) {
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !*name) return 0;
    struct sockaddr_un sa;
    socklen_t len;
    if (!state || notify_addr(name, &sa, &len) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    /* MSG_DONTWAIT: the master's event loop sends too, and a full receive queue must not stall it. */
    ssize_t r;
    do {
        r = sendto(fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)&sa, len);
    } while (r < 0 && errno == EINTR);
    close(fd);
    return r == (ssize_t)strlen(state) ? 1 : -1;
}

int sd_notify_sendf(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) return -1;
    return sd_notify_send(buf);
}

static int env_u64(const char *name, unsigned long long *out) {
    const char *s = getenv(name);
    if (!s || *s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

uint64_t sd_notify_watchdog_usec(void) {
    unsigned long long usec, pid;
    if (env_u64("WATCHDOG_USEC", &usec) != 0 || usec == 0) return 0;
    if (getenv("WATCHDOG_PID") && (env_u64("WATCHDOG_PID", &pid) != 0 || pid != (unsigned long long)getpid()))
        return 0;
    return usec;
}

uint64_t sd_notify_ping_ms(uint64_t usec) {
    if (usec == 0) return 0;
    uint64_t ms = usec / 2000;
    return ms ? ms : 1;
}
