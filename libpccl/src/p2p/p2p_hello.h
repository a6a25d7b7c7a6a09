/*
 * p2p_hello.h - how a p2p connection (ring, shared state, bandwidth probe)
 * begins (internal). In an open run the connecting side sends the 27-byte
 * hello (kind, its uuid, slot). In a keyed run the two sides run the handshake
 * instead (sec_hs.h): the hello travels as the connector's context and the
 * acceptor answers with its own uuid as its context, so both are covered by the
 * proofs of the key, and the connector checks that it reached the peer it meant.
 * When the run encrypts, the connection then carries AEAD frames (*link).
 */
#ifndef PCCL_P2P_HELLO_H
#define PCCL_P2P_HELLO_H

#include <stdint.h>

#include "base/base.h"
#include "sec/sec.h"

typedef struct p2p_intro {
    uint8_t kind;
    uint8_t uuid[16]; /* the connector's */
    uint32_t slot;
} p2p_intro_t;

/*
 * Connects to `to` and introduces this side (sec NULL or not keyed: an open run). peer_uuid is
 * the peer meant (keyed runs check it). Connect and handshake end by timeout_ms or when cancel
 * (may be NULL; its wait's eventfd joins every poll) fires. @return a blocking fd with TCP_NODELAY and *link
 * (NULL unless the run encrypts), or with a reason in err: -PERR_IO (no connection, or the hello could not be
 * sent; errno set), -PERR_TIMEOUT, -PERR_CANCELLED, -PERR_REFUSED (the handshake failed: no key, another key,
 * another peer).
 */
int p2p_dial(const ccoip_socket_address_t *to, const sec_cfg_t *sec, const p2p_intro_t *me,
             const uint8_t peer_uuid[16], int timeout_ms, const net_cancel_t *cancel, sec_link_t **link, char *err,
             size_t errlen);
/* p2p_dial's introduction on a connected blocking fd (a punched or relayed one: docs/nat.md), by deadline_ms
 * (net_now_ms clock). @return fd, or p2p_dial's codes (fd closed). */
int p2p_introduce(int fd, const sec_cfg_t *sec, const p2p_intro_t *me, const uint8_t peer_uuid[16],
                  uint64_t deadline_ms, const net_cancel_t *cancel, sec_link_t **link, char *err, size_t errlen);
/*
 * The introduction of an accepted connection, read without blocking: the p2p acceptor's poll
 * loop runs many at once, with no thread each. Holds at most one handshake message (136 bytes).
 */
typedef struct p2p_greeting {
    sec_hs_t *hs;              /* keyed run: the responder's handshake */
    uint8_t hello[SEC_HS_CTX]; /* open run: the hello as it arrives */
    size_t hello_len;
} p2p_greeting_t;

/* Begins the greeting of an accepted connection (sec NULL or not keyed: an open run); self is this
 * peer's uuid (the context of its handshake answer). @return 0, or -PERR_NOMEM. */
int p2p_greeting_start(p2p_greeting_t *g, const sec_cfg_t *sec, const uint8_t self[16]);
/*
 * Reads what arrived on fd (non-blocking) and answers the handshake. @return 0 with *greeted 1 (done: *who,
 * and *link when the run encrypts) or 0 (more to come: wait for POLLIN), or, with the reason in err (the caller
 * closes fd; nothing the other side sent was acted on), -PERR_IO (closed, or the answer failed), -PERR_REFUSED
 * (the proof of the key failed), -PERR_PROTOCOL (a bad hello), -PERR_NOMEM. The caller bounds it in time.
 */
int p2p_greeting_step(p2p_greeting_t *g, int fd, p2p_intro_t *who, sec_link_t **link, int *greeted, char *err,
                      size_t errlen);
void p2p_greeting_free(p2p_greeting_t *g);

/*
 * Reads the introduction of an accepted connection within SEC_HS_TIMEOUT_MS (blocking); self is this peer's
 * uuid (the context of its handshake answer); cancelling w (may be NULL; a wait with an eventfd) ends it at
 * once. @return 0 with *who and *link, or p2p_greeting_step's codes, -PERR_TIMEOUT or -PERR_CANCELLED, with a
 * reason in err (the caller closes fd; nothing the other side sent was acted on).
 */
int p2p_greet(int fd, const sec_cfg_t *sec, const uint8_t self[16], const pwait_t *w, p2p_intro_t *who,
              sec_link_t **link, char *err, size_t errlen);

#endif
