/*
 * pccl_sparse.h - sparse all-reduce with error feedback (docs/sparse.md).
 * Extra names only: pccl.h keeps PCCL 1.0's names, values and layouts (tests/unit/test_abi.c).
 *
 * Each member adds its residual to its input, splits the sum into chunks of PCCL_EXT_SPARSE_CHUNK elements and
 * keeps, in each chunk, the ceil(fraction * chunk length) values of largest magnitude (ties: the lowest index),
 * optionally quantized to 2 or 4 bits (sign and magnitude levels between the chunk's smallest and largest kept
 * magnitude). What it did not send, the quantization error included, stays in its residual (error feedback).
 * The packs of (index, value) travel through the all-gather of variable counts (pccl_coll.h) and every member
 * sums them in rank order, so every member holds the same bits. The residual never leaves its member; a
 * newcomer starts with a zero residual.
 *
 * Non-finite values (NaN, infinities) of input + residual are never quantized or dropped: each is sent exactly,
 * outside the chunk's budget, and its residual becomes 0; the output holds the rank-order sum at its index.
 *
 * The contract is the collectives': a member whose settings (count, dtype, op, fraction, bits) differ from
 * another member's makes the operation fail on every member with pcclInvalidUsage and the reason logged; a
 * failure anywhere (pcclRankConnectionLost) leaves recvbuf and the residual as they were, so a retry is exact.
 */
#ifndef PCCL_SPARSE_H
#define PCCL_SPARSE_H

#include "pccl.h"
#include "pccl_coll.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Elements per selection chunk: each chunk keeps ceil(fraction * its length) values. */
#define PCCL_EXT_SPARSE_CHUNK 4096u

/** One member's residual of one tensor: count elements of dtype, zero when created. Opaque. */
typedef struct pcclExtSparseResidual pcclExtSparseResidual_t;

/** What one sparse all-reduce did on this member. */
typedef struct pcclExtSparseInfo_t {
    uint32_t rank;       /**< this member's rank in the exchange */
    uint32_t world_size; /**< members of the exchange; pcclAvg divides by it */
    uint64_t kept;       /**< values this member sent within the chunks' budgets */
    uint64_t nonfinite;  /**< non-finite values this member sent exactly, beyond the budgets */
    uint64_t pack_bytes; /**< bytes of this member's pack */
    uint64_t tx_bytes;   /**< payload bytes this member sent (the settings check and the packs) */
    uint64_t rx_bytes;   /**< payload bytes this member received */
} pcclExtSparseInfo_t;

/**
 * Creates a zero residual for tensors of count elements of dtype (pcclFloat or pcclDouble).
 * @return pcclSuccess; pcclInvalidArgument (NULL out, count 0, another dtype); pcclInternalError (no memory).
 */
PCCL_EXPORT pcclResult_t pcclExtSparseResidualCreate(uint64_t count, pcclDataType_t datatype,
                                                     pcclExtSparseResidual_t **out);

/** Frees a residual (NULL is ignored). */
PCCL_EXPORT void pcclExtSparseResidualDestroy(pcclExtSparseResidual_t *residual);

/** Sets a residual back to zero. @return pcclSuccess; pcclInvalidArgument for NULL. */
PCCL_EXPORT pcclResult_t pcclExtSparseResidualReset(pcclExtSparseResidual_t *residual);

/** The residual's count elements (read-only; valid until the next call on it), NULL for NULL. */
PCCL_EXPORT const void *pcclExtSparseResidualData(const pcclExtSparseResidual_t *residual);

/**
 * Sparse all-reduce of count elements of datatype (pcclFloat or pcclDouble) with op pcclSum or pcclAvg.
 * sendbuf NULL or equal to recvbuf means in place. fraction in (0, 1]; bits 0 (values in their own type), 2 or 4.
 * The residual must have been created for the same count and dtype; it is updated only when the call succeeds.
 * Runs two collectives of tag, one after the other (a check of the settings, then the packs).
 * @return pcclSuccess; pcclInvalidArgument (NULL comm, residual or recvbuf, a count or dtype that is not the
 *         residual's, an op other than sum and avg, fraction outside (0, 1], bits not in {0, 2, 4}; the reason
 *         logged); pcclInvalidUsage (settings differ between members, the reason logged on every member, or as
 *         pcclExtCollective); pcclTooFewPeers; pcclRankConnectionLost (aborted on every member: retry).
 */
PCCL_EXPORT pcclResult_t pcclExtSparseAllReduce(const void *sendbuf, void *recvbuf, uint64_t count,
                                                pcclDataType_t datatype, pcclRedOp_t op, double fraction,
                                                int bits, pcclExtSparseResidual_t *residual, uint64_t tag,
                                                const pcclComm_t *communicator, pcclExtSparseInfo_t *info);

/**
 * Parses the CLI's spelling "topk:FRACTION[:BITS]" (e.g. "topk:0.03", "topk:0.03:2").
 * @return pcclSuccess with *fraction and *bits (0 when absent) set; pcclInvalidArgument for anything else
 *         (a fraction outside (0, 1], bits not in {0, 2, 4}); nothing is written then.
 */
PCCL_EXPORT pcclResult_t pcclExtSparseParse(const char *spec, double *fraction, int *bits);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_SPARSE_H */
