/*
 * topk.c - the sparse all-reduce's selection, quantization and packing (format in pccl_topk.h).
 *
 * Selection orders by the magnitude's bit pattern (monotonic in the magnitude for finite IEEE values), found
 * by a radix select over the chunk's keys, then takes offsets in ascending order: every value above the k-th
 * largest key, and of those equal to it the lowest offsets first, so the choice never depends on the algorithm.
 * Only dequantization must agree across members: it is plain IEEE arithmetic on the record's bytes (built
 * with -ffp-contract=off, as quantize.c, so no FMA changes a result). Chunks run in parallel (OpenMP); each
 * element is touched by one chunk, so the order of additions per element is the order of the calls.
 */
#include "pccl_topk.h"
#include "base/err.h"

#include <math.h>
#include <string.h>

static void put_bits(uint8_t *buf, size_t pos, uint32_t v, int n) {
    for (int b = 0; b < n; b++, pos++)
        if (v >> b & 1u) buf[pos >> 3] |= (uint8_t)(1u << (pos & 7));
}

static uint32_t get_bits(const uint8_t *buf, size_t pos, int n) {
    uint32_t v = 0;
    for (int b = 0; b < n; b++, pos++) v |= (uint32_t)(buf[pos >> 3] >> (pos & 7) & 1u) << b;
    return v;
}

static size_t bits_to_bytes(uint64_t nbits) { return (size_t)((nbits + 7) / 8); }

uint32_t pccl_topk_k(uint32_t len, double fraction) {
    double k = ceil(fraction * (double)len);
    if (!(k >= 1.0)) return 1;
    return k >= (double)len ? len : (uint32_t)k;
}

static size_t esz_of(const pccl_topk_cfg_t *c) { return c->is_double ? sizeof(double) : sizeof(float); }

size_t pccl_topk_chunk_bytes(const pccl_topk_cfg_t *c, uint32_t len) {
    uint32_t k = pccl_topk_k(len, c->fraction);
    size_t idx = bits_to_bytes((uint64_t)k * PCCL_TOPK_IDX_BITS);
    if (c->bits == 0) return idx + (size_t)k * esz_of(c);
    return 2 * esz_of(c) + idx + bits_to_bytes((uint64_t)k * (unsigned)c->bits);
}

static uint64_t nchunks(const pccl_topk_cfg_t *c) { return (c->count + PCCL_TOPK_CHUNK - 1) / PCCL_TOPK_CHUNK; }

static uint32_t chunk_len(const pccl_topk_cfg_t *c, uint64_t ch) {
    uint64_t start = ch * PCCL_TOPK_CHUNK, left = c->count - start;
    return left < PCCL_TOPK_CHUNK ? (uint32_t)left : PCCL_TOPK_CHUNK;
}

size_t pccl_topk_body_bytes(const pccl_topk_cfg_t *c, uint64_t *kept) {
    uint64_t n = nchunks(c), full = c->count / PCCL_TOPK_CHUNK;
    size_t bytes = (size_t)full * pccl_topk_chunk_bytes(c, PCCL_TOPK_CHUNK);
    uint64_t k = full * pccl_topk_k(PCCL_TOPK_CHUNK, c->fraction);
    if (n > full) {
        bytes += pccl_topk_chunk_bytes(c, chunk_len(c, full));
        k += pccl_topk_k(chunk_len(c, full), c->fraction);
    }
    if (kept) *kept = k;
    return bytes;
}

size_t pccl_topk_exc_bytes(const pccl_topk_cfg_t *c) { return 8 + esz_of(c); }

/* The offsets of the k largest keys of a chunk, ascending: radix select of the k-th largest key (top byte
 * first), then one pass taking the keys above it and the first of those equal to it. */
static void select_chunk(const uint64_t *key, uint32_t len, uint32_t k, int key_bits, uint16_t *sel) {
    if (k >= len) {
        for (uint32_t i = 0; i < len; i++) sel[i] = (uint16_t)i;
        return;
    }
    uint64_t prefix = 0, mask = 0;
    uint32_t need = k;
    for (int shift = key_bits - 8; shift >= 0; shift -= 8) {
        uint32_t hist[256] = {0};
        for (uint32_t i = 0; i < len; i++)
            if ((key[i] & mask) == prefix) hist[key[i] >> shift & 255u]++;
        for (int b = 255; b >= 0; b--) {
            if (hist[b] >= need) {
                prefix |= (uint64_t)b << shift;
                break;
            }
            need -= hist[b];
        }
        mask |= (uint64_t)255u << shift;
    }
    /* prefix is the k-th largest key; need of the keys equal to it are taken, the lowest offsets first. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < len && n < k; i++)
        if (key[i] > prefix || (key[i] == prefix && need && need--)) sel[n++] = (uint16_t)i;
}

static void put_offsets(uint8_t *rec, const uint16_t *sel, uint32_t k) {
    for (uint32_t j = 0; j < k; j++) put_bits(rec, (size_t)j * PCCL_TOPK_IDX_BITS, sel[j], PCCL_TOPK_IDX_BITS);
}

/* The typed kernels: accumulate, take the non-finite, encode and decode a chunk, add exceptions. */
#define TOPK_TYPED(T, SUF, KEY_BITS, ABS_MASK)                                                                    \
    static uint64_t accumulate_##SUF(T *acc, const T *in, const T *res, uint64_t n) {                           \
        uint64_t nf = 0;                                                                                          \
        _Pragma("omp parallel for reduction(+ : nf) schedule(static) if (n >= 65536)")                           \
        for (uint64_t i = 0; i < n; i++) {                                                                        \
            acc[i] = res ? in[i] + res[i] : in[i];                                                                \
            nf += !isfinite(acc[i]);                                                                              \
        }                                                                                                         \
        return nf;                                                                                                \
    }                                                                                                             \
    static void take_nonfinite_##SUF(T *acc, uint64_t n, uint8_t *exc) {                                       \
        size_t at = 0;                                                                                            \
        for (uint64_t i = 0; i < n; i++) {                                                                        \
            if (isfinite(acc[i])) continue;                                                                       \
            for (int b = 0; b < 8; b++) exc[at + (size_t)b] = (uint8_t)(i >> (8 * b));                          \
            memcpy(exc + at + 8, &acc[i], sizeof(T));                                                             \
            at += 8 + sizeof(T);                                                                                  \
            acc[i] = 0;                                                                                           \
        }                                                                                                         \
    }                                                                                                             \
    static T level_##SUF(T lo, T hi, uint32_t q, uint32_t levels) {                                              \
        if (q == 0) return lo;                                                                                    \
        if (q == levels - 1) return hi;                                                                           \
        T step = (hi - lo) / (T)(levels - 1);                                                                     \
        return lo + (T)q * step;                                                                                  \
    }                                                                                                             \
    static void encode_chunk_##SUF(T *a, uint32_t len, uint32_t k, int bits, uint8_t *rec) {                    \
        uint64_t key[PCCL_TOPK_CHUNK];                                                                            \
        uint16_t sel[PCCL_TOPK_CHUNK] = {0};                                                                      \
        for (uint32_t i = 0; i < len; i++) {                                                                      \
            uint64_t u = 0;                                                                                       \
            memcpy(&u, &a[i], sizeof(T));                                                                         \
            key[i] = u & (ABS_MASK);                                                                              \
        }                                                                                                         \
        select_chunk(key, len, k, KEY_BITS, sel);                                                                 \
        size_t esz = sizeof(T), idx_bytes = bits_to_bytes((uint64_t)k * PCCL_TOPK_IDX_BITS);                   \
        if (bits == 0) {                                                                                          \
            put_offsets(rec, sel, k);                                                                             \
            for (uint32_t j = 0; j < k; j++) {                                                                    \
                memcpy(rec + idx_bytes + j * esz, &a[sel[j]], esz);                                               \
                a[sel[j]] = 0;                                                                                    \
            }                                                                                                     \
            return;                                                                                               \
        }                                                                                                         \
        T lo = fabs(a[sel[0]]), hi = lo;                                                                          \
        for (uint32_t j = 1; j < k; j++) {                                                                        \
            T m = fabs(a[sel[j]]);                                                                                \
            if (m < lo) lo = m;                                                                                   \
            if (m > hi) hi = m;                                                                                   \
        }                                                                                                         \
        memcpy(rec, &lo, esz);                                                                                    \
        memcpy(rec + esz, &hi, esz);                                                                              \
        put_offsets(rec + 2 * esz, sel, k);                                                                       \
        uint8_t *codes = rec + 2 * esz + idx_bytes;                                                               \
        uint32_t levels = 1u << (bits - 1);                                                                       \
        T step = (hi - lo) / (T)(levels - 1);                                                                     \
        for (uint32_t j = 0; j < k; j++) {                                                                        \
            T v = a[sel[j]];                                                                                      \
            uint32_t q = 0, neg = signbit(v) ? 1u : 0u;                                                           \
            if (step > 0) {                                                                                       \
                T r = floor((fabs(v) - lo) / step + (T)0.5);                                                      \
                q = r <= 0 ? 0u : r >= (T)(levels - 1) ? levels - 1 : (uint32_t)r;                               \
            }                                                                                                     \
            put_bits(codes, (size_t)j * (unsigned)bits, neg << (bits - 1) | q, bits);                             \
            T d = level_##SUF(lo, hi, q, levels);                                                                 \
            a[sel[j]] = v - (neg ? -d : d);                                                                       \
        }                                                                                                         \
    }                                                                                                             \
    static void decode_chunk_##SUF(const uint8_t *rec, uint32_t k, int bits, T *out) {                          \
        size_t esz = sizeof(T), idx_bytes = bits_to_bytes((uint64_t)k * PCCL_TOPK_IDX_BITS);                   \
        const uint8_t *offs = bits ? rec + 2 * esz : rec;                                                         \
        if (bits == 0) {                                                                                          \
            for (uint32_t j = 0; j < k; j++) {                                                                    \
                T v;                                                                                              \
                memcpy(&v, rec + idx_bytes + j * esz, esz);                                                       \
                out[get_bits(offs, (size_t)j * PCCL_TOPK_IDX_BITS, PCCL_TOPK_IDX_BITS)] += v;                    \
            }                                                                                                     \
            return;                                                                                               \
        }                                                                                                         \
        T lo, hi;                                                                                                 \
        memcpy(&lo, rec, esz);                                                                                    \
        memcpy(&hi, rec + esz, esz);                                                                              \
        const uint8_t *codes = offs + idx_bytes;                                                                  \
        uint32_t levels = 1u << (bits - 1);                                                                       \
        for (uint32_t j = 0; j < k; j++) {                                                                        \
            uint32_t code = get_bits(codes, (size_t)j * (unsigned)bits, bits);                                    \
            T d = level_##SUF(lo, hi, code & (levels - 1), levels);                                               \
            out[get_bits(offs, (size_t)j * PCCL_TOPK_IDX_BITS, PCCL_TOPK_IDX_BITS)] += code >> (bits - 1) ? -d : d; \
        }                                                                                                         \
    }                                                                                                             \
    static void exc_add_##SUF(const uint8_t *exc, uint64_t n, T *out) {                                        \
        for (uint64_t e = 0; e < n; e++, exc += 8 + sizeof(T)) {                                                  \
            uint64_t i = 0;                                                                                       \
            T v;                                                                                                  \
            for (int b = 0; b < 8; b++) i |= (uint64_t)exc[b] << (8 * b);                                         \
            memcpy(&v, exc + 8, sizeof(T));                                                                       \
            out[i] += v;                                                                                          \
        }                                                                                                         \
    }

TOPK_TYPED(float, f, 32, 0x7FFFFFFFull)
TOPK_TYPED(double, d, 64, 0x7FFFFFFFFFFFFFFFull)

uint64_t pccl_topk_accumulate(const pccl_topk_cfg_t *c, void *acc, const void *in, const void *res) {
    return c->is_double ? accumulate_d(acc, in, res, c->count) : accumulate_f(acc, in, res, c->count);
}

void pccl_topk_take_nonfinite(const pccl_topk_cfg_t *c, void *acc, uint8_t *exc) {
    if (c->is_double) take_nonfinite_d(acc, c->count, exc);
    else take_nonfinite_f(acc, c->count, exc);
}

void pccl_topk_encode(const pccl_topk_cfg_t *c, void *acc, uint8_t *body) {
    uint64_t n = nchunks(c);
    size_t full = pccl_topk_chunk_bytes(c, PCCL_TOPK_CHUNK);
    memset(body, 0, pccl_topk_body_bytes(c, NULL));
    _Pragma("omp parallel for schedule(static) if (n >= 16)")
    for (uint64_t ch = 0; ch < n; ch++) {
        uint32_t len = chunk_len(c, ch), k = pccl_topk_k(len, c->fraction);
        if (c->is_double) encode_chunk_d((double *)acc + ch * PCCL_TOPK_CHUNK, len, k, c->bits, body + ch * full);
        else encode_chunk_f((float *)acc + ch * PCCL_TOPK_CHUNK, len, k, c->bits, body + ch * full);
    }
}

int pccl_topk_check(const pccl_topk_cfg_t *c, const uint8_t *body, const uint8_t *exc, uint64_t nexc) {
    uint64_t n = nchunks(c);
    size_t full = pccl_topk_chunk_bytes(c, PCCL_TOPK_CHUNK), esz = esz_of(c), eb = pccl_topk_exc_bytes(c);
    if (n == 0) return 0;
    uint32_t last = chunk_len(c, n - 1), k = pccl_topk_k(last, c->fraction);
    const uint8_t *offs = body + (n - 1) * full + (c->bits ? 2 * esz : 0);
    for (uint32_t j = 0; j < k; j++)
        if (get_bits(offs, (size_t)j * PCCL_TOPK_IDX_BITS, PCCL_TOPK_IDX_BITS) >= last) return -PERR_PROTOCOL;
    for (uint64_t e = 0; e < nexc; e++) {
        uint64_t i = 0;
        for (int b = 0; b < 8; b++) i |= (uint64_t)exc[e * eb + (size_t)b] << (8 * b);
        if (i >= c->count) return -PERR_PROTOCOL;
    }
    return 0;
}

void pccl_topk_decode_add(const pccl_topk_cfg_t *c, const uint8_t *body, void *out) {
    uint64_t n = nchunks(c);
    size_t full = pccl_topk_chunk_bytes(c, PCCL_TOPK_CHUNK);
    _Pragma("omp parallel for schedule(static) if (n >= 16)")
    for (uint64_t ch = 0; ch < n; ch++) {
        uint32_t kc = pccl_topk_k(chunk_len(c, ch), c->fraction);
        if (c->is_double) decode_chunk_d(body + ch * full, kc, c->bits, (double *)out + ch * PCCL_TOPK_CHUNK);
        else decode_chunk_f(body + ch * full, kc, c->bits, (float *)out + ch * PCCL_TOPK_CHUNK);
    }
}

void pccl_topk_exc_add(const pccl_topk_cfg_t *c, const uint8_t *exc, uint64_t n, void *out) {
    if (c->is_double) exc_add_d(exc, n, out);
    else exc_add_f(exc, n, out);
}
