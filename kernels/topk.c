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
#include <stdlib.h>
#include <string.h>

/* n <= 25 bits at bit pos, LSB first; only the bytes holding them are touched (buf pre-zeroed for put). */
static void put_bits(uint8_t *buf, size_t pos, uint32_t v, int n) {
    uint32_t w = v << (pos & 7);
    for (unsigned j = 0; j < ((pos & 7) + (unsigned)n + 7) / 8; j++) buf[(pos >> 3) + j] |= (uint8_t)(w >> (8 * j));
}

static uint32_t get_bits(const uint8_t *buf, size_t pos, int n) {
    uint32_t w = 0;
    for (unsigned j = 0; j < ((pos & 7) + (unsigned)n + 7) / 8; j++) w |= (uint32_t)buf[(pos >> 3) + j] << (8 * j);
    return w >> (pos & 7) & ((1u << n) - 1);
}

static size_t bits_to_bytes(uint64_t nbits) { return (size_t)((nbits + 7) / 8); }

uint32_t pccl_topk_k(uint32_t len, double fraction) {
    double k = ceil(fraction * (double)len);
    if (!(k >= 1.0)) return 1;
    return k >= (double)len ? len : (uint32_t)k;
}

static size_t esz_of(const pccl_topk_cfg_t *c) { return c->is_double ? sizeof(double) : sizeof(float); }

static uint64_t nchunks(const pccl_topk_cfg_t *c) { return (c->count + PCCL_TOPK_CHUNK - 1) / PCCL_TOPK_CHUNK; }

static uint32_t chunk_len(const pccl_topk_cfg_t *c, uint64_t ch) {
    uint64_t start = ch * PCCL_TOPK_CHUNK, left = c->count - start;
    return left < PCCL_TOPK_CHUNK ? (uint32_t)left : PCCL_TOPK_CHUNK;
}

/* The record's fixed part: the scales and codes, or the values. */
static size_t fixed_bytes(const pccl_topk_cfg_t *c, uint32_t k) {
    if (c->bits == 0) return (size_t)k * esz_of(c);
    return 2 * esz_of(c) + bits_to_bytes((uint64_t)k * (unsigned)c->bits);
}

/* The Rice parameter of a chunk's gaps: floor(log2(len / k)), the mean gap's magnitude. */
static int rice_r(uint32_t len, uint32_t k) {
    int r = 0;
    while (r < 11 && ((uint64_t)k << (r + 1)) <= len) r++;
    return r;
}

/* At most k (1 + r) bits of unary ends and low bits, plus one unary bit per 2^r of the gaps' sum (< len). */
static size_t stream_max(uint32_t len, uint32_t k) {
    int r = rice_r(len, k);
    return bits_to_bytes((uint64_t)k * (uint64_t)(1 + r) + (len >> r));
}

static size_t slot_bytes(const pccl_topk_cfg_t *c, uint32_t len) {
    uint32_t k = pccl_topk_k(len, c->fraction);
    return fixed_bytes(c, k) + stream_max(len, k);
}

static size_t table_bytes(const pccl_topk_cfg_t *c) { return 2 * (size_t)nchunks(c); }

uint64_t pccl_topk_kept(const pccl_topk_cfg_t *c) {
    uint64_t n = nchunks(c), full = c->count / PCCL_TOPK_CHUNK;
    uint64_t k = full * pccl_topk_k(PCCL_TOPK_CHUNK, c->fraction);
    return n > full ? k + pccl_topk_k(chunk_len(c, full), c->fraction) : k;
}

size_t pccl_topk_body_max(const pccl_topk_cfg_t *c) {
    uint64_t n = nchunks(c), full = c->count / PCCL_TOPK_CHUNK;
    size_t bytes = table_bytes(c) + (size_t)full * slot_bytes(c, PCCL_TOPK_CHUNK);
    return n > full ? bytes + slot_bytes(c, chunk_len(c, full)) : bytes;
}

size_t pccl_topk_exc_bytes(const pccl_topk_cfg_t *c) { return 8 + esz_of(c); }

/* The offsets of the k largest keys of a chunk, ascending. A radix select finds the k-th largest key, top bits
 * first (11, then 8 at a time), keeping after each digit only the keys that share the digits chosen so far, so
 * only the first digit reads the whole chunk; then one pass takes the keys above it and the first of those equal
 * to it. */
static void select_chunk(const uint64_t *key, uint32_t len, uint32_t k, int key_bits, uint16_t *sel) {
    if (k >= len) {
        for (uint32_t i = 0; i < len; i++) sel[i] = (uint16_t)i;
        return;
    }
    uint64_t cand[PCCL_TOPK_CHUNK], prefix = 0;
    uint32_t hist[1u << 11], n = len, need = k;
    const uint64_t *cur = key;
    for (int width = 11, shift = key_bits - 11;; width = shift < 8 ? shift : 8, shift -= width) {
        uint32_t mask = (1u << width) - 1, b = mask, m = 0;
        memset(hist, 0, (mask + 1) * sizeof *hist);
        for (uint32_t i = 0; i < n; i++) hist[cur[i] >> shift & mask]++;
        while (hist[b] < need) need -= hist[b--];
        prefix |= (uint64_t)b << shift;
        if (shift == 0) break;
        for (uint32_t i = 0; i < n; i++) { /* branch-free: which keys match is data, not a pattern */
            cand[m] = cur[i];
            m += (cur[i] >> shift & mask) == b;
        }
        cur = cand, n = m;
        if (n == 1) { /* the k-th largest key itself */
            prefix = cand[0];
            break;
        }
    }
    /* prefix is the k-th largest key; need of the keys equal to it are taken, the lowest offsets first. */
    uint32_t taken = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t tie = key[i] == prefix && need > 0;
        need -= tie;
        sel[taken] = (uint16_t)i;
        taken += (key[i] > prefix) | tie;
    }
}

/* A chunk's offsets (ascending) as Rice-coded gaps: gap g = offset - previous - 1 (the first from -1) as g >> r
 * ones, a zero, then the r low bits of g. Returns the stream's bytes (st pre-zeroed). */
static size_t put_stream(uint8_t *st, const uint16_t *sel, uint32_t k, int r) {
    size_t pos = 0;
    int32_t prev = -1;
    for (uint32_t j = 0; j < k; prev = sel[j], j++) {
        uint32_t g = (uint32_t)(sel[j] - prev - 1), q = g >> r;
        for (; q >= 24; q -= 24, pos += 24) put_bits(st, pos, 0xFFFFFFu, 24);
        put_bits(st, pos, (1u << q) - 1, (int)q);
        pos += q + 1;
        put_bits(st, pos, g & ((1u << r) - 1), r);
        pos += (size_t)r;
    }
    return bits_to_bytes(pos);
}

/* Reads k offsets of a chunk of len from a stream of nbytes: 0, or -PERR_PROTOCOL when the stream ends early or
 * an offset falls outside the chunk (so a received stream is never read past its end). */
static int get_stream(const uint8_t *st, size_t nbytes, uint32_t k, int r, uint32_t len, uint16_t *offs) {
    size_t pos = 0, nbits = nbytes * 8;
    int64_t prev = -1;
    for (uint32_t j = 0; j < k; j++) {
        uint64_t q = 0;
        for (;; q++) {
            if (pos >= nbits) return -PERR_PROTOCOL;
            int one = st[pos >> 3] >> (pos & 7) & 1;
            pos++;
            if (!one) break;
        }
        if (pos + (size_t)r > nbits) return -PERR_PROTOCOL;
        int64_t off = prev + 1 + (int64_t)(q << r | get_bits(st, pos, r));
        pos += (size_t)r;
        if (off >= (int64_t)len) return -PERR_PROTOCOL;
        offs[j] = (uint16_t)off;
        prev = off;
    }
    return 0;
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
    static void encode_chunk_##SUF(T *a, uint32_t len, uint32_t k, int bits, uint8_t *rec, uint16_t *sel) {    \
        uint64_t key[PCCL_TOPK_CHUNK];                                                                            \
        for (uint32_t i = 0; i < len; i++) {                                                                      \
            uint64_t u = 0;                                                                                       \
            memcpy(&u, &a[i], sizeof(T));                                                                         \
            key[i] = u & (ABS_MASK);                                                                              \
        }                                                                                                         \
        select_chunk(key, len, k, KEY_BITS, sel);                                                                 \
        size_t esz = sizeof(T);                                                                                   \
        if (bits == 0) {                                                                                          \
            for (uint32_t j = 0; j < k; j++) {                                                                    \
                memcpy(rec + j * esz, &a[sel[j]], esz);                                                           \
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
        uint8_t *codes = rec + 2 * esz;                                                                           \
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
    static void decode_chunk_##SUF(const uint8_t *rec, uint32_t k, int bits, const uint16_t *offs, T *out) {   \
        size_t esz = sizeof(T);                                                                                   \
        if (bits == 0) {                                                                                          \
            for (uint32_t j = 0; j < k; j++) {                                                                    \
                T v;                                                                                              \
                memcpy(&v, rec + j * esz, esz);                                                                   \
                out[offs[j]] += v;                                                                                \
            }                                                                                                     \
            return;                                                                                               \
        }                                                                                                         \
        T lo, hi;                                                                                                 \
        memcpy(&lo, rec, esz);                                                                                    \
        memcpy(&hi, rec + esz, esz);                                                                              \
        const uint8_t *codes = rec + 2 * esz;                                                                     \
        uint32_t levels = 1u << (bits - 1);                                                                       \
        for (uint32_t j = 0; j < k; j++) {                                                                        \
            uint32_t code = get_bits(codes, (size_t)j * (unsigned)bits, bits);                                    \
            T d = level_##SUF(lo, hi, code & (levels - 1), levels);                                               \
            out[offs[j]] += code >> (bits - 1) ? -d : d;                                                          \
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

/* Encodes chunk ch into its slot: the fixed part, then the stream; returns the stream's bytes. */
static size_t encode_one(const pccl_topk_cfg_t *c, void *acc, uint64_t ch, uint8_t *slot) {
    uint16_t sel[PCCL_TOPK_CHUNK];
    uint32_t len = chunk_len(c, ch), k = pccl_topk_k(len, c->fraction);
    if (c->is_double) encode_chunk_d((double *)acc + ch * PCCL_TOPK_CHUNK, len, k, c->bits, slot, sel);
    else encode_chunk_f((float *)acc + ch * PCCL_TOPK_CHUNK, len, k, c->bits, slot, sel);
    return put_stream(slot + fixed_bytes(c, k), sel, k, rice_r(len, k));
}

/* Chunks are encoded in parallel into slots of their largest size, then moved together in order. */
size_t pccl_topk_encode(const pccl_topk_cfg_t *c, void *acc, uint8_t *body) {
    uint64_t n = nchunks(c);
    size_t slot = slot_bytes(c, PCCL_TOPK_CHUNK), tb = table_bytes(c);
    memset(body, 0, pccl_topk_body_max(c));
    _Pragma("omp parallel for schedule(static) if (n >= 16)")
    for (uint64_t ch = 0; ch < n; ch++) {
        size_t len = encode_one(c, acc, ch, body + tb + ch * slot);
        body[2 * ch] = (uint8_t)len, body[2 * ch + 1] = (uint8_t)(len >> 8);
    }
    size_t at = tb;
    for (uint64_t ch = 0; ch < n; ch++) {
        size_t rec = fixed_bytes(c, pccl_topk_k(chunk_len(c, ch), c->fraction)) + (body[2 * ch] | (size_t)body[2 * ch + 1] << 8);
        memmove(body + at, body + tb + ch * slot, rec);
        at += rec;
    }
    return at;
}

/* Where each chunk's record starts (offsets of n chunks), from the table; the body's bytes, or 0 when the records
 * run past avail. */
static size_t record_offsets(const pccl_topk_cfg_t *c, const uint8_t *body, size_t avail, size_t *off) {
    uint64_t n = nchunks(c);
    size_t at = table_bytes(c);
    if (at > avail) return 0;
    for (uint64_t ch = 0; ch < n; ch++) {
        if (off) off[ch] = at;
        at += fixed_bytes(c, pccl_topk_k(chunk_len(c, ch), c->fraction)) + (body[2 * ch] | (size_t)body[2 * ch + 1] << 8);
        if (at > avail) return 0;
    }
    return at;
}

static size_t stream_bytes(const uint8_t *body, uint64_t ch) { return body[2 * ch] | (size_t)body[2 * ch + 1] << 8; }

int pccl_topk_check(const pccl_topk_cfg_t *c, const uint8_t *body, size_t body_bytes, const uint8_t *exc,
                    uint64_t nexc) {
    uint64_t n = nchunks(c);
    size_t eb = pccl_topk_exc_bytes(c), at = table_bytes(c);
    uint16_t offs[PCCL_TOPK_CHUNK];
    if (record_offsets(c, body, body_bytes, NULL) != body_bytes) return -PERR_PROTOCOL;
    for (uint64_t ch = 0; ch < n; ch++) {
        uint32_t len = chunk_len(c, ch), k = pccl_topk_k(len, c->fraction);
        size_t f = fixed_bytes(c, k);
        if (get_stream(body + at + f, stream_bytes(body, ch), k, rice_r(len, k), len, offs) != 0) return -PERR_PROTOCOL;
        at += f + stream_bytes(body, ch);
    }
    for (uint64_t e = 0; e < nexc; e++) {
        uint64_t i = 0;
        for (int b = 0; b < 8; b++) i |= (uint64_t)exc[e * eb + (size_t)b] << (8 * b);
        if (i >= c->count) return -PERR_PROTOCOL;
    }
    return 0;
}

/* Adds the record of chunk ch (checked) at rec to out. */
static void decode_one(const pccl_topk_cfg_t *c, const uint8_t *body, uint64_t ch, size_t at, void *out) {
    uint16_t offs[PCCL_TOPK_CHUNK];
    uint32_t len = chunk_len(c, ch), k = pccl_topk_k(len, c->fraction);
    size_t f = fixed_bytes(c, k);
    if (get_stream(body + at + f, stream_bytes(body, ch), k, rice_r(len, k), len, offs) != 0) return;
    if (c->is_double) decode_chunk_d(body + at, k, c->bits, offs, (double *)out + ch * PCCL_TOPK_CHUNK);
    else decode_chunk_f(body + at, k, c->bits, offs, (float *)out + ch * PCCL_TOPK_CHUNK);
}

void pccl_topk_decode_add(const pccl_topk_cfg_t *c, const uint8_t *body, void *out) {
    uint64_t n = nchunks(c);
    size_t *off = malloc((size_t)n * sizeof *off);
    if (!off) { /* serially, walking the records */
        for (uint64_t ch = 0, at = table_bytes(c); ch < n; ch++) {
            decode_one(c, body, ch, at, out);
            at += fixed_bytes(c, pccl_topk_k(chunk_len(c, ch), c->fraction)) + stream_bytes(body, ch);
        }
        return;
    }
    record_offsets(c, body, SIZE_MAX, off);
    _Pragma("omp parallel for schedule(static) if (n >= 16)")
    for (uint64_t ch = 0; ch < n; ch++) decode_one(c, body, ch, off[ch], out);
    free(off);
}

void pccl_topk_exc_add(const pccl_topk_cfg_t *c, const uint8_t *exc, uint64_t n, void *out) {
    if (c->is_double) exc_add_d(exc, n, out);
    else exc_add_f(exc, n, out);
}
