/*
 * identity.h - a peer's identity (internal): an Ed25519 key pair, its uuid (derived from the public key),
 * its name, and the proof of possession that HELLO and RESUME carry (docs/protocol.md "Identity",
 * docs/security.md). libsodium does the crypto.
 *
 * An identity file (pccl join --identity-file, PCCL_IDENTITY_FILE) holds the 32-byte Ed25519 seed as one
 * line of base64; it is private to its owner (mode 0600, like a run key file) and created when missing.
 * A public key is written as one line of base64 (44 characters); one is read as base64 or 64 hex digits.
 */
#ifndef PCCL_IDENTITY_H
#define PCCL_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define IDENT_PK_BYTES 32
#define IDENT_SK_BYTES 64
#define IDENT_SIG_BYTES 64
#define IDENT_NONCE_BYTES 32
#define IDENT_DIGEST_BYTES 32
#define IDENT_NAME_MAX 63 /* printable bytes of a peer's name */
#define IDENT_PK_STRLEN 45 /* base64 of a public key, with its NUL */

typedef struct ident {
    uint8_t pk[IDENT_PK_BYTES];
    uint8_t sk[IDENT_SK_BYTES];
} ident_t;

/* A fresh key pair. @return 0, or -PERR_FAILED (libsodium failed to initialize). */
int ident_generate(ident_t *id);
/* The key pair of a 32-byte seed. @return 0, or -PERR_FAILED (libsodium failed). */
int ident_from_seed(ident_t *id, const uint8_t seed[32]);
/* Loads the identity file at path, creating it (mode 0600, a fresh seed) when missing. A file that group or
 * others may access, that another user owns, or that is not one base64 seed line is refused.
 * *created (may be NULL) says whether it was created now.
 * @return 0; -PERR_IO (cannot create, open or read it); -PERR_INVALID (refused by sec_file_check, or malformed);
 *         -PERR_FAILED (libsodium failed). A failure leaves a one-line reason in err. */
int ident_load_file(const char *path, ident_t *id, int *created, char *err, size_t errlen);

/* The uuid of a public key: the first 16 bytes of its BLAKE2b-256. */
void ident_uuid(const uint8_t pk[IDENT_PK_BYTES], uint8_t uuid[16]);
/* The public key as one base64 line (no newline). */
void ident_pk_str(const uint8_t pk[IDENT_PK_BYTES], char out[IDENT_PK_STRLEN]);
/* A public key written as base64 or 64 hex digits (surrounding blanks ignored). @return 0, or -PERR_INVALID. */
int ident_pk_parse(const char *s, size_t len, uint8_t pk[IDENT_PK_BYTES]);

/* The proof of a HELLO or RESUME: sig over a domain label, the master's nonce and digest (BLAKE2b-256 of
 * the message's body up to the signature, wire.c). */
void ident_sign(const ident_t *id, const uint8_t nonce[IDENT_NONCE_BYTES], const uint8_t digest[IDENT_DIGEST_BYTES],
                uint8_t sig[IDENT_SIG_BYTES]);
/* @return 0 when sig proves pk's possession for this nonce and digest, -PERR_REFUSED otherwise. */
int ident_verify(const uint8_t pk[IDENT_PK_BYTES], const uint8_t nonce[IDENT_NONCE_BYTES],
                 const uint8_t digest[IDENT_DIGEST_BYTES], const uint8_t sig[IDENT_SIG_BYTES]);

struct wire_msg;
struct wbuf;
/* Appends the framed encoding of HELLO or RESUME m (its id.sig ignored) signed by id for the master's nonce;
 * m's id.pubkey must be id's. @return 0, or wire_encode's code. */
int ident_encode_signed(const ident_t *id, const uint8_t nonce[IDENT_NONCE_BYTES], const struct wire_msg *m,
                        struct wbuf *out);

/* Whether s is a valid peer name: at most IDENT_NAME_MAX bytes, each printable ASCII (may be empty). */
int ident_name_valid(const char *s);
/* A name made valid: non-printable bytes become '-', truncated to IDENT_NAME_MAX. */
void ident_name_clean(const char *s, char out[IDENT_NAME_MAX + 1]);
/* The default name of a peer: PCCL_NAME, else the host name (a Kubernetes pod's is the pod name). */
void ident_default_name(char out[IDENT_NAME_MAX + 1]);

/* A list of admitted public keys (pccl master --allow-keys). */
typedef struct ident_keys {
    uint8_t (*pk)[IDENT_PK_BYTES];
    int n;
} ident_keys_t;
/* Reads an allow-keys file: one public key per line, optionally followed by blanks and a comment; blank
 * lines and lines starting with '#' are skipped. @return 0; -PERR_IO (cannot open or read it); -PERR_INVALID
 * (a line that is no key, with the file and line in err); -PERR_NOMEM. On failure keys are untouched. */
int ident_keys_load(const char *path, ident_keys_t *keys, char *err, size_t errlen);
int ident_keys_has(const ident_keys_t *keys, const uint8_t pk[IDENT_PK_BYTES]);
void ident_keys_free(ident_keys_t *keys);

#endif
