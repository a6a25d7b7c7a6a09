"""DiLoCo (Douillard et al. 2023, arXiv:2311.08105) and Streaming DiLoCo (Douillard et al. 2025, arXiv:2501.18512).

Every peer trains its own copy of the model (the local parameters) with an inner optimizer; the run keeps global
parameters, equal on every peer. Every H inner steps the peers average the outer gradient (the pseudo-gradient:
global minus local parameters) with an all-reduce and every peer applies the same outer optimizer step (Nesterov
SGD by default) to the global parameters. Streaming DiLoCo splits the parameters into K fragments and syncs one
fragment every H/K inner steps (each fragment every H), launching the fragment's all-reduce asynchronously and
waiting for it `overlap_steps` inner steps later, while training goes on.

    d = StreamingDiLoCo("127.0.0.1:48148", model, torch.optim.AdamW(model.parameters(), lr=3e-3),
                        inner_steps=20, fragments=4, overlap_steps=1)
    while d.revision < rounds:
        loss_fn(model(x), y).backward()
        d.step()            # inner step; at the schedule's points: launch, or wait + outer step + prologue
    d.use_global_params()   # the model takes the run's global parameters (to evaluate or save)

Shared state: the global parameters and the outer optimizer's state (state_dict()s); the inner optimizer's state
stays private. See docs/python-training.md.
"""
from concurrent.futures import ThreadPoolExecutor

import torch

from pccl._errors import PCCLError
from pccl._enums import ReduceOp
from pccl._sparse import SparseAllReduce, parse_sparsify
from pccl.train._session import Session
from pccl.train._state import StateDictSync


def nesterov_sgd(lr: float = 0.7, momentum: float = 0.9):
    """The papers' outer optimizer as a factory: params -> torch.optim.SGD(lr, momentum, nesterov=True)."""
    return lambda params: torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True)


def fragments_of(numels, k):
    """Splits parameter indices 0..len(numels)-1 into k contiguous fragments of about equal element counts.
    Returns a list of k non-empty lists. Raises ValueError when k is not in [1, len(numels)]."""
    if not 1 <= k <= len(numels):
        raise ValueError(f"fragments must be in [1, {len(numels)}] (the parameter count), got {k}")
    total, out, cur, acc = sum(numels), [], [], 0
    for i, n in enumerate(numels):
        cur.append(i)
        acc += n
        left_params, left_frags = len(numels) - i - 1, k - len(out) - 1
        if left_frags > 0 and (acc * k >= total * (len(out) + 1) or left_params == left_frags):
            out.append(cur)
            cur = []
    out.append(cur)
    return out


class StreamingDiLoCo:
    """Streaming DiLoCo over pccl. DiLoCo is the case fragments=1, overlap_steps=0, alpha=0 (class DiLoCo).

    comm: a just-connected pccl.Communicator or the master's address. model: the torch.nn.Module trained locally.
    inner_optimizer: a torch.optim.Optimizer over model.parameters() (private to this peer).
    outer_optimizer: a factory params -> Optimizer for the global parameters (default nesterov_sgd(0.7, 0.9)).
    inner_steps (H): inner steps between two syncs of one fragment. fragments (K): parameter partitions, H % K == 0;
    one fragment is synced every H/K inner steps, in turn. overlap_steps (tau, 0 <= tau < H/K): inner steps between
    a fragment's launch and the wait for it. alpha: after a fragment's outer step its local parameters become
    alpha * local + (1 - alpha) * global (0: replaced by the global ones). quantization: a pccl.QuantizationOptions
    for the outer gradients on the wire (None: float32). sparsify: "topk:FRACTION[:BITS]" or (fraction, bits): the
    outer gradients go through pccl.SparseAllReduce instead (top-k per chunk with error feedback, one residual per
    fragment kept on this peer, a newcomer's empty; docs/sparse.md), launched on a worker thread so that it overlaps
    the inner steps as the dense all-reduce does; exclusive with quantization. sparse_decay (beta, in [0, 1]): the
    top-k is taken from beta * residual + outer gradient (SparseLoCo, arXiv:2508.15706, section 3; 1: plain error
    feedback). min_world, timeout_s, max_failures, layout_capacity: as FaultTolerantManager.

    Fault tolerance: the master gives every member of an all-reduce the same outcome. A fragment sync that failed
    is skipped on every peer alike (global parameters and outer optimizer untouched, revision unchanged) and so
    retried at the next sync point, H/K inner steps later; the local parameters keep their progress, so that
    outer gradient covers the steps of both. A newcomer receives the global parameters and outer optimizer state
    and starts from them.

    The constructor blocks until the run has min_world peers and this peer holds the run's state. Raises
    ValueError for a bad schedule, PCCLError (fatal), TimeoutError.
    """

    def __init__(self, comm, model: torch.nn.Module, inner_optimizer: torch.optim.Optimizer, *, outer_optimizer=None,
                 inner_steps: int = 100, fragments: int = 1, overlap_steps: int = 0, alpha: float = 0.0,
                 quantization=None, sparsify=None, sparse_decay: float = 1.0, min_world: int = 2,
                 timeout_s: float = 300.0, max_failures: int = 50, layout_capacity=None):
        if inner_steps < 1 or fragments < 1 or inner_steps % fragments:
            raise ValueError(f"inner_steps ({inner_steps}) must be a positive multiple of fragments ({fragments})")
        self.round_steps = inner_steps // fragments
        if not 0 <= overlap_steps < self.round_steps:
            raise ValueError(f"overlap_steps must be in [0, inner_steps/fragments = {self.round_steps}), "
                             f"got {overlap_steps}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if isinstance(sparsify, str):
            sparsify = parse_sparsify(sparsify)
        if sparsify is not None and quantization is not None:
            raise ValueError("sparsify and quantization are exclusive (sparsify takes its own bits)")
        if not 0.0 <= sparse_decay <= 1.0:
            raise ValueError(f"sparse_decay must be in [0, 1], got {sparse_decay}")
        self.sparsify, self.sparse_decay = sparsify, sparse_decay
        self.model, self.inner_optimizer = model, inner_optimizer
        self.overlap_steps, self.alpha, self.quantization = overlap_steps, alpha, quantization
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self._names = [n for n, _ in named]
        self._local = [p for _, p in named]
        self._global = [torch.nn.Parameter(p.detach().clone()) for p in self._local]
        self.outer_optimizer = (outer_optimizer or nesterov_sgd())(self._global)
        self.fragments = fragments_of([p.numel() for p in self._local], fragments)
        device = self._local[0].device
        self._bufs = [torch.zeros(sum(self._local[i].numel() for i in f), dtype=torch.float32, device=device)
                      for f in self.fragments]
        state = StateDictSync(lambda: {n: g.data for n, g in zip(self._names, self._global)},
                              {"outer": self.outer_optimizer}, len(self._global), layout_capacity)
        self.session = Session(comm, state, min_world=min_world, timeout_s=timeout_s, max_failures=max_failures)
        self.comm, self.stats = self.session.comm, self.session.stats
        self._sparse = [None] * len(self.fragments)  # SparseAllReduce per fragment, made at its first sync
        self._worker = ThreadPoolExecutor(max_workers=1) if sparsify is not None else None
        # (fragment index, AsyncReduceHandle, Future of a sparse call, or None when alone; PCCLError at launch or None)
        self._pending = None
        self._begin()

    @property
    def revision(self) -> int:
        """Outer steps committed by the run (one per fragment sync): equal on every peer after each prologue."""
        return self.session.revision

    def step(self) -> bool:
        """One inner step (inner_optimizer.step(), then zero_grad()) and, on the schedule, a fragment's launch or
        its wait, outer step and the next prologue. Returns True when an outer step was committed in this call.
        Raises PCCLError (fatal), TimeoutError."""
        self.inner_optimizer.step()
        self.inner_optimizer.zero_grad()
        self._count += 1
        if self._count == self.round_steps:
            self._launch()
            self._count = 0
            if self.overlap_steps == 0:
                return self._finish()
        elif self._pending is not None and self._count == self.overlap_steps:
            return self._finish()
        return False

    def use_global_params(self):
        """Copies the global parameters into the model (to evaluate or save the run's model). The next inner
        steps start from them."""
        with torch.no_grad():
            for loc, glob in zip(self._local, self._global):
                loc.copy_(glob)

    def _begin(self):
        self.session.begin(on_synced=self._on_synced)
        self._count = self.overlap_steps  # every peer's schedule restarts here, a newcomer's too

    def _on_synced(self, rx_bytes):
        if rx_bytes > 0:  # outdated (a newcomer): local progress refers to other global parameters
            self.use_global_params()

    def _launch(self):
        """Fills the fragment's buffer with its outer gradient (global - local) and launches its all-reduce."""
        f = self.session.revision % len(self.fragments)
        buf, off = self._bufs[f], 0
        with torch.no_grad():
            for i in self.fragments[f]:
                n = self._local[i].numel()
                torch.sub(self._global[i].reshape(-1), self._local[i].reshape(-1), out=buf[off:off + n])
                off += n
        handle, error = None, None
        if self.stats.world_size >= 2 and self.sparsify is not None:
            handle = self._launch_sparse(f, buf)
        elif self.stats.world_size >= 2:
            try:
                handle = self.comm.all_reduce_async(buf, buf, op=ReduceOp.AVG, tag=0,
                                                    quantization_options=self.quantization)
            except PCCLError as e:
                error = e
        self._pending = (f, handle, error)

    def _launch_sparse(self, f, buf):
        """Starts fragment f's sparse all-reduce (average, in place in buf) on the worker thread: a Future."""
        if self._sparse[f] is None:
            fraction, bits = self.sparsify
            self._sparse[f] = SparseAllReduce(self.comm, buf, fraction=fraction, bits=bits)
        sar = self._sparse[f]
        if self.sparse_decay != 1.0:  # the library selects from buf + residual: this weights the residual by beta
            with torch.no_grad():
                buf.sub_(torch.from_numpy(sar.residual).to(buf.device), alpha=1.0 - self.sparse_decay)
        return self._worker.submit(sar, buf, None, ReduceOp.AVG, 0)

    def _finish(self):
        """Waits for the pending fragment; commits its outer step or skips it alike; runs the next prologue."""
        f, handle, error = self._pending
        self._pending = None
        if handle is not None and hasattr(handle, "result"):  # a sparse call's Future
            try:
                self.stats.world_size = handle.result().world_size
            except PCCLError as e:
                error = e
        elif handle is not None:
            ok, status, info = handle.wait()
            if ok:
                self.stats.world_size = info.local_world_size
            else:
                error = PCCLError(status, "pcclAwaitAsyncReduce")
        if error is None:
            self._commit(f)
        else:
            self.session.failed(error, f"outer gradient all-reduce of fragment {f}")
            self.stats.skipped += 1
        self._begin()
        return error is None

    def _commit(self, f):
        buf, off = self._bufs[f], 0
        for i in self.fragments[f]:
            g = self._global[i]
            g.grad = buf[off:off + g.numel()].view_as(g).to(g.dtype)
            off += g.numel()
        self.outer_optimizer.step()
        with torch.no_grad():
            for i in self.fragments[f]:
                self._global[i].grad = None
                if self.alpha == 0.0:
                    self._local[i].copy_(self._global[i])
                else:
                    self._local[i].lerp_(self._global[i], 1.0 - self.alpha)
        self.session.state.revision += 1
        self.stats.committed += 1


class DiLoCo(StreamingDiLoCo):
    """DiLoCo: every H inner steps all parameters are synced at once (blocking) and the local parameters replaced
    by the new global ones. Arguments as StreamingDiLoCo without fragments, overlap_steps, alpha."""

    def __init__(self, comm, model, inner_optimizer, *, outer_optimizer=None, inner_steps: int = 100,
                 quantization=None, sparsify=None, sparse_decay: float = 1.0, min_world: int = 2,
                 timeout_s: float = 300.0, max_failures: int = 50, layout_capacity=None):
        super().__init__(comm, model, inner_optimizer, outer_optimizer=outer_optimizer, inner_steps=inner_steps,
                         fragments=1, overlap_steps=0, alpha=0.0, quantization=quantization, sparsify=sparsify,
                         sparse_decay=sparse_decay, min_world=min_world,
                         timeout_s=timeout_s, max_failures=max_failures, layout_capacity=layout_capacity)
