/*
 * msm_rebuild.h - the computations of a rebuild from RESUMEs (msm_rebuild.c), for msm_resume.c. Each is
 * linear or n log n in what the resuming peers sent (sorting and binary search, no nested scans), so
 * that a flood of large RESUMEs costs the master's loop little. Pure: no I/O, no clock.
 */
#ifndef PCCL_MSM_REBUILD_H
#define PCCL_MSM_REBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "sm/msm_internal.h"

/* The peers in MSM_RS_COLLECT, sorted by (group, uuid), for lookups by a ring's uuids. */
typedef struct msm_rb_index {
    struct msm_rb_key { uint32_t group; uint8_t uuid[16]; int peer; } *v;
    int n;
} msm_rb_index_t;

/* @return 0, or -PERR_NOMEM. */
int msm_rb_index_build(const msm_t *m, msm_rb_index_t *ix);
void msm_rb_index_free(msm_rb_index_t *ix);
/* Index into m->peers of the collecting peer of group with uuid, or -PERR_INVALID when there is none. */
int msm_rb_lookup(const msm_rb_index_t *ix, uint32_t group, const uint8_t uuid[16]);

/* Whether every peer a collecting peer names in its ring is back (collecting, same group), in *all.
 * @return 0, or -PERR_NOMEM (*all 0). */
int msm_rb_all_named_back(const msm_t *m, int *all);

/* The ring of the collecting peers mem[0..n) (indexes into m->peers, one group): the order most of them
 * report, restricted to the peers back (ties: the one reported first in mem order), then the others in
 * mem order. Writes n indexes to order. @return 0, or -PERR_NOMEM. */
int msm_rb_ring_order(const msm_t *m, const msm_rb_index_t *ix, const int *mem, int n, int *order);

/* The collectives that some peer of mem[0..n) did not finish, sorted, for msm_rb_unfinished. */
typedef struct msm_rb_ops {
    wire_op_outcome_t *v;
    size_t n;
    int all; /* a peer's list was lost: every op counts as unfinished */
} msm_rb_ops_t;
/* @return 0, or -PERR_NOMEM (out->all set: every op counts as unfinished). */
int msm_rb_ops_build(const msm_t *m, const int *mem, int n, msm_rb_ops_t *out);
int msm_rb_unfinished(const msm_rb_ops_t *u, const wire_op_outcome_t *op);
void msm_rb_ops_free(msm_rb_ops_t *u);

/* The claim (revision and state digest) held by most of peers[0..n) that report a revision; ties go to
 * the higher revision, which every one of them backs (they proved their p2p wiring). @return the index
 * in peers of one holding it; -PERR_INVALID when none reports a revision; -PERR_NOMEM. */
int msm_rb_claim(const msm_peer_t *const *peers, int n);

/* The digest a RESUME's tensor entries are compared by (keys, dtypes, counts, hashes, in order). */
void msm_rb_digest_tensors(const wire_tensor_t *t, uint32_t n, uint8_t out[16]);

#endif
