/*
 * ss_fetch.h - the receiving side of a shared-state sync: fetches the ranges of
 * a plan from all its sources at once, verifies each tensor, then lands it.
 *
 * The fetch runs in stages of consecutive tensors that fit one staging buffer
 * (a sixteenth of the fetch within [SS_STAGE_MIN, SS_STAGE_MAX], or the
 * largest fetched tensor if that is larger). Within a stage one thread per
 * source receives that source's ranges into the buffer, over a connection
 * kept for the whole fetch; two buffers alternate when every tensor fits a
 * stage, so a stage is hashed and landed while the next one arrives. A tensor
 * lands only once the staged bytes hash to the value the master announced. A source that breaks off hands its unreceived bytes to the other
 * holders of the same tensors (the plan lists them), split evenly; what it had
 * delivered stays and is not fetched again, so rx counts every byte once.
 */
#ifndef PCCL_SS_FETCH_H
#define PCCL_SS_FETCH_H

#include <stdint.h>

#include "comm/comm.h"
#include "base/base.h"

/* Largest stage (unless one tensor is larger): bounds the staging memory of a large state. Tensors
 * that share a stage are fetched at once, so sources holding different small tensors work together. */
#define SS_STAGE_MAX ((uint64_t)64 << 20)
/* Smallest stage: a fetch below it is one stage, one connection per source. */
#define SS_STAGE_MIN ((uint64_t)16 << 20)

/* Fetches plan's tensors into st; *rx counts the payload bytes received. A leave or destroy of c ends it, a
 * lost master does not. @return 0; on failure every tensor not yet verified is exactly as it was (the verified
 * ones hold the elected content): -PERR_CANCELLED (a leave or destroy), -PERR_PROTOCOL (a plan this peer
 * cannot follow), -PERR_NOMEM, or -PERR_FAILED (no source left for a tensor, or a tensor that did not verify
 * or land; logged). */
int ss_fetch(pcclComm_t *c, pcclSharedState_t *st, const wire_msg_t *plan, uint64_t *rx);

/* Shared state outlives a master outage: a fetch, and the serving of one, end on a leave or destroy only.
 * Their wait w is one of c's waits, which a lost master connection ends too; this opens w again (caller
 * holds c->mu). @return 0, or -PERR_CANCELLED when c's waits ended for good (w stays ended). */
int ss_watch_again_locked(pcclComm_t *c, pwait_t *w);

#endif
