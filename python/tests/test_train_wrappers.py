"""pccl.train with real torch: FaultTolerantManager, DiLoCo and StreamingDiLoCo in peer processes (peers/wrapper_peer.py)
on a master on loopback. Every peer logs the hashes of its shared state at each revision: at one revision all peers
must hold the same bits, also across a SIGKILL, a newcomer's join and a reallocated optimizer tensor."""
import pytest
import torch

import pccl
from harness import read_json_lines, wait_until
from pccl.train import RETRYABLE, StateDictSync, StreamingDiLoCo, fragments_of, is_retryable

N_ADAM_TENSORS = 12  # 4 parameters x (step, exp_avg, exp_avg_sq)


class Run:
    """Peers of one kind against one master; their JSON lines by rank."""

    def __init__(self, procs, kind, *opts):
        self.procs, self.kind, self.opts = procs, kind, opts
        self.master = procs.start_master()
        self.stopfile = procs.dir / "stop"

    def start(self, rank, min_world):
        self.procs.start_peer("wrapper_peer.py", f"rank{rank}", self.kind, self.master, rank, self.out(rank),
                              self.stopfile, min_world, *self.opts)

    def out(self, rank):
        return self.procs.dir / f"rank{rank}.jsonl"

    def records(self, rank):
        return read_json_lines(self.out(rank))

    def last_revision(self, rank):
        r = self.records(rank)
        return r[-1]["revision"] if r else -1

    def stop_soon(self, ranks, ahead):
        stop = max(self.last_revision(r) for r in ranks) + ahead
        self.stopfile.write_text(str(stop))
        return stop

    def check_equal(self, ranks, killed=()):
        """Every revision's records of ranks and killed ranks agree (shared state, optimizer state); the ranks end
        with equal final records, which are returned."""
        by_rev = {}
        for r in (*ranks, *killed):
            for x in self.records(r):
                if not x.get("reallocated"):
                    by_rev.setdefault(x["revision"], set()).add((x["model"], x["optim"], x["n_optim"]))
        bad = {rev: v for rev, v in by_rev.items() if len(v) != 1}
        assert not bad, f"peers held different state at one revision: {bad}"
        finals = [self.records(r)[-1] for r in ranks]
        assert all(f.get("final") for f in finals), finals
        assert len({(f["revision"], f["model"], f["optim"]) for f in finals}) == 1, finals
        return finals


def test_ft_equal_state_and_reallocated_tensor(procs):
    """3 peers with Adam: its moments appear after the first step and are shared from then on; rank 0 replaces one
    moment with a new tensor of other content after revision 4; the next sync repairs that new tensor."""
    run = Run(procs, "ft", "optim=adam", "steps=12", "realloc=4")
    for r in range(3):
        run.start(r, 3)
    procs.expect_success([f"rank{r}" for r in range(3)], 55)
    finals = run.check_equal(range(3))
    assert finals[0]["revision"] == 12 and finals[0]["accuracy"] >= 0.9, finals[0]
    r0 = run.records(0)
    assert r0[0]["revision"] == 0 and r0[0]["n_optim"] == 0, "Adam's state exists before the first step?"
    assert all(x["n_optim"] == N_ADAM_TENSORS for x in r0 if x["revision"] > 0)
    realloc = next(x for x in r0 if x.get("reallocated"))
    after = next(x for x in r0 if x["revision"] == 5)
    assert realloc["optim"] != after["optim"] and after["rx"] > realloc["rx"], "the new tensor was not synced"
    assert all(x["rx"] == 0 for r in (1, 2) for x in run.records(r)), "only rank 0 needed a repair"


def test_ft_failed_all_reduce_is_skipped_on_every_peer(procs):
    """Rank 0 all-reduces one element more at revision 3: the master rejects that all-reduce for every member, so
    every peer skips the step alike, weights and optimizer untouched, and the run goes on."""
    run = Run(procs, "ft", "optim=adam", "steps=8", "mismatch=3")
    for r in range(3):
        run.start(r, 3)
    procs.expect_success([f"rank{r}" for r in range(3)], 55)
    finals = run.check_equal(range(3))
    assert all(f["skipped"] == 1 and f["committed"] == 8 for f in finals), finals
    for r in range(3):
        at3 = [x for x in run.records(r) if x["revision"] == 3]
        assert [x.get("not_committed", False) for x in at3] == [False, True], at3
        assert at3[0]["model"] == at3[1]["model"] and at3[0]["optim"] == at3[1]["optim"], "a skipped step moved state"


def test_ft_kill_and_newcomer_gets_model_and_adam_state(procs):
    run = Run(procs, "ft", "optim=adam", "sleep=0.05")
    for r in range(3):
        run.start(r, 3)
    wait_until(lambda: all(run.last_revision(r) >= 5 for r in range(3)), 40, "5 steps of 3 peers")
    procs.kill("rank2")
    killed_at = run.last_revision(2)
    wait_until(lambda: all(len([x for x in run.records(r) if x["revision"] > killed_at + 1 and x["world"] == 2]) >= 3
                           for r in (0, 1)), 30, "3 steps of the 2 survivors")
    run.start(3, 2)
    wait_until(lambda: len(run.records(3)) >= 3, 40, "3 steps with the newcomer")
    run.stop_soon((0, 1, 3), 5)
    procs.expect_success(["rank0", "rank1", "rank3"], 30)
    run.check_equal((0, 1, 3), killed=(2,))
    first = run.records(3)[0]
    assert first["revision"] > killed_at and first["first"] == first["revision"], first
    assert first["rx"] > 0 and first["n_optim"] == N_ADAM_TENSORS, f"newcomer lacks the optimizer state: {first}"
    assert any(x["world"] == 3 for x in run.records(3)), "the newcomer never took part in an all-reduce"


def test_diloco_quantized_converges(procs):
    run = Run(procs, "diloco", "steps=10", "inner=10", "quant=1")
    for r in range(2):
        run.start(r, 2)
    procs.expect_success(["rank0", "rank1"], 55)
    finals = run.check_equal(range(2))
    assert finals[0]["revision"] == 10 and finals[0]["committed"] == 10, finals[0]
    assert finals[0]["n_optim"] == 4, "outer Nesterov momentum buffers not shared"
    assert finals[0]["accuracy"] >= 0.9 and finals[0]["loss"] < 0.5, finals[0]


def test_streaming_diloco_sparse_converges(procs):
    """Outer gradients as top-10% packs at 2 bits with decayed error feedback, 2 fragments overlapped with the inner
    steps: equal global parameters on both peers, and the model still learns."""
    run = Run(procs, "streaming", "steps=12", "inner=6", "fragments=2", "overlap=1", "alpha=0",
              "sparse=topk:0.1:2", "decay=0.9")
    for r in range(2):
        run.start(r, 2)
    procs.expect_success(["rank0", "rank1"], 55)
    finals = run.check_equal(range(2))
    assert finals[0]["revision"] == 12 and finals[0]["committed"] == 12, finals[0]
    assert finals[0]["world"] == 2, "the sparse all-reduce did not report the exchange's world"
    assert finals[0]["accuracy"] >= 0.8, finals[0]


def test_sparsify_arguments_are_checked_before_connecting():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="sparsify"):
        StreamingDiLoCo("127.0.0.1:1", model, opt, inner_steps=10, sparsify="topk:1.5")
    with pytest.raises(ValueError, match="exclusive"):
        StreamingDiLoCo("127.0.0.1:1", model, opt, inner_steps=10, sparsify="topk:0.1",
                        quantization=pccl.QuantizationOptions(pccl.DataType.UINT8, pccl.QuantizationAlgorithm.MIN_MAX))
    with pytest.raises(ValueError, match="sparse_decay"):
        StreamingDiLoCo("127.0.0.1:1", model, opt, inner_steps=10, sparsify=(0.1, 2), sparse_decay=1.5)


def test_streaming_diloco_kill_and_join(procs):
    """3 fragments synced in turn with one step of overlap; a peer is SIGKILLed and a newcomer joins; every peer ends
    with the same global parameters and outer momentum."""
    run = Run(procs, "streaming", "inner=6", "fragments=3", "overlap=1", "sleep=0.03")
    for r in range(3):
        run.start(r, 3)
    wait_until(lambda: all(run.last_revision(r) >= 4 for r in range(3)), 40, "4 fragment syncs of 3 peers")
    procs.kill("rank2")
    killed_at = run.last_revision(2)
    wait_until(lambda: all(run.last_revision(r) >= killed_at + 3 for r in (0, 1)), 30, "syncs of the survivors")
    run.start(3, 2)
    wait_until(lambda: len(run.records(3)) >= 4, 40, "4 fragment syncs with the newcomer")
    run.stop_soon((0, 1, 3), 6)
    procs.expect_success(["rank0", "rank1", "rank3"], 30)
    finals = run.check_equal((0, 1, 3), killed=(2,))
    first = run.records(3)[0]
    assert first["revision"] > killed_at and first["rx"] > 0, first
    assert finals[0]["n_optim"] == 4 and finals[0]["accuracy"] >= 0.9, finals[0]


def test_fragments_partition_contiguously_by_size():
    assert fragments_of([10, 10, 10, 10], 2) == [[0, 1], [2, 3]]
    assert fragments_of([100, 1, 1, 1], 3) == [[0], [1], [2, 3]]
    assert fragments_of([1, 1, 1], 3) == [[0], [1], [2]]
    assert fragments_of([5], 1) == [[0]]
    for bad in (0, 4):
        with pytest.raises(ValueError):
            fragments_of([1, 1, 1], bad)


def test_schedule_is_checked_before_connecting():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="multiple of fragments"):
        StreamingDiLoCo("127.0.0.1:1", model, opt, inner_steps=10, fragments=3)
    with pytest.raises(ValueError, match="overlap_steps"):
        StreamingDiLoCo("127.0.0.1:1", model, opt, inner_steps=10, fragments=2, overlap_steps=5)
    with pytest.raises(ValueError, match="alpha"):
        StreamingDiLoCo("127.0.0.1:1", model, opt, inner_steps=4, alpha=2.0)


def test_retryable_by_result_code():
    assert is_retryable(pccl.PCCLError(pccl.Result.RANK_CONNECTION_LOST, "pcclAllReduce"))
    assert is_retryable(pccl.PCCLError(pccl.Result.TOO_FEW_PEERS, "pcclAllReduce"))
    for fatal in (pccl.Result.MASTER_CONNECTION_FAILED, pccl.Result.RUN_SHUT_DOWN, pccl.Result.INVALID_ARGUMENT,
                  pccl.Result.INTERNAL_ERROR, pccl.Result.PENDING_ASYNC_OPS):
        assert fatal not in RETRYABLE and not is_retryable(pccl.PCCLError(fatal, "pcclX"))


def _model_and_adam(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    return model, torch.optim.Adam(model.parameters(), lr=0.1, betas=(0.8, 0.9))


def test_layout_description_recreates_lazy_optimizer_state():
    """What a newcomer does between the two syncs, without a network: the group's description (from an Adam that
    stepped, with a learning rate changed since) makes a fresh Adam hold the same entries, shapes and hyperparameters,
    so both collect the same names, dtypes and shapes."""
    old_model, old_opt = _model_and_adam(1)
    old_model(torch.ones(1, 3)).sum().backward()
    old_opt.step()
    old_opt.param_groups[0]["lr"] = 0.05
    new_model, new_opt = _model_and_adam(2)
    old = StateDictSync(old_model.state_dict, {"optim": old_opt}, 4)
    new = StateDictSync(new_model.state_dict, {"optim": new_opt}, 4)
    assert len(new.collect()) == 4 and len(old.collect()) == 4 + 12
    old._fill_layout()
    new._layout.copy_(old._layout)  # what the layout sync delivers to an outdated peer
    new._apply_layout()
    shapes = lambda s: {k: (v.dtype, tuple(v.shape)) for k, v in s.collect().items()}  # noqa: E731
    assert shapes(new) == shapes(old)
    assert new_opt.param_groups[0]["lr"] == 0.05 and new_opt.param_groups[0]["betas"] == (0.8, 0.9)
    assert new.describe() == old.describe()


def test_layout_over_capacity_is_a_clear_error():
    model, opt = _model_and_adam(1)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    s = StateDictSync(model.state_dict, {"optim": opt}, 4, layout_capacity=64)
    with pytest.raises(ValueError, match="layout_capacity"):
        s._fill_layout()
