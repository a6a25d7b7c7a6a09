/*
 * sec_frame.h - AEAD framing of an encrypted connection (internal): each frame
 * is u32 length (big-endian, of the plaintext) | ciphertext | 16-byte tag,
 * sealed with AES-256-GCM or ChaCha20-Poly1305 (OpenSSL 3 EVP; the handshake
 * picks one per connection) under the session key of its direction. The
 * 96-bit nonce is 4 zero bytes and the frame's sequence number on that
 * connection (big-endian); the length is authenticated data. A forged,
 * altered, reordered, replayed or truncated frame does not open. A sec_aead_t
 * owns one cipher context per direction, keyed once, so a frame costs no
 * allocation and no key schedule; its send and receive halves are independent
 * (one thread may seal while another opens).
 */
#ifndef PCCL_SEC_FRAME_H
#define PCCL_SEC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "sec/sec_hs.h"

#define SEC_FRAME_HDR 4
#define SEC_FRAME_TAG 16
#define SEC_FRAME_OVERHEAD (SEC_FRAME_HDR + SEC_FRAME_TAG)
/* Largest plaintext of one frame: a receiver buffers a whole frame before it may use a byte. */
#define SEC_FRAME_MAX ((size_t)256 << 10)

struct evp_cipher_ctx_st;

/* The cipher state of one established encrypted connection. */
typedef struct sec_aead {
    int cipher;                         /* SEC_CIPHER_* */
    struct evp_cipher_ctx_st *tx, *rx;  /* keyed with the session's keys of each direction */
    uint64_t tx_seq, rx_seq;            /* the next frame's nonce counter in each direction */
} sec_aead_t;

/* Keys a's two directions from an encrypted session (the session's keys may be wiped after).
 * @return 0, or -PERR_FAILED (unknown cipher, out of memory; a is then empty and safe to free). */
int sec_aead_init(sec_aead_t *a, const sec_session_t *s);
/* Frees the contexts (which wipe their keys); a may be zeroed or half-initialized. */
void sec_aead_free(sec_aead_t *a);

/* Seals len (1..SEC_FRAME_MAX) bytes of pt into out (len + SEC_FRAME_OVERHEAD bytes; out may be
 * pt - SEC_FRAME_HDR, i.e. in place) and advances the send counter. @return 0; -PERR_INVALID (no
 * key, a length out of range, or the counter is spent); -PERR_FAILED (the cipher failed). After a
 * failure the connection must be closed: a nonce is never reused. */
int sec_frame_seal(sec_aead_t *a, const uint8_t *pt, size_t len, uint8_t *out);
/* Size of the whole frame whose 4-byte header is hdr; 0 when its length is 0 or over the maximum. */
size_t sec_frame_size(const uint8_t *hdr);
/* Opens a whole frame (frame_len = sec_frame_size) into out (frame_len - SEC_FRAME_OVERHEAD
 * bytes; out may be frame + SEC_FRAME_HDR, i.e. in place). @return 0 and advances the receive
 * counter, or -PERR_REFUSED for a frame that does not open (out's bytes are then zeroed: nothing
 * unauthenticated is left there). */
int sec_frame_open_to(sec_aead_t *a, const uint8_t *frame, size_t frame_len, uint8_t *out);
/* sec_frame_open_to in place: the plaintext is then at frame + SEC_FRAME_HDR. */
int sec_frame_open(sec_aead_t *a, uint8_t *frame, size_t frame_len);

/* This machine's preferred cipher: PCCL_CIPHER if set ("aes-256-gcm" or "chacha20-poly1305"),
 * else AES-256-GCM where the CPU has AES and carry-less multiply instructions, else
 * ChaCha20-Poly1305. */
int sec_cipher_preferred(void);
/* The cipher both sides use: AES-256-GCM only when both prefer it (it is slow without AES-NI). */
int sec_cipher_agree(int initiator_pref, int responder_pref);
/* "aes-256-gcm", "chacha20-poly1305", or "none". */
const char *sec_cipher_name(int cipher);

#endif
