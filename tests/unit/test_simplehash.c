/* test_simplehash.c - SimpleHash: an independent reference written from
 * docs/simplehash.md, serial == parallel for every thread count and
 * alignment, single-byte sensitivity, stored test vectors, and CUDA == CPU
 * when a device is present.
 *
 * `test_simplehash --print-vectors` prints tests/data/simplehash_vectors.txt. */
#include "pccl_kernels.h"
#include "tinytest.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>

#ifdef PCCL_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- reference, straight from the prose definition; no shared code ---- */

static uint64_t ref_fmix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return k;
}

static uint64_t ref_leaf(const unsigned char *p, size_t len)
{
    uint32_t lane[32];
    for (uint32_t l = 0; l < 32; l++)
        lane[l] = 0x811C9DC5u ^ (l * 0x9E3779B9u);
    size_t nwords = (len + 127) / 128 * 32; /* zero-padded to whole strides */
    for (size_t j = 0; j < nwords; j++) {
        uint32_t w = 0;
        for (size_t k = 0; k < 4; k++)
            if (4 * j + k < len)
                w |= (uint32_t)p[4 * j + k] << (8 * k);
        uint32_t h = (lane[j % 32] ^ w) * 0x9E3779B1u;
        lane[j % 32] = h ^ (h >> 15);
    }
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint32_t k = 0; k < 16; k++) {
        h = (h ^ ((uint64_t)lane[2 * k] | (uint64_t)lane[2 * k + 1] << 32)) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return ref_fmix(h);
}

static uint64_t ref_simplehash(const unsigned char *p, size_t n)
{
    size_t m = n == 0 ? 1 : (n + 16383) / 16384;
    uint64_t *node = malloc(m * sizeof *node);
    for (size_t i = 0; i < m; i++) {
        size_t off = i * 16384;
        node[i] = ref_leaf(p + off, n - off < 16384 ? n - off : 16384);
    }
    while (m > 1) { /* pair neighbours; an odd last node moves up as is */
        for (size_t i = 0; i < m / 2; i++)
            node[i] = ref_fmix(node[2 * i] ^ ref_fmix(node[2 * i + 1] ^ 0x243F6A8885A308D3ull));
        if (m % 2)
            node[m / 2] = node[m - 1];
        m = (m + 1) / 2;
    }
    uint64_t root = node[0];
    free(node);
    return ref_fmix(root ^ ref_fmix((uint64_t)n + 0x13198A2E03707344ull));
}

/* ---- helpers ---- */

static void fill_pattern(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131 + 7) & 255);
}

static uint64_t rng = 0x0123456789ABCDEFull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const size_t vector_lengths[] = {0,     1,     3,     7,       8,       63,      64,      65,
                                        127,   128,   129,   4095,    4096,    4097,    16383,   16384,
                                        16385, 65536, 99999, 1000003, 1048575, 1048576, 1048577, 2113537,
                                        3145728 + 12345,   5000000};
#define NVEC (sizeof(vector_lengths) / sizeof(vector_lengths[0]))
#define VEC_MAX 5000000

static int print_vectors(void)
{
    unsigned char *buf = malloc(VEC_MAX);
    fill_pattern(buf, VEC_MAX);
    printf("# SimpleHash test vectors (see docs/simplehash.md).\n");
    printf("# Input of length n: byte i = (i*131 + 7) & 255 for i < n.\n");
    printf("# length hash\n");
    for (size_t i = 0; i < NVEC; i++)
        printf("%zu %016llx\n", vector_lengths[i], (unsigned long long)pccl_simplehash_serial(buf, vector_lengths[i]));
    free(buf);
    return 0;
}

/* ---- tests ---- */

/* The implementation equals the prose definition, around every boundary:
 * word, stride, leaf, 64-leaf chunk, and uneven trees. */
static void test_matches_reference(void)
{
    size_t maxn = 4u << 20;
    unsigned char *buf = malloc(maxn);
    for (size_t i = 0; i < maxn; i++)
        buf[i] = (unsigned char)rnd();
    size_t bad = 0;
    for (size_t n = 0; n <= 1200; n++)
        bad += pccl_simplehash_serial(buf, n) != ref_simplehash(buf, n);
    static const size_t edges[] = {16383, 16384, 16385, 32768, 49153, 1048575, 1048576, 1048577,
                                   1064960 + 1, 2097152 - 128, 3 * 1048576 + 7, 4u << 20};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        uint64_t want = ref_simplehash(buf, edges[i]);
        bad += pccl_simplehash_serial(buf, edges[i]) != want;
        bad += pccl_simplehash(buf, edges[i]) != want;
    }
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(pccl_simplehash(NULL, 0), ref_simplehash(buf, 0)); /* empty input, no pointer */
    free(buf);
}

/* Serial == parallel, and the value does not depend on the address. */
static void test_lengths_and_alignment(void)
{
    enum { MAXN = 10000 };
    unsigned char *buf = malloc(MAXN + 16);
    uint64_t *h0 = malloc((MAXN + 1) * sizeof *h0);
    fill_pattern(buf, MAXN);
    for (size_t n = 0; n <= MAXN; n++)
        h0[n] = pccl_simplehash_serial(buf, n);
    size_t bad = 0;
    for (size_t off = 0; off < 16; off++) {
        fill_pattern(buf + off, MAXN);
        for (size_t n = 0; n <= MAXN; n++) {
            bad += pccl_simplehash_serial(buf + off, n) != h0[n];
            bad += pccl_simplehash(buf + off, n) != h0[n];
        }
    }
    CHECK_EQ_U64(bad, 0);
    free(buf);
    free(h0);
}

static void test_thread_counts(void)
{
    size_t maxn = 6u << 20;
    unsigned char *buf = malloc(maxn + 16);
    for (size_t i = 0; i < maxn + 16; i++)
        buf[i] = (unsigned char)rnd();
    size_t bad = 0;
    for (int round = 0; round < 12; round++) {
        size_t n = round == 0 ? maxn : (size_t)(rnd() % maxn);
        size_t off = (size_t)(rnd() % 16);
        uint64_t want = pccl_simplehash_serial(buf + off, n);
        for (int t = 1; t <= 4; t++) {
            omp_set_num_threads(TT_OMP_THREADS(t));
            bad += pccl_simplehash(buf + off, n) != want;
        }
    }
    omp_set_num_threads(TT_OMP_THREADS(omp_get_num_procs()));
    CHECK_EQ_U64(bad, 0);
    free(buf);
}

static void test_single_byte_changes(void)
{
    size_t bad = 0;
    unsigned char small[700];
    for (size_t n = 1; n <= sizeof small; n += (n < 140 ? 1 : 37)) {
        fill_pattern(small, n);
        uint64_t h = pccl_simplehash(small, n);
        for (size_t i = 0; i < n; i++) {
            unsigned char keep = small[i];
            small[i] ^= (unsigned char)(1u << (i % 8)); /* a single bit */
            bad += pccl_simplehash(small, n) == h;
            small[i] = keep;
        }
    }
    size_t n = 3 * 1048576 + 77;
    unsigned char *big = malloc(n);
    fill_pattern(big, n);
    uint64_t h = pccl_simplehash(big, n);
    for (int k = 0; k < 600; k++) {
        size_t i = k < 8 ? (size_t[]){0, 1, 16383, 16384, 1048575, 1048576, n - 78, n - 1}[k]
                         : (size_t)(rnd() % n);
        unsigned char keep = big[i];
        big[i] = (unsigned char)(keep + 1 + rnd() % 255);
        bad += pccl_simplehash(big, n) == h;
        bad += pccl_simplehash_serial(big, n) == h;
        big[i] = keep;
    }
    CHECK_EQ_U64(bad, 0);
    free(big);

    /* Trailing zeros are not padding: all-zero inputs of each length differ. */
    unsigned char zeros[1025] = {0};
    uint64_t seen[1025];
    size_t dup = 0;
    for (size_t len = 0; len <= 1024; len++) {
        seen[len] = pccl_simplehash(zeros, len);
        for (size_t j = 0; j < len; j++)
            dup += seen[j] == seen[len];
    }
    CHECK_EQ_U64(dup, 0);
}

static void test_vectors_file(void)
{
    const char *path = PCCL_TEST_DATA_DIR "/simplehash_vectors.txt";
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    unsigned char *buf = malloc(VEC_MAX);
    fill_pattern(buf, VEC_MAX);
    char line[256];
    int checked = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long len, want;
        if (line[0] == '#' || sscanf(line, "%llu %llx", &len, &want) != 2)
            continue;
        CHECK(len <= VEC_MAX);
        if (len > VEC_MAX)
            continue;
        CHECK_EQ_U64(pccl_simplehash_serial(buf, len), want);
        CHECK_EQ_U64(pccl_simplehash(buf, len), want);
        CHECK_EQ_U64(ref_simplehash(buf, len), want);
        checked++;
    }
    fclose(f);
    free(buf);
    CHECK(checked >= (int)NVEC);
}

#ifdef PCCL_HAS_CUDA
/* Hash of host bytes [p, p+n) copied to device memory at byte offset off. */
static int cuda_hash(const unsigned char *p, size_t n, size_t off, uint64_t *out)
{
    void *d = NULL;
    if (cudaMalloc(&d, n + off + 1) != cudaSuccess)
        return -1;
    int rc = cudaMemcpy((char *)d + off, p, n, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
    if (rc == 0)
        rc = pccl_simplehash_cuda((char *)d + off, n, out);
    cudaFree(d);
    return rc;
}
#endif

static void test_cuda_matches_cpu(void)
{
#ifdef PCCL_HAS_CUDA
    if (pccl_cuda_available()) {
        unsigned char *buf = malloc(VEC_MAX);
        fill_pattern(buf, VEC_MAX);
        size_t bad = 0;
        for (size_t i = 0; i < NVEC; i++) {
            for (size_t off = 0; off < 4; off++) {
                uint64_t got = 0;
                CHECK(cuda_hash(buf, vector_lengths[i], off, &got) == 0);
                bad += got != pccl_simplehash(buf, vector_lengths[i]);
            }
        }
        for (int round = 0; round < 200; round++) {
            size_t n = round < 100 ? (size_t)(rnd() % 20000) : (size_t)(rnd() % VEC_MAX);
            size_t off = (size_t)(rnd() % 16);
            uint64_t got = 0;
            CHECK(cuda_hash(buf, n, off, &got) == 0);
            bad += got != pccl_simplehash(buf, n);
        }
        CHECK_EQ_U64(bad, 0);
        free(buf);
        fprintf(stderr, "CUDA SimpleHash checks ran on the device\n");
        return;
    }
#endif
    fprintf(stderr, "SKIP: CUDA SimpleHash checks (no CUDA device)\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print-vectors") == 0)
        return print_vectors();
    RUN_TEST(test_matches_reference);
    RUN_TEST(test_lengths_and_alignment);
    RUN_TEST(test_thread_counts);
    RUN_TEST(test_single_byte_changes);
    RUN_TEST(test_vectors_file);
    RUN_TEST(test_cuda_matches_cpu);
    TEST_MAIN_END();
}
