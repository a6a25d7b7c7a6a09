/*
 * pccl.h - public C99 API of pccl, a fault-tolerant collective
 * communications library. Names, types and semantics follow the PCCL C API
 * so that a program written against PCCL compiles against pccl unchanged.
 *
 * Model: one master process orchestrates membership and micro-consensus;
 * peers ("ranks") move data to each other directly over TCP. Peers join only
 * through an accept phase (pcclUpdateTopology) and may vanish at any moment;
 * the others' calls then fail with an error and can be retried.
 *
 * Threading (PCCL 1.0's rules; tests/e2e/test_threads.sh checks them under TSan):
 *  - collectives (pcclAllReduce, pcclAllReduceAsync, pcclAwaitAsyncReduce,
 *    pcclAllReduceMultipleWithRetry) may run on any threads, concurrently with
 *    each other when their tags differ; a handle is awaited once, by any thread;
 *  - while collectives run on other threads, one thread may vote
 *    pcclArePeersPending and read pcclGetAttribute (any thread, any time);
 *  - the other phase calls (pcclConnect, pcclUpdateTopology,
 *    pcclOptimizeTopology, pcclSynchronizeSharedState) are one at a time per
 *    communicator and need every collective awaited (else pcclPendingAsyncOps);
 *  - pcclDestroyCommunicator comes last, after every other call has returned.
 * Master restarts: a peer that loses the master reconnects and re-registers
 * for PCCL_MASTER_RECONNECT_MS (default 60000; 0 turns it off), keeping its
 * state and connections. Calls made meanwhile wait; calls in flight fail with
 * their retryable code (pcclUpdateTopologyFailed, pcclTopologyOptimizationFailed,
 * pcclRankConnectionLost; in place, buffers restored). pcclMasterConnectionFailed
 * means the master did not come back within that window, or refused this peer.
 * Nothing in this library calls exit() or abort().
 */
#ifndef PCCL_H
#define PCCL_H

#include "ccoip.h"
#include "ccoip_inet.h"

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#if defined(_MSC_VER)
#define PCCL_EXPORT __declspec(dllexport)
#else
#define PCCL_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Marks a pointer argument that may be NULL. */
#define PCCL_NULLABLE

/* X-macro: name, value, description. Generates pcclResult_t and pcclResultString. */
#define PCCL_RESULT_MAP(X)                                                                  \
    X(pcclSuccess, 0, "success")                                                            \
    X(pcclNotInitialized, 1, "pcclInit was not called")                                     \
    X(pcclInternalError, 2, "internal error")                                               \
    X(pcclInvalidArgument, 3, "invalid argument")                                           \
    X(pcclInvalidUsage, 4, "invalid usage (wrong state, mismatched parameters or revision)") \
    X(pcclTooFewPeers, 5, "too few peers (world size below 2)")                             \
    X(pcclMasterConnectionFailed, 6, "connection to the master failed or was lost")         \
    X(pcclRankConnectionFailed, 7, "could not connect to a peer")                           \
    X(pcclRankConnectionLost, 8, "a peer was lost during the operation")                    \
    X(pcclNoSharedStateAvailable, 9, "no peer can provide the shared state")                \
    X(pcclPendingAsyncOps, 10, "async operations are still outstanding")                    \
    X(pcclUpdateTopologyFailed, 11, "topology update failed; retry")                        \
    X(pcclTopologyOptimizationFailed, 12, "topology optimization failed; retry")

typedef enum pcclResult_t {
#define PCCL_RESULT_ENUM_(name, value, text) name = value,
    PCCL_RESULT_MAP(PCCL_RESULT_ENUM_)
#undef PCCL_RESULT_ENUM_
} pcclResult_t;

/** Element types (PCCL 1.0's values). */
typedef enum pcclDataType_t {
    pcclUint8 = 0,
    pcclInt8 = 1,
    pcclInt16 = 2,
    pcclUint16 = 3,
    pcclUint32 = 4,
    pcclInt32 = 5,
    pcclUint64 = 6,
    pcclInt64 = 7,
    pcclFloat16 = 8,  /* IEEE 754 binary16 */
    pcclBFloat16 = 9, /* bfloat16: upper 16 bits of a binary32 */
    pcclFloat = 10,
    pcclDouble = 11
} pcclDataType_t;

typedef enum pcclDeviceType_t {
    pcclDeviceCpu = 0,
    pcclDeviceCuda = 1
} pcclDeviceType_t;

typedef enum pcclRedOp_t {
    pcclSum,
    pcclAvg, /* sum, divided by the world size once at the end */
    pcclProd,
    pcclMax,
    pcclMin
} pcclRedOp_t;

typedef enum pcclAttribute_t {
    /** Accepted peers in the whole run (the master is not a peer). */
    PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE = 1,
    /** Accepted peers in this communicator's peer group. */
    PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE = 2,
    /** Peer groups with at least one accepted peer. */
    PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS = 3,
    /** World size of the largest peer group. */
    PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE = 4
} pcclAttribute_t;

typedef enum pcclSharedStateSyncStrategy_t {
    /** Popular content wins; this peer sends and receives as the master directs. */
    PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR = 0,
    /** This peer only receives; its content never counts toward popularity. */
    PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY = 1,
    /** This peer only sends; its content must be the popular one. */
    PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY = 2
} pcclSharedStateSyncStrategy_t;

typedef struct pcclCommCreateParams_t {
    /** Address of the master's control port (default port CCOIP_PROTOCOL_PORT_MASTER). */
    ccoip_socket_address_t master_address;
    /** Peer group: collectives and shared state span only peers of the same group. */
    uint32_t peer_group;
    /** TCP connections per ring neighbour; concurrent all-reduces share them, and one all-reduce alone may be
     *  striped over all of them (the master decides: PCCL_STRIPE_MIN_BYTES, PCCL_STRIPE_LOCAL). 0 means 1. */
    uint32_t p2p_connection_pool_size;
} pcclCommCreateParams_t;

typedef struct pcclComm_t pcclComm_t;

/** Opaque; declared for source compatibility with PCCL 1.0 (no call takes it). */
typedef struct pcclRankInfo_t pcclRankInfo_t;

typedef struct pcclReduceInfo_t {
    /** Peers that took part in the (last) operation. */
    uint32_t local_world_size;
    /** Payload bytes this peer sent / received over p2p connections. */
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclReduceInfo_t;

typedef enum pcclDistributionHint_t {
    pcclDistributionNone = 0,
    pcclDistributionNormal = 1,
    pcclDistributionUniform = 2
} pcclDistributionHint_t;

typedef struct pcclReduceOperandDescriptor_t {
    pcclDataType_t datatype;
    pcclDistributionHint_t distribution_hint;
} pcclReduceOperandDescriptor_t;

/**
 * How an all-reduce is quantized on the wire (see docs/quantization.md).
 * Values travel in blocks of 8192 elements, each with its own parameters:
 * pcclQuantMinMax maps the block's [min, max] evenly onto the codes (error per
 * element and encode <= (max - min) / (codes - 1) / 2); pcclQuantZeroPointScale
 * maps [-max|x|, max|x|] symmetrically so that 0 stays exact (error <=
 * max|x| / 127 / 2 for 8 bits), or, to float16, scales by a power of two.
 * Sources: pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16. Targets: pcclUint8,
 * pcclInt8, pcclUint16 (both algorithms), pcclFloat16 (zero-point-scale only).
 * NaN and +-Inf are carried exactly (a block holding one loses 3 of its codes).
 * Reduce-scatter accumulates in the source type; each chunk's owner encodes the
 * result once and all peers, owner included, keep the decoded values, so results
 * are bit-identical (PCCL technical report section 5.3.1). The distribution hint
 * is accepted and does not change the parameters (they come from the exact range).
 */
typedef enum pcclQuantizationAlgorithm_t {
    pcclQuantNone = 0,
    pcclQuantMinMax = 1,
    pcclQuantZeroPointScale = 2
} pcclQuantizationAlgorithm_t;

typedef struct pcclQuantizationOptions_t {
    pcclDataType_t quantized_datatype;
    pcclQuantizationAlgorithm_t algorithm;
} pcclQuantizationOptions_t;

typedef struct pcclReduceDescriptor_t {
    /** Number of elements (not bytes) in the send and receive buffers. */
    size_t count;
    pcclRedOp_t op;
    /** Identifies the operation; must be unique among operations in flight. */
    uint64_t tag;
    pcclReduceOperandDescriptor_t src_descriptor;
    pcclQuantizationOptions_t quantization_options;
} pcclReduceDescriptor_t;

typedef struct pcclReduceSingleDescriptor_t {
    void *sendbuf;
    void *recvbuf;
    pcclReduceDescriptor_t descriptor;
} pcclReduceOpDescriptor_t;

typedef struct pcclAsyncReduceOp_t {
    pcclComm_t *comm;
    uint64_t tag;
} pcclAsyncReduceOp_t;

/** 16-byte identity the master assigns to each peer. */
typedef struct pcclRankUuid_t {
    uint8_t data[16];
} pcclRankUuid_t;

typedef struct pcclTensorInfo_t {
    /** Key, unique within the shared state (at most 255 bytes). */
    const char *name;
    /** count elements of datatype, on device_type. */
    void *data;
    size_t count;
    pcclDataType_t datatype;
    pcclDeviceType_t device_type;
    /** If true, a differing hash of this tensor never triggers a transfer. */
    bool allow_content_inequality;
} pcclTensorInfo_t;

typedef struct pcclSharedState_t {
    /** Must be the group's previous revision + 1 (any value on the group's first sync). */
    uint64_t revision;
    /** Number of entries in infos. */
    size_t count;
    pcclTensorInfo_t *infos;
} pcclSharedState_t;

typedef struct pcclSharedStateSyncInfo_t {
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclSharedStateSyncInfo_t;

typedef struct pcclMasterInstanceState_t pcclMasterInstance_t;

typedef struct pcclBuildInfo_t {
    /** True when the CUDA kernels (SimpleHash on device) were compiled in. */
    bool has_cuda_support;
} pcclBuildInfo_t;

/** Static English description of a result code (never NULL). */
PCCL_EXPORT const char *pcclResultString(pcclResult_t result);

/**
 * Initializes the library. Call once per process before anything else.
 * @return pcclSuccess.
 */
PCCL_EXPORT pcclResult_t pcclInit(void);

/**
 * Allocates a communicator; no connection is made until pcclConnect.
 * @return pcclSuccess; pcclNotInitialized; pcclInvalidArgument if a pointer is NULL
 *         or the master address is not IPv4.
 */
PCCL_EXPORT pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params,
                                                pcclComm_t **comm_out);

/**
 * Reads an integer attribute (a snapshot as of this thread's last call).
 * @return pcclSuccess; pcclInvalidArgument for NULL pointers or an unknown attribute.
 */
PCCL_EXPORT pcclResult_t pcclGetAttribute(const pcclComm_t *communicator,
                                          pcclAttribute_t attribute, int *p_attribute_out);

/**
 * Closes all connections, joins all internal threads and frees the communicator.
 * @return pcclSuccess; pcclInvalidArgument if communicator is NULL.
 */
PCCL_EXPORT pcclResult_t pcclDestroyCommunicator(pcclComm_t *communicator);

/**
 * Connects to the master and blocks until the existing peers accept this peer
 * (their next pcclUpdateTopology) and p2p connections to its ring neighbours work.
 * Connecting to the master is bounded (PCCL_CONNECT_TIMEOUT_MS, default 10000 ms).
 * @return pcclSuccess; pcclInvalidUsage if already connected;
 *         pcclMasterConnectionFailed if the master is unreachable, refuses the
 *         protocol version, or goes away while this peer waits.
 */
PCCL_EXPORT pcclResult_t pcclConnect(pcclComm_t *communicator);

/**
 * Vote to accept pending peers and to drop vanished ones; blocks until every
 * accepted peer of the run voted and the p2p connections of the new ring work.
 * A peer that a restarted master rebuilt the run without (it came back after the
 * rebuild window) is a newcomer again: this call waits until it is accepted.
 * @return pcclSuccess; pcclPendingAsyncOps if async all-reduces are not awaited;
 *         pcclUpdateTopologyFailed if p2p wiring failed (retry);
 *         pcclMasterConnectionFailed if the master is gone.
 */
PCCL_EXPORT pcclResult_t pcclUpdateTopology(pcclComm_t *communicator);

/**
 * Joint vote of all accepted peers: are peers waiting to be accepted?
 * The same answer is returned to every peer. May overlap with all-reduces.
 * A peer waiting to be accepted again after a master restart gets true at once
 * (itself), and pcclTooFewPeers from the group's collectives and syncs.
 * @return pcclSuccess; pcclInvalidArgument for NULL pointers;
 *         pcclMasterConnectionFailed if the master is gone.
 */
PCCL_EXPORT pcclResult_t pcclArePeersPending(const pcclComm_t *communicator, bool *pending_out);

/** PCCL's older spelling of pcclArePeersPending. */
PCCL_EXPORT pcclResult_t pcclAreNewPeersPending(const pcclComm_t *communicator,
                                                bool *new_peers_pending_out);

/**
 * Joint vote to re-order the ring by measured bandwidth. Never admits new peers.
 * @return pcclSuccess (also when the ring is unchanged);
 *         pcclTopologyOptimizationFailed (retry); pcclPendingAsyncOps.
 */
PCCL_EXPORT pcclResult_t pcclOptimizeTopology(const pcclComm_t *communicator);

/**
 * Blocking ring all-reduce (reduce-scatter then all-gather, pipelined in chunks;
 * Patarasuk & Yuan 2009; PCCL technical report section 4.1) of descriptor->count
 * elements. sendbuff == recvbuff reduces in place. Every peer ends with the same
 * bits. On failure, in place: the buffer holds its content from before the call
 * (kept in a backup the size of the buffer). Out of place: sendbuff is only
 * read, never written, and recvbuff is undefined after a failure; this mode
 * needs no backup and no copy of the input, so it is the faster one when the
 * caller can hold two buffers.
 * @return pcclSuccess; pcclInvalidArgument (NULL pointers, count 0, unsupported
 *         datatype/op/quantization); pcclInvalidUsage (not connected, tag in use,
 *         parameters differ from other peers'); pcclTooFewPeers (group of one);
 *         pcclRankConnectionLost (a peer failed; retry).
 */
PCCL_EXPORT pcclResult_t pcclAllReduce(const void *sendbuff, void *recvbuff,
                                       const pcclReduceDescriptor_t *descriptor,
                                       const pcclComm_t *communicator,
                                       pcclReduceInfo_t *PCCL_NULLABLE reduce_info_out);

/**
 * Launches an all-reduce and returns at once; await it with pcclAwaitAsyncReduce.
 * Buffers must stay valid and untouched until then.
 * @return as pcclAllReduce for argument errors; pcclTooFewPeers at once when the
 *         peer group had fewer than 2 peers at the last topology update; failures
 *         of the operation itself are returned by pcclAwaitAsyncReduce.
 */
PCCL_EXPORT pcclResult_t pcclAllReduceAsync(const void *sendbuff, void *recvbuff,
                                            const pcclReduceDescriptor_t *descriptor,
                                            const pcclComm_t *communicator,
                                            pcclAsyncReduceOp_t *reduce_handle_out);

/**
 * Waits for an async all-reduce.
 * @return as pcclAllReduce; pcclInvalidArgument for an unknown handle.
 */
PCCL_EXPORT pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *reduce_handle,
                                              pcclReduceInfo_t *PCCL_NULLABLE reduce_info_out);

/**
 * Runs count all-reduces, at most max_in_flight at a time; awaits all, retries
 * the failed ones, and returns when all succeeded or the group fell below 2 peers.
 * reduce_info_out sums tx/rx bytes; local_world_size is the last one seen.
 * @return pcclSuccess; pcclTooFewPeers; pcclInvalidArgument; pcclInvalidUsage.
 */
PCCL_EXPORT pcclResult_t pcclAllReduceMultipleWithRetry(
    const pcclReduceOpDescriptor_t *descriptors, size_t count, const pcclComm_t *communicator,
    pcclReduceInfo_t *PCCL_NULLABLE reduce_info_out, int max_in_flight);

/**
 * Makes the shared state bit-identical across the peer group: each tensor is
 * hashed (SimpleHash), the master elects the most popular content, and peers
 * that differ fetch the differing tensors from an up-to-date peer.
 * shared_state->revision of an outdated peer is updated to the group's.
 * @return pcclSuccess; pcclInvalidArgument; pcclInvalidUsage (revision ahead
 *         of the group's expected one, or tensor layout differs from the popular one);
 *         pcclNoSharedStateAvailable; pcclRankConnectionLost (this peer's transfer
 *         failed: its revision stays and the tensor being received keeps its bytes;
 *         retry. Peers that had nothing to fetch succeed meanwhile).
 */
PCCL_EXPORT pcclResult_t pcclSynchronizeSharedState(const pcclComm_t *communicator,
                                                    pcclSharedState_t *shared_state,
                                                    pcclSharedStateSyncStrategy_t strategy,
                                                    pcclSharedStateSyncInfo_t *PCCL_NULLABLE sync_info_out);

/**
 * Creates a master bound to listen_address (port 0 picks a free port).
 * @return pcclSuccess; pcclInvalidArgument; pcclInternalError if the port cannot be bound.
 */
PCCL_EXPORT pcclResult_t pcclCreateMaster(ccoip_socket_address_t listen_address,
                                          pcclMasterInstance_t **p_master_handle_out);

/** Starts the master's event loop on its own thread and returns. */
PCCL_EXPORT pcclResult_t pcclRunMaster(pcclMasterInstance_t *master_instance);

/** Asks a running master to stop (async-signal-safe). */
PCCL_EXPORT pcclResult_t pcclInterruptMaster(pcclMasterInstance_t *master_instance);

/** Blocks until the master's loop has ended and its connections are closed. */
PCCL_EXPORT pcclResult_t pcclMasterAwaitTermination(pcclMasterInstance_t *master_instance);

/** Frees a master after pcclMasterAwaitTermination (or one never run). */
PCCL_EXPORT pcclResult_t pcclDestroyMaster(pcclMasterInstance_t *master_instance);

/** Fills *info with how this build was configured. */
PCCL_EXPORT pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_H */
