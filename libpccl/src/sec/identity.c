/* identity.c - see identity.h. */
#include "sec/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sec/sec_key.h"
#include "base/base.h"

/* Separates these signatures from any other use of the key. */
static const char sign_label[] = "pccl peer identity v6";
#define IDENT_FILE_MAX 4096

int ident_generate(ident_t *id) {
    if (sodium_init() < 0) return -PERR_FAILED;
    return crypto_sign_keypair(id->pk, id->sk) == 0 ? 0 : -PERR_FAILED;
}

int ident_from_seed(ident_t *id, const uint8_t seed[32]) {
    if (sodium_init() < 0) return -PERR_FAILED;
    return crypto_sign_seed_keypair(id->pk, id->sk, seed) == 0 ? 0 : -PERR_FAILED;
}

/* Creates path with a fresh seed; O_EXCL, so a file that appeared meanwhile is not overwritten.
 * @return 0 with *created 1 (id holds the new key pair) or 0 (it exists now: read it); -PERR_IO with a
 * reason in err. */
static int create_file(const char *path, ident_t *id, int *created, char *err, size_t errlen) {
    *created = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST) return 0;
        snprintf(err, errlen, "cannot create identity file '%s': %s", path, strerror(errno));
        return -PERR_IO;
    }
    uint8_t seed[32];
    randombytes_buf(seed, sizeof seed);
    char line[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL) + 1];
    sodium_bin2base64(line, sizeof line - 1, seed, sizeof seed, sodium_base64_VARIANT_ORIGINAL);
    size_t n = strlen(line);
    line[n++] = '\n';
    int rc = write(fd, line, n) == (ssize_t)n && fsync(fd) == 0 ? 0 : -PERR_IO;
    if (rc < 0) snprintf(err, errlen, "cannot write identity file '%s': %s", path, strerror(errno));
    close(fd);
    if (rc == 0) {
        ident_from_seed(id, seed);
        *created = 1;
    } else {
        unlink(path);
    }
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(line, sizeof line);
    return rc;
}

int ident_load_file(const char *path, ident_t *id, int *created, char *err, size_t errlen) {
    int made = 0;
    if (created) *created = 0;
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return -PERR_FAILED;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        int c = create_file(path, id, &made, err, errlen);
        if (c != 0 || made) {
            if (created) *created = made;
            return c;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot open identity file '%s': %s", path, strerror(errno));
        return -PERR_IO;
    }
    struct stat st = {0};
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat identity file '%s': %s", path, strerror(errno));
        close(fd);
        return -PERR_IO;
    }
    /* The run key's rules: a regular file, private, owned by this user or root. */
    int rc = sec_file_check(&st, geteuid(), "identity file", path, err, errlen);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    char buf[IDENT_FILE_MAX + 1];
    size_t n = 0;
    ssize_t r;
    while (n < IDENT_FILE_MAX && (r = read(fd, buf + n, IDENT_FILE_MAX - n)) > 0) n += (size_t)r;
    close(fd);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) n--;
    buf[n] = 0;
    uint8_t seed[32];
    size_t got = 0;
    rc = -PERR_INVALID;
    if (sodium_base642bin(seed, sizeof seed, buf, n, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != sizeof seed)
        snprintf(err, errlen, "identity file '%s' is malformed: it must hold one line of base64, a 32-byte seed "
                 "(delete it to make a new identity)", path);
    else if ((rc = ident_from_seed(id, seed)) != 0)
        snprintf(err, errlen, "identity file '%s': cannot derive the key pair", path);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

void ident_uuid(const uint8_t pk[IDENT_PK_BYTES], uint8_t uuid[16]) {
    uint8_t h[32];
    crypto_generichash(h, sizeof h, pk, IDENT_PK_BYTES, NULL, 0);
    memcpy(uuid, h, 16);
}

void ident_pk_str(const uint8_t pk[IDENT_PK_BYTES], char out[IDENT_PK_STRLEN]) {
    sodium_bin2base64(out, IDENT_PK_STRLEN, pk, IDENT_PK_BYTES, sodium_base64_VARIANT_ORIGINAL);
}

int ident_pk_parse(const char *s, size_t len, uint8_t pk[IDENT_PK_BYTES]) {
    while (len && (*s == ' ' || *s == '\t')) s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r' || s[len - 1] == '\n')) len--;
    size_t got = 0;
    const char *end = NULL;
    if (len == 2 * IDENT_PK_BYTES)
        return sodium_hex2bin(pk, IDENT_PK_BYTES, s, len, NULL, &got, &end) == 0 && got == IDENT_PK_BYTES &&
                       end == s + len ? 0 : -PERR_INVALID;
    return sodium_base642bin(pk, IDENT_PK_BYTES, s, len, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) == 0 &&
                   got == IDENT_PK_BYTES && end == s + len ? 0 : -PERR_INVALID;
}

/* label | nonce | digest */
static void signed_message(const uint8_t *nonce, const uint8_t *digest, uint8_t *out) {
    memcpy(out, sign_label, sizeof sign_label - 1);
    memcpy(out + sizeof sign_label - 1, nonce, IDENT_NONCE_BYTES);
    memcpy(out + sizeof sign_label - 1 + IDENT_NONCE_BYTES, digest, IDENT_DIGEST_BYTES);
}
#define SIGNED_LEN (sizeof sign_label - 1 + IDENT_NONCE_BYTES + IDENT_DIGEST_BYTES)

void ident_sign(const ident_t *id, const uint8_t nonce[IDENT_NONCE_BYTES], const uint8_t digest[IDENT_DIGEST_BYTES],
                uint8_t sig[IDENT_SIG_BYTES]) {
    uint8_t msg[SIGNED_LEN];
    signed_message(nonce, digest, msg);
    crypto_sign_detached(sig, NULL, msg, sizeof msg, id->sk);
}

int ident_verify(const uint8_t pk[IDENT_PK_BYTES], const uint8_t nonce[IDENT_NONCE_BYTES],
                 const uint8_t digest[IDENT_DIGEST_BYTES], const uint8_t sig[IDENT_SIG_BYTES]) {
    uint8_t msg[SIGNED_LEN];
    signed_message(nonce, digest, msg);
    return crypto_sign_verify_detached(sig, msg, sizeof msg, pk) == 0 ? 0 : -PERR_REFUSED;
}

int ident_encode_signed(const ident_t *id, const uint8_t nonce[IDENT_NONCE_BYTES], const wire_msg_t *m,
                        wbuf_t *out) {
    size_t start = out->len;
    int rc = wire_encode(m, out);
    if (rc != 0) return rc;
    /* The frame: u32 length, then the body, whose last WIRE_SIG_LEN bytes are the signature. */
    uint8_t *body = out->data + start + 4, *sig = out->data + out->len - WIRE_SIG_LEN;
    uint8_t digest[IDENT_DIGEST_BYTES];
    wire_body_digest(body, (size_t)(sig - body), digest);
    ident_sign(id, nonce, digest, sig);
    return 0;
}

int ident_name_valid(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e) return 0;
    return n <= IDENT_NAME_MAX;
}

void ident_name_clean(const char *s, char out[IDENT_NAME_MAX + 1]) {
    size_t n = 0;
    for (; s[n] && n < IDENT_NAME_MAX; n++) out[n] = (unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e ? '-' : s[n];
    out[n] = 0;
}

void ident_default_name(char out[IDENT_NAME_MAX + 1]) {
    const char *env = getenv("PCCL_NAME");
    char host[256] = "";
    if (env && *env) {
        ident_name_clean(env, out);
        return;
    }
    if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    host[sizeof host - 1] = 0;
    ident_name_clean(host, out);
}

int ident_keys_load(const char *path, ident_keys_t *keys, char *err, size_t errlen) {
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "cannot open allow-keys file '%s': %s", path, strerror(errno));
        return -PERR_IO;
    }
    ident_keys_t k = {0};
    int cap = 0, lineno = 0, rc = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "allow-keys file '%s' line %d: too long", path, lineno);
            rc = -PERR_INVALID;
            break;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || !*p) continue;
        size_t tok = strcspn(p, " \t\r\n");
        uint8_t pk[IDENT_PK_BYTES];
        if (ident_pk_parse(p, tok, pk) != 0) {
            snprintf(err, errlen, "allow-keys file '%s' line %d: not a public key (base64 or 64 hex digits, as "
                     "`pccl identity FILE` prints)", path, lineno);
            rc = -PERR_INVALID;
            break;
        }
        if (k.n == cap) {
            cap = cap ? cap * 2 : 16;
            void *g = realloc(k.pk, (size_t)cap * IDENT_PK_BYTES);
            if (!g) {
                snprintf(err, errlen, "out of memory reading '%s'", path);
                rc = -PERR_NOMEM;
                break;
            }
            k.pk = g;
        }
        memcpy(k.pk[k.n++], pk, IDENT_PK_BYTES);
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "cannot read allow-keys file '%s'", path);
        rc = -PERR_IO;
    }
    fclose(f);
    if (rc != 0) {
        free(k.pk);
        return rc;
    }
    ident_keys_free(keys);
    *keys = k;
    return 0;
}

int ident_keys_has(const ident_keys_t *keys, const uint8_t pk[IDENT_PK_BYTES]) {
    for (int i = 0; i < keys->n; i++)
        if (memcmp(keys->pk[i], pk, IDENT_PK_BYTES) == 0) return 1;
    return 0;
}

void ident_keys_free(ident_keys_t *keys) {
    free(keys->pk);
    keys->pk = NULL;
    keys->n = 0;
}
