/*
 * bandwidth.h - point-to-point bandwidth measurement (internal).
 *
 * Sub-protocol on a p2p connection after the hello of kind P2P_KIND_BENCH:
 *   client -> server: u8 direction (BW_CLIENT_SENDS or BW_SERVER_SENDS), u32 duration in ms
 *   the sender streams bytes as fast as it can for that long, then half-closes;
 *   the receiver counts bytes from the first to the last one; if the server was
 *   the receiver it answers u64 bytes, u64 nanoseconds.
 * Measuring at the receiver excludes the time the sender spends filling socket
 * buffers. The result is in Mbit/s (10^6 bits per second).
 */
#ifndef PCCL_BANDWIDTH_H
#define PCCL_BANDWIDTH_H

#include <stdint.h>

#include "p2p/p2p_hello.h"
#include "sec/sec.h"

enum { BW_CLIENT_SENDS = 1, BW_SERVER_SENDS = 2 };
#define BW_MAX_DURATION_MS 60000

typedef struct bw_result {
    uint64_t bytes;
    uint64_t ns;
    double mbps;
} bw_result_t;

/*
 * Measures one direction over `streams` parallel connections to `to`
 * (a pccl peer's p2p port or a `pccl bench-bandwidth --server`).
 * uuid identifies the caller in the hello. In a keyed run (sec, which may be NULL) the
 * connections prove the key and must reach peer_uuid. The measurement runs under w (base/wait.h: a wait
 * with an eventfd, opened for this measurement alone; NULL: one of its own): cancelling w (a destroy, an
 * abort) ends every stream's dial and transfer at once, and the first stream that fails ends w with its
 * code, which ends the others. Bounded by duration_ms + timeout_ms of silence.
 * @return 0 and *out (summed over streams); -PERR_INVALID (streams or duration out of range); -PERR_FAILED
 * (no thread for a stream); w's reason when it was cancelled; else the first failing stream's code (p2p_dial's
 * or link_*_until's; -PERR_PROTOCOL: a server that answered no time).
 */
int bw_measure(const ccoip_socket_address_t *to, const uint8_t uuid[16], const sec_cfg_t *sec,
               const uint8_t peer_uuid[16], int direction, int duration_ms, int streams, int timeout_ms,
               pwait_t *w, bw_result_t *out);

/* How a measurement's streams connect: as p2p_dial does, to the peer the caller knows (ctx; a communicator's
 * p2p_dial_peer, with its NAT traversal: docs/nat.md). */
typedef int (*bw_dial_fn)(void *ctx, const p2p_intro_t *me, int timeout_ms, const net_cancel_t *cancel,
                          sec_link_t **link, char *err, size_t errlen);
/* bw_measure whose streams connect through dial(ctx, ...) instead of p2p_dial to `to`. */
int bw_measure_via(bw_dial_fn dial, void *ctx, const uint8_t uuid[16], int direction, int duration_ms, int streams,
                   int timeout_ms, pwait_t *w, bw_result_t *out);

/* Serves one BENCH connection whose introduction was already read (bounded by timeout_ms of silence; fd is
 * made non-blocking); link: the AEAD stream when the run encrypts, else NULL. w (may be NULL; with an eventfd):
 * cancelling it ends the service at once. A request for longer than max_ms, or for this side to send when
 * may_send is 0, is refused; a client that keeps sending past its duration plus timeout_ms, or does not close
 * within timeout_ms of the server's last byte, is cut off, so a probe is bounded in time and bytes. */
void bw_serve_connection(sec_link_t *link, int fd, int timeout_ms, int max_ms, int may_send, const pwait_t *w);

#endif
