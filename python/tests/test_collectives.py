"""Every dtype and op, in place, out of place, async and multiple-with-retry, over 3 peer
processes and a master, against NumPy's results; quantized sums within their documented bound. The peers
run the ring (PCCL_ALGO=ring), whose bytes on the wire the traffic tests count; the other algorithms are
the C tests' (test_ring_rhd, test_algo_rhd, test_algo_rd)."""
import pytest

from cases import WORLD, case_ids
from harness import run_peers_once


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Runs the peers once; {case: [record of each peer]}."""
    return run_peers_once(tmp_path_factory.mktemp("collectives"), "collectives_peer.py", WORLD, 120,
                          env={"PCCL_ALGO": "ring"})


@pytest.mark.parametrize("case", case_ids())
def test_case(results, case):
    recs = results.get(case, [])
    assert len(recs) == WORLD, f"{len(recs)} of {WORLD} peers reported {case}"
    for rank, rec in enumerate(recs):
        assert rec["ok"], f"rank {rank}: {rec['error']}"
        assert rec["world"] == WORLD
    assert len({rec["digest"] for rec in recs}) == 1, "peers ended with different bits"


def test_ring_traffic(results):
    """A ring all-reduce of B bytes over W peers moves 2 (W-1)/W B each way per peer (up to a chunk's rounding)."""
    import numpy as np
    from cases import COUNT
    for case in ("numpy-float32-SUM-inplace", "numpy-float64-MAX-outofplace", "torch-int16-PROD-async"):
        itemsize = np.dtype(case.split("-")[1]).itemsize
        ideal = 2 * (WORLD - 1) * COUNT * itemsize / WORLD
        for rec in results[case]:
            for key in ("tx", "rx"):
                assert abs(rec[key] - ideal) <= 2 * WORLD * itemsize, f"{case} {key}={rec[key]}, ideal {ideal:.0f}"


def test_quantized_traffic(results):
    """8-bit codes cross the wire instead of 4- and 8-byte floats (plus per-block parameters)."""
    from cases import COUNT
    for case, itemsize in (("numpy-float32-SUM-quant_MIN_MAX_UINT8", 4),
                           ("numpy-float64-SUM-quant_ZERO_POINT_SCALE_INT8", 8)):
        unquantized = 2 * (WORLD - 1) * COUNT * itemsize / WORLD
        for rec in results[case]:
            assert 0 < rec["tx"] < 2 * unquantized / itemsize, f"{case}: tx {rec['tx']}"
    # 4 and 2 bits: 4.5 and 2.5 bits per float32 on the wire (groups of 128 with 8 bytes of parameters)
    for case, bits in (("numpy-float32-SUM-quant_MIN_MAX_UINT4", 4.5), ("torch-float32-SUM-quant_ZERO_POINT_SCALE_UINT2", 2.5)):
        unquantized = 2 * (WORLD - 1) * COUNT * 4 / WORLD
        for rec in results[case]:
            assert 0 < rec["tx"] <= unquantized * bits / 32 + 2 * WORLD * 16, f"{case}: tx {rec['tx']}"
