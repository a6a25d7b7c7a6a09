/*
 * mnist.h - loads MNIST-format (IDX) image/label pairs, e.g. Fashion-MNIST.
 *
 * The files are the gzip-compressed originals as shipped by Debian's
 * dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist):
 *   <dir>/<split>-images-idx3-ubyte.gz  magic 2051, n, 28, 28, then n*784 bytes
 *   <dir>/<split>-labels-idx1-ubyte.gz  magic 2049, n, then n bytes in 0..9
 * Header fields are big-endian uint32. Uncompressed files load too (zlib reads
 * them transparently), which the tests rely on for nothing but is handy.
 */
#ifndef PCCL_WORKLOAD_MNIST_H
#define PCCL_WORKLOAD_MNIST_H

#include <stddef.h>
#include <stdint.h>

#define MNIST_ROWS 28
#define MNIST_COLS 28
#define MNIST_PIXELS (MNIST_ROWS * MNIST_COLS) /* 784 */
#define MNIST_CLASSES 10

/* Where Debian's dataset-fashion-mnist package installs the data. */
#ifndef MNIST_DEFAULT_DIR
#define MNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#endif

typedef struct mnist_set {
    uint32_t n;      /* number of examples */
    float *images;   /* n * MNIST_PIXELS, row-major, pixel/255 in [0,1] */
    uint8_t *labels; /* n, each in 0..9 */
} mnist_set_t;

/*
 * Loads <dir>/<split>-images-idx3-ubyte.gz and <dir>/<split>-labels-idx1-ubyte.gz.
 * split is "train" or "t10k" (any prefix works). Returns 0 and fills *out, or
 * returns -1 with *out zeroed and a one-line reason (no newline) in err.
 */
int mnist_load(const char *dir, const char *split, mnist_set_t *out, char *err, size_t errlen);

/* Loads one image file / one label file; same contract as mnist_load. */
int mnist_load_images(const char *path, float **images, uint32_t *n, char *err, size_t errlen);
int mnist_load_labels(const char *path, uint8_t **labels, uint32_t *n, char *err, size_t errlen);

/* Frees the arrays and zeroes *set; safe on a zeroed or already-freed set. */
void mnist_free(mnist_set_t *set);

#endif
