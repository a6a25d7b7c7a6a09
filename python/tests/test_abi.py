"""The cdefs against PCCL 1.0's ABI and against pccl.h and pccl_coll.h: every public struct's size and
field offsets, every enum value and flag, and the Python enums' values. The headers are read by
compiling a probe."""
import shutil
import subprocess
from pathlib import Path

import pytest

import pccl
from pccl._native import ffi

INCLUDE = Path(__file__).resolve().parents[2] / "libpccl" / "include"

# PCCL 1.0's layouts on x86-64 (the numbers tests/unit/test_abi.c pins): type -> (size, {field: offset}).
PCCL1_LAYOUT = {
    "ccoip_ipv4_address_t": (4, {"data": 0}),
    "ccoip_ipv6_address_t": (16, {"data": 0}),
    "ccoip_inet_address_t": (24, {"protocol": 0, "ipv4": 4, "ipv6": 8}),
    "ccoip_socket_address_t": (28, {"inet": 0, "port": 24}),
    "pcclCommCreateParams_t": (36, {"master_address": 0, "peer_group": 28, "p2p_connection_pool_size": 32}),
    "pcclReduceInfo_t": (24, {"local_world_size": 0, "tx_bytes": 8, "rx_bytes": 16}),
    "pcclReduceOperandDescriptor_t": (8, {"datatype": 0, "distribution_hint": 4}),
    "pcclQuantizationOptions_t": (8, {"quantized_datatype": 0, "algorithm": 4}),
    "pcclReduceDescriptor_t": (40, {"count": 0, "op": 8, "tag": 16, "src_descriptor": 24,
                                    "quantization_options": 32}),
    "pcclReduceOpDescriptor_t": (56, {"sendbuf": 0, "recvbuf": 8, "descriptor": 16}),
    "pcclAsyncReduceOp_t": (16, {"comm": 0, "tag": 8}),
    "pcclRankUuid_t": (16, {"data": 0}),
    "pcclTensorInfo_t": (40, {"name": 0, "data": 8, "count": 16, "datatype": 24, "device_type": 28,
                              "allow_content_inequality": 32}),
    "pcclSharedState_t": (24, {"revision": 0, "count": 8, "infos": 16}),
    "pcclSharedStateSyncInfo_t": (16, {"tx_bytes": 0, "rx_bytes": 8}),
    "pcclBuildInfo_t": (1, {"has_cuda_support": 0}),
}
# pccl_coll.h's layouts on x86-64.
COLL_LAYOUT = {
    "pcclExtCollDescriptor_t": (96, {"kind": 0, "tag": 8, "sendbuf": 16, "recvbuf": 24, "count": 32,
                                     "recv_capacity": 40, "datatype": 48, "op": 52, "quantization_options": 56,
                                     "flags": 64, "rank_key": 72, "counts": 80, "counts_capacity": 88}),
    "pcclExtCollInfo_t": (48, {"rank": 0, "world_size": 4, "root": 8, "offset": 16, "count": 24, "tx_bytes": 32,
                               "rx_bytes": 40}),
    "pcclExtAsyncCollOp_t": (16, {"comm": 0, "tag": 8}),
}
LAYOUT = {**PCCL1_LAYOUT, **COLL_LAYOUT}
ENUM_TYPES = ["ccoip_inet_protocol_t", "pcclResult_t", "pcclDataType_t", "pcclDeviceType_t", "pcclRedOp_t",
              "pcclAttribute_t", "pcclSharedStateSyncStrategy_t", "pcclDistributionHint_t",
              "pcclQuantizationAlgorithm_t", "pcclExtCollKind_t"]

# (Python member or None, C name, PCCL 1.0's value)
R, D, S, A = pccl.Result, pccl.DataType, pccl.SharedStateSyncStrategy, pccl.Attribute
ENUMS = [
    (None, "inetIPv4", 0), (None, "inetIPv6", 1),
    (R.SUCCESS, "pcclSuccess", 0), (R.NOT_INITIALIZED, "pcclNotInitialized", 1),
    (R.INTERNAL_ERROR, "pcclInternalError", 2), (R.INVALID_ARGUMENT, "pcclInvalidArgument", 3),
    (R.INVALID_USAGE, "pcclInvalidUsage", 4), (R.TOO_FEW_PEERS, "pcclTooFewPeers", 5),
    (R.MASTER_CONNECTION_FAILED, "pcclMasterConnectionFailed", 6),
    (R.RANK_CONNECTION_FAILED, "pcclRankConnectionFailed", 7), (R.RANK_CONNECTION_LOST, "pcclRankConnectionLost", 8),
    (R.NO_SHARED_STATE_AVAILABLE, "pcclNoSharedStateAvailable", 9), (R.PENDING_ASYNC_OPS, "pcclPendingAsyncOps", 10),
    (R.UPDATE_TOPOLOGY_FAILED, "pcclUpdateTopologyFailed", 11),
    (R.TOPOLOGY_OPTIMIZATION_FAILED, "pcclTopologyOptimizationFailed", 12),
    (D.UINT8, "pcclUint8", 0), (D.INT8, "pcclInt8", 1), (D.INT16, "pcclInt16", 2), (D.UINT16, "pcclUint16", 3),
    (D.UINT32, "pcclUint32", 4), (D.INT32, "pcclInt32", 5), (D.UINT64, "pcclUint64", 6), (D.INT64, "pcclInt64", 7),
    (D.FLOAT16, "pcclFloat16", 8), (D.BFLOAT16, "pcclBFloat16", 9), (D.FLOAT, "pcclFloat", 10),
    (D.DOUBLE, "pcclDouble", 11),
    (pccl.DeviceType.CPU, "pcclDeviceCpu", 0), (pccl.DeviceType.CUDA, "pcclDeviceCuda", 1),
    (pccl.ReduceOp.SUM, "pcclSum", 0), (pccl.ReduceOp.AVG, "pcclAvg", 1), (pccl.ReduceOp.PROD, "pcclProd", 2),
    (pccl.ReduceOp.MAX, "pcclMax", 3), (pccl.ReduceOp.MIN, "pcclMin", 4),
    (A.GLOBAL_WORLD_SIZE, "PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE", 1),
    (A.LOCAL_WORLD_SIZE, "PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE", 2),
    (A.NUM_DISTINCT_PEER_GROUPS, "PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS", 3),
    (A.LARGEST_PEER_GROUP_WORLD_SIZE, "PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE", 4),
    (S.ENFORCE_POPULAR, "PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR", 0),
    (S.RECEIVE_ONLY, "PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY", 1),
    (S.SEND_ONLY, "PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY", 2),
    (pccl.DistributionHint.NONE, "pcclDistributionNone", 0), (pccl.DistributionHint.NORMAL, "pcclDistributionNormal", 1),
    (pccl.DistributionHint.UNIFORM, "pcclDistributionUniform", 2),
    (pccl.QuantizationAlgorithm.NONE, "pcclQuantNone", 0), (pccl.QuantizationAlgorithm.MIN_MAX, "pcclQuantMinMax", 1),
    (pccl.QuantizationAlgorithm.ZERO_POINT_SCALE, "pcclQuantZeroPointScale", 2),
]
K = pccl.CollectiveKind
COLL_ENUMS = [
    (K.ALL_REDUCE, "pcclExtCollAllReduce", 0), (K.BROADCAST, "pcclExtCollBroadcast", 1),
    (K.ALL_GATHER, "pcclExtCollAllGather", 2), (K.ALL_GATHER_V, "pcclExtCollAllGatherV", 3),
    (K.REDUCE_SCATTER, "pcclExtCollReduceScatter", 4), (K.BARRIER, "pcclExtCollBarrier", 5),
    (None, "PCCL_EXT_COLL_ROOT", 1), (None, "PCCL_EXT_COLL_RANKED", 2), (None, "PCCL_EXT_COLL_SHARED_SOURCES", 4),
]
# The kind names of the master's JSON, metrics and logs.
KIND_NAMES = ["all_reduce", "broadcast", "all_gather", "all_gather_v", "reduce_scatter", "barrier"]

# Extension values beyond PCCL 1.0's enums: (Python member, extension header, C name); none may reuse a
# PCCL 1.0 value.
EXTENSIONS = [(R.RUN_SHUT_DOWN, "pccl_leave.h", "pcclExtRunShutDown"),
              (D.UINT4, "pccl_compress.h", "pcclExtUint4"), (D.UINT2, "pccl_compress.h", "pcclExtUint2")]


def test_extension_values_match_their_headers():
    import re
    for member, hdr, name in EXTENSIONS:
        pccl1 = {v for m, _, v in ENUMS if isinstance(m, type(member))}
        ctype = {R: "pcclResult_t", D: "pcclDataType_t"}[type(member)]
        text = (INCLUDE / hdr).read_text()
        m = re.search(r"#define\s+%s\s+\(\(%s\)(\d+)\)" % (name, ctype), text)
        assert m, f"{name} not in {hdr}"
        assert member.value == int(m.group(1)) and member.value not in pccl1


@pytest.fixture(scope="module")
def header(tmp_path_factory):
    """{'size T' | 'off T f' | 'enum NAME' | 'sizeof enum T': value} as compiled from pccl.h."""
    cc = shutil.which("cc")
    if cc is None or not INCLUDE.is_dir():
        pytest.skip("needs a C compiler and libpccl/include")
    lines = ["#include <pccl.h>", "#include <pccl_coll.h>", "#include <stddef.h>", "#include <stdio.h>",
             "int main(void) {"]
    for t, (_, fields) in LAYOUT.items():
        lines.append(f'printf("size {t} %zu\\n", sizeof({t}));')
        lines += [f'printf("off {t} {f} %zu\\n", offsetof({t}, {f}));' for f in fields]
    lines += [f'printf("sizeof enum {t} %zu\\n", sizeof({t}));' for t in ENUM_TYPES]
    lines += [f'printf("enum {c} %lld\\n", (long long){c});' for _, c, _ in ENUMS + COLL_ENUMS]
    lines.append("return 0; }")
    d = tmp_path_factory.mktemp("abi")
    (d / "probe.c").write_text("\n".join(lines))
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-o", str(d / "probe"),
                    str(d / "probe.c")], check=True)
    out = subprocess.run([str(d / "probe")], check=True, capture_output=True, text=True).stdout
    return {line.rpartition(" ")[0]: int(line.rpartition(" ")[2]) for line in out.splitlines()}


@pytest.mark.parametrize("ctype", LAYOUT)
def test_struct_layout(header, ctype):
    size, fields = LAYOUT[ctype]
    assert ffi.sizeof(ctype) == size == header[f"size {ctype}"]
    for f, off in fields.items():
        assert ffi.offsetof(ctype, f) == off == header[f"off {ctype} {f}"], f"{ctype}.{f}"


def test_enum_types_are_ints(header):
    for t in ENUM_TYPES:
        assert ffi.sizeof(t) == 4 == header[f"sizeof enum {t}"], t


def test_every_field_is_checked():
    for t, (_, fields) in LAYOUT.items():
        assert [f for f, _ in ffi.typeof(t).fields] == list(fields), f"{t}: the table above lacks fields"


def test_enum_values(header):
    for member, cname, value in ENUMS + COLL_ENUMS:
        assert header[f"enum {cname}"] == value, f"pccl.h: {cname}"
        assert getattr(pccl._native.lib, cname) == value, f"cdefs: {cname}"
        if member is not None:
            assert member.value == value, f"{member} != {cname}"


def test_every_enum_member_is_checked():
    c_names = {c for _, c, _ in ENUMS + COLL_ENUMS}
    for t in ENUM_TYPES:
        assert set(ffi.typeof(t).relements) <= c_names, f"{t} has values the table above lacks"
    checked = {m for m, _, _ in ENUMS + COLL_ENUMS if m is not None} | {m for m, _, _ in EXTENSIONS}
    for cls in (R, D, S, A, pccl.DeviceType, pccl.ReduceOp, pccl.DistributionHint, pccl.QuantizationAlgorithm, K):
        assert set(cls) <= checked, f"{cls.__name__} has members the table above lacks"


def test_collective_kind_names():
    assert [k.name.lower() for k in sorted(K, key=lambda k: k.value)] == KIND_NAMES


def test_collective_functions_are_declared():
    """The functions the package calls are declared with the header's parameter types (read from both
    texts: the library need not have them, as ABI mode resolves a symbol on its first call)."""
    import re
    from pccl._cdefs import CDEFS

    def params(text, name, prefix):
        m = re.search(r"%s%s\(([^)]*)\);" % (prefix, name), re.sub(r"\s+", " ", text))
        assert m, f"{name} not declared"
        return [re.sub(r"\s*\*\s*", " *", re.sub(r"\s*\b\w+$", "", p.strip())) for p in m.group(1).split(",")]
    for name in ("pcclExtCollective", "pcclExtCollectiveAsync", "pcclExtAwaitCollective",
                 "pcclExtCollectiveMultipleWithRetry"):
        header = params((INCLUDE / "pccl_coll.h").read_text(), name, "PCCL_EXPORT pcclResult_t ")
        assert params(CDEFS, name, "pcclResult_t ") == header, name
        assert len(header) in (2, 3, 5), header


def test_extension_functions_are_declared():
    """The extension calls the package binds (pccl/_cdefs_ext.py) against their headers, and the values of their
    enums."""
    import re
    from pccl._cdefs_ext import EXT_CDEFS

    def params(text, name, prefix):
        m = re.search(r"%s%s\(([^)]*)\);" % (prefix, name), re.sub(r"\s+", " ", text))
        assert m, f"{name} not declared"
        return [re.sub(r"\s*\*\s*", " *", re.sub(r"\s*\b\w+$", "", p.strip())) for p in m.group(1).split(",")]
    for hdr, ret, names in (("pccl_leave.h", "pcclResult_t", ("pcclExtLeave", "pcclExtGetDeparture")),
                            ("pccl_ext.h", "pcclResult_t", ("pcclExtCommSetRunKey", "pcclExtMasterSetRunKey",
                                                            "pcclExtCommSetName")),
                            ("pccl_tools.h", "void", ("pcclToolLogSetLevel", "pcclToolLogSetSink"))):
        text = (INCLUDE / hdr).read_text()
        for name in names:
            assert params(EXT_CDEFS, name, ret + " ") == params(text, name, "PCCL_EXPORT " + ret + " "), name
    tools = re.sub(r"\s+", " ", (INCLUDE / "pccl_tools.h").read_text())
    assert "typedef void (*pcclToolLogSink_t)(pcclLogLevel_t level, const char *component, const char *msg, " \
           "void *ctx);" in tools
    for hdr, names in (("pccl_leave.h", ("pcclExtInRun", "pcclExtLeft", "pcclExtKicked", "pcclExtMasterLost",
                                         "pcclExtShutDown")),
                       ("pccl_tools.h", ("PCCL_LOG_ERROR", "PCCL_LOG_WARN", "PCCL_LOG_INFO", "PCCL_LOG_DEBUG"))):
        text = (INCLUDE / hdr).read_text()
        for name in names:
            m = re.search(r"\b%s = (\d+)" % name, text)
            assert m and int(m.group(1)) == getattr(pccl._native.lib, name), name
    assert {d.name for d in pccl.Departure} == {"IN_RUN", "LEFT", "KICKED", "MASTER_LOST", "SHUT_DOWN"}
