/*
 * sec_key.h - the run key (internal): the secret every member of a keyed run
 * holds. It comes from a file (pccl master/join --key-file, PCCL_KEY_FILE) or
 * from memory; either way only a 32-byte digest of it (the PSK) is kept.
 * docs/security.md describes what it protects.
 */
#ifndef PCCL_SEC_KEY_H
#define PCCL_SEC_KEY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/base.h"

#define SEC_KEY_MIN_BYTES 32          /* secret bytes a key must have */
#define SEC_KEY_MAX_FILE (64u << 10)  /* a larger "key file" is a mistake */
#define SEC_PSK_BYTES 32
#define SEC_TOKEN_MIN_BYTES 16        /* bytes an admin token must have */

/* What a communicator or master knows about the security of its run. */
typedef struct sec_cfg {
    int keyed;                   /* 0: an open run (no handshake at all) */
    int encrypt;                 /* every connection carries AEAD frames (only when keyed) */
    uint8_t psk[SEC_PSK_BYTES];  /* BLAKE2b-256 of the key */
} sec_cfg_t;

/* Derives cfg->psk from key bytes (a trailing newline is not part of the key); sets keyed.
 * @return 0; -PERR_INVALID when fewer than SEC_KEY_MIN_BYTES remain; -PERR_FAILED when libsodium does not
 *         initialize. A failure leaves a reason in err. */
int sec_key_from_bytes(const void *key, size_t len, sec_cfg_t *cfg, char *err, size_t errlen);
/* A key an API call passed in memory (pcclExtCommSetRunKey, pcclExtMasterSetRunKey), or none (NULL, 0): *cfg
 * cleared, then keyed from it. @return 0, or sec_key_from_bytes's code (-PERR_INVALID also for a NULL key of a
 * nonzero length; logged: the reason the key was refused). */
int sec_key_from_api(const void *key, size_t len, sec_cfg_t *cfg);
/* The checks of a file holding a secret (a run key, an admin token), like ssh's: a regular file, no access for
 * group or others, owned by me (the effective uid) or root, at most SEC_KEY_MAX_FILE bytes. what names it in
 * messages ("key file"). @return 0, or -PERR_INVALID with a one-line reason in err. */
int sec_file_check(const struct stat *st, uid_t me, const char *what, const char *path, char *err, size_t errlen);
/* Reads a key file after sec_file_check (a systemd credential, directly in $CREDENTIALS_DIRECTORY, may show the
 * group read bit: that is systemd's ACL for the service, not a group's access). @return 0, or sec_key_from_bytes's
 * code (-PERR_INVALID also for a file that cannot be read or fails the checks) with a one-line reason in err. */
int sec_key_from_file(const char *path, sec_cfg_t *cfg, char *err, size_t errlen);
/* Reads an admin token (the file's first line, trailing blanks stripped, at least SEC_TOKEN_MIN_BYTES) into
 * out[cap] after sec_file_check. @return 0, or -PERR_INVALID with a one-line reason in err. */
int sec_token_from_file(const char *path, char *out, size_t cap, char *err, size_t errlen);
/* The key file PCCL_KEY_FILE names, if any (unset or empty: cfg untouched); cfg->keyed says whether one was
 * loaded. @return 0, or sec_key_from_file's code with a reason in err. */
int sec_key_from_env(sec_cfg_t *cfg, char *err, size_t errlen);

#endif
