/*
 * sec_hs.h - the handshake of a keyed run (internal): mutual proof of the run
 * key with fresh ephemeral X25519 keys and nonces from both sides, giving each
 * connection its own session keys. A pure state machine over buffers (bytes in,
 * bytes out, no I/O, no clock), so blocking sockets (sec_link.c) and the
 * master's libuv loop drive the same code. Exact construction: docs/security.md.
 *
 *   initiator -> responder  MSG1 (104 bytes): magic, version, type 1, purpose, cipher
 *                                             preferred, ephemeral pk, nonce, context
 *   responder -> initiator  MSG2 (136 bytes): magic, version, type 2, flags, cipher
 *                                             chosen, ephemeral pk, nonce, context, MAC
 *   initiator -> responder  MSG3 (40 bytes):  magic, version, type 3, 0, 0, MAC
 *
 * Messages have fixed sizes, so a handshake never buffers more than 136 bytes
 * and the feed consumes exactly the bytes of its messages: whatever follows
 * (the protocol's own bytes) stays with the caller, and nothing of it is acted
 * on before the handshake is done.
 */
#ifndef PCCL_SEC_HS_H
#define PCCL_SEC_HS_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "sec/sec_key.h"

#define SEC_HS_MAGIC 0x50435348u /* "PCSH" */
#define SEC_HS_VERSION 2
#define SEC_HS_MSG1 104
#define SEC_HS_MSG2 136
#define SEC_HS_MSG3 40
#define SEC_HS_CTX 32
#define SEC_KEY_BYTES 32
#define SEC_HS_TIMEOUT_MS 5000 /* every driver ends a handshake that takes longer */

enum { SEC_PURPOSE_CONTROL = 1, SEC_PURPOSE_P2P = 2 };
enum { SEC_FLAG_ENCRYPT = 1 };
/* Bulk ciphers of encrypted runs (sec_frame.c); the wire carries these numbers. */
enum { SEC_CIPHER_NONE = 0, SEC_CIPHER_AES256GCM = 1, SEC_CIPHER_CHACHA20POLY1305 = 2 };
enum { SEC_INITIATOR = 1, SEC_RESPONDER = 2 };

/* Keys of one established connection; each direction has its own key and counter. */
typedef struct sec_session {
    int encrypt;
    int cipher; /* SEC_CIPHER_*: what both sides agreed on (NONE unless encrypt) */
    uint8_t tx_key[SEC_KEY_BYTES], rx_key[SEC_KEY_BYTES];
    uint64_t tx_seq, rx_seq;
} sec_session_t;

typedef struct sec_hs_params {
    int role;
    uint8_t purpose;
    /* Responder: the flags it announces. Initiator: the flags it requires, or -1 for any (a peer
     * learns from the master whether the run is encrypted). */
    int flags;
    int cipher;                /* this side's preferred bulk cipher; 0: sec_cipher_preferred() */
    const uint8_t *ctx;        /* SEC_HS_CTX bytes sent in this side's message (NULL: zeros) */
    const uint8_t *expect_ctx; /* if set, the other side's context must begin with these bytes */
    size_t expect_ctx_len;
} sec_hs_params_t;

typedef struct sec_hs {
    int role, state;
    uint8_t purpose;
    int flags;
    int cipher;                         /* this side's preference */
    uint8_t psk[SEC_PSK_BYTES];
    uint8_t pk[32], sk[32];
    uint8_t expect_ctx[SEC_HS_CTX];
    size_t expect_ctx_len;
    uint8_t peer_ctx[SEC_HS_CTX];       /* the other side's context, valid when done */
    uint8_t msg1[SEC_HS_MSG1], msg2[SEC_HS_MSG2];
    uint8_t th[32];                     /* transcript hash (MSG1, MSG2 up to its MAC) */
    uint8_t mac_key_i[SEC_KEY_BYTES];   /* the initiator's MAC key, kept by the responder for MSG3 */
    uint8_t in[SEC_HS_MSG2];            /* the message being received */
    size_t in_len;
    uint8_t out[SEC_HS_MSG2];           /* bytes to send now; the driver sends them and sets out_len 0 */
    size_t out_len;
    sec_session_t session;              /* valid when done */
    int rc;                             /* the failure, once failed */
    char err[96];
} sec_hs_t;

/* Starts a handshake with cfg's key. An initiator has MSG1 in out afterwards.
 * @return 0, or -PERR_INVALID for parameters no handshake can have (reason in err). */
int sec_hs_start(sec_hs_t *hs, const sec_cfg_t *cfg, const sec_hs_params_t *p);
/* Bytes still missing of the message expected next (0 when done or failed). */
size_t sec_hs_want(const sec_hs_t *hs);
/*
 * Feeds received bytes; *used says how many it took (never more than sec_hs_want). After each
 * call, out holds what to send (MSG2 or MSG3), and sec_hs_done says whether the handshake is
 * complete (session and peer_ctx valid; the initiator still has MSG3 to send).
 * @return 0 (more bytes wanted, or done); -PERR_PROTOCOL for bytes that are no handshake of this
 *         version; -PERR_REFUSED for a side without the run key, the expected context or the same
 *         encryption. A failure leaves the reason in err and repeats on every later feed; the
 *         connection must be closed.
 */
int sec_hs_feed(sec_hs_t *hs, const uint8_t *in, size_t len, size_t *used);
/* 1 once the handshake is complete, else 0 (still running, or failed). */
int sec_hs_done(const sec_hs_t *hs);
/* Wipes every secret of the handshake (the session too: copy it first). */
void sec_hs_wipe(sec_hs_t *hs);

#endif
