/*
 * sec_relay.h - what a client tells a relay (internal): the greeting that opens every connection to
 * `pccl relay`, and the tokens that pair two connections (docs/relay.md). Shared by the relay client
 * (p2p/relay_client.h), the relay server (master/relay/) and the master, which mints tokens.
 *
 * A token is 16 bytes of nonce followed by a 16-byte MAC of the nonce: keyed BLAKE2b (libsodium's
 * crypto_generichash) under the token key, derived from the run's PSK (sec_cfg_t.psk) with crypto_kdf, so a relay
 * that holds the token key accepts only tokens its master minted, and cannot learn the PSK from it (it could not
 * join the run); in an open run the MAC is unkeyed and proves nothing (an open relay checks no token).
 */
#ifndef PCCL_SEC_RELAY_H
#define PCCL_SEC_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "sec/sec_key.h"

#define RELAY_TOKEN_BYTES 32
#define RELAY_NONCE_BYTES 16
#define RELAY_KEY_BYTES 32
/* The relay's default port: the first after the master's admin port. */
#define RELAY_DEFAULT_PORT 48153

/* The greeting: magic "PCRL", version, token, role; RELAY_GREETING_BYTES in all. */
#define RELAY_MAGIC 0x5043524Cu
#define RELAY_VERSION 1
#define RELAY_GREETING_BYTES (4 + 1 + RELAY_TOKEN_BYTES + 1)
#define RELAY_ROLE_DIALER 0
#define RELAY_ROLE_TARGET 1

/* The one byte the relay answers a greeting with: paired (the other side's bytes follow), or why it
 * closes the connection. */
enum relay_status {
    RELAY_ST_PAIRED = 0,
    RELAY_ST_BAD_TOKEN = 1, /* a keyed relay: the token was not minted under its run key */
    RELAY_ST_TIMEOUT = 2,   /* no partner with the token came in time */
    RELAY_ST_BUSY = 3,      /* over a limit (connections, per address), or the token's role is taken */
    RELAY_ST_VERSION = 4,   /* a greeting of another protocol version */
};
/* A one-line description of a status byte. */
const char *relay_status_str(int status);

/*
 * The token for nonce: nonce, then its MAC under psk (a keyed run's sec_cfg_t.psk, SEC_PSK_BYTES) or unkeyed
 * (psk NULL: an open run). @return 0, or -PERR_FAILED (libsodium did not initialize).
 */
int relay_token_make(const uint8_t *run_key_or_NULL, const uint8_t nonce[RELAY_NONCE_BYTES],
                     uint8_t out[RELAY_TOKEN_BYTES]);
/* Whether token was minted under psk (NULL: unkeyed), compared in constant time. @return 0, or -PERR_REFUSED. */
int relay_token_check(const uint8_t *run_key_or_NULL, const uint8_t token[RELAY_TOKEN_BYTES]);
/* The token key of psk: what a keyed relay holds instead of the run key. @return 0, or -PERR_FAILED. */
int relay_token_key(const uint8_t psk[SEC_PSK_BYTES], uint8_t out[RELAY_KEY_BYTES]);
/* relay_token_check under a token key (NULL: unkeyed). @return 0, or -PERR_REFUSED. */
int relay_token_check_key(const uint8_t *token_key_or_NULL, const uint8_t token[RELAY_TOKEN_BYTES]);

typedef struct relay_greeting {
    uint8_t token[RELAY_TOKEN_BYTES];
    uint8_t role; /* RELAY_ROLE_DIALER or RELAY_ROLE_TARGET */
} relay_greeting_t;

/* The greeting of token and role into out. */
void relay_greeting_encode(const uint8_t token[RELAY_TOKEN_BYTES], int role, uint8_t out[RELAY_GREETING_BYTES]);
/*
 * Parses the first len bytes of a greeting as they arrive; each byte is judged as soon as it is there, so a
 * stranger sending garbage is caught at its first wrong byte. @return the number of bytes still missing (0:
 * complete, *out filled; bytes past RELAY_GREETING_BYTES are not looked at), or -PERR_PROTOCOL (not a relay
 * greeting: wrong magic or role), or -PERR_REFUSED (a greeting of another version).
 */
int relay_greeting_parse(const uint8_t *buf, size_t len, relay_greeting_t *out);

#endif
