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

enum { MSEC_FAIL = -1, MSEC_MORE = 0, MSEC_DONE = 1, MSEC_OPEN_CLIENT = 2 };

/* Starts the responder's handshake of a new connection. @return 0, or -1 (out of memory). */
int msec_start(msec_t *x, const sec_cfg_t *cfg, uint64_t now_ms);
/*
 * Feeds the connection's input buf[0, *len). Handshake bytes are removed from it; what to send
 * back is in x->hs->out (the caller writes it and sets out_len 0, before acting on the result).
 * @return MSEC_MORE; MSEC_DONE (buf keeps the bytes after the handshake, unless the run encrypts:
 *         then they moved to raw); MSEC_OPEN_CLIENT (the client spoke the open protocol: it has no
 *         key); MSEC_FAIL (reason in err). After DONE or a failure the handshake state is freed.
 */
int msec_feed(msec_t *x, uint8_t *buf, size_t *len, char *err, size_t errlen);
/* Space for the next read into raw (grows it); NULL when out of memory. */
uint8_t *msec_raw_space(msec_t *x, size_t *avail);
/* Opens every whole frame in raw and appends the plaintext to *buf (growing it).
 * @return 0, or -1 for a frame that does not open (the connection must be dropped). */
int msec_open(msec_t *x, uint8_t **buf, size_t *len, size_t *cap);
/* Seals len bytes into a malloc'd buffer of frames (*out, *out_len). @return 0 or -1 (no memory,
 * or the cipher failed: the connection must be dropped). */
int msec_seal(msec_t *x, const uint8_t *pt, size_t len, uint8_t **out, size_t *out_len);
void msec_free(msec_t *x);

#endif
