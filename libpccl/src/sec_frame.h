/*
 * sec_frame.h - AEAD framing of an encrypted connection (internal): each frame
 * is u32 length (big-endian, of the plaintext) | ciphertext | 16-byte tag,
 * sealed with XChaCha20-Poly1305 (IETF) under the session key of its direction;
 * the nonce is the frame's sequence number on that connection, and the length
 * is authenticated data. A forged, altered, reordered, replayed or truncated
 * frame does not open. Pure functions over buffers.
 */
#ifndef PCCL_SEC_FRAME_H
#define PCCL_SEC_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "sec_hs.h"

#define SEC_FRAME_HDR 4
#define SEC_FRAME_TAG 16
#define SEC_FRAME_OVERHEAD (SEC_FRAME_HDR + SEC_FRAME_TAG)
/* Largest plaintext of one frame: a receiver buffers a whole frame before it may use a byte. */
#define SEC_FRAME_MAX ((size_t)256 << 10)

/* Seals len (1..SEC_FRAME_MAX) bytes of pt into out (len + SEC_FRAME_OVERHEAD bytes; out may be
 * pt - SEC_FRAME_HDR, i.e. in place) and advances the send counter. */
void sec_frame_seal(sec_session_t *s, const uint8_t *pt, size_t len, uint8_t *out);
/* Size of the whole frame whose 4-byte header is hdr; 0 when its length is 0 or over the maximum. */
size_t sec_frame_size(const uint8_t *hdr);
/* Opens a whole frame (frame_len = sec_frame_size) into out (frame_len - SEC_FRAME_OVERHEAD
 * bytes; out may be frame + SEC_FRAME_HDR, i.e. in place). @return 0 and advances the receive
 * counter, or -1 (out's bytes are then undefined). */
int sec_frame_open_to(sec_session_t *s, const uint8_t *frame, size_t frame_len, uint8_t *out);
/* sec_frame_open_to in place: the plaintext is then at frame + SEC_FRAME_HDR. */
int sec_frame_open(sec_session_t *s, uint8_t *frame, size_t frame_len);

#endif
