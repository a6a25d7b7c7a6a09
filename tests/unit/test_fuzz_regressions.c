/* test_fuzz_regressions.c - replays every saved fuzz input through the same
 * code paths as the libFuzzer harnesses (tests/fuzz/fuzz_targets.h), built
 * with the regular compiler and no libFuzzer: the crash regressions in
 * tests/fuzz/regressions/<harness>/ and the seed corpora in
 * tests/fuzz/corpus/<harness>/. A violated invariant aborts (the ctest fails);
 * under scripts/sanitize.sh asan, memory errors and leaks fail it too. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_targets.h"
#include "tinytest.h"

#define FUZZ_DIR PCCL_TEST_DATA_DIR "/../fuzz"

typedef int (*target_fn)(const uint8_t *, size_t);

static int read_file(const char *path, uint8_t **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b) break;
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) { free(b); b = NULL; break; }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (!b) return -1;
    *out = b;
    *len = n;
    return 0;
}

/* Replays every regular file of dir (hidden files skipped); returns how many. */
static int replay_dir(const char *dir, target_fn fn) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint8_t *data;
        size_t len;
        if (read_file(path, &data, &len) != 0) continue;
        fn(data, len); /* aborts on a violated invariant; the name is printed first */
        free(data);
        count++;
    }
    closedir(d);
    return count;
}

static void replay(const char *harness, target_fn fn, int min_corpus) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/regressions/%s", FUZZ_DIR, harness);
    int nreg = replay_dir(dir, fn);
    snprintf(dir, sizeof dir, "%s/corpus/%s", FUZZ_DIR, harness);
    int ncorp = replay_dir(dir, fn);
    fprintf(stderr, "  %s: %d regression inputs, %d corpus inputs\n", harness, nreg, ncorp);
    CHECK(ncorp >= min_corpus); /* the corpus is found (the path is right) */
}

static void test_wire_decode(void) { replay("fuzz_wire_decode", fuzz_wire_decode_one, 20); }
static void test_p2p_hello(void) { replay("fuzz_p2p_hello", fuzz_p2p_hello_one, 3); }
static void test_master_sm(void) { replay("fuzz_master_sm", fuzz_master_sm_one, 5); }
static void test_quant_block(void) { replay("fuzz_quant_block", fuzz_quant_block_one, 5); }
static void test_quant_low(void) { replay("fuzz_quant_low", fuzz_quant_low_one, 4); }
static void test_sec_handshake(void) { replay("fuzz_sec_handshake", fuzz_sec_handshake_one, 5); }

/* The harness bodies themselves on a few fixed inputs (independent of the files). */
static void test_builtin_inputs(void) {
    static const uint8_t hello[] = {0, 1, 0x50, 0x43, 0x43, 0x4c, 0, 1, 0, 0, 0, 0, 0x9c, 0x41, 0, 0, 0, 1};
    CHECK(fuzz_wire_decode_one(hello, sizeof hello) == 0);
    CHECK(fuzz_wire_decode_one(hello, sizeof hello - 1) == 0); /* truncated: rejected */
    CHECK(fuzz_wire_decode_one(NULL, 0) == 0);
    static const uint8_t script[] = {0x00, 0x40, 0, 0x9c, 0x41, 1, 0x01, 0x41, 0, 0x9c, 0x42, 1,
                                     0x70, 0, 2, 0, 2, 0x71, 0, 2, 0, 2, 0x60, 250, 0x20, 0x21};
    CHECK(fuzz_master_sm_one(script, sizeof script) == 0);
    CHECK(fuzz_p2p_hello_one(hello, sizeof hello) == 0);
}

int main(void) {
    RUN_TEST(test_builtin_inputs);
    RUN_TEST(test_wire_decode);
    RUN_TEST(test_p2p_hello);
    RUN_TEST(test_master_sm);
    RUN_TEST(test_quant_block);
    RUN_TEST(test_quant_low);
    RUN_TEST(test_sec_handshake);
    TEST_MAIN_END();
}
