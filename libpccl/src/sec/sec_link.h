/*
 * sec_link.h - one end of a connection of a keyed run (internal): the blocking
 * handshake driver, and the AEAD stream over a socket once the run encrypts.
 * A link buffers what the socket delivered beyond the frame in use and the
 * sealed bytes the socket has not taken yet; its send and receive halves are
 * independent, so one thread may send while another receives. Every call that
 * takes `sec_link_t *` also accepts NULL: the socket is then used as it is
 * (an open run, or a keyed run that does not encrypt). sec_link_recv and sec_link_send behave as recv(2) and
 * send(2) (-1 and errno); the rest return err.h codes.
 */
#ifndef PCCL_SEC_LINK_H
#define PCCL_SEC_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "sec/sec_frame.h"
#include "sec/sec_hs.h"

typedef struct sec_link {
    sec_aead_t a;
    /* receive: raw bytes [rstart, rend) not yet opened; plaintext [poff, poff + plen) to hand out */
    uint8_t *rbuf;
    size_t rcap, rstart, rend, poff, plen;
    /* send: sealed bytes [woff, wlen) the socket has not taken */
    uint8_t *wbuf;
    size_t woff, wlen;
} sec_link_t;

/* A link for an established encrypted session, or NULL (out of memory, or a cipher OpenSSL lacks).
 * Buffers are allocated on first use. */
sec_link_t *sec_link_new(const sec_session_t *s);
void sec_link_free(sec_link_t *l);

/*
 * Runs a handshake on a connected socket until done, deadline_ms (net_now_ms clock) or cancel
 * (may be NULL). Reads exactly the handshake's bytes. @return 0 with hs->session and
 * hs->peer_ctx valid; -PERR_TIMEOUT; -PERR_CANCELLED; -PERR_IO (sending or receiving failed, or
 * the other side closed); sec_hs_feed's -PERR_PROTOCOL or -PERR_REFUSED. A failure leaves a reason
 * in err (the caller closes the socket).
 */
int sec_handshake_fd(int fd, sec_hs_t *hs, uint64_t deadline_ms, const net_cancel_t *cancel, char *err,
                     size_t errlen);

/* As recv(2) on fd's blocking mode: > 0 plaintext bytes, 0 at end of stream, -1 with errno
 * (EAGAIN: nothing ready; EBADMSG: a frame that does not open; EPROTO: the stream ended mid-frame).
 * Returns EAGAIN only when no whole frame is buffered, so poll(2) on fd tells when to call again. */
ssize_t sec_link_recv(sec_link_t *l, int fd, void *buf, size_t len);
/* As send(2): seals up to one frame of buf and returns the plaintext bytes taken (which the link
 * will deliver), or -1 with errno (EAGAIN: earlier bytes still wait for the socket). len 0 only
 * flushes. */
ssize_t sec_link_send(sec_link_t *l, int fd, const void *buf, size_t len);
/* Sealed bytes the socket has not taken yet (0 for NULL). */
size_t sec_link_pending(const sec_link_t *l);

/* Blocking (SO_RCVTIMEO/SO_SNDTIMEO bound them) whole transfers. @return 0; -PERR_TIMEOUT; -PERR_IO (an error,
 * errno set, or the end of the stream); -PERR_REFUSED (a frame that does not open); -PERR_PROTOCOL (the stream
 * ended mid-frame). */
int link_send_all(sec_link_t *l, int fd, const void *buf, size_t len);
int link_recv_all(sec_link_t *l, int fd, void *buf, size_t len);
/* The same on a non-blocking fd through a wait: a wait for the socket lasts until deadline_ms (net_now_ms clock)
 * at most, and cancel (may be NULL) ends the transfer at once, blocked or not. @return as link_send_all and
 * link_recv_all, or -PERR_CANCELLED. */
int link_send_until(sec_link_t *l, int fd, const void *buf, size_t len, uint64_t deadline_ms,
                    const net_cancel_t *cancel);
int link_recv_all_until(sec_link_t *l, int fd, void *buf, size_t len, uint64_t deadline_ms,
                        const net_cancel_t *cancel);
/* Up to len bytes as they come, waiting as link_send_until. @return > 0 bytes, 0 at the end of the stream, or
 * -PERR_TIMEOUT, -PERR_CANCELLED, -PERR_IO, -PERR_REFUSED, -PERR_PROTOCOL. */
ssize_t link_recv_until(sec_link_t *l, int fd, void *buf, size_t len, uint64_t deadline_ms,
                        const net_cancel_t *cancel);
/* One framed control message through the link. @return 0, link_send_all's code or wire_encode's. */
int link_send_msg(sec_link_t *l, int fd, const wire_msg_t *m);
/* @return 0; link_recv_all's code; -PERR_PROTOCOL (a length out of range); -PERR_NOMEM; wire_decode's code. A
 * failure leaves a reason in err. */
int link_recv_msg(sec_link_t *l, int fd, wire_msg_t *out, char *err, size_t errlen);

#endif
