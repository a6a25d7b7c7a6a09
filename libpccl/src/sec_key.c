/* sec_key.c - see sec_key.h. */
#include "sec_key.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sec_key_from_bytes(const void *key, size_t len, sec_cfg_t *cfg, char *err, size_t errlen) {
    const uint8_t *k = key;
    /* `echo KEY > file` and the same KEY set in memory must be one key. */
    while (len && (k[len - 1] == '\n' || k[len - 1] == '\r')) len--;
    if (len < SEC_KEY_MIN_BYTES) {
        snprintf(err, errlen, "the run key has %zu bytes; at least %d are needed (e.g. `head -c 32 /dev/urandom "
                 "| base64 > FILE`)", len, SEC_KEY_MIN_BYTES);
        return -1;
    }
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return -1;
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

int sec_key_from_file(const char *path, sec_cfg_t *cfg, char *err, size_t errlen) {
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open key file '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "key file '%s' is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen, "key file '%s' is accessible by group or others (mode %04o); it must be private "
                 "(chmod 600 '%s')", path, (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return -1;
    }
    if (st.st_size > (off_t)SEC_KEY_MAX_FILE) {
        snprintf(err, errlen, "key file '%s' is larger than %u bytes", path, SEC_KEY_MAX_FILE);
        close(fd);
        return -1;
    }
    uint8_t *buf = sodium_malloc(SEC_KEY_MAX_FILE);
    size_t n = 0;
    ssize_t r = 0;
    while (buf && n < SEC_KEY_MAX_FILE && (r = read(fd, buf + n, SEC_KEY_MAX_FILE - n)) > 0) n += (size_t)r;
    close(fd);
    int rc = -1;
    if (!buf) snprintf(err, errlen, "out of memory reading key file '%s'", path);
    else if (r < 0) snprintf(err, errlen, "cannot read key file '%s': %s", path, strerror(errno));
    else if (sec_key_from_bytes(buf, n, cfg, err, errlen) == 0) rc = 0;
    else {
        char why[160];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "key file '%s': %s", path, why);
    }
    if (buf) sodium_free(buf); /* sodium_free wipes it */
    return rc;
}

int sec_key_from_env(sec_cfg_t *cfg, char *err, size_t errlen) {
    const char *path = getenv("PCCL_KEY_FILE");
    if (!path || !*path) return 0;
    return sec_key_from_file(path, cfg, err, errlen) == 0 ? 1 : -1;
}
