/* test_sec_key.c - the run key (sec_key.c): a private file of 32+ bytes is taken, a file that
 * group or others may access is refused with a message saying so (like ssh), a short one too;
 * the file and the same bytes in memory (without the trailing newline) are one key, and
 * PCCL_KEY_FILE is what pcclCreateCommunicator and pcclCreateMaster read. A key or admin token file owned by
 * another user (not root) is refused whatever its mode; an admin token has the same checks and 16+ bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pccl.h"
#include "sec/sec_key.h"
#include "tinytest.h"

static char g_dir[] = "/tmp/pccl-keytest.XXXXXX";

static const char *write_key(const char *name, const char *text, mode_t mode) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
    return path;
}

static const char *SECRET = "Zm9vYmFyYmF6cXV4MDEyMzQ1Njc4OWFiY2RlZmdoaWo="; /* 44 bytes */

static void test_private_file(void) {
    sec_cfg_t a = {0}, b = {0};
    char err[320];
    char text[128];
    snprintf(text, sizeof text, "%s\n", SECRET);
    CHECK(sec_key_from_file(write_key("good", text, 0600), &a, err, sizeof err) == 0);
    CHECK(a.keyed == 1 && a.encrypt == 0);
    CHECK(sec_key_from_bytes(SECRET, strlen(SECRET), &b, err, sizeof err) == 0);
    CHECK(memcmp(a.psk, b.psk, SEC_PSK_BYTES) == 0);
    sec_cfg_t c = {0};
    CHECK(sec_key_from_bytes("Zm9vYmFyYmF6cXV4MDEyMzQ1Njc4OWFiY2RlZmdoaWO=", strlen(SECRET), &c, err, sizeof err) == 0);
    CHECK(memcmp(a.psk, c.psk, SEC_PSK_BYTES) != 0);
    CHECK(sec_key_from_file(write_key("owner-only", SECRET, 0400), &c, err, sizeof err) == 0);
}

static void test_refused(void) {
    sec_cfg_t a = {0};
    char err[320];
    const mode_t modes[] = {0644, 0640, 0604, 0660, 0602};
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        err[0] = 0;
        CHECK(sec_key_from_file(write_key("open", SECRET, modes[k]), &a, err, sizeof err) == -PERR_INVALID);
        CHECK(strstr(err, "group or others") != NULL && strstr(err, "chmod 600") != NULL);
    }
    CHECK(a.keyed == 0);
    CHECK(sec_key_from_file(write_key("short", "only-twenty-one-bytes\n", 0600), &a, err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "at least 32") != NULL);
    CHECK(sec_key_from_file("/nonexistent/pccl-key", &a, err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "cannot open") != NULL);
    CHECK(sec_key_from_file(g_dir, &a, err, sizeof err) == -PERR_INVALID); /* a directory */
    CHECK(a.keyed == 0);
}

static void test_env(void) {
    sec_cfg_t a = {0};
    char err[320];
    unsetenv("PCCL_KEY_FILE");
    CHECK(sec_key_from_env(&a, err, sizeof err) == 0 && !a.keyed);
    setenv("PCCL_KEY_FILE", write_key("env", SECRET, 0600), 1);
    CHECK(sec_key_from_env(&a, err, sizeof err) == 0 && a.keyed);
    /* The library refuses to start with a refused key instead of running open. */
    setenv("PCCL_KEY_FILE", write_key("env-open", SECRET, 0644), 1);
    CHECK(sec_key_from_env(&a, err, sizeof err) == -PERR_INVALID);
    pcclInit();
    pcclCommCreateParams_t p = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                   .port = 1}};
    pcclComm_t *comm = NULL;
    CHECK(pcclCreateCommunicator(&p, &comm) == pcclInvalidArgument && comm == NULL);
    pcclMasterInstance_t *m = NULL;
    CHECK(pcclCreateMaster(p.master_address, &m) == pcclInvalidArgument && m == NULL);
    /* PCCL_ENCRYPT without a key is refused too. */
    unsetenv("PCCL_KEY_FILE");
    setenv("PCCL_ENCRYPT", "1", 1);
    CHECK(pcclCreateMaster(p.master_address, &m) == pcclInvalidArgument && m == NULL);
    unsetenv("PCCL_ENCRYPT");
}

/* sec_file_check on crafted stat records: owner, mode, type and size, without needing another user's files. */
static void test_file_check(void) {
    char err[320];
    struct stat st = {.st_mode = S_IFREG | 0600, .st_uid = 1000, .st_size = 44};
    CHECK(sec_file_check(&st, 1000, "key file", "k", err, sizeof err) == 0);
    st.st_uid = 0; /* root's file: accepted, as ssh does */
    CHECK(sec_file_check(&st, 1000, "key file", "k", err, sizeof err) == 0);
    st.st_uid = 1001;
    CHECK(sec_file_check(&st, 1000, "key file", "k", err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "owned by uid 1001") != NULL && strstr(err, "uid 1000") != NULL);
    CHECK(sec_file_check(&st, 1001, "token file", "t", err, sizeof err) == 0);
    st.st_mode = S_IFREG | 0640;
    CHECK(sec_file_check(&st, 1001, "token file", "t", err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "token file 't'") != NULL && strstr(err, "group or others") != NULL);
    st.st_mode = S_IFDIR | 0700;
    CHECK(sec_file_check(&st, 1001, "key file", "k", err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "not a regular file") != NULL);
    st.st_mode = S_IFREG | 0400;
    st.st_size = SEC_KEY_MAX_FILE + 1;
    CHECK(sec_file_check(&st, 1001, "key file", "k", err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "larger than") != NULL);
}

/* A real file of another user: only root can make one (chown); elsewhere test_file_check covers the rule. */
static void test_foreign_owner(void) {
    if (geteuid() != 0) return;
    sec_cfg_t a = {0};
    char err[320], tok[64];
    const char *key = write_key("foreign", SECRET, 0600);
    CHECK(chown(key, 65534, 65534) == 0);
    CHECK(sec_key_from_file(key, &a, err, sizeof err) == -PERR_INVALID && strstr(err, "owned by uid 65534") != NULL);
    CHECK(a.keyed == 0);
    CHECK(sec_token_from_file(key, tok, sizeof tok, err, sizeof err) == -PERR_INVALID && strstr(err, "owned by uid 65534"));
}

/* A systemd credential (LoadCredential=): systemd's ACL for the service shows as mode 0440; accepted there only. */
static void test_systemd_credential(void) {
    char err[320], tok[64], dir[300];
    const char *path = write_key("cred.token", "0123456789abcdef\n", 0440);
    unsetenv("CREDENTIALS_DIRECTORY");
    CHECK(sec_token_from_file(path, tok, sizeof tok, err, sizeof err) == -PERR_INVALID && strstr(err, "mode 0440"));
    snprintf(dir, sizeof dir, "%s/", g_dir);
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    CHECK(sec_token_from_file(path, tok, sizeof tok, err, sizeof err) == 0 && strcmp(tok, "0123456789abcdef") == 0);
    chmod(path, 0460); /* group write is no ACL of systemd's */
    CHECK(sec_token_from_file(path, tok, sizeof tok, err, sizeof err) == -PERR_INVALID);
    chmod(path, 0444);
    CHECK(sec_token_from_file(path, tok, sizeof tok, err, sizeof err) == -PERR_INVALID);
    setenv("CREDENTIALS_DIRECTORY", "/nonexistent", 1); /* elsewhere, 0440 stays refused */
    chmod(path, 0440);
    CHECK(sec_token_from_file(path, tok, sizeof tok, err, sizeof err) == -PERR_INVALID);
    unsetenv("CREDENTIALS_DIRECTORY");
}

static void test_token(void) {
    char err[320], tok[64];
    CHECK(sec_token_from_file(write_key("tok", "0123456789abcdef \nsecond line\n", 0600), tok, sizeof tok, err,
                              sizeof err) == 0);
    CHECK(strcmp(tok, "0123456789abcdef") == 0);
    CHECK(sec_token_from_file(write_key("tok-crlf", "0123456789abcdefXY\r\n", 0400), tok, sizeof tok, err,
                              sizeof err) == 0);
    CHECK(strcmp(tok, "0123456789abcdefXY") == 0);
    tok[0] = 0;
    CHECK(sec_token_from_file(write_key("tok-short", "s3cret\n", 0600), tok, sizeof tok, err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "6 bytes") != NULL && strstr(err, "at least 16") != NULL && tok[0] == 0);
    CHECK(sec_token_from_file(write_key("tok-open", "0123456789abcdef\n", 0644), tok, sizeof tok, err,
                              sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "token file") != NULL && strstr(err, "chmod 600") != NULL);
    CHECK(sec_token_from_file(write_key("tok-long", "0123456789abcdef0123456789abcdef\n", 0600), tok, 20, err,
                              sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "longer than 19") != NULL);
    CHECK(sec_token_from_file("/nonexistent/pccl-token", tok, sizeof tok, err, sizeof err) == -PERR_INVALID);
    CHECK(strstr(err, "cannot open token file") != NULL);
}

int main(void) {
    if (!mkdtemp(g_dir)) return 1;
    RUN_TEST(test_private_file);
    RUN_TEST(test_refused);
    RUN_TEST(test_env);
    RUN_TEST(test_file_check);
    RUN_TEST(test_foreign_owner);
    RUN_TEST(test_token);
    RUN_TEST(test_systemd_credential);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    TEST_MAIN_END();
}
