/* sec_relay.c - see sec_relay.h. */
#include "sec/sec_relay.h"

#include <sodium.h>
#include <string.h>

#include "sec/sec_key.h"

#define RELAY_MAC_BYTES (RELAY_TOKEN_BYTES - RELAY_NONCE_BYTES)

const char *relay_status_str(int status) {
    switch (status) {
    case RELAY_ST_PAIRED: return "paired";
    case RELAY_ST_BAD_TOKEN: return "the relay refused the token (not minted under its run key)";
    case RELAY_ST_TIMEOUT: return "no partner with the token reached the relay in time";
    case RELAY_ST_BUSY: return "the relay is busy (a connection limit, or the token's role is taken)";
    case RELAY_ST_VERSION: return "the relay speaks another protocol version";
    default: return "unknown relay status";
    }
}

int relay_token_key(const uint8_t psk[SEC_PSK_BYTES], uint8_t out[RELAY_KEY_BYTES]) {
    if (sodium_init() < 0) return -PERR_FAILED;
    /* A key of its own: a token never serves as anything else made from the PSK, and the key gives the PSK away
     * to nobody who holds it (a relay). */
    _Static_assert(SEC_PSK_BYTES == crypto_kdf_KEYBYTES, "the PSK is a KDF master key");
    _Static_assert(RELAY_KEY_BYTES <= crypto_generichash_KEYBYTES, "the token key keys BLAKE2b");
    crypto_kdf_derive_from_key(out, RELAY_KEY_BYTES, 1, "pcclrlay", psk);
    return 0;
}

/* The MAC of nonce: keyed BLAKE2b under the token key k, or unkeyed when k is NULL. */
static int mac_under(const uint8_t *k, const uint8_t nonce[RELAY_NONCE_BYTES], uint8_t mac[RELAY_MAC_BYTES]) {
    if (sodium_init() < 0) return -PERR_FAILED;
    crypto_generichash(mac, RELAY_MAC_BYTES, nonce, RELAY_NONCE_BYTES, k, k ? RELAY_KEY_BYTES : 0);
    return 0;
}

/* The MAC of nonce under psk's token key, or unkeyed when psk is NULL. */
static int token_mac(const uint8_t *psk, const uint8_t nonce[RELAY_NONCE_BYTES], uint8_t mac[RELAY_MAC_BYTES]) {
    uint8_t key[RELAY_KEY_BYTES];
    int rc = psk ? relay_token_key(psk, key) : 0;
    if (rc == 0) rc = mac_under(psk ? key : NULL, nonce, mac);
    sodium_memzero(key, sizeof key);
    return rc;
}

int relay_token_make(const uint8_t *run_key_or_NULL, const uint8_t nonce[RELAY_NONCE_BYTES],
                     uint8_t out[RELAY_TOKEN_BYTES]) {
    memcpy(out, nonce, RELAY_NONCE_BYTES);
    return token_mac(run_key_or_NULL, nonce, out + RELAY_NONCE_BYTES);
}

int relay_token_check(const uint8_t *run_key_or_NULL, const uint8_t token[RELAY_TOKEN_BYTES]) {
    uint8_t key[RELAY_KEY_BYTES];
    int rc = run_key_or_NULL ? relay_token_key(run_key_or_NULL, key) : 0;
    if (rc == 0) rc = relay_token_check_key(run_key_or_NULL ? key : NULL, token);
    sodium_memzero(key, sizeof key);
    return rc ? -PERR_REFUSED : 0;
}

int relay_token_check_key(const uint8_t *token_key_or_NULL, const uint8_t token[RELAY_TOKEN_BYTES]) {
    uint8_t mac[RELAY_MAC_BYTES];
    if (mac_under(token_key_or_NULL, token, mac) != 0) return -PERR_REFUSED;
    return crypto_verify_16(mac, token + RELAY_NONCE_BYTES) == 0 ? 0 : -PERR_REFUSED;
}

void relay_greeting_encode(const uint8_t token[RELAY_TOKEN_BYTES], int role, uint8_t out[RELAY_GREETING_BYTES]) {
    out[0] = (uint8_t)(RELAY_MAGIC >> 24);
    out[1] = (uint8_t)(RELAY_MAGIC >> 16);
    out[2] = (uint8_t)(RELAY_MAGIC >> 8);
    out[3] = (uint8_t)RELAY_MAGIC;
    out[4] = RELAY_VERSION;
    memcpy(out + 5, token, RELAY_TOKEN_BYTES);
    out[5 + RELAY_TOKEN_BYTES] = (uint8_t)role;
}

int relay_greeting_parse(const uint8_t *buf, size_t len, relay_greeting_t *out) {
    for (size_t i = 0; i < len && i < 4; i++)
        if (buf[i] != (uint8_t)(RELAY_MAGIC >> (24 - 8 * i))) return -PERR_PROTOCOL;
    if (len > 4 && buf[4] != RELAY_VERSION) return -PERR_REFUSED;
    if (len < RELAY_GREETING_BYTES) return (int)(RELAY_GREETING_BYTES - len);
    uint8_t role = buf[5 + RELAY_TOKEN_BYTES];
    if (role != RELAY_ROLE_DIALER && role != RELAY_ROLE_TARGET) return -PERR_PROTOCOL;
    memcpy(out->token, buf + 5, RELAY_TOKEN_BYTES);
    out->role = role;
    return 0;
}
