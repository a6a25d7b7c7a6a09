/* sec_key.c - see sec_key.h. */
#include "sec/sec_key.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

int sec_key_from_bytes(const void *key, size_t len, sec_cfg_t *cfg, char *err, size_t errlen) {
    const uint8_t *k = key;
    /* `echo KEY > file` and the same KEY set in memory must be one key. */
    while (len && (k[len - 1] == '\n' || k[len - 1] == '\r')) len--;
    if (len < SEC_KEY_MIN_BYTES) {
        snprintf(err, errlen, "the run key has %zu bytes; at least %d are needed (e.g. `head -c 32 /dev/urandom "
                 "| base64 > FILE`)", len, SEC_KEY_MIN_BYTES);
        return -PERR_INVALID;
    }
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return -PERR_FAILED;
    }
    static const char label[] = "pccl run key v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, SEC_PSK_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof label - 1);
    crypto_generichash_update(&st, k, len);
    crypto_generichash_final(&st, cfg->psk, SEC_PSK_BYTES);
    sodium_memzero(&st, sizeof st);
    cfg->keyed = 1;
    return 0;
}

int sec_file_check(const struct stat *st, uid_t me, const char *what, const char *path, char *err, size_t errlen) {
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s '%s' is not a regular file", what, path);
        return -PERR_INVALID;
    }
    if (st->st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen, "%s '%s' is accessible by group or others (mode %04o); it must be private "
                 "(chmod 600 '%s')", what, path, (unsigned)(st->st_mode & 07777), path);
        return -PERR_INVALID;
    }
    /* Like ssh: a file another user owns could be rewritten by that user, whatever its mode. */
    if (st->st_uid != me && st->st_uid != 0) {
        snprintf(err, errlen, "%s '%s' is owned by uid %u, not by this user (uid %u) or root; it must be yours "
                 "(chown)", what, path, (unsigned)st->st_uid, (unsigned)me);
        return -PERR_INVALID;
    }
    if (st->st_size > (off_t)SEC_KEY_MAX_FILE) {
        snprintf(err, errlen, "%s '%s' is larger than %u bytes", what, path, SEC_KEY_MAX_FILE);
        return -PERR_INVALID;
    }
    return 0;
}

/* Whether path names a file directly in $CREDENTIALS_DIRECTORY, the directory systemd made for this service's
 * credentials (LoadCredential=). */
static int is_systemd_credential(const char *path) {
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    size_t n = dir ? strlen(dir) : 0;
    while (n > 1 && dir[n - 1] == '/') n--;
    return n && strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] && !strchr(path + n + 1, '/');
}

/* Opens path and reads all of it into a sodium_malloc'd buffer of SEC_KEY_MAX_FILE bytes after
 * sec_file_check. @return the buffer (sodium_free it) with its length in *n, or NULL with err. */
static uint8_t *read_secret_file(const char *path, const char *what, size_t *n, char *err, size_t errlen) {
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s '%s': %s", what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat %s '%s': %s", what, path, strerror(errno));
        close(fd);
        return NULL;
    }
    /* systemd grants a service read access to its credentials with an ACL entry where the file system has ACLs;
     * the ACL's mask then shows as the group's read bit, though no group can read the file. */
    if (is_systemd_credential(path) && (st.st_mode & (S_IRWXG | S_IRWXO)) == S_IRGRP) st.st_mode &= ~(mode_t)S_IRGRP;
    if (sec_file_check(&st, geteuid(), what, path, err, errlen) != 0) {
        close(fd);
        return NULL;
    }
    uint8_t *buf = sodium_malloc(SEC_KEY_MAX_FILE);
    ssize_t r = 0;
    *n = 0;
    while (buf && *n < SEC_KEY_MAX_FILE && (r = read(fd, buf + *n, SEC_KEY_MAX_FILE - *n)) > 0) *n += (size_t)r;
    close(fd);
    if (!buf) snprintf(err, errlen, "out of memory reading %s '%s'", what, path);
    else if (r < 0) {
        snprintf(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
        sodium_free(buf);
        buf = NULL;
    }
    return buf;
}

int sec_key_from_file(const char *path, sec_cfg_t *cfg, char *err, size_t errlen) {
    size_t n;
    uint8_t *buf = read_secret_file(path, "key file", &n, err, errlen);
    if (!buf) return -PERR_INVALID;
    int rc = sec_key_from_bytes(buf, n, cfg, err, errlen);
    if (rc != 0) {
        char why[160];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "key file '%s': %s", path, why);
    }
    sodium_free(buf); /* sodium_free wipes it */
    return rc;
}

int sec_token_from_file(const char *path, char *out, size_t cap, char *err, size_t errlen) {
    size_t n;
    uint8_t *buf = read_secret_file(path, "token file", &n, err, errlen);
    if (!buf) return -PERR_INVALID;
    size_t len = 0; /* the first line, trailing blanks stripped */
    while (len < n && buf[len] != '\n') len++;
    while (len && (buf[len - 1] == '\r' || buf[len - 1] == ' ' || buf[len - 1] == '\t')) len--;
    int rc = -PERR_INVALID;
    if (len < SEC_TOKEN_MIN_BYTES)
        snprintf(err, errlen, "token file '%s': its first line has %zu bytes; at least %d are needed (e.g. `head -c "
                 "32 /dev/urandom | base64 > FILE`)", path, len, SEC_TOKEN_MIN_BYTES);
    else if (len >= cap) snprintf(err, errlen, "token file '%s': its first line is longer than %zu bytes", path, cap - 1);
    else if (memchr(buf, 0, len)) snprintf(err, errlen, "token file '%s': the token contains a NUL byte", path);
    else {
        memcpy(out, buf, len);
        out[len] = 0;
        rc = 0;
    }
    sodium_free(buf);
    return rc;
}

int sec_key_from_env(sec_cfg_t *cfg, char *err, size_t errlen) {
    const char *path = getenv("PCCL_KEY_FILE");
    if (!path || !*path) return 0;
    return sec_key_from_file(path, cfg, err, errlen);
}

int sec_key_from_api(const void *key, size_t len, sec_cfg_t *cfg) {
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    if (!key && !len) return 0;
    int rc = key ? sec_key_from_bytes(key, len, cfg, err, sizeof err) : -PERR_INVALID;
    if (rc != 0) {
        PLOG_ERROR("pccl", "run key refused: %s", key ? err : "NULL key");
        return rc;
    }
    return 0;
}
