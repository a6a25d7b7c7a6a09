/*
 * net.h - blocking TCP helpers with bounded waits (internal).
 * Every call that can wait takes or inherits a timeout; sends use
 * MSG_NOSIGNAL so a vanished peer is an error, never SIGPIPE.
 * Failures are err.h codes; errno is kept as detail for the log (strerror).
 */
#ifndef PCCL_NET_H
#define PCCL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "base/addr.h"
#include "base/wire.h"

uint64_t net_now_ms(void);
/* Listens on a (port 0: an ephemeral one, stored in *port_out); 0.0.0.0 and [::] listen dual-stack on [::] (IPv4
 * alone where the host has no IPv6), so IPv4 and IPv6 peers reach it alike (addr_listen_dual). @return fd, or -PERR_IO (errno set). */
int net_listen(const ccoip_socket_address_t *a, uint16_t *port_out);
/* net_listen on every address (dual-stack) at port (0: ephemeral), with SO_REUSEPORT: the p2p listener, whose
 * port the control connection and punches share (net_connect_from; docs/nat.md). */
int net_listen_any(uint16_t port, uint16_t *port_out);
/* Connects with a timeout. @return a blocking fd with TCP_NODELAY; -PERR_TIMEOUT; -PERR_IO (errno set: refused,
 * unreachable, ...). */
int net_connect(const ccoip_socket_address_t *to, int timeout_ms);
/* What ends a wait early with ECANCELED: wait (wait.h), whose eventfd joins the poll, so a cancel ends the
 * wait at once and a wait costs no timer slices. */
typedef struct net_cancel {
    const struct pwait *wait;
} net_cancel_t;
/* net_connect that also ends when cancel (may be NULL) says so (-PERR_CANCELLED). */
int net_connect_cancellable(const ccoip_socket_address_t *to, int timeout_ms, const net_cancel_t *cancel);
/* net_connect_cancellable from local_port (0: an ephemeral one) on every address, with SO_REUSEADDR and
 * SO_REUSEPORT so that it shares the p2p listener's port: -PERR_IO with errno EADDRINUSE/EADDRNOTAVAIL when
 * that port cannot be used towards `to`. */
int net_connect_from(const ccoip_socket_address_t *to, uint16_t local_port, int timeout_ms, const net_cancel_t *cancel);
/* Connects to the first of to[0, n) that accepts, in that order (a name's addresses, addr_resolve_all), each
 * given an equal share of what is left of timeout_ms. @return the fd (*which, may be NULL, its index), or the
 * last address's failure as net_connect_cancellable; -PERR_CANCELLED at once. */
int net_connect_first(const ccoip_socket_address_t *to, int n, int timeout_ms, const net_cancel_t *cancel,
                      int *which);
/* net_connect_first from local_port (net_connect_from), each address tried from an ephemeral port where
 * local_port is taken towards it. */
int net_connect_first_from(const ccoip_socket_address_t *to, int n, uint16_t local_port, int timeout_ms,
                           const net_cancel_t *cancel, int *which);
/* Waits until fd has events (poll(2) flags) or deadline_ms (net_now_ms clock) passes or cancel
 * fires. @return 0 ready; -PERR_TIMEOUT (errno ETIMEDOUT); -PERR_CANCELLED (errno ECANCELED); -PERR_IO (poll
 * failed, errno set). */
int net_wait_until(int fd, short events, uint64_t deadline_ms, const net_cancel_t *cancel);
void net_set_nodelay(int fd);
/* Receive buffer of a connection whose peer is on this host, in bytes (before the kernel's
 * doubling for bookkeeping). */
#define NET_LOCAL_RCVBUF (256 << 10)
/* 1 when peer is on this host: a loopback address (127/8, ::1) or the local address itself. */
int net_same_host(const ccoip_inet_address_t *me, const ccoip_inet_address_t *peer);
/* 1 when the connected socket fd's peer is on this host (net_same_host of its two ends). */
int net_fd_same_host(int fd);
/* Sets SO_RCVBUF to NET_LOCAL_RCVBUF when the connection's peer is on this host and returns 1;
 * leaves other connections to the kernel's autotuning (a WAN window must grow) and returns 0. */
int net_bound_local_rcvbuf(int fd);
/* @return 0, or -PERR_IO (errno set). */
int net_set_nonblock(int fd, int on);
/* SO_RCVTIMEO / SO_SNDTIMEO in ms (0 = none). */
void net_set_timeouts(int fd, int ms);
/* Full send/receive on a blocking fd. @return 0; -PERR_TIMEOUT (SO_RCVTIMEO/SO_SNDTIMEO passed); -PERR_IO (an
 * error, errno set, or the end of the stream). */
int net_send_all(int fd, const void *buf, size_t len);
int net_recv_all(int fd, void *buf, size_t len);

#endif
