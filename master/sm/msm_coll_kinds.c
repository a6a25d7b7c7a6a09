/*
 * msm_coll_kinds.c - the table of collective kinds and the checks and plan that read it (see
 * msm_coll_kinds.h). Pure: votes in, a verdict or a plan out.
 */
#include "sm/msm_coll_kinds.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "pccl_coll.h"
#include "sm/msm_algo.h"
#include "pccl_kernels.h"

const msm_coll_kind_t msm_coll_kinds[MSM_COLL_NKINDS] = {
    /* Its buffer is in place on every member: capacity is 0 on the wire and nothing to check. */
    [pcclExtCollAllReduce] = {.name = "all_reduce",
                              .equal = MSM_EQ_COUNT | MSM_EQ_DTYPE | MSM_EQ_REDUCE,
                              .output = MSM_SIZE_NONE,
                              .payload = MSM_SIZE_COUNT},
    [pcclExtCollBroadcast] = {.name = "broadcast",
                              .equal = MSM_EQ_COUNT | MSM_EQ_DTYPE,
                              .root = 1,
                              .output = MSM_SIZE_COUNT,
                              .payload = MSM_SIZE_COUNT},
    [pcclExtCollAllGather] = {.name = "all_gather",
                              .equal = MSM_EQ_COUNT | MSM_EQ_DTYPE,
                              .output = MSM_SIZE_WORLD_COUNT,
                              .payload = MSM_SIZE_WORLD_COUNT},
    [pcclExtCollAllGatherV] = {.name = "all_gather_v",
                               .equal = MSM_EQ_DTYPE,
                               .output = MSM_SIZE_SUM,
                               .world_cap = 1,
                               .payload = MSM_SIZE_SUM},
    [pcclExtCollReduceScatter] = {.name = "reduce_scatter",
                                  .equal = MSM_EQ_COUNT | MSM_EQ_DTYPE | MSM_EQ_REDUCE,
                                  .output = MSM_SIZE_BLOCK,
                                  .payload = MSM_SIZE_COUNT},
    /* No buffers: nothing to compare but the kind. */
    [pcclExtCollBarrier] = {.name = "barrier", .output = MSM_SIZE_NONE, .payload = MSM_SIZE_NONE},
};

const msm_coll_kind_t *msm_coll_kind(unsigned kind) { return kind < MSM_COLL_NKINDS ? &msm_coll_kinds[kind] : NULL; }

static const char *op_name(unsigned op) {
    static const char *const names[] = {"sum", "avg", "prod", "max", "min"};
    return op < sizeof names / sizeof names[0] ? names[op] : "unknown";
}

static const char *quant_name(unsigned algo) {
    static const char *const names[] = {"none", "min_max", "zero_point_scale"};
    return algo < sizeof names / sizeof names[0] ? names[algo] : "unknown";
}

/* The elements size s of the kind amounts to for votes v[0..n) (the common count from v[0]) into *out.
 * @return 0, or 1 when it exceeds 2^64 - 1 (*out UINT64_MAX). */
static int size_of(msm_coll_size_t s, const msm_coll_vote_t *v, int n, uint64_t *out) {
    uint64_t r = 0;
    int over = 0;
    switch (s) {
    case MSM_SIZE_NONE: break;
    case MSM_SIZE_COUNT: r = v[0].count; break;
    case MSM_SIZE_WORLD_COUNT: over = __builtin_mul_overflow(v[0].count, (uint64_t)n, &r); break;
    case MSM_SIZE_SUM:
        for (int i = 0; i < n && !over; i++) over = __builtin_add_overflow(r, v[i].count, &r);
        break;
    case MSM_SIZE_BLOCK: r = v[0].count / (uint64_t)n + (v[0].count % (uint64_t)n != 0); break;
    }
    *out = over ? UINT64_MAX : r;
    return over;
}

uint64_t msm_coll_payload_bytes(const msm_coll_vote_t *v, int n) {
    const msm_coll_kind_t *k = n > 0 ? msm_coll_kind(v[0].kind) : NULL;
    if (!k) return 0;
    uint64_t elems, bytes;
    size_of(k->payload, v, n, &elems);
    size_t esize = pccl_dtype_size((pcclDataType_t)v[0].dtype);
    return __builtin_mul_overflow(elems, (uint64_t)esize, &bytes) ? UINT64_MAX : bytes;
}

/* Writes the reason of a failed check into d (MSM_COLL_DETAIL_MAX bytes). @return -PERR_INVALID. */
static int reject(char *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int reject(char *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, MSM_COLL_DETAIL_MAX, fmt, ap);
    va_end(ap);
    return -PERR_INVALID;
}

/* The first member whose parameter at offset off (size bytes) differs from member 0's, or 0. */
static int first_diff(const msm_coll_vote_t *v, int n, size_t off, size_t size) {
    for (int i = 1; i < n; i++)
        if (memcmp((const char *)&v[i] + off, (const char *)&v[0] + off, size) != 0) return i;
    return 0;
}
#define FIRST_DIFF(field) first_diff(v, n, offsetof(msm_coll_vote_t, field), sizeof v[0].field)

/* The parameters every member must pass equal: kind, then the kind's MSM_EQ_* set. */
static int check_equal(const msm_coll_vote_t *v, const char *const *names, int n, char *d) {
    int i;
    for (i = 0; i < n; i++)
        if (!msm_coll_kind(v[i].kind)) return reject(d, "unknown collective kind %u from %s", v[i].kind, names[i]);
    if ((i = FIRST_DIFF(kind)))
        return reject(d, "kinds differ: %s on %s, %s on %s", msm_coll_kinds[v[0].kind].name, names[0],
                      msm_coll_kinds[v[i].kind].name, names[i]);
    for (i = 0; i < n; i++)
        if (v[i].algo > WIRE_ALGO_MAX) return reject(d, "unknown algorithm %u from %s", v[i].algo, names[i]);
    if ((i = FIRST_DIFF(algo)))
        return reject(d, "algorithms differ: PCCL_ALGO=%s on %s, %s on %s", msm_algo_name(v[0].algo), names[0],
                      msm_algo_name(v[i].algo), names[i]);
    unsigned eq = msm_coll_kinds[v[0].kind].equal;
    if ((eq & MSM_EQ_DTYPE) && (i = FIRST_DIFF(dtype)))
        return reject(d, "dtypes differ: %s on %s, %s on %s", pccl_dtype_name((pcclDataType_t)v[0].dtype),
                      names[0], pccl_dtype_name((pcclDataType_t)v[i].dtype), names[i]);
    if ((eq & MSM_EQ_COUNT) && (i = FIRST_DIFF(count)))
        return reject(d, "counts differ: %llu on %s, %llu on %s", (unsigned long long)v[0].count, names[0],
                      (unsigned long long)v[i].count, names[i]);
    if ((eq & MSM_EQ_REDUCE) && (i = FIRST_DIFF(op)))
        return reject(d, "reduce ops differ: %s on %s, %s on %s", op_name(v[0].op), names[0], op_name(v[i].op),
                      names[i]);
    if ((eq & MSM_EQ_REDUCE) && ((i = FIRST_DIFF(quant_algo)) || (i = FIRST_DIFF(quant_dtype))))
        return reject(d, "quantizations differ: %s to %s on %s, %s to %s on %s", quant_name(v[0].quant_algo),
                      pccl_dtype_name((pcclDataType_t)v[0].quant_dtype), names[0], quant_name(v[i].quant_algo),
                      pccl_dtype_name((pcclDataType_t)v[i].quant_dtype), names[i]);
    return 0;
}

typedef struct keyed {
    uint64_t key;
    int pos;
} keyed_t;

static int by_key(const void *a, const void *b) {
    const keyed_t *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->pos - y->pos;
}

/* The members sorted by rank key (ties in ring order); NULL when out of memory. Caller frees. */
static keyed_t *sorted_keys(const msm_coll_vote_t *v, int n) {
    keyed_t *k = malloc((size_t)n * sizeof *k);
    if (!k) return NULL;
    for (int i = 0; i < n; i++) k[i] = (keyed_t){.key = v[i].rank_key, .pos = i};
    qsort(k, (size_t)n, sizeof *k, by_key);
    return k;
}

/* Rank keys: on every member or none, and distinct. */
static int check_keys(const msm_coll_vote_t *v, const char *const *names, int n, char *d) {
    unsigned ranked = v[0].flags & PCCL_EXT_COLL_RANKED;
    for (int i = 1; i < n; i++)
        if ((v[i].flags & PCCL_EXT_COLL_RANKED) != ranked) {
            int with = ranked ? 0 : i, without = ranked ? i : 0;
            return reject(d, "rank keys on only some members: %s sets one, %s does not", names[with],
                          names[without]);
        }
    if (!ranked) return 0;
    keyed_t *k = sorted_keys(v, n);
    if (!k) return -PERR_NOMEM;
    int rc = 0;
    for (int i = 1; i < n && !rc; i++)
        if (k[i].key == k[i - 1].key)
            rc = reject(d, "duplicate rank key %llu: %s and %s", (unsigned long long)k[i].key,
                        names[k[i - 1].pos], names[k[i].pos]);
    free(k);
    return rc;
}

/* The ring position of the first root at or after `from`, or n. */
static int next_root(const msm_coll_vote_t *v, int n, int from) {
    while (from < n && !(v[from].flags & PCCL_EXT_COLL_ROOT)) from++;
    return from;
}

/* Exactly one root, for the kinds that have one. */
static int check_root(const msm_coll_vote_t *v, const char *const *names, int n, char *d) {
    if (!msm_coll_kinds[v[0].kind].root) return 0;
    int first = next_root(v, n, 0);
    if (first == n) return reject(d, "no member is the root");
    int second = next_root(v, n, first + 1);
    if (second == n) return 0;
    int roots = 2;
    for (int i = next_root(v, n, second + 1); i < n; i = next_root(v, n, i + 1)) roots++;
    if (roots == 2) return reject(d, "two roots: %s and %s", names[first], names[second]);
    return reject(d, "%d roots, %s and %s among them", roots, names[first], names[second]);
}

/* Every member's output holds what the kind writes there for this world. */
static int check_output(const msm_coll_vote_t *v, const char *const *names, int n, char *d) {
    const msm_coll_kind_t *k = &msm_coll_kinds[v[0].kind];
    uint64_t need;
    int over = size_of(k->output, v, n, &need);
    for (int i = 0; i < n; i++) {
        if (k->world_cap && v[i].max_world && v[i].max_world < (uint32_t)n)
            return reject(d, "counts too small on %s: a world of %d, holds %u", names[i], n,
                          v[i].max_world);
        if (k->output != MSM_SIZE_NONE && (over || need > v[i].capacity))
            return reject(d, "output too small on %s: needs %s%llu elements, holds %llu",
                          names[i], over ? "more than " : "", (unsigned long long)need,
                          (unsigned long long)v[i].capacity);
    }
    return 0;
}

int msm_coll_check(const msm_coll_vote_t *v, const char *const *names, int n, char *detail) {
    detail[0] = 0;
    if (n <= 0) return 0;
    int rc = check_equal(v, names, n, detail);
    if (!rc) rc = check_keys(v, names, n, detail);
    if (!rc) rc = check_root(v, names, n, detail);
    if (!rc) rc = check_output(v, names, n, detail);
    return rc;
}

int msm_coll_plan(const msm_coll_vote_t *v, int n, uint32_t *root, wire_coll_member_t *members) {
    *root = 0;
    if (n <= 0) return 0;
    const msm_coll_kind_t *k = msm_coll_kind(v[0].kind);
    int own_counts = k && !(k->equal & MSM_EQ_COUNT);
    for (int i = 0; i < n; i++)
        members[i] = (wire_coll_member_t){.rank = (uint32_t)i, .count = own_counts ? v[i].count : v[0].count};
    if (v[0].flags & PCCL_EXT_COLL_RANKED) {
        keyed_t *s = sorted_keys(v, n);
        if (!s) return -PERR_NOMEM;
        for (int r = 0; r < n; r++) members[s[r].pos].rank = (uint32_t)r;
        free(s);
    }
    if (!k || !k->root) return 0;
    int r = next_root(v, n, 0);
    if (r == n) return 0;
    *root = (uint32_t)r;
    members[r].holds = 1;
    if (!(v[r].flags & PCCL_EXT_COLL_SHARED_SOURCES)) return 0;
    /* Only members that hashed their buffer (they set the flag too) can hold the root's data. */
    for (int i = 0; i < n; i++)
        if ((v[i].flags & PCCL_EXT_COLL_SHARED_SOURCES) && v[i].hash == v[r].hash) members[i].holds = 1;
    return 0;
}
