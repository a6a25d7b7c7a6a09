/* sec_link.c - see sec_link.h. */
#include "sec/sec_link.h"

#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Room for one whole frame behind a partial one, so a frame never waits for a compaction. */
#define RCAP (2 * (SEC_FRAME_MAX + SEC_FRAME_OVERHEAD))
#define WCAP (SEC_FRAME_MAX + SEC_FRAME_OVERHEAD)

sec_link_t *sec_link_new(const sec_session_t *s) {
    sec_link_t *l = calloc(1, sizeof *l);
    if (l && sec_aead_init(&l->a, s) != 0) {
        free(l);
        return NULL;
    }
    return l;
}

void sec_link_free(sec_link_t *l) {
    if (!l) return;
    sec_aead_free(&l->a);
    if (l->rbuf) sodium_memzero(l->rbuf, l->rcap);
    free(l->rbuf);
    free(l->wbuf);
    free(l);
}

int sec_handshake_fd(int fd, sec_hs_t *hs, uint64_t deadline_ms, const net_cancel_t *cancel, char *err,
                     size_t errlen) {
    uint8_t buf[SEC_HS_MSG2];
    for (;;) {
        if (hs->out_len) {
            int rc = net_send_all(fd, hs->out, hs->out_len);
            if (rc != 0) {
                snprintf(err, errlen, "handshake: send failed: %s", strerror(errno));
                return rc;
            }
            hs->out_len = 0;
        }
        if (sec_hs_done(hs)) return 0;
        int w = net_wait_until(fd, POLLIN, deadline_ms, cancel);
        if (w != 0) {
            snprintf(err, errlen, "handshake: %s", w == -PERR_TIMEOUT ? "no answer in time" : "cancelled");
            return w;
        }
        /* Only the handshake's own bytes: what follows belongs to the protocol after it. */
        ssize_t n = recv(fd, buf, sec_hs_want(hs), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
            snprintf(err, errlen, "handshake: %s", n == 0 ? "the other side closed the connection (no key, or "
                                                            "another key?)" : strerror(errno));
            return -PERR_IO;
        }
        size_t used;
        int r = sec_hs_feed(hs, buf, (size_t)n, &used);
        if (r != 0) {
            snprintf(err, errlen, "handshake: %s", hs->err);
            return r;
        }
    }
}

ssize_t sec_link_recv(sec_link_t *l, int fd, void *buf, size_t len) {
    if (!l) return recv(fd, buf, len, 0);
    for (;;) {
        if (l->plen) {
            size_t n = len < l->plen ? len : l->plen;
            memcpy(buf, l->rbuf + l->poff, n);
            l->poff += n;
            l->plen -= n;
            return (ssize_t)n;
        }
        size_t avail = l->rend - l->rstart, fs = 0;
        if (avail >= SEC_FRAME_HDR) {
            fs = sec_frame_size(l->rbuf + l->rstart);
            if (!fs) {
                errno = EBADMSG;
                return -1;
            }
            if (avail >= fs) {
                /* A caller that takes the whole frame gets it decrypted straight into its buffer:
                 * one memory pass fewer on the ring's bulk path. */
                size_t n = fs - SEC_FRAME_OVERHEAD;
                uint8_t *to = len >= n ? buf : l->rbuf + l->rstart + SEC_FRAME_HDR;
                if (sec_frame_open_to(&l->a, l->rbuf + l->rstart, fs, to) != 0) {
                    errno = EBADMSG;
                    return -1;
                }
                l->rstart += fs;
                if (to == buf) return (ssize_t)n;
                l->poff = l->rstart - fs + SEC_FRAME_HDR;
                l->plen = n;
                continue;
            }
        }
        if (!l->rbuf) {
            if (!(l->rbuf = malloc(RCAP))) return -1;
            l->rcap = RCAP;
        }
        /* Nothing of the buffer is in use before rstart: move the partial frame to the front when
         * the rest might not hold it. */
        if (!avail) l->rstart = l->rend = 0;
        if (l->rstart && l->rcap - l->rend < WCAP) {
            memmove(l->rbuf, l->rbuf + l->rstart, avail);
            l->rstart = 0;
            l->rend = avail;
        }
        ssize_t n = recv(fd, l->rbuf + l->rend, l->rcap - l->rend, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            if (!avail) return 0;
            errno = EPROTO;
            return -1;
        }
        l->rend += (size_t)n;
    }
}

/* Writes sealed bytes, as send(2): 0 when all are out, else -1 with errno (EAGAIN: some wait for the socket). */
static int flush(sec_link_t *l, int fd) {
    while (l->woff < l->wlen) {
        ssize_t n = send(fd, l->wbuf + l->woff, l->wlen - l->woff, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        l->woff += (size_t)n;
    }
    l->woff = l->wlen = 0;
    return 0;
}

ssize_t sec_link_send(sec_link_t *l, int fd, const void *buf, size_t len) {
    if (!l) return send(fd, buf, len, MSG_NOSIGNAL);
    if (flush(l, fd) < 0) return -1;
    if (!len) return 0;
    if (!l->wbuf && !(l->wbuf = malloc(WCAP))) return -1;
    size_t n = len < SEC_FRAME_MAX ? len : SEC_FRAME_MAX;
    if (sec_frame_seal(&l->a, buf, n, l->wbuf) != 0) {
        errno = EPROTO;
        return -1;
    }
    l->woff = 0;
    l->wlen = n + SEC_FRAME_OVERHEAD;
    if (flush(l, fd) < 0 && errno != EAGAIN) return -1; /* the rest waits in the link */
    return (ssize_t)n;
}

size_t sec_link_pending(const sec_link_t *l) { return l ? l->wlen - l->woff : 0; }

/* The code of a failed sec_link_recv/sec_link_send on a blocking socket, from its errno (EAGAIN: the socket's
 * timeout passed); n 0 is the end of the stream. */
static int link_code(ssize_t n) {
    if (n == 0) return -PERR_IO;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -PERR_TIMEOUT;
    if (errno == EBADMSG) return -PERR_REFUSED;
    if (errno == EPROTO) return -PERR_PROTOCOL;
    return -PERR_IO;
}

int link_send_all(sec_link_t *l, int fd, const void *buf, size_t len) {
    if (!l) return net_send_all(fd, buf, len);
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = sec_link_send(l, fd, p, len);
        if (n <= 0) return link_code(n);
        p += n;
        len -= (size_t)n;
    }
    return flush(l, fd) == 0 ? 0 : link_code(-1);
}

int link_recv_all(sec_link_t *l, int fd, void *buf, size_t len) {
    if (!l) return net_recv_all(fd, buf, len);
    uint8_t *p = buf;
    while (len) {
        ssize_t n = sec_link_recv(l, fd, p, len);
        if (n <= 0) return link_code(n);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int cancelled(const net_cancel_t *cancel) { return cancel && cancel->wait && pwait_result(cancel->wait); }

/* After a call on a non-blocking fd that did nothing (n < 0): 0 once fd has events (call again), else the code. */
static int await_socket(int fd, short events, uint64_t deadline_ms, const net_cancel_t *cancel) {
    if (errno == EINTR) return 0;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return link_code(-1);
    return net_wait_until(fd, events, deadline_ms, cancel);
}

int link_send_until(sec_link_t *l, int fd, const void *buf, size_t len, uint64_t deadline_ms,
                    const net_cancel_t *cancel) {
    const uint8_t *p = buf;
    /* The wait is looked at on every pass: a receiver that keeps up never makes the sender poll. */
    while (len || sec_link_pending(l)) {
        if (cancelled(cancel)) return -PERR_CANCELLED;
        ssize_t n = sec_link_send(l, fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 || len) {
            int rc = n < 0 ? await_socket(fd, POLLOUT, deadline_ms, cancel) : -PERR_IO;
            if (rc != 0) return rc;
        }
    }
    return 0;
}

ssize_t link_recv_until(sec_link_t *l, int fd, void *buf, size_t len, uint64_t deadline_ms,
                        const net_cancel_t *cancel) {
    for (;;) {
        if (cancelled(cancel)) return -PERR_CANCELLED;
        ssize_t n = sec_link_recv(l, fd, buf, len);
        if (n >= 0) return n;
        int rc = await_socket(fd, POLLIN, deadline_ms, cancel);
        if (rc != 0) return rc;
    }
}

int link_recv_all_until(sec_link_t *l, int fd, void *buf, size_t len, uint64_t deadline_ms,
                        const net_cancel_t *cancel) {
    uint8_t *p = buf;
    while (len) {
        ssize_t n = link_recv_until(l, fd, p, len, deadline_ms, cancel);
        if (n <= 0) return n == 0 ? -PERR_IO : (int)n;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int link_send_msg(sec_link_t *l, int fd, const wire_msg_t *m) {
    wbuf_t b = {0};
    int rc = wire_encode(m, &b);
    if (rc == 0) rc = link_send_all(l, fd, b.data, b.len);
    wbuf_free(&b);
    return rc;
}

int link_recv_msg(sec_link_t *l, int fd, wire_msg_t *out, char *err, size_t errlen) {
    uint8_t hdr[4];
    int rc = link_recv_all(l, fd, hdr, 4);
    if (rc != 0) {
        snprintf(err, errlen, rc == -PERR_REFUSED ? "a frame failed authentication" : "connection closed");
        return rc;
    }
    uint32_t body = wire_get_u32(hdr);
    if (body < 2 || body > WIRE_MAX_BODY) {
        snprintf(err, errlen, "packet length %u out of range", body);
        return -PERR_PROTOCOL;
    }
    uint8_t *b = malloc(body);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -PERR_NOMEM;
    }
    rc = link_recv_all(l, fd, b, body);
    if (rc != 0)
        snprintf(err, errlen, rc == -PERR_REFUSED ? "a frame failed authentication" : "connection closed mid-packet");
    else rc = wire_decode(b, body, out, err, errlen);
    free(b);
    return rc;
}
