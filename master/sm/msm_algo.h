/*
 * msm_algo.h - which algorithm a collective runs (docs/algorithms.md): the alpha-beta cost model of the ring, of
 * recursive halving and doubling and of recursive doubling, the master's choice per operation from its payload, the world size and the
 * bandwidths and round trips it measured, and the members' forced choice (PCCL_ALGO, in COLL_INIT). Pure.
 */
#ifndef PCCL_MSM_ALGO_H
#define PCCL_MSM_ALGO_H

#include <stdint.h>

#include "sm/master_sm.h"

/* Latency of one message when the master has no measurement of it, seconds. */
#define MSM_ALGO_ALPHA_S 100e-6
/* Bandwidth of a pair the master has not measured, Mbit/s. */
#define MSM_ALGO_DEFAULT_MBPS 10000.0
/* The recursive halving and doubling's time per byte relative to the ring's on the same links: the ring
 * streams one operation through every member without a barrier and splices large sends; each halving or
 * doubling step waits for its whole block before the next step sends. */
#define MSM_ALGO_RHD_BYTE_FACTOR 1.25
/* Recursive doubling's: its steps wait as rhd's do, and each reduces the whole vector it receives, where the ring
 * of 2 members reduces half of what it receives and copies the rest into place (on loopback 2 x 400 KB ran slower
 * than the ring, 2 x 100 KB faster: docs/algorithms.md, kappa_rd). */
#define MSM_ALGO_RD_BYTE_FACTOR 1.5

/* The model's inputs: payload bytes n, world size N, alpha of the ring's messages and of the partners' (s per
 * message; alpha_rhd 0: alpha), beta of the slowest ring edge and of the slowest pair of partners (s per byte). */
typedef struct msm_algo_cost {
    double bytes, alpha, beta_ring, beta_rhd, alpha_rhd;
    uint32_t world;
    int bcast; /* a broadcast: the chain against the binomial tree */
    int half;  /* a reduce-scatter or an all-gather: one half of the all-reduce */
} msm_algo_cost_t;

/* Modelled seconds of an all-reduce: the ring 2 (N - 1) (alpha + n beta / N); recursive halving and doubling
 * over p = 2^floor(log2 N) 2 log2 p alpha + 2 (p - 1) / p n kappa beta, plus 2 (alpha + n kappa beta) when
 * r = N - p > 0 (the fold and the result's return). Of a reduce-scatter or an all-gather (half): the ring
 * (N - 1) (alpha + n beta / N); rhd log2 p alpha + (p - 1) / p n kappa beta, plus 2 alpha + (1 + 1 / N) n kappa
 * beta when r > 0 (the whole vector one way at the fold or the unfold, one member's block the other way). Of a
 * broadcast: the pipelined chain (N - 1) alpha + n beta, the binomial tree ceil(log2 N) (alpha + n kappa beta). */
double msm_algo_ring_s(const msm_algo_cost_t *c);
double msm_algo_rhd_s(const msm_algo_cost_t *c);
/* Modelled seconds of an all-reduce by recursive doubling: log2 p (alpha + n kappa_rd beta), plus 2 (alpha + n
 * kappa_rd beta) when r > 0 (the fold and the result's return); kappa_rd MSM_ALGO_RD_BYTE_FACTOR. */
double msm_algo_rd_s(const msm_algo_cost_t *c);

/* Whether recursive halving and doubling exists for an operation of kind (pcclExtCollKind_t) over world members:
 * an all-reduce (quantized or not), or a plain reduce-scatter, an all-gather or an all-gather of variable counts
 * of any world whose ranks are its ring positions (by_position); for a broadcast with one holder (holders: the
 * root, no other member holding its data) WIRE_ALGO_RHD means the binomial tree. */
int msm_algo_has_rhd(unsigned kind, int quantized, int by_position, uint32_t holders, uint32_t world);

/* What exists for an operation besides the ring (msm_algo_choose's `has`): MSM_ALGO_HAS_RHD where
 * msm_algo_has_rhd says so, and with it MSM_ALGO_HAS_RD for an all-reduce (recursive doubling: the same
 * partners). */
#define MSM_ALGO_HAS_RHD 1
#define MSM_ALGO_HAS_RD 2
int msm_algo_has(unsigned kind, int quantized, int by_position, uint32_t holders, uint32_t world);

/* The algorithm (WIRE_ALGO_RING, _RHD or _RD) of an operation for which `has` (MSM_ALGO_HAS_* bits) exist and
 * whose members forced `forced` (WIRE_ALGO_*; equal on every member, msm_coll_check): the ring where rhd does
 * not exist, else a forced choice (a forced rd where only rhd exists: rhd), else the model's cheapest (rhd
 * from 3 members: with 2 it is the ring's schedule). */
uint8_t msm_algo_choose(int has, uint8_t forced, const msm_algo_cost_t *c);

/* What the master measured between an operation's members (msm_algo_links). */
typedef struct msm_algo_links {
    double slowest_mbps; /* the slowest measured pair's bandwidth, Mbit/s */
    double ring_rtt_us;  /* the mean round trip of the measured ring edges (member i to i + 1), microseconds */
    double max_rtt_us;   /* the longest round trip of any measured pair, microseconds */
} msm_algo_links_t;                  /* 0: nothing of that measured */

/* One pass over m's bandwidth store for the members conns[0..world) in ring order. @return 0, or -PERR_NOMEM
 * (*out zero: nothing measured). */
int msm_algo_links(const msm_t *m, const uint64_t *conns, uint32_t world, msm_algo_links_t *out);

/* The model's inputs from what was measured (docs/algorithms.md): beta 1 / slowest_mbps (MSM_ALGO_DEFAULT_MBPS
 * when none); the ring's alpha half the mean round trip of its edges, the partners' half the longest round trip
 * (each falls back to the other, both to MSM_ALGO_ALPHA_S when no round trip was measured). */
msm_algo_cost_t msm_algo_cost_of(const msm_algo_links_t *l, uint64_t bytes, uint32_t world, int bcast);

/* The algorithm of an operation of kind over the members conns[0..world) in ring order (msm_algo_choose with the
 * model of msm_algo_cost_of over msm_algo_links, priced as one half of an all-reduce for a reduce-scatter or an
 * all-gather and as a broadcast for a broadcast). */
uint8_t msm_algo_for(const msm_t *m, int has, unsigned kind, uint8_t forced, uint64_t bytes,
                     const uint64_t *conns, uint32_t world);

/* Its name in logs and reasons ("auto", "ring", "rhd", "rd"; "unknown"). */
const char *msm_algo_name(uint8_t algo);

#endif
