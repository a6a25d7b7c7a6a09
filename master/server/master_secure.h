/*
 * master_secure.h - the master's side of a keyed run, per control connection
 * (internal): the responder's handshake driven by libuv's reads, then, when the
 * run encrypts, opening received frames into the connection's input and sealing
 * what the state machine sends. Nothing a connection sends reaches the state
 * machine before its handshake is done (master_server.c calls msm_on_connect
 * only then).
 */
#ifndef PCCL_MASTER_SECURE_H
#define PCCL_MASTER_SECURE_H

#include <stddef.h>
#include <stdint.h>

#include "sec/sec.h"

typedef struct msec {
    sec_hs_t *hs;        /* non-NULL while the handshake runs */
    uint64_t started_ms; /* loop time of the accept: the handshake's deadline counts from it */
    int encrypt;         /* after the handshake: frames in both directions */
    sec_aead_t a;        /* the frames' cipher state (encrypt) */
    uint8_t *raw;        /* received bytes not yet opened (encrypt) */
    size_t raw_len, raw_cap;
} msec_t;

/* Where a connection's handshake stands after msec_feed (a state, not a result code). */
typedef enum msec_state {
    MSEC_HANDSHAKING, /* more bytes wanted */
    MSEC_READY,       /* authenticated: the state machine may hear it */
    MSEC_OPEN_CLIENT, /* the client spoke the open protocol: it has no key (the handshake state is freed) */
} msec_state_t;

/* Starts the responder's handshake of a new connection. @return 0, or -PERR_NOMEM. */
int msec_start(msec_t *x, const sec_cfg_t *cfg, uint64_t now_ms);
/*
 * Feeds the connection's input buf[0, *len). Handshake bytes are removed from it; what to send
 * back is in x->hs->out (the caller writes it and sets out_len 0, before acting on the result).
 * On success *state says where the handshake stands: at MSEC_READY buf keeps the bytes after the
 * handshake, unless the run encrypts (then they moved to raw); at MSEC_OPEN_CLIENT err says why
 * the client is refused.
 * @return 0; sec_hs_feed's -PERR_PROTOCOL or -PERR_REFUSED; -PERR_NOMEM; -PERR_FAILED (the cipher
 *         cannot be set up). A failure leaves the reason in err. After READY, OPEN_CLIENT or a
 *         failure the handshake state is freed.
 */
int msec_feed(msec_t *x, uint8_t *buf, size_t *len, msec_state_t *state, char *err, size_t errlen);
/* Space for the next read into raw (grows it); NULL when out of memory. */
uint8_t *msec_raw_space(msec_t *x, size_t *avail);
/* Opens every whole frame in raw and appends the plaintext to *buf (growing it).
 * @return 0; -PERR_REFUSED for a frame that does not open; -PERR_NOMEM (either way the connection
 *         must be dropped). */
int msec_open(msec_t *x, uint8_t **buf, size_t *len, size_t *cap);
/* Seals len bytes into a malloc'd buffer of frames (*out, *out_len). @return 0, -PERR_NOMEM, or
 * -PERR_FAILED (the cipher failed); either failure means the connection must be dropped. */
int msec_seal(msec_t *x, const uint8_t *pt, size_t len, uint8_t **out, size_t *out_len);
void msec_free(msec_t *x);

#endif
