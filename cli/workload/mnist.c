/*
 * mnist.c - IDX (MNIST / Fashion-MNIST) loader on top of zlib's gz* API.
 *
 * Every read is checked: a truncated, corrupt or mislabeled file must turn
 * into -1 plus a one-line reason, never a crash or a silently short dataset,
 * because a peer training on garbage would poison the DiLoCo average.
 */
#include "mnist.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MNIST_IMAGES_MAGIC 2051u /* 0x00000803: unsigned byte, 3 dims */
#define MNIST_LABELS_MAGIC 2049u /* 0x00000801: unsigned byte, 1 dim */
/* Far above any real IDX set; rejects absurd headers before a huge malloc. */
#define MNIST_MAX_EXAMPLES (16u * 1024u * 1024u)
/* gzread takes an unsigned length; read in bounded chunks. */
#define MNIST_READ_CHUNK (1u << 20)

static void mnist_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void mnist_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Describes why gzread came up short: a zlib error (corrupt stream) or EOF.
 * zlib prefixes its message with the path, which our message already has. */
static const char *mnist_gz_reason(gzFile f, const char *path) {
    int code = Z_OK;
    const char *msg = gzerror(f, &code);
    if (code == Z_OK || code == Z_STREAM_END || !msg || !msg[0]) return "unexpected end of file (truncated?)";
    const size_t plen = strlen(path);
    if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0) msg += plen + 2;
    return msg;
}

/* Reads exactly len bytes; returns 0, or -1 with err set. */
static int mnist_read_exact(gzFile f, const char *path, const char *what, uint8_t *dst, size_t len,
                            char *err, size_t errlen) {
    size_t done = 0;
    while (done < len) {
        size_t want = len - done;
        if (want > MNIST_READ_CHUNK) want = MNIST_READ_CHUNK;
        int got = gzread(f, dst + done, (unsigned)want);
        if (got <= 0) {
            mnist_errf(err, errlen, "%s: reading %s: got %zu of %zu bytes: %s", path, what, done, len,
                       mnist_gz_reason(f, path));
            return -1;
        }
        done += (size_t)got;
    }
    return 0;
}

/* Reads count big-endian uint32 header fields. */
static int mnist_read_header(gzFile f, const char *path, uint32_t *fields, int count, char *err, size_t errlen) {
    uint8_t raw[16];
    if (mnist_read_exact(f, path, "header", raw, (size_t)count * 4, err, errlen) != 0) return -1;
    for (int i = 0; i < count; i++) {
        const uint8_t *p = raw + 4 * i;
        fields[i] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
    }
    return 0;
}

/* IDX files have an exact size; extra bytes mean the wrong file or a bad header. */
static int mnist_expect_eof(gzFile f, const char *path, char *err, size_t errlen) {
    uint8_t extra;
    int got = gzread(f, &extra, 1);
    if (got == 0) {
        int code = Z_OK;
        (void)gzerror(f, &code);
        if (code == Z_OK || code == Z_STREAM_END) return 0;
        mnist_errf(err, errlen, "%s: %s", path, mnist_gz_reason(f, path));
        return -1;
    }
    if (got < 0) {
        mnist_errf(err, errlen, "%s: %s", path, mnist_gz_reason(f, path));
        return -1;
    }
    mnist_errf(err, errlen, "%s: trailing data after the declared payload", path);
    return -1;
}

static gzFile mnist_open(const char *path, char *err, size_t errlen) {
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) mnist_errf(err, errlen, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
    return f;
}

int mnist_load_images(const char *path, float **images, uint32_t *n, char *err, size_t errlen) {
    *images = NULL;
    *n = 0;
    gzFile f = mnist_open(path, err, errlen);
    if (!f) return -1;
    uint8_t *raw = NULL;
    float *out = NULL;
    uint32_t h[4];
    if (mnist_read_header(f, path, h, 4, err, errlen) != 0) goto fail;
    if (h[0] != MNIST_IMAGES_MAGIC) {
        mnist_errf(err, errlen, "%s: bad magic %u (want %u for an IDX image file)", path, h[0], MNIST_IMAGES_MAGIC);
        goto fail;
    }
    if (h[2] != MNIST_ROWS || h[3] != MNIST_COLS) {
        mnist_errf(err, errlen, "%s: images are %ux%u, want %dx%d", path, h[2], h[3], MNIST_ROWS, MNIST_COLS);
        goto fail;
    }
    if (h[1] == 0 || h[1] > MNIST_MAX_EXAMPLES) {
        mnist_errf(err, errlen, "%s: implausible image count %u", path, h[1]);
        goto fail;
    }
    size_t total = (size_t)h[1] * MNIST_PIXELS;
    raw = malloc(total);
    out = malloc(total * sizeof(float));
    if (!raw || !out) {
        mnist_errf(err, errlen, "%s: out of memory for %u images", path, h[1]);
        goto fail;
    }
    if (mnist_read_exact(f, path, "pixels", raw, total, err, errlen) != 0) goto fail;
    if (mnist_expect_eof(f, path, err, errlen) != 0) goto fail;
    /* A table keeps the scaling exact (correctly rounded v/255) and cheap. */
    float scale[256];
    for (int v = 0; v < 256; v++) scale[v] = (float)v / 255.0f;
    for (size_t i = 0; i < total; i++) out[i] = scale[raw[i]];
    free(raw);
    gzclose(f);
    *images = out;
    *n = h[1];
    return 0;
fail:
    free(raw);
    free(out);
    gzclose(f);
    return -1;
}

int mnist_load_labels(const char *path, uint8_t **labels, uint32_t *n, char *err, size_t errlen) {
    *labels = NULL;
    *n = 0;
    gzFile f = mnist_open(path, err, errlen);
    if (!f) return -1;
    uint8_t *out = NULL;
    uint32_t h[2];
    if (mnist_read_header(f, path, h, 2, err, errlen) != 0) goto fail;
    if (h[0] != MNIST_LABELS_MAGIC) {
        mnist_errf(err, errlen, "%s: bad magic %u (want %u for an IDX label file)", path, h[0], MNIST_LABELS_MAGIC);
        goto fail;
    }
    if (h[1] == 0 || h[1] > MNIST_MAX_EXAMPLES) {
        mnist_errf(err, errlen, "%s: implausible label count %u", path, h[1]);
        goto fail;
    }
    out = malloc(h[1]);
    if (!out) {
        mnist_errf(err, errlen, "%s: out of memory for %u labels", path, h[1]);
        goto fail;
    }
    if (mnist_read_exact(f, path, "labels", out, h[1], err, errlen) != 0) goto fail;
    if (mnist_expect_eof(f, path, err, errlen) != 0) goto fail;
    for (uint32_t i = 0; i < h[1]; i++) {
        if (out[i] >= MNIST_CLASSES) {
            mnist_errf(err, errlen, "%s: label %u at index %u is out of range 0..%d", path, out[i], i,
                       MNIST_CLASSES - 1);
            goto fail;
        }
    }
    gzclose(f);
    *labels = out;
    *n = h[1];
    return 0;
fail:
    free(out);
    gzclose(f);
    return -1;
}

int mnist_load(const char *dir, const char *split, mnist_set_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!dir || !split) {
        mnist_errf(err, errlen, "mnist_load: dir and split are required");
        return -1;
    }
    char ipath[4096], lpath[4096];
    int a = snprintf(ipath, sizeof ipath, "%s/%s-images-idx3-ubyte.gz", dir, split);
    int b = snprintf(lpath, sizeof lpath, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    if (a < 0 || (size_t)a >= sizeof ipath || b < 0 || (size_t)b >= sizeof lpath) {
        mnist_errf(err, errlen, "mnist_load: path too long");
        return -1;
    }
    float *images = NULL;
    uint8_t *labels = NULL;
    uint32_t ni = 0, nl = 0;
    if (mnist_load_labels(lpath, &labels, &nl, err, errlen) != 0) return -1;
    if (mnist_load_images(ipath, &images, &ni, err, errlen) != 0) {
        free(labels);
        return -1;
    }
    if (ni != nl) {
        mnist_errf(err, errlen, "%s/%s: %u images but %u labels", dir, split, ni, nl);
        free(images);
        free(labels);
        return -1;
    }
    out->n = ni;
    out->images = images;
    out->labels = labels;
    return 0;
}

void mnist_free(mnist_set_t *set) {
    if (!set) return;
    free(set->images);
    free(set->labels);
    memset(set, 0, sizeof *set);
}
