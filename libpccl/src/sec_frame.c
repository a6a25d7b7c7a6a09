/* sec_frame.c - see sec_frame.h. */
#include "sec_frame.h"

#include <sodium.h>
#include <string.h>

#include "wire.h"

_Static_assert(SEC_FRAME_TAG == crypto_aead_xchacha20poly1305_ietf_ABYTES, "tag size");

/* Each direction of each connection has its own key, so a counter never repeats a nonce. */
static void nonce_of(uint64_t seq, uint8_t n[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES]) {
    memset(n, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    wire_put_u64(n + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES - 8, seq);
}

void sec_frame_seal(sec_session_t *s, const uint8_t *pt, size_t len, uint8_t *out) {
    uint8_t n[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    nonce_of(s->tx_seq++, n);
    uint8_t hdr[SEC_FRAME_HDR];
    wire_put_u32(hdr, (uint32_t)len);
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(out + SEC_FRAME_HDR, out + SEC_FRAME_HDR + len, NULL, pt,
                                                        len, hdr, sizeof hdr, NULL, n, s->tx_key);
    memcpy(out, hdr, sizeof hdr);
}

size_t sec_frame_size(const uint8_t *hdr) {
    uint32_t len = wire_get_u32(hdr);
    return len == 0 || len > SEC_FRAME_MAX ? 0 : (size_t)len + SEC_FRAME_OVERHEAD;
}

int sec_frame_open_to(sec_session_t *s, const uint8_t *frame, size_t frame_len, uint8_t *out) {
    if (frame_len < SEC_FRAME_OVERHEAD || sec_frame_size(frame) != frame_len) return -1;
    size_t len = frame_len - SEC_FRAME_OVERHEAD;
    uint8_t n[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    nonce_of(s->rx_seq, n);
    if (crypto_aead_xchacha20poly1305_ietf_decrypt_detached(out, NULL, frame + SEC_FRAME_HDR, len,
                                                            frame + SEC_FRAME_HDR + len, frame, SEC_FRAME_HDR, n,
                                                            s->rx_key) != 0)
        return -1;
    s->rx_seq++;
    return 0;
}

int sec_frame_open(sec_session_t *s, uint8_t *frame, size_t frame_len) {
    return sec_frame_open_to(s, frame, frame_len, frame + SEC_FRAME_HDR);
}
