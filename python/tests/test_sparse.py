"""SparseAllReduce over 3 peer processes (peers/sparse_peer.py): every output equals the sum of the packs the peers
sent, replayed here with NumPy (per chunk of 4096 the top fraction by magnitude, ties to the lowest index), each
residual what its peer did not send; outputs bit-identical across peers; NaN sent exactly; settings that differ
refused on every peer with nothing written. And the argument checks, the parser and the declarations."""
import math
import re
from pathlib import Path

import numpy as np
import pytest

from harness import run_peers_once

WORLD, COUNT, CHUNK = 3, 2 * 4096 + 300, 4096
INCLUDE = Path(__file__).resolve().parents[2] / "libpccl" / "include"


def inputs(pid, rnd, dtype=np.float32):
    return np.random.default_rng(1000 * pid + rnd).integers(-1000, 1001, COUNT).astype(dtype)


def select(acc, fraction):
    """The kept mask: per chunk, ceil(fraction * len) largest magnitudes, ties to the lowest index."""
    keep = np.zeros(acc.size, bool)
    for start in range(0, acc.size, CHUNK):
        c = acc[start:start + CHUNK]
        k = max(1, min(c.size, math.ceil(fraction * c.size)))
        order = np.lexsort((np.arange(c.size), -np.abs(c)))  # by magnitude descending, then index
        keep[start + order[:k]] = True
    return keep


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_peers_once(tmp_path_factory.mktemp("sparse"), "sparse_peer.py", WORLD, 120)


def test_unquantized_rounds_are_the_sum_of_the_packs(results):
    residual = {pid: np.zeros(COUNT, np.float32) for pid in range(WORLD)}
    cases = [(f"bits0-round{r}", r, "SUM") for r in range(3)] + [("bits0-avg-inplace", 3, "AVG")]
    for case, rnd, op in cases:
        recs = sorted(results[case], key=lambda r: r["id"])
        assert len(recs) == WORLD and all(r["ok"] for r in recs), case
        want = np.zeros(COUNT, np.float32)
        for pid in range(WORLD):
            acc = inputs(pid, rnd) + residual[pid]
            keep = select(acc, 0.05)
            want[keep] += acc[keep]
            residual[pid] = np.where(keep, 0, acc).astype(np.float32)
            assert np.array_equal(np.array(recs[pid]["residual"], np.float32), residual[pid]), (case, pid)
            assert recs[pid]["kept"] == 2 * 205 + 15
        if op == "AVG":
            want = want / np.float32(WORLD)
        for rec in recs:
            assert np.array_equal(np.array(rec["out"], np.float32), want), case
        assert len({str(rec["out"]) for rec in recs}) == 1


def test_quantized_bit_identical_and_nan_sent(results):
    for case in ("bits2-round0", "bits2-round1"):
        recs = results.get(case, [])
        assert len(recs) == WORLD and all(r["ok"] for r in recs), case
        assert len({str(rec["out"]) for rec in recs}) == 1, f"{case}: outputs differ"
    r0 = results["bits2-round0"]
    assert all(math.isnan(rec["out"][7]) for rec in r0)
    assert all(rec["residual"][7] == 0 for rec in r0 if rec["id"] == 1)
    # 2 bits: every sent value is a chunk's smallest or largest kept magnitude, which are inputs: integers
    assert all(v == int(v) for rec in results["bits2-round1"] for v in rec["out"])


def test_torch_tensors(results):
    pytest.importorskip("torch")
    recs = results.get("torch-bits4", [])
    assert len(recs) == WORLD and all(r["ok"] for r in recs)
    assert len({str(rec["out"]) for rec in recs}) == 1, "outputs differ"
    assert all(rec["kept"] == 2 * 123 + 9 for rec in recs)


@pytest.mark.parametrize("case", ["mismatch", "mismatch3"])
def test_mismatched_fraction_refused_everywhere(results, case):
    recs = results[case]
    assert len(recs) == WORLD
    for rec in recs:
        assert not rec["ok"] and rec["error"] == "INVALID_USAGE", rec
        assert rec["unchanged"], rec


def test_arguments_and_parser():
    import pccl
    from pccl._sparse import parse_sparsify
    assert parse_sparsify("topk:0.03:2") == (0.03, 2)
    assert parse_sparsify("topk:1") == (1.0, 0)
    for bad in ("topk:0", "topk:1.5", "topk:0.1:3", "top:0.1", ""):
        with pytest.raises(ValueError):
            parse_sparsify(bad)
    comm = pccl.Communicator("127.0.0.1:1")
    x = np.zeros(10, np.float32)
    for kw in ({"fraction": 0}, {"fraction": 1.5}, {"bits": 3}, {"bits": 8}):
        with pytest.raises(ValueError):
            pccl.SparseAllReduce(comm, x, **kw)
    with pytest.raises(TypeError):
        pccl.SparseAllReduce(comm, np.zeros(4, np.int32))
    sar = pccl.SparseAllReduce(comm, x, fraction=0.5)
    with pytest.raises(ValueError):
        sar(np.zeros(11, np.float32))
    with pytest.raises(ValueError):
        sar(x, op=pccl.ReduceOp.MAX)
    assert not sar.residual.any()


def test_declarations_match_the_header():
    """Each function and the info struct of _sparse.SPARSE_CDEFS as pccl_sparse.h declares them."""
    from pccl._sparse import SPARSE_CDEFS
    header = (INCLUDE / "pccl_sparse.h").read_text()
    header = re.sub(r"/\*.*?\*/", "", header, flags=re.S).replace("PCCL_EXPORT ", "")
    norm = lambda s: re.sub(r"\s+", " ", s).strip()
    for m in re.finditer(r"^(\w[\w ]*\*?)\s*(pcclExtSparse\w+)\(([^)]*)\);", SPARSE_CDEFS, re.M):
        h = re.search(re.escape(m.group(2)) + r"\(([^)]*)\);", header)
        assert h and norm(h.group(1)) == norm(m.group(3)), m.group(2)
    fields = lambda text: re.findall(r"(uint\d+_t) (\w+);", text.split("pcclExtSparseInfo_t {")[1].split("}")[0])
    assert fields(SPARSE_CDEFS) == fields(header)
