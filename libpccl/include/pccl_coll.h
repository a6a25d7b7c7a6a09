/*
 * pccl_coll.h - the collectives beyond the all-reduce: broadcast, all-gather, all-gather of variable
 * counts, reduce-scatter and barrier, under PCCL 1.0's fault-tolerance contract (docs/collectives.md).
 * Extra names only: pccl.h keeps PCCL 1.0's names, values and layouts (tests/unit/test_abi.c).
 *
 * The contract is the all-reduce's. A collective is one operation of a tag: every member of the peer
 * group votes it through the master, which cross-checks the parameters (counts, dtypes, roots, reduce
 * ops, rank keys, output capacities) and rejects a mismatch on every member with pcclInvalidUsage and the
 * reason in each member's log; then it commences the operation on the members that voted. A failure on any
 * member (a lost connection, a killed peer, a wait past its deadline) aborts the operation on every member
 * with pcclRankConnectionLost: in place the caller's output buffer is restored, out of place the input is
 * untouched, so the same call may be retried. A peer that joins (through pcclUpdateTopology) or leaves
 * between operations changes the next operation's world. Operations of different tags may run at once; a tag
 * has one operation in flight. Alone in the group a collective returns pcclTooFewPeers.
 *
 * Ranks. The members of one operation are ranked 0..world_size-1 (pcclExtCollInfo_t). By default a rank is
 * the member's position in the operation's ring: the order the master chose from measured bandwidth, which
 * changes as peers come and go, so a caller learns its rank from the info of each operation. A caller that
 * needs a stable order (torch.distributed's ranks) sets PCCL_EXT_COLL_RANKED and a rank_key unique among the
 * members; ranks then follow the keys in ascending order. Keys from only some members, or two equal keys,
 * are rejected. Either way the data moves along the measured ring; the rank only places blocks in the output.
 *
 * Results are bit-identical on every member: all-gathered and broadcast blocks are copied unchanged, and a
 * reduce-scatter reduces each element in one fixed order along the ring (as the all-reduce does).
 */
#ifndef PCCL_COLL_H
#define PCCL_COLL_H

#include "pccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The collective an operation runs. Values travel on the wire (COLL_INIT's kind). */
typedef enum pcclExtCollKind_t {
    pcclExtCollAllReduce = 0,     /**< pcclAllReduce's operation; not accepted by pcclExtCollective */
    pcclExtCollBroadcast = 1,     /**< the root's count elements reach every member */
    pcclExtCollAllGather = 2,     /**< each member's count elements; the output holds world_size blocks by rank */
    pcclExtCollAllGatherV = 3,    /**< as all-gather, each member with its own count */
    pcclExtCollReduceScatter = 4, /**< count elements reduced across members; rank r keeps block r */
    pcclExtCollBarrier = 5,       /**< no data: returns once every member has entered it */
} pcclExtCollKind_t;

/** Descriptor flags. */
#define PCCL_EXT_COLL_ROOT 0x1u   /**< broadcast: this member is the root (exactly one member sets it) */
#define PCCL_EXT_COLL_RANKED 0x2u /**< rank_key orders the ranks (every member sets it, or none) */
/** Broadcast: every member whose buffer is equal to the root's (equal hashes, as the multi-source join
 * compares them) sends too, each feeding the members that follow it in the ring; costs one hash of the
 * buffer per member before the vote. */
#define PCCL_EXT_COLL_SHARED_SOURCES 0x4u

/**
 * One collective. Counts are in elements of datatype, never bytes. sendbuf NULL or equal to recvbuf means in
 * place. Per kind:
 * - broadcast: count elements. The root sends sendbuf (in place: recvbuf), every member's recvbuf receives
 *   them (the root's too, out of place). Non-roots' sendbuf is not read.
 * - all-gather: sendbuf holds this member's count elements (in place: the first count elements of recvbuf,
 *   moved to its rank's block); recvbuf receives world_size * count elements, block r from rank r.
 * - all-gather of variable counts: as all-gather with this member's own count; blocks are packed in rank
 *   order (block r starts at the sum of counts[0..r-1]); counts[r] receives rank r's count (counts holds
 *   counts_capacity entries).
 * - reduce-scatter: sendbuf holds count elements, the same count on every member, reduced with op (and
 *   quantization_options, as the all-reduce) across members. Rank r of world W keeps block r: elements
 *   [r*(count/W) + min(r, count%W), ...) of length count/W + (r < count%W), written to the start of recvbuf
 *   (in place: at the block's own offset in recvbuf). pcclAvg divides by W.
 * - barrier: no buffers; count 0.
 * recv_capacity is the number of elements recvbuf holds; an operation whose output would not fit on some
 * member (world_size * count, the sum of the counts, the largest block; or world_size > counts_capacity) is
 * rejected on every member.
 */
typedef struct pcclExtCollDescriptor_t {
    pcclExtCollKind_t kind;
    uint64_t tag;               /**< the operation's tag: one operation per tag in flight */
    const void *sendbuf;        /**< input (see the kinds); NULL: in place */
    void *recvbuf;              /**< output; NULL only for a barrier */
    uint64_t count;             /**< elements (see the kinds) */
    uint64_t recv_capacity;     /**< elements recvbuf holds */
    pcclDataType_t datatype;    /**< every member passes the same */
    pcclRedOp_t op;             /**< reduce-scatter only */
    pcclQuantizationOptions_t quantization_options; /**< reduce-scatter only; pcclQuantNone by default */
    uint32_t flags;             /**< PCCL_EXT_COLL_* */
    uint64_t rank_key;          /**< with PCCL_EXT_COLL_RANKED: this member's key */
    uint64_t *counts;           /**< all-gather of variable counts: receives world_size counts */
    uint32_t counts_capacity;   /**< entries counts holds */
} pcclExtCollDescriptor_t;

/** What one collective did on this member. */
typedef struct pcclExtCollInfo_t {
    uint32_t rank;       /**< this member's rank in the operation */
    uint32_t world_size; /**< members of the operation */
    uint32_t root;       /**< broadcast: the root's rank */
    uint64_t offset;     /**< reduce-scatter: element offset of this member's block in the input */
    uint64_t count;      /**< elements written to recvbuf (reduce-scatter: the block; all-gather(v): all blocks) */
    uint64_t tx_bytes;   /**< payload bytes this member sent */
    uint64_t rx_bytes;   /**< payload bytes this member received */
} pcclExtCollInfo_t;

/** The handle of an async collective; a plain value, valid until awaited. */
typedef struct pcclExtAsyncCollOp_t {
    pcclComm_t *comm;
    uint64_t tag;
} pcclExtAsyncCollOp_t;

/**
 * Runs one collective on the calling thread and returns when it ended on this member (info may be NULL).
 * @return pcclSuccess; pcclInvalidArgument (a NULL or overlapping buffer, an unknown kind, dtype or op, an
 *         impossible quantization, a count that overflows); pcclInvalidUsage (not connected, the tag already in
 *         flight, or rejected by the master: parameters differ between members, no root or two roots, unequal
 *         rank keys, an output too small for the world; the reason is logged); pcclTooFewPeers; or
 *         pcclRankConnectionLost (aborted on every member: retry). A run that ended returns what every call
 *         then returns (pcclMasterConnectionFailed, pcclExtRunShutDown).
 */
PCCL_EXPORT pcclResult_t pcclExtCollective(const pcclExtCollDescriptor_t *desc, const pcclComm_t *communicator,
                                           pcclExtCollInfo_t *info);

/** Launches a collective (its vote and data movement run on a worker); await it with pcclExtAwaitCollective. The
 * buffers must stay valid and untouched until then. @return as pcclExtCollective for what is known at launch. */
PCCL_EXPORT pcclResult_t pcclExtCollectiveAsync(const pcclExtCollDescriptor_t *desc, const pcclComm_t *communicator,
                                                pcclExtAsyncCollOp_t *handle);

/** Waits for an async collective. @return as pcclExtCollective; pcclInvalidArgument for an unknown handle. */
PCCL_EXPORT pcclResult_t pcclExtAwaitCollective(const pcclExtAsyncCollOp_t *handle, pcclExtCollInfo_t *info);

/**
 * Runs n collectives of distinct tags, at most max_in_flight at once, and retries those aborted with
 * pcclRankConnectionLost (every member retries the same ones) until all succeed or another result ends it.
 * info, when not NULL, holds n entries. @return pcclSuccess or the first result that is not a retryable abort.
 */
PCCL_EXPORT pcclResult_t pcclExtCollectiveMultipleWithRetry(const pcclExtCollDescriptor_t *descs, size_t n,
                                                            const pcclComm_t *communicator, pcclExtCollInfo_t *info,
                                                            int max_in_flight);

/* The typed forms: each fills a descriptor (tag and flags as named, rank ordering by ring position unless
 * rank_key is given through pcclExtCollective) and runs it blocking. */

/** Broadcast of count elements from the member that passes is_root true. */
PCCL_EXPORT pcclResult_t pcclExtBroadcast(const void *sendbuf, void *recvbuf, uint64_t count, pcclDataType_t datatype,
                                          bool is_root, uint64_t tag, const pcclComm_t *communicator,
                                          pcclExtCollInfo_t *info);

/** All-gather of count elements per member into recvbuf (recv_capacity elements). */
PCCL_EXPORT pcclResult_t pcclExtAllGather(const void *sendbuf, void *recvbuf, uint64_t count, uint64_t recv_capacity,
                                          pcclDataType_t datatype, uint64_t tag, const pcclComm_t *communicator,
                                          pcclExtCollInfo_t *info);

/** All-gather of variable counts: count is this member's; counts (counts_capacity entries) receives all. */
PCCL_EXPORT pcclResult_t pcclExtAllGatherV(const void *sendbuf, uint64_t count, void *recvbuf, uint64_t recv_capacity,
                                           uint64_t *counts, uint32_t counts_capacity, pcclDataType_t datatype,
                                           uint64_t tag, const pcclComm_t *communicator, pcclExtCollInfo_t *info);

/** Reduce-scatter of count elements with op; this member's block goes to recvbuf (recv_capacity elements). */
PCCL_EXPORT pcclResult_t pcclExtReduceScatter(const void *sendbuf, void *recvbuf, uint64_t count,
                                              uint64_t recv_capacity, pcclDataType_t datatype, pcclRedOp_t op,
                                              uint64_t tag, const pcclComm_t *communicator, pcclExtCollInfo_t *info);

/** Returns once every member of the group entered a barrier of this tag: one exchange with the master, whose
 *  COMMENCE (sent when the last member's vote arrives) ends it; no data moves and no connection slot is held. */
PCCL_EXPORT pcclResult_t pcclExtBarrier(uint64_t tag, const pcclComm_t *communicator, pcclExtCollInfo_t *info);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_COLL_H */
