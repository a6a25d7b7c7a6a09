/* test_identity.c - a peer's identity (identity.c, comm_identity.c): an identity file is created private and
 * gives the same key every time, one open to others or malformed is refused; signatures verify only for their
 * key, nonce and digest; public keys read as base64 or hex; allow-keys files take comments and name the bad
 * line; names are printable ASCII of at most 63 bytes; the pccl_ext.h identity calls and PCCL_IDENTITY_FILE /
 * PCCL_NAME set what a communicator announces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "sec/identity.h"
#include "base/log.h"
#include "pccl.h"
#include "pccl_ext.h"
#include "tinytest.h"

static char g_dir[] = "/tmp/pccl-idtest.XXXXXX";

static const char *path_of(const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

/* A private identity file that holds no key (base64 of 5 bytes): refused as malformed. */
static void write_bad_identity(void) {
    FILE *f = fopen(path_of("bad"), "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("c2hvcnQ=\n", f);
    fclose(f);
    chmod(path_of("bad"), 0600);
}

static void test_identity_file(void) {
    ident_t a, b;
    char err[320];
    const char *p = path_of("id");
    int created = 0;
    CHECK(ident_load_file(p, &a, &created, err, sizeof err) == 0 && created == 1);
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(ident_load_file(p, &b, &created, err, sizeof err) == 0 && created == 0); /* read back: the same key */
    CHECK(memcmp(a.pk, b.pk, 32) == 0 && memcmp(a.sk, b.sk, 64) == 0);
    chmod(p, 0640);
    CHECK(ident_load_file(p, &b, NULL, err, sizeof err) == -PERR_INVALID && strstr(err, "accessible by group or others"));
    chmod(p, 0600);
    write_bad_identity();
    CHECK(ident_load_file(path_of("bad"), &b, NULL, err, sizeof err) == -PERR_INVALID && strstr(err, "malformed"));
    CHECK(mkdir(path_of("dir"), 0700) == 0);
    CHECK(ident_load_file(path_of("dir"), &b, NULL, err, sizeof err) == -PERR_INVALID && strstr(err, "not a regular file"));
    CHECK(ident_load_file("/nonexistent-dir/id", &b, NULL, err, sizeof err) == -PERR_IO && strstr(err, "cannot create"));
}

static void test_sign_verify(void) {
    ident_t a, b;
    CHECK(ident_generate(&a) == 0 && ident_generate(&b) == 0);
    uint8_t nonce[32], digest[32], sig[64];
    memset(nonce, 1, sizeof nonce);
    memset(digest, 2, sizeof digest);
    ident_sign(&a, nonce, digest, sig);
    CHECK(ident_verify(a.pk, nonce, digest, sig) == 0);
    CHECK(ident_verify(b.pk, nonce, digest, sig) == -PERR_REFUSED); /* another key */
    nonce[5] ^= 1;
    CHECK(ident_verify(a.pk, nonce, digest, sig) == -PERR_REFUSED); /* another challenge: a replay */
    nonce[5] ^= 1;
    digest[0] ^= 1;
    CHECK(ident_verify(a.pk, nonce, digest, sig) == -PERR_REFUSED); /* another message */
    uint8_t u1[16], u2[16];
    ident_uuid(a.pk, u1);
    ident_uuid(b.pk, u2);
    CHECK(memcmp(u1, u2, 16) != 0);
}

static void test_public_keys(void) {
    ident_t a;
    CHECK(ident_generate(&a) == 0);
    char s[IDENT_PK_STRLEN], hex[65];
    ident_pk_str(a.pk, s);
    CHECK(strlen(s) == 44);
    uint8_t pk[32];
    CHECK(ident_pk_parse(s, strlen(s), pk) == 0 && memcmp(pk, a.pk, 32) == 0);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", a.pk[i]);
    CHECK(ident_pk_parse(hex, 64, pk) == 0 && memcmp(pk, a.pk, 32) == 0);
    CHECK(ident_pk_parse(s, 43, pk) == -PERR_INVALID);
    CHECK(ident_pk_parse("zz", 2, pk) == -PERR_INVALID);
    FILE *f = fopen(path_of("allow"), "w");
    fprintf(f, "# run 7\n\n%s # trainer-1\n   %s\n", s, hex);
    fclose(f);
    ident_keys_t k = {0};
    char err[320];
    CHECK(ident_keys_load(path_of("allow"), &k, err, sizeof err) == 0 && k.n == 2 && ident_keys_has(&k, a.pk));
    f = fopen(path_of("allow"), "a");
    fprintf(f, "not-a-key\n");
    fclose(f);
    CHECK(ident_keys_load(path_of("allow"), &k, err, sizeof err) == -PERR_INVALID && strstr(err, "line 5"));
    CHECK(k.n == 2); /* a refused file leaves the list as it was */
    ident_keys_free(&k);
}

static void test_names(void) {
    CHECK(ident_name_valid("") && ident_name_valid("trainer 1.node-a_b"));
    CHECK(!ident_name_valid("tab\there") && !ident_name_valid("\x80"));
    char n64[65];
    memset(n64, 'n', 64);
    n64[64] = 0;
    CHECK(!ident_name_valid(n64));
    n64[63] = 0;
    CHECK(ident_name_valid(n64));
    char out[IDENT_NAME_MAX + 1];
    ident_name_clean("a\nb", out);
    CHECK(strcmp(out, "a-b") == 0);
    setenv("PCCL_NAME", "from-env", 1);
    ident_default_name(out);
    CHECK(strcmp(out, "from-env") == 0);
    unsetenv("PCCL_NAME");
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ident_default_name(out);
    CHECK(strncmp(out, host, IDENT_NAME_MAX) == 0);
}

static void test_comm_calls(void) {
    pcclInit();
    pcclCommCreateParams_t params = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4.data = {127, 0, 0, 1}},
                                                        .port = 1}};
    write_bad_identity();
    setenv("PCCL_IDENTITY_FILE", path_of("id"), 1);
    setenv("PCCL_NAME", "env-name", 1);
    pcclComm_t *c = NULL;
    CHECK(pcclCreateCommunicator(&params, &c) == pcclSuccess);
    ident_t file;
    char err[320];
    CHECK(ident_load_file(path_of("id"), &file, NULL, err, sizeof err) == 0);
    uint8_t uuid[16], want[16];
    char pk[45], want_pk[45];
    CHECK(pcclExtCommGetIdentity(c, uuid, pk) == pcclSuccess);
    ident_uuid(file.pk, want);
    ident_pk_str(file.pk, want_pk);
    CHECK(memcmp(uuid, want, 16) == 0 && strcmp(pk, want_pk) == 0);
    CHECK(strcmp(c->name, "env-name") == 0);
    CHECK(pcclExtCommSetName(c, "tab\t") == pcclInvalidArgument);
    CHECK(pcclExtCommSetName(c, "api-name") == pcclSuccess && strcmp(c->name, "api-name") == 0);
    uint8_t seed[32];
    memset(seed, 9, sizeof seed);
    CHECK(pcclExtCommSetIdentitySeed(c, seed, 31) == pcclInvalidArgument);
    CHECK(pcclExtCommSetIdentitySeed(c, seed, 32) == pcclSuccess);
    ident_t from_seed;
    ident_from_seed(&from_seed, seed);
    ident_uuid(from_seed.pk, want);
    CHECK(pcclExtCommGetIdentity(c, uuid, NULL) == pcclSuccess && memcmp(uuid, want, 16) == 0);
    CHECK(pcclExtCommSetIdentityFile(c, path_of("bad")) == pcclInvalidArgument);
    pcclDestroyCommunicator(c);
    /* a refused PCCL_IDENTITY_FILE fails the communicator's creation */
    setenv("PCCL_IDENTITY_FILE", path_of("bad"), 1);
    c = NULL;
    CHECK(pcclCreateCommunicator(&params, &c) == pcclInvalidArgument && c == NULL);
    unsetenv("PCCL_IDENTITY_FILE");
    unsetenv("PCCL_NAME");
}

int main(void) {
    pccl_log_set_level(PCCL_LOG_ERROR); /* refusals log errors by design */
    if (!mkdtemp(g_dir)) return 1;
    RUN_TEST(test_identity_file);
    RUN_TEST(test_sign_verify);
    RUN_TEST(test_public_keys);
    RUN_TEST(test_names);
    RUN_TEST(test_comm_calls);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_MAIN_END();
}
