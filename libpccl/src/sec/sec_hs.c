/* sec_hs.c - see sec_hs.h; the construction is written out in docs/security.md. */
#include "sec/sec_hs.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "sec/sec_frame.h"

enum { ST_WAIT1, ST_WAIT2, ST_WAIT3, ST_DONE, ST_FAIL }; /* states, not results */
#define HDR 8            /* magic, version, type, flags/purpose, cipher */
#define BODY (32 + 32 + SEC_HS_CTX) /* ephemeral pk, nonce, context */
#define MAC crypto_auth_BYTES
#define KDF_CTX "pcclhs01"
enum { SUB_MAC_R = 1, SUB_MAC_I = 2, SUB_I2R = 3, SUB_R2I = 4 };

_Static_assert(SEC_HS_MSG1 == HDR + BODY, "MSG1 layout");
_Static_assert(SEC_HS_MSG2 == HDR + BODY + MAC, "MSG2 layout");
_Static_assert(SEC_HS_MSG3 == HDR + MAC, "MSG3 layout");

/* Ends the handshake with rc (-PERR_PROTOCOL or -PERR_REFUSED); every later feed returns it again. */
static int fail(sec_hs_t *hs, int rc, const char *why) {
    snprintf(hs->err, sizeof hs->err, "%s", why);
    hs->state = ST_FAIL;
    hs->rc = rc;
    hs->out_len = 0;
    return rc;
}

/* A message no handshake of this version sends. */
static int bad(sec_hs_t *hs, const char *why) { return fail(hs, -PERR_PROTOCOL, why); }
/* A well-formed message from a side without the key, the expected context or the same encryption. */
static int refuse(sec_hs_t *hs, const char *why) { return fail(hs, -PERR_REFUSED, why); }

static void put_hdr(uint8_t *p, uint8_t type, uint8_t b6, uint8_t b7) {
    wire_put_u32(p, SEC_HS_MAGIC);
    p[4] = SEC_HS_VERSION;
    p[5] = type;
    p[6] = b6;
    p[7] = b7;
}

static int known_cipher(int c) { return c == SEC_CIPHER_AES256GCM || c == SEC_CIPHER_CHACHA20POLY1305; }

/* Fills pk, random nonce and context of this side's message at p. */
static void put_body(const sec_hs_t *hs, uint8_t *p, const uint8_t *ctx) {
    memcpy(p, hs->pk, 32);
    randombytes_buf(p + 32, 32);
    if (ctx) memcpy(p + 64, ctx, SEC_HS_CTX);
    else memset(p + 64, 0, SEC_HS_CTX);
}

static uint8_t g_ctx_zero[SEC_HS_CTX];

int sec_hs_start(sec_hs_t *hs, const sec_cfg_t *cfg, const sec_hs_params_t *p) {
    memset(hs, 0, sizeof *hs);
    if (sodium_init() < 0 || !cfg->keyed || (p->role != SEC_INITIATOR && p->role != SEC_RESPONDER) ||
        p->expect_ctx_len > SEC_HS_CTX || (p->cipher && !known_cipher(p->cipher))) {
        return fail(hs, -PERR_INVALID, "bad handshake parameters");
    }
    hs->role = p->role;
    hs->purpose = p->purpose;
    hs->flags = p->flags;
    hs->cipher = p->cipher ? p->cipher : sec_cipher_preferred();
    memcpy(hs->psk, cfg->psk, SEC_PSK_BYTES);
    if (p->expect_ctx) memcpy(hs->expect_ctx, p->expect_ctx, p->expect_ctx_len);
    hs->expect_ctx_len = p->expect_ctx_len;
    crypto_kx_keypair(hs->pk, hs->sk);
    if (p->role == SEC_INITIATOR) {
        put_hdr(hs->msg1, 1, p->purpose, (uint8_t)hs->cipher);
        put_body(hs, hs->msg1 + HDR, p->ctx);
        memcpy(hs->out, hs->msg1, SEC_HS_MSG1);
        hs->out_len = SEC_HS_MSG1;
        hs->state = ST_WAIT2;
    } else {
        /* The responder's own message is built when MSG1 arrives; keep its context until then. */
        memcpy(hs->msg2 + HDR + 64, p->ctx ? p->ctx : g_ctx_zero, SEC_HS_CTX);
        hs->state = ST_WAIT1;
    }
    return 0;
}

static size_t expected(const sec_hs_t *hs) {
    switch (hs->state) {
    case ST_WAIT1: return SEC_HS_MSG1;
    case ST_WAIT2: return SEC_HS_MSG2;
    case ST_WAIT3: return SEC_HS_MSG3;
    default: return 0;
    }
}

size_t sec_hs_want(const sec_hs_t *hs) { return expected(hs) - hs->in_len; }

/* Session keys and MAC keys from the key exchange, the PSK and the transcript (MSG1, MSG2 up to
 * its MAC). Fills the session, and the two MAC keys. @return 0, or -PERR_PROTOCOL for a peer key without a
 * shared secret. */
static int derive(sec_hs_t *hs, const uint8_t *peer_pk, uint8_t mac_r[32], uint8_t mac_i[32]) {
    uint8_t rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES], dh[2 * crypto_kx_SESSIONKEYBYTES];
    int rc = hs->role == SEC_INITIATOR ? crypto_kx_client_session_keys(rx, tx, hs->pk, hs->sk, peer_pk)
                                       : crypto_kx_server_session_keys(rx, tx, hs->pk, hs->sk, peer_pk);
    if (rc != 0) return -PERR_PROTOCOL; /* a low-order point: no shared secret */
    /* The same order on both sides: the initiator's sending key first. */
    memcpy(dh, hs->role == SEC_INITIATOR ? tx : rx, 32);
    memcpy(dh + 32, hs->role == SEC_INITIATOR ? rx : tx, 32);
    uint8_t h[32], k[32];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    crypto_generichash_update(&st, hs->msg1, SEC_HS_MSG1);
    crypto_generichash_update(&st, hs->msg2, HDR + BODY);
    crypto_generichash_final(&st, h, sizeof h);
    static const char label[] = "pccl hs v1";
    crypto_generichash_init(&st, hs->psk, SEC_PSK_BYTES, sizeof k);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof label - 1);
    crypto_generichash_update(&st, dh, sizeof dh);
    crypto_generichash_update(&st, h, sizeof h);
    crypto_generichash_final(&st, k, sizeof k);
    crypto_kdf_derive_from_key(mac_r, 32, SUB_MAC_R, KDF_CTX, k);
    crypto_kdf_derive_from_key(mac_i, 32, SUB_MAC_I, KDF_CTX, k);
    int init = hs->role == SEC_INITIATOR;
    crypto_kdf_derive_from_key(hs->session.tx_key, 32, init ? SUB_I2R : SUB_R2I, KDF_CTX, k);
    crypto_kdf_derive_from_key(hs->session.rx_key, 32, init ? SUB_R2I : SUB_I2R, KDF_CTX, k);
    memcpy(hs->th, h, sizeof h); /* what the MACs cover */
    sodium_memzero(rx, sizeof rx);
    sodium_memzero(tx, sizeof tx);
    sodium_memzero(dh, sizeof dh);
    sodium_memzero(k, sizeof k);
    sodium_memzero(&st, sizeof st);
    return 0;
}

static int check_hdr(sec_hs_t *hs, const uint8_t *p, uint8_t type) {
    if (wire_get_u32(p) != SEC_HS_MAGIC) return bad(hs, "not a pccl handshake (is the other side keyed?)");
    if (p[4] != SEC_HS_VERSION) return bad(hs, "unsupported handshake version");
    if (p[5] != type) return bad(hs, "malformed handshake message");
    if (type == 1 && p[6] != hs->purpose) return bad(hs, "handshake for another kind of connection");
    if (type == 1 && !known_cipher(p[7])) return bad(hs, "unknown cipher");
    if (type == 2 && (p[6] & ~SEC_FLAG_ENCRYPT)) return bad(hs, "unknown handshake flags");
    /* The responder picks by the one rule both sides know; anything else is a fault or a forgery. */
    if (type == 2 && p[7] != ((p[6] & SEC_FLAG_ENCRYPT) ? sec_cipher_agree(hs->cipher, p[7]) : SEC_CIPHER_NONE))
        return bad(hs, "the other side chose a cipher this side did not offer");
    if (type == 3 && (p[6] != 0 || p[7] != 0)) return bad(hs, "malformed handshake message");
    return 0;
}

/* Responder: MSG1 arrived; answer MSG2. */
static int on_msg1(sec_hs_t *hs) {
    memcpy(hs->msg1, hs->in, SEC_HS_MSG1);
    memcpy(hs->peer_ctx, hs->msg1 + HDR + 64, SEC_HS_CTX);
    int enc = (hs->flags & SEC_FLAG_ENCRYPT) != 0;
    int cipher = enc ? sec_cipher_agree(hs->msg1[7], hs->cipher) : SEC_CIPHER_NONE;
    put_hdr(hs->msg2, 2, (uint8_t)hs->flags, (uint8_t)cipher);
    uint8_t ctx[SEC_HS_CTX];
    memcpy(ctx, hs->msg2 + HDR + 64, SEC_HS_CTX);
    put_body(hs, hs->msg2 + HDR, ctx);
    uint8_t mac_r[32];
    if (derive(hs, hs->msg1 + HDR, mac_r, hs->mac_key_i) != 0) return bad(hs, "bad ephemeral key");
    crypto_auth(hs->msg2 + HDR + BODY, hs->th, sizeof hs->th, mac_r);
    sodium_memzero(mac_r, sizeof mac_r);
    hs->session.encrypt = enc;
    hs->session.cipher = cipher;
    memcpy(hs->out, hs->msg2, SEC_HS_MSG2);
    hs->out_len = SEC_HS_MSG2;
    hs->state = ST_WAIT3;
    return 0;
}

/* Initiator: MSG2 arrived; check the responder's proof and answer MSG3. */
static int on_msg2(sec_hs_t *hs) {
    memcpy(hs->msg2, hs->in, SEC_HS_MSG2);
    uint8_t flags = hs->msg2[6];
    if (hs->flags >= 0 && flags != (uint8_t)hs->flags)
        return refuse(hs, flags & SEC_FLAG_ENCRYPT ? "the other side encrypts, this one does not"
                                                 : "this side encrypts, the other side does not");
    uint8_t mac_r[32], mac_i[32];
    int ok = derive(hs, hs->msg2 + HDR, mac_r, mac_i) == 0 &&
             crypto_auth_verify(hs->msg2 + HDR + BODY, hs->th, sizeof hs->th, mac_r) == 0;
    if (ok) {
        put_hdr(hs->out, 3, 0, 0);
        crypto_auth(hs->out + HDR, hs->th, sizeof hs->th, mac_i);
    }
    sodium_memzero(mac_r, sizeof mac_r);
    sodium_memzero(mac_i, sizeof mac_i);
    if (!ok) return refuse(hs, "the other side does not hold the run key");
    memcpy(hs->peer_ctx, hs->msg2 + HDR + 64, SEC_HS_CTX);
    if (hs->expect_ctx_len && sodium_memcmp(hs->peer_ctx, hs->expect_ctx, hs->expect_ctx_len) != 0)
        return refuse(hs, "the other side is not the peer expected");
    hs->session.encrypt = (flags & SEC_FLAG_ENCRYPT) != 0;
    hs->session.cipher = hs->msg2[7];
    hs->out_len = SEC_HS_MSG3;
    hs->state = ST_DONE;
    return 0;
}

/* Responder: MSG3 arrived; check the initiator's proof. */
static int on_msg3(sec_hs_t *hs) {
    if (crypto_auth_verify(hs->in + HDR, hs->th, sizeof hs->th, hs->mac_key_i) != 0)
        return refuse(hs, "the other side does not hold the run key");
    if (hs->expect_ctx_len && sodium_memcmp(hs->peer_ctx, hs->expect_ctx, hs->expect_ctx_len) != 0)
        return refuse(hs, "the other side is not the peer expected");
    hs->state = ST_DONE;
    return 0;
}

int sec_hs_feed(sec_hs_t *hs, const uint8_t *in, size_t len, size_t *used) {
    *used = 0;
    if (hs->state == ST_FAIL) return hs->rc;
    if (hs->state == ST_DONE) return 0;
    size_t want = expected(hs), take = want - hs->in_len;
    if (take > len) take = len;
    uint8_t type = hs->state == ST_WAIT1 ? 1 : hs->state == ST_WAIT2 ? 2 : 3;
    memcpy(hs->in + hs->in_len, in, take);
    size_t before = hs->in_len;
    hs->in_len += take;
    *used = take;
    /* Garbage fails as soon as its header is in, not after a full message's worth of bytes. */
    if (before < HDR && hs->in_len >= HDR) {
        int rc = check_hdr(hs, hs->in, type);
        if (rc != 0) return rc;
    }
    if (hs->in_len < want) return 0;
    hs->in_len = 0;
    switch (hs->state) {
    case ST_WAIT1: return on_msg1(hs);
    case ST_WAIT2: return on_msg2(hs);
    default: return on_msg3(hs);
    }
}

int sec_hs_done(const sec_hs_t *hs) { return hs->state == ST_DONE; }

void sec_hs_wipe(sec_hs_t *hs) { sodium_memzero(hs, sizeof *hs); }
