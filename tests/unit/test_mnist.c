/*
 * test_mnist.c - the IDX loader: the real Fashion-MNIST files when installed,
 * and synthetic .gz files written to a temporary directory covering a valid
 * set and each way a file can be wrong (magic, shape, counts, labels,
 * truncation, corruption, trailing bytes, missing file).
 *
 * The workload sources live in the pccl binary, not in libpccl, so the loader
 * is compiled into this test directly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tinytest.h"

#include "../../cli/workload/mnist.c"

static char tmpdir[256];

/* ---- writers for synthetic files ---- */

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Writes bytes gzip-compressed to tmpdir/name; returns 0 on success. */
static int write_gz(const char *name, const uint8_t *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    gzFile f = gzopen(path, "wb");
    if (!f) return -1;
    int ok = len == 0 || gzwrite(f, data, (unsigned)len) == (int)len;
    return (gzclose(f) == Z_OK && ok) ? 0 : -1;
}

/* Writes raw bytes (for cutting or damaging an existing .gz). */
static int write_raw(const char *name, const uint8_t *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

static uint8_t *read_raw(const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = malloc(1 << 20);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* An image file: header(magic, n, rows, cols) + pixel i of image b = (b*7 + i) % 256,
 * with only `payload` pixel bytes actually written (to make truncated files). */
static int write_images(const char *name, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, size_t payload,
                        size_t extra) {
    size_t len = 16 + payload + extra;
    uint8_t *buf = calloc(1, len);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    put_be32(buf + 8, rows);
    put_be32(buf + 12, cols);
    for (size_t i = 0; i < payload; i++) buf[16 + i] = (uint8_t)(((i / 784) * 7 + i % 784) % 256);
    int rc = write_gz(name, buf, len);
    free(buf);
    return rc;
}

static int write_labels(const char *name, uint32_t magic, uint32_t n, const uint8_t *labels, size_t payload) {
    uint8_t buf[64];
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    memcpy(buf + 8, labels, payload);
    return write_gz(name, buf, 8 + payload);
}

/* Expects mnist_load(tmpdir, split) to fail with a message; prints it. */
static void expect_fail(const char *split, const char *why) {
    mnist_set_t set;
    memset(&set, 0xAB, sizeof set);
    char err[512] = "";
    int rc = mnist_load(tmpdir, split, &set, err, sizeof err);
    fprintf(stderr, "  %-22s -> rc %d: %s\n", why, rc, err);
    CHECK(rc == -1);
    CHECK(err[0] != '\0');
    CHECK(strchr(err, '\n') == NULL);
    CHECK(set.n == 0 && set.images == NULL && set.labels == NULL);
}

static const uint8_t good_labels[3] = {0, 9, 5};

static void test_valid_synthetic(void) {
    CHECK(write_images("ok-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 0) == 0);
    CHECK(write_labels("ok-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3) == 0);
    mnist_set_t set;
    char err[512] = "";
    int rc = mnist_load(tmpdir, "ok", &set, err, sizeof err);
    if (rc != 0) fprintf(stderr, "  %s\n", err);
    CHECK(rc == 0);
    if (rc != 0) return;
    CHECK_EQ_U64(set.n, 3);
    CHECK(memcmp(set.labels, good_labels, 3) == 0);
    int pixels_ok = 1;
    for (uint32_t b = 0; b < 3; b++)
        for (int i = 0; i < 784; i++) {
            const unsigned byte = (b * 7 + (unsigned)i) % 256;
            pixels_ok &= set.images[b * 784 + i] == (float)byte / 255.0f;
        }
    CHECK(pixels_ok);
    CHECK(set.images[255] == 1.0f && set.images[0] == 0.0f);
    mnist_free(&set);
    CHECK(set.images == NULL && set.labels == NULL && set.n == 0);
    mnist_free(&set); /* idempotent */
}

static void test_bad_synthetic(void) {
    /* Each case: a split whose image or label file is wrong in one way. */
    write_images("magic-images-idx3-ubyte.gz", 2052, 3, 28, 28, 3 * 784, 0);
    write_labels("magic-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("magic", "wrong image magic");

    write_images("lmagic-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 0);
    write_labels("lmagic-labels-idx1-ubyte.gz", 2051, 3, good_labels, 3);
    expect_fail("lmagic", "wrong label magic");

    write_images("dims-images-idx3-ubyte.gz", 2051, 3, 27, 28, 3 * 784, 0);
    write_labels("dims-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("dims", "27x28 images");

    write_images("trunc-images-idx3-ubyte.gz", 2051, 3, 28, 28, 2 * 784 + 100, 0);
    write_labels("trunc-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("trunc", "truncated pixels");

    write_images("ltrunc-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 0);
    write_labels("ltrunc-labels-idx1-ubyte.gz", 2049, 3, good_labels, 2);
    expect_fail("ltrunc", "truncated labels");

    const uint8_t header_only[6] = {0, 0, 8, 3, 0, 0};
    write_gz("hdr-images-idx3-ubyte.gz", header_only, sizeof header_only);
    write_labels("hdr-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("hdr", "truncated header");

    write_gz("empty-images-idx3-ubyte.gz", NULL, 0);
    write_labels("empty-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("empty", "empty file");

    write_images("count-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 0);
    write_labels("count-labels-idx1-ubyte.gz", 2049, 2, good_labels, 2);
    expect_fail("count", "3 images, 2 labels");

    const uint8_t out_of_range[3] = {0, 10, 5};
    write_images("range-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 0);
    write_labels("range-labels-idx1-ubyte.gz", 2049, 3, out_of_range, 3);
    expect_fail("range", "label 10");

    write_images("extra-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 5);
    write_labels("extra-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("extra", "trailing bytes");

    write_images("huge-images-idx3-ubyte.gz", 2051, 0xFFFFFFFFu, 28, 28, 784, 0);
    write_labels("huge-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("huge", "absurd count");

    write_labels("missing-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
    expect_fail("missing", "missing image file");

    /* The gzip stream itself cut short: a valid file with its tail chopped off. */
    CHECK(write_images("whole-images-idx3-ubyte.gz", 2051, 3, 28, 28, 3 * 784, 0) == 0);
    size_t len = 0;
    uint8_t *gz = read_raw("whole-images-idx3-ubyte.gz", &len);
    CHECK(gz != NULL && len > 40);
    if (gz) {
        write_raw("gzcut-images-idx3-ubyte.gz", gz, len / 2);
        write_labels("gzcut-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
        expect_fail("gzcut", "gzip stream cut");
        /* Damaged compressed bytes: inflate error or CRC mismatch. */
        for (size_t i = 20; i < len - 8; i += 3) gz[i] ^= 0x5A;
        write_raw("gzbad-images-idx3-ubyte.gz", gz, len);
        write_labels("gzbad-labels-idx1-ubyte.gz", 2049, 3, good_labels, 3);
        expect_fail("gzbad", "corrupt gzip data");
        free(gz);
    }

    /* Individual loaders report the same way. */
    float *img = (float *)1;
    uint32_t n = 7;
    char err[256] = "";
    CHECK(mnist_load_images("/nonexistent/x.gz", &img, &n, err, sizeof err) == -1);
    CHECK(img == NULL && n == 0 && err[0] != '\0');
    /* A tiny error buffer is never overrun and stays terminated. */
    char small[8];
    uint8_t *lab = NULL;
    CHECK(mnist_load_labels("/nonexistent/y.gz", &lab, &n, small, sizeof small) == -1);
    CHECK(strlen(small) == sizeof small - 1);
}

static void test_real_dataset(void) {
    struct stat sb;
    if (stat(MNIST_DEFAULT_DIR, &sb) != 0) {
        fprintf(stderr, "  SKIP: dataset not installed (%s)\n", MNIST_DEFAULT_DIR);
        return;
    }
    const char *splits[2] = {"train", "t10k"};
    const uint32_t want[2] = {60000, 10000};
    for (int s = 0; s < 2; s++) {
        mnist_set_t set;
        char err[512] = "";
        int rc = mnist_load(MNIST_DEFAULT_DIR, splits[s], &set, err, sizeof err);
        if (rc != 0) fprintf(stderr, "  %s\n", err);
        CHECK(rc == 0);
        if (rc != 0) continue;
        CHECK_EQ_U64(set.n, want[s]);
        /* Fashion-MNIST is balanced: n/10 examples of every class. */
        uint32_t hist[10] = {0};
        int labels_ok = 1;
        for (uint32_t i = 0; i < set.n; i++) {
            labels_ok &= set.labels[i] < 10;
            if (set.labels[i] < 10) hist[set.labels[i]]++;
        }
        CHECK(labels_ok);
        int balanced = 1;
        for (int c = 0; c < 10; c++) balanced &= hist[c] == set.n / 10;
        CHECK(balanced);
        float lo = 1.0f, hi = 0.0f;
        double sum = 0.0;
        for (size_t i = 0; i < (size_t)set.n * MNIST_PIXELS; i++) {
            const float v = set.images[i];
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            sum += v;
        }
        const double mean = sum / ((double)set.n * MNIST_PIXELS);
        fprintf(stderr, "  %s: n=%u pixels [%g, %g] mean %.4f\n", splits[s], set.n, (double)lo, (double)hi, mean);
        CHECK(lo == 0.0f && hi == 1.0f);
        CHECK(mean > 0.2 && mean < 0.4); /* Fashion-MNIST's pixel mean is ~0.286 */
        mnist_free(&set);
    }
}

/* Removes the files this test wrote, then the directory. */
static void cleanup(void) {
    static const char *prefixes[] = {"ok", "magic", "lmagic", "dims", "trunc", "ltrunc", "hdr", "empty", "count",
                                     "range", "extra", "huge", "missing", "gzcut", "gzbad"};
    char path[512];
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", tmpdir, prefixes[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", tmpdir, prefixes[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pccl_test_mnist_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN_TEST(test_valid_synthetic);
    RUN_TEST(test_bad_synthetic);
    RUN_TEST(test_real_dataset);
    cleanup();
    TEST_MAIN_END();
}
