/*
 * msm_coll_kinds.h - the collectives the master votes (pcclExtCollKind_t of pccl_coll.h) as one table, and
 * the pure functions that read it: the cross-check of an operation's votes (which parameters must be equal,
 * the root, rank keys, the output each member needs), the COMMENCE plan (root, ranks, counts, holders) and
 * the elements an operation moves (metrics, stripes). msm_collective.c feeds them the votes in ring order.
 */
#ifndef PCCL_MSM_COLL_KINDS_H
#define PCCL_MSM_COLL_KINDS_H

#include <stddef.h>
#include <stdint.h>

#include "sm/master_sm.h"

/* One member's COLL_INIT (docs/protocol.md): what the checks and the plan read. */
typedef struct msm_coll_vote {
    uint8_t kind, flags, dtype, op, quant_algo, quant_dtype;
    uint8_t algo; /* the member's forced algorithm (WIRE_ALGO_*), equal on every member of any kind */
    uint32_t max_world;
    uint64_t count, rank_key, capacity, hash;
} msm_coll_vote_t;

/* A number of elements the kind derives from the votes of a world of W members. */
typedef enum msm_coll_size {
    MSM_SIZE_NONE,        /* none */
    MSM_SIZE_COUNT,       /* the common count */
    MSM_SIZE_WORLD_COUNT, /* W x the common count */
    MSM_SIZE_SUM,         /* the sum of the members' own counts */
    MSM_SIZE_BLOCK,       /* the largest block of the count split over W: ceil(count / W) */
} msm_coll_size_t;

/* Parameters every member must pass equal (the kind always is). */
#define MSM_EQ_COUNT 0x1u
#define MSM_EQ_DTYPE 0x2u
#define MSM_EQ_REDUCE 0x4u /* reduce op and quantization (algorithm, dtype) */

typedef struct msm_coll_kind {
    const char *name;        /* in logs, /v1/status, /metrics labels */
    unsigned equal;          /* MSM_EQ_* */
    int root;                /* exactly one member sets PCCL_EXT_COLL_ROOT; shared sources apply */
    msm_coll_size_t output;  /* what each member's capacity must hold */
    int world_cap;           /* each member's max_world, when nonzero, bounds W (its counts array) */
    msm_coll_size_t payload; /* the operation's data in elements: bytes by kind, stripes */
} msm_coll_kind_t;

extern const msm_coll_kind_t msm_coll_kinds[MSM_COLL_NKINDS];

/* The kind's row, or NULL for a value no kind has. */
const msm_coll_kind_t *msm_coll_kind(unsigned kind);

/* Longest reason msm_coll_check writes, with its NUL (COLL_REJECT's detail). */
#define MSM_COLL_DETAIL_MAX 256

/*
 * Cross-checks the votes v[0..n) of one operation, in ring order, names[i] naming member i in the reason.
 * @return 0, or -PERR_INVALID with the first failed check in detail (MSM_COLL_DETAIL_MAX bytes), its values
 * named ("two roots: a and b", "output too small on c: needs 12 elements, holds 8"); -PERR_NOMEM.
 */
int msm_coll_check(const msm_coll_vote_t *v, const char *const *names, int n, char *detail);

/*
 * COMMENCE's plan for votes that passed msm_coll_check: *root the ring position of the root (0 when the kind
 * has none), and per ring position i, members[i]: its rank (i, or the order of the rank keys), its count (its
 * own for a kind whose counts may differ, else the common count) and whether it holds the data (the root, and
 * with shared sources the members whose hash equals the root's). @return 0, or -PERR_NOMEM.
 */
int msm_coll_plan(const msm_coll_vote_t *v, int n, uint32_t *root, wire_coll_member_t *members);

/* Bytes of the operation's data (its payload size times the dtype size), saturated. */
uint64_t msm_coll_payload_bytes(const msm_coll_vote_t *v, int n);

#endif
