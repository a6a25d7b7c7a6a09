/*
 * test_abi.c - pins the public ABI to PCCL 1.0's: every enum value, every
 * struct's size and field offsets (x86-64 LP64), the ccoip.h ports and every
 * function's signature. Programs built against PCCL 1.0's headers, and its
 * Python package (cffi, which hard-codes these layouts), run on libpccl only
 * while this table holds. The numbers are PCCL 1.0's, written out by hand:
 * never update them to follow a change of pccl.h.
 */
#include "tinytest.h"

#include <ccoip.h>
#include <pccl.h>
#include <stddef.h>
#include <string.h>

typedef struct {
    const char *name;
    long long value, pccl1;
} abi_row_t;

#define ROW(expr, expected) {#expr, (long long)(expr), (expected)}

static const abi_row_t enums[] = {
    ROW(pcclSuccess, 0), ROW(pcclNotInitialized, 1), ROW(pcclInternalError, 2), ROW(pcclInvalidArgument, 3),
    ROW(pcclInvalidUsage, 4), ROW(pcclTooFewPeers, 5), ROW(pcclMasterConnectionFailed, 6),
    ROW(pcclRankConnectionFailed, 7), ROW(pcclRankConnectionLost, 8), ROW(pcclNoSharedStateAvailable, 9),
    ROW(pcclPendingAsyncOps, 10), ROW(pcclUpdateTopologyFailed, 11), ROW(pcclTopologyOptimizationFailed, 12),

    ROW(pcclUint8, 0), ROW(pcclInt8, 1), ROW(pcclInt16, 2), ROW(pcclUint16, 3), ROW(pcclUint32, 4),
    ROW(pcclInt32, 5), ROW(pcclUint64, 6), ROW(pcclInt64, 7), ROW(pcclFloat16, 8), ROW(pcclBFloat16, 9),
    ROW(pcclFloat, 10), ROW(pcclDouble, 11),

    ROW(pcclDeviceCpu, 0), ROW(pcclDeviceCuda, 1),
    ROW(pcclSum, 0), ROW(pcclAvg, 1), ROW(pcclProd, 2), ROW(pcclMax, 3), ROW(pcclMin, 4),
    ROW(PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, 1), ROW(PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, 2),
    ROW(PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS, 3), ROW(PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE, 4),
    ROW(PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, 0), ROW(PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY, 1),
    ROW(PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY, 2),
    ROW(pcclDistributionNone, 0), ROW(pcclDistributionNormal, 1), ROW(pcclDistributionUniform, 2),
    ROW(pcclQuantNone, 0), ROW(pcclQuantMinMax, 1), ROW(pcclQuantZeroPointScale, 2),
    ROW(inetIPv4, 0), ROW(inetIPv6, 1),

    ROW(CCOIP_PROTOCOL_PORT_MASTER, 48148), ROW(CCOIP_PROTOCOL_PORT_SHARED_STATE, 48149),
    ROW(CCOIP_PROTOCOL_PORT_P2P, 48150), ROW(CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK, 48151),
};

#define SZ(type, expected) {"sizeof(" #type ")", (long long)sizeof(type), (expected)}
#define OFF(type, field, expected) {"offsetof(" #type ", " #field ")", (long long)offsetof(type, field), (expected)}

static const abi_row_t layouts[] = {
    SZ(ccoip_inet_protocol_t, 4), SZ(ccoip_ipv4_address_t, 4), SZ(ccoip_ipv6_address_t, 16),
    SZ(ccoip_inet_address_t, 24), OFF(ccoip_inet_address_t, protocol, 0), OFF(ccoip_inet_address_t, ipv4, 4),
    OFF(ccoip_inet_address_t, ipv6, 8),
    SZ(ccoip_socket_address_t, 28), OFF(ccoip_socket_address_t, inet, 0), OFF(ccoip_socket_address_t, port, 24),

    SZ(pcclResult_t, 4), SZ(pcclDataType_t, 4), SZ(pcclDeviceType_t, 4), SZ(pcclRedOp_t, 4), SZ(pcclAttribute_t, 4),
    SZ(pcclSharedStateSyncStrategy_t, 4), SZ(pcclDistributionHint_t, 4), SZ(pcclQuantizationAlgorithm_t, 4),

    SZ(pcclCommCreateParams_t, 36), OFF(pcclCommCreateParams_t, master_address, 0),
    OFF(pcclCommCreateParams_t, peer_group, 28), OFF(pcclCommCreateParams_t, p2p_connection_pool_size, 32),

    SZ(pcclReduceInfo_t, 24), OFF(pcclReduceInfo_t, local_world_size, 0), OFF(pcclReduceInfo_t, tx_bytes, 8),
    OFF(pcclReduceInfo_t, rx_bytes, 16),

    SZ(pcclReduceOperandDescriptor_t, 8), OFF(pcclReduceOperandDescriptor_t, datatype, 0),
    OFF(pcclReduceOperandDescriptor_t, distribution_hint, 4),
    SZ(pcclQuantizationOptions_t, 8), OFF(pcclQuantizationOptions_t, quantized_datatype, 0),
    OFF(pcclQuantizationOptions_t, algorithm, 4),

    SZ(pcclReduceDescriptor_t, 40), OFF(pcclReduceDescriptor_t, count, 0), OFF(pcclReduceDescriptor_t, op, 8),
    OFF(pcclReduceDescriptor_t, tag, 16), OFF(pcclReduceDescriptor_t, src_descriptor, 24),
    OFF(pcclReduceDescriptor_t, quantization_options, 32),

    SZ(pcclReduceOpDescriptor_t, 56), OFF(pcclReduceOpDescriptor_t, sendbuf, 0),
    OFF(pcclReduceOpDescriptor_t, recvbuf, 8), OFF(pcclReduceOpDescriptor_t, descriptor, 16),

    SZ(pcclAsyncReduceOp_t, 16), OFF(pcclAsyncReduceOp_t, comm, 0), OFF(pcclAsyncReduceOp_t, tag, 8),
    SZ(pcclRankUuid_t, 16), OFF(pcclRankUuid_t, data, 0),

    SZ(pcclTensorInfo_t, 40), OFF(pcclTensorInfo_t, name, 0), OFF(pcclTensorInfo_t, data, 8),
    OFF(pcclTensorInfo_t, count, 16), OFF(pcclTensorInfo_t, datatype, 24), OFF(pcclTensorInfo_t, device_type, 28),
    OFF(pcclTensorInfo_t, allow_content_inequality, 32),

    SZ(pcclSharedState_t, 24), OFF(pcclSharedState_t, revision, 0), OFF(pcclSharedState_t, count, 8),
    OFF(pcclSharedState_t, infos, 16),
    SZ(pcclSharedStateSyncInfo_t, 16), OFF(pcclSharedStateSyncInfo_t, tx_bytes, 0),
    OFF(pcclSharedStateSyncInfo_t, rx_bytes, 8),
    SZ(pcclBuildInfo_t, 1), OFF(pcclBuildInfo_t, has_cuda_support, 0),
};

static void check_rows(const abi_row_t *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        tt_checks++;
        if (rows[i].value != rows[i].pccl1) {
            tt_failures++;
            fprintf(stderr, "ABI: %s is %lld, PCCL 1.0 has %lld\n", rows[i].name, rows[i].value, rows[i].pccl1);
        }
    }
}

static void test_enum_values(void) { check_rows(enums, sizeof enums / sizeof enums[0]); }

static void test_struct_layouts(void) { check_rows(layouts, sizeof layouts / sizeof layouts[0]); }

/* PCCL 1.0's field names must compile: programs write them by name. */
static void test_field_names(void) {
    pcclCommCreateParams_t p = {.master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{127, 0, 0, 1}}},
                                                   .port = CCOIP_PROTOCOL_PORT_MASTER},
                                .peer_group = 7,
                                .p2p_connection_pool_size = 2};
    p.master_address.inet.ipv6.data[15] = 1;
    const unsigned char *raw = (const unsigned char *)&p;
    uint16_t port;
    memcpy(&port, raw + 24, sizeof port);
    CHECK(raw[4] == 127 && raw[7] == 1 && raw[8 + 15] == 1 && port == 48148);
    pcclRankInfo_t *opaque = NULL; /* the typedef exists (opaque, as in PCCL 1.0) */
    CHECK(opaque == NULL);
}

/*
 * Every function with PCCL 1.0's exact prototype: assigning it to a pointer of
 * that type is a compile error (-Werror) if a parameter or the return type
 * differs. pcclResultString and pcclAreNewPeersPending are pccl's additions.
 */
static void test_signatures(void) {
    pcclResult_t (*init)(void) = pcclInit;
    pcclResult_t (*create)(const pcclCommCreateParams_t *, pcclComm_t **) = pcclCreateCommunicator;
    pcclResult_t (*attr)(const pcclComm_t *, pcclAttribute_t, int *) = pcclGetAttribute;
    pcclResult_t (*destroy)(pcclComm_t *) = pcclDestroyCommunicator;
    pcclResult_t (*connect)(pcclComm_t *) = pcclConnect;
    pcclResult_t (*update)(pcclComm_t *) = pcclUpdateTopology;
    pcclResult_t (*pending)(const pcclComm_t *, bool *) = pcclArePeersPending;
    pcclResult_t (*optimize)(const pcclComm_t *) = pcclOptimizeTopology;
    pcclResult_t (*allreduce)(const void *, void *, const pcclReduceDescriptor_t *, const pcclComm_t *,
                              pcclReduceInfo_t *) = pcclAllReduce;
    pcclResult_t (*launch)(const void *, void *, const pcclReduceDescriptor_t *, const pcclComm_t *,
                           pcclAsyncReduceOp_t *) = pcclAllReduceAsync;
    pcclResult_t (*multiple)(const pcclReduceOpDescriptor_t *, size_t, const pcclComm_t *, pcclReduceInfo_t *,
                             int) = pcclAllReduceMultipleWithRetry;
    pcclResult_t (*await_)(const pcclAsyncReduceOp_t *, pcclReduceInfo_t *) = pcclAwaitAsyncReduce;
    pcclResult_t (*sync)(const pcclComm_t *, pcclSharedState_t *, pcclSharedStateSyncStrategy_t,
                         pcclSharedStateSyncInfo_t *) = pcclSynchronizeSharedState;
    pcclResult_t (*master)(ccoip_socket_address_t, pcclMasterInstance_t **) = pcclCreateMaster;
    pcclResult_t (*run)(pcclMasterInstance_t *) = pcclRunMaster;
    pcclResult_t (*interrupt)(pcclMasterInstance_t *) = pcclInterruptMaster;
    pcclResult_t (*await_master)(pcclMasterInstance_t *) = pcclMasterAwaitTermination;
    pcclResult_t (*destroy_master)(pcclMasterInstance_t *) = pcclDestroyMaster;
    pcclResult_t (*build)(pcclBuildInfo_t *) = pcclGetBuildInfo;
    const void *all[] = {(void *)init, (void *)create, (void *)attr, (void *)destroy, (void *)connect,
                         (void *)update, (void *)pending, (void *)optimize, (void *)allreduce, (void *)launch,
                         (void *)multiple, (void *)await_, (void *)sync, (void *)master, (void *)run,
                         (void *)interrupt, (void *)await_master, (void *)destroy_master, (void *)build};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK(all[i] != NULL);
}

int main(void) {
    RUN_TEST(test_enum_values);
    RUN_TEST(test_struct_layouts);
    RUN_TEST(test_field_names);
    RUN_TEST(test_signatures);
    TEST_MAIN_END();
}
