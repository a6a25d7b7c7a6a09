"""Fault-tolerant data parallelism: average the gradients over the peers present, commit or skip alike.

    mgr = FaultTolerantManager("127.0.0.1:48148", model, optimizer)   # joins; a newcomer receives the state
    while mgr.revision < steps:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        mgr.step()          # average gradients; optimizer.step() on every peer or on none; next step's prologue

See docs/python-training.md for the design.
"""
import torch

from pccl._enums import ReduceOp
from pccl._errors import PCCLError
from pccl.train._session import Session
from pccl.train._state import StateDictSync


class FaultTolerantManager:
    """Wraps a model and its optimizer for fault-tolerant data-parallel training over pccl.

    comm: a just-connected pccl.Communicator or the master's address ('HOST:PORT'). model: a torch.nn.Module whose
    state_dict() (parameters and buffers) is shared. optimizer: a torch.optim.Optimizer over (some of) the model's
    parameters; its state_dict() (state and param_groups' hyperparameters) is shared too.
    min_world (default 2): peers to wait for before the first step; later steps go on with any 2 (with 1, a lone
    peer steps on its own gradients).
    timeout_s, max_failures: see Session. layout_capacity: bytes of the optimizer layout description (equal on
    every peer; the default depends on the parameter count only).

    The constructor blocks until the run has min_world peers and this peer holds the run's state (a newcomer
    receives the model and optimizer state). Raises PCCLError for a fatal failure, TimeoutError, ValueError for a
    non-contiguous state tensor.
    """

    def __init__(self, comm, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, min_world: int = 2,
                 timeout_s: float = 300.0, max_failures: int = 50, layout_capacity=None):
        self.model = model
        self.optimizer = optimizer
        self._params = [p for g in optimizer.param_groups for p in g["params"]]
        self._index_of = {id(p): i for i, p in enumerate(self._params)}
        state = StateDictSync(model.state_dict, {"optim": optimizer}, len(self._params), layout_capacity)
        self.session = Session(comm, state, min_world=min_world, timeout_s=timeout_s, max_failures=max_failures)
        self.comm = self.session.comm
        self.stats = self.session.stats
        self.session.begin()

    @property
    def revision(self) -> int:
        """Committed steps of the run (the shared state's revision): equal on every peer after each step()."""
        return self.session.revision

    def step(self) -> bool:
        """Averages the gradients (p.grad after backward) over the peers, then on success runs optimizer.step() and
        raises the revision by one; on failure (a peer died mid-all-reduce, the world fell below 2) the weights and
        the optimizer are untouched, on every peer alike (the master gives every member of an all-reduce the same
        outcome). Then runs the next step's prologue (newcomers accepted, state synced). Returns True when the step
        was committed. Gradients are averaged over all peers: a parameter without a gradient on some peer counts
        as zero there, and keeps grad None only if it has none on every peer.
        Raises PCCLError (fatal), TimeoutError."""
        committed = self._average() if self.stats.world_size >= 2 else True
        return self.session.conclude(committed, self.optimizer.step)

    def _buckets(self):
        """[(flat buffer, [(param, offset)], flags offset or None)] per gradient dtype, in an order equal on every
        peer; the float32 bucket carries one presence flag per parameter at its end."""
        by_dtype = {torch.float32: []}
        for p in self._params:
            by_dtype.setdefault(p.dtype, []).append(p)
        device = self._params[0].device if self._params else torch.device("cpu")
        out = []
        for dtype in sorted(by_dtype, key=str):
            ps = by_dtype[dtype]
            offsets, n = [], 0
            for p in ps:
                offsets.append((p, n))
                n += p.numel()
            flags = n if dtype == torch.float32 else None
            buf = torch.zeros(n + (len(self._params) if flags is not None else 0), dtype=dtype, device=device)
            for p, off in offsets:
                if p.grad is not None:
                    buf[off:off + p.numel()].copy_(p.grad.reshape(-1))
            out.append((buf, offsets, flags))
        return out

    def _average(self):
        """All-reduces the gradients (AVG); True and the averages in p.grad on success, False with p.grad untouched
        on a retryable failure."""
        buckets = self._buckets()
        flags_buf, flags_at = next((b, f) for b, _, f in buckets if f is not None)
        for i, p in enumerate(self._params):
            flags_buf[flags_at + i] = 0.0 if p.grad is None else 1.0
        handles, error = [], None
        for tag, (buf, _, _) in enumerate(buckets):
            try:
                handles.append(self.comm.all_reduce_async(buf, buf, op=ReduceOp.AVG, tag=tag))
            except PCCLError as e:
                error = e
                break
        outcomes = [h.wait() for h in handles]
        if error is None:
            bad = next((o for o in outcomes if not o[0]), None)
            if bad is not None:
                error = PCCLError(bad[1], "pcclAwaitAsyncReduce")
        if error is not None:
            self.session.failed(error, "gradient all-reduce")
            return False
        self.stats.world_size = outcomes[0][2].local_world_size
        for buf, offsets, _ in buckets:
            for p, off in offsets:
                if flags_buf[flags_at + self._index_of[id(p)]] == 0:
                    p.grad = None
                elif p.grad is None:
                    p.grad = buf[off:off + p.numel()].view_as(p).clone()
                else:
                    p.grad.copy_(buf[off:off + p.numel()].view_as(p))
        return True
