/* relay_key.c - the key a keyed relay checks tokens with: a relay key file (the token key alone, which cannot
 * join the run), or the run key file itself (its token key derived, the run key wiped). */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "relay/relay_internal.h"

#define RELAY_KEY_PREFIX "pccl-relay-key-v1 "

int relay_key_line(const char *run_key_file, char *out, size_t cap, char *err, size_t errlen) {
    sec_cfg_t sec = {0};
    uint8_t k[RELAY_KEY_BYTES];
    int rc = sec_key_from_file(run_key_file, &sec, err, errlen);
    if (rc == 0) rc = relay_token_key(sec.psk, k);
    sodium_memzero(&sec, sizeof sec);
    if (rc != 0) return rc;
    char b64[sodium_base64_ENCODED_LEN(RELAY_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof b64, k, sizeof k, sodium_base64_VARIANT_ORIGINAL);
    sodium_memzero(k, sizeof k);
    rc = snprintf(out, cap, RELAY_KEY_PREFIX "%s", b64) < (int)cap ? 0 : -PERR_INVALID;
    sodium_memzero(b64, sizeof b64);
    return rc;
}

/* The token key of a relay key line into k. @return 0, or -PERR_INVALID with err. */
static int from_line(const char *path, const char *line, uint8_t k[RELAY_KEY_BYTES], char *err, size_t errlen) {
    const char *b64 = line + strlen(RELAY_KEY_PREFIX);
    size_t n = 0;
    if (sodium_base642bin(k, RELAY_KEY_BYTES, b64, strlen(b64), NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        n != RELAY_KEY_BYTES) {
        snprintf(err, errlen, "relay key file '%s': not %d bytes of base64 after '%s'", path, RELAY_KEY_BYTES,
                 RELAY_KEY_PREFIX);
        return -PERR_INVALID;
    }
    return 0;
}

int relay_load_key(const char *path, uint8_t k[RELAY_KEY_BYTES], int *run_key, char *err, size_t errlen) {
    char line[128];
    *run_key = 0;
    /* A relay key file is one line with the prefix; anything else is read as a run key, with its messages. */
    if (sec_token_from_file(path, line, sizeof line, err, errlen) == 0 &&
        strncmp(line, RELAY_KEY_PREFIX, strlen(RELAY_KEY_PREFIX)) == 0) {
        int rc = from_line(path, line, k, err, errlen);
        sodium_memzero(line, sizeof line);
        return rc;
    }
    sodium_memzero(line, sizeof line);
    sec_cfg_t sec = {0};
    int rc = sec_key_from_file(path, &sec, err, errlen);
    if (rc == 0) rc = relay_token_key(sec.psk, k);
    sodium_memzero(&sec, sizeof sec);
    *run_key = rc == 0;
    return rc;
}
