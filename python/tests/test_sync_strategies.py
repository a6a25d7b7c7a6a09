"""Shared-state sync of NumPy and torch tensors across 3 peer processes: a SEND_ONLY peer's
content (all of it) reaches two RECEIVE_ONLY peers with exact byte counts; then, between
up-to-date peers, an allow_content_inequality tensor stays private and nothing moves."""
import numpy as np

from harness import read_json_lines
from sync_peer import SHAPES, WORLD, reference

ITEMSIZE = {"np_f32": 4, "np_i16": 2, "pt_f16": 2, "pt_bf16": 2, "private": 1}
STATE_BYTES = sum(SHAPES[k] * ITEMSIZE[k] for k in ITEMSIZE)


def test_send_only_and_receive_only(procs):
    master = procs.start_master()
    outs = [str(procs.dir / f"rank{r}") for r in range(WORLD)]
    for r in range(WORLD):
        procs.start_peer("sync_peer.py", f"rank{r}", master, r, outs[r])
    procs.expect_success([f"rank{r}" for r in range(WORLD)], 60)

    syncs = [read_json_lines(o + ".jsonl") for o in outs]
    first = [s[0] for s in syncs]
    assert (first[0]["tx"], first[0]["rx"]) == ((WORLD - 1) * STATE_BYTES, 0)
    for r in (1, 2):
        assert (first[r]["tx"], first[r]["rx"]) == (0, STATE_BYTES), f"rank {r}: {first[r]}"
    assert [f["revision"] for f in first] == [7, 7, 7], "receivers did not take the sender's revision"
    for r in range(WORLD):
        assert (syncs[r][1]["tx"], syncs[r][1]["rx"]) == (0, 0), f"rank {r} moved bytes between up-to-date peers"

    for r in range(WORLD):
        state = np.load(outs[r] + ".npz")
        assert np.array_equal(state["np_f32"], reference("np_f32").astype(np.float32))
        assert np.array_equal(state["np_i16"], (reference("np_i16") * 2).astype(np.int16))
        assert np.array_equal(state["pt_f16"], reference("pt_f16"))
        assert np.array_equal(state["pt_bf16"], reference("pt_bf16"))
        assert (state["private"] == r + 10).all(), "an allow_content_inequality tensor was overwritten"
