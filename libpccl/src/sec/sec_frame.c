/* sec_frame.c - see sec_frame.h. */
#include "sec/sec_frame.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "base/base.h"

#define NONCE 12

_Static_assert(SEC_KEY_BYTES == 32, "256-bit keys");

static const EVP_CIPHER *evp_of(int cipher) {
    switch (cipher) {
    case SEC_CIPHER_AES256GCM: return EVP_aes_256_gcm();
    case SEC_CIPHER_CHACHA20POLY1305: return EVP_chacha20_poly1305();
    default: return NULL;
    }
}

const char *sec_cipher_name(int cipher) {
    switch (cipher) {
    case SEC_CIPHER_AES256GCM: return "aes-256-gcm";
    case SEC_CIPHER_CHACHA20POLY1305: return "chacha20-poly1305";
    default: return "none";
    }
}

/* AES-GCM is fast only with AES rounds and carry-less multiply in hardware; ChaCha20 is fast anywhere. */
static int cpu_has_aes(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
#elif defined(__aarch64__)
    unsigned long hw = getauxval(AT_HWCAP);
    return (hw & HWCAP_AES) && (hw & HWCAP_PMULL);
#else
    return 0;
#endif
}

int sec_cipher_preferred(void) {
    const char *e = getenv("PCCL_CIPHER");
    if (e && *e) {
        if (strcmp(e, "aes-256-gcm") == 0) return SEC_CIPHER_AES256GCM;
        if (strcmp(e, "chacha20-poly1305") == 0) return SEC_CIPHER_CHACHA20POLY1305;
        pccl_log(PCCL_LOG_WARN, "sec", "PCCL_CIPHER=%s is neither aes-256-gcm nor chacha20-poly1305: ignored", e);
    }
    return cpu_has_aes() ? SEC_CIPHER_AES256GCM : SEC_CIPHER_CHACHA20POLY1305;
}

int sec_cipher_agree(int initiator_pref, int responder_pref) {
    return initiator_pref == SEC_CIPHER_AES256GCM && responder_pref == SEC_CIPHER_AES256GCM
               ? SEC_CIPHER_AES256GCM
               : SEC_CIPHER_CHACHA20POLY1305;
}

void sec_aead_free(sec_aead_t *a) {
    EVP_CIPHER_CTX_free(a->tx); /* frees wipe the expanded keys */
    EVP_CIPHER_CTX_free(a->rx);
    memset(a, 0, sizeof *a);
}

int sec_aead_init(sec_aead_t *a, const sec_session_t *s) {
    memset(a, 0, sizeof *a);
    const EVP_CIPHER *c = evp_of(s->cipher);
    if (!c || !(a->tx = EVP_CIPHER_CTX_new()) || !(a->rx = EVP_CIPHER_CTX_new()) ||
        EVP_EncryptInit_ex(a->tx, c, NULL, s->tx_key, NULL) != 1 ||
        EVP_DecryptInit_ex(a->rx, c, NULL, s->rx_key, NULL) != 1) {
        sec_aead_free(a);
        return -PERR_FAILED;
    }
    a->cipher = s->cipher;
    a->tx_seq = s->tx_seq;
    a->rx_seq = s->rx_seq;
    return 0;
}

/* Each direction of each connection has its own key, so a counter never repeats a nonce. */
static void nonce_of(uint64_t seq, uint8_t n[NONCE]) {
    memset(n, 0, NONCE - 8);
    wire_put_u64(n + NONCE - 8, seq);
}

int sec_frame_seal(sec_aead_t *a, const uint8_t *pt, size_t len, uint8_t *out) {
    /* The last counter value is never used: the connection closes instead of wrapping. */
    if (!a->tx || a->tx_seq == UINT64_MAX || len == 0 || len > SEC_FRAME_MAX) return -PERR_INVALID;
    uint8_t n[NONCE], hdr[SEC_FRAME_HDR];
    nonce_of(a->tx_seq, n);
    wire_put_u32(hdr, (uint32_t)len);
    int ol;
    if (EVP_EncryptInit_ex(a->tx, NULL, NULL, NULL, n) != 1 || EVP_EncryptUpdate(a->tx, NULL, &ol, hdr, sizeof hdr) != 1 ||
        EVP_EncryptUpdate(a->tx, out + SEC_FRAME_HDR, &ol, pt, (int)len) != 1 ||
        EVP_EncryptFinal_ex(a->tx, out + SEC_FRAME_HDR + len, &ol) != 1 ||
        EVP_CIPHER_CTX_ctrl(a->tx, EVP_CTRL_AEAD_GET_TAG, SEC_FRAME_TAG, out + SEC_FRAME_HDR + len) != 1)
        return -PERR_FAILED;
    memcpy(out, hdr, sizeof hdr); /* after the cipher read pt: out may overlap pt's header room only */
    a->tx_seq++;
    return 0;
}

size_t sec_frame_size(const uint8_t *hdr) {
    uint32_t len = wire_get_u32(hdr);
    return len == 0 || len > SEC_FRAME_MAX ? 0 : (size_t)len + SEC_FRAME_OVERHEAD;
}

int sec_frame_open_to(sec_aead_t *a, const uint8_t *frame, size_t frame_len, uint8_t *out) {
    if (!a->rx || a->rx_seq == UINT64_MAX || frame_len < SEC_FRAME_OVERHEAD || sec_frame_size(frame) != frame_len)
        return -PERR_REFUSED;
    size_t len = frame_len - SEC_FRAME_OVERHEAD;
    uint8_t n[NONCE], tag[SEC_FRAME_TAG];
    nonce_of(a->rx_seq, n);
    memcpy(tag, frame + SEC_FRAME_HDR + len, sizeof tag); /* in place, out overwrites the ciphertext only */
    int ol;
    /* The cipher writes plaintext before it checks the tag: a frame that fails leaves zeros. */
    if (EVP_DecryptInit_ex(a->rx, NULL, NULL, NULL, n) != 1 ||
        EVP_DecryptUpdate(a->rx, NULL, &ol, frame, SEC_FRAME_HDR) != 1 ||
        EVP_DecryptUpdate(a->rx, out, &ol, frame + SEC_FRAME_HDR, (int)len) != 1 ||
        EVP_CIPHER_CTX_ctrl(a->rx, EVP_CTRL_AEAD_SET_TAG, SEC_FRAME_TAG, tag) != 1 ||
        EVP_DecryptFinal_ex(a->rx, out + len, &ol) != 1) {
        OPENSSL_cleanse(out, len);
        return -PERR_REFUSED;
    }
    a->rx_seq++;
    return 0;
}

int sec_frame_open(sec_aead_t *a, uint8_t *frame, size_t frame_len) {
    return sec_frame_open_to(a, frame, frame_len, frame + SEC_FRAME_HDR);
}
