"""A grid of sharded replicas: sharded data parallelism inside a replica (torch.distributed over Gloo), pccl across
replicas with one peer group per shard (docs/python-training.md, "Sharded replicas").

    dist.init_process_group("gloo")                      # the replica's ranks (torchrun)
    shard = FlatShard(model)                             # this rank keeps 1/W of the parameters
    opt = torch.optim.AdamW([shard.param], lr=1e-3)
    grid = GridReplica("HOST:PORT", shard, opt)          # peer group = shard rank; waits for a full grid
    while grid.revision < steps:
        shard.gather()                                   # the full parameters, for forward and backward
        loss_fn(model(x), y).backward()
        grid.step()                                      # shard gradients, pccl average per shard, commit or skip

The rule that keeps the grid out of deadlocks: no collective of the replica's process group runs unless every rank of
every replica present has been accepted into the pccl run (grid_full()), and every accepted rank takes part in every
topology update (GridReplica's prologue loops them together until the grid is full).
"""
import math

import torch
import torch.distributed as dist

from pccl._comm import Communicator
from pccl._enums import Attribute, ReduceOp
from pccl._errors import PCCLError
from pccl.train._session import Session
from pccl.train._state import StateDictSync


def grid_full(comm: Communicator, shards: int) -> bool:
    """True when every replica present has all its `shards` ranks accepted: the run's world size equals shards x the
    largest peer group's (each peer group is one shard; a replica whose ranks are not all accepted yet leaves some
    groups short). Run-wide attributes as of the last topology update: the same answer on every peer."""
    world = comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
    largest = comm.get_attribute(Attribute.LARGEST_PEER_GROUP_WORLD_SIZE)
    groups = comm.get_attribute(Attribute.NUM_DISTINCT_PEER_GROUPS)
    return groups == shards and world == shards * largest


class FlatShard:
    """The module's parameters as one flat float vector split into W equal shards over `group` (W its size, padding
    at the end); this rank keeps shard `rank` in `param`, the tensor its optimizer steps.

    gather(): all-gathers the shards and writes the full parameters into the module (blocking, every rank of the
    group). reduce_gradients(): averages the module's gradients over the group and leaves this rank's slice in
    param.grad. Every rank must start from the same module parameters (the same seed), as FSDP's do.
    """

    def __init__(self, module: torch.nn.Module, group=None):
        self.module = module
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self._params = [p for p in module.parameters()]
        if len({p.dtype for p in self._params}) != 1:
            raise ValueError("FlatShard needs parameters of one dtype")
        self.numel = sum(p.numel() for p in self._params)
        self.shard_numel = math.ceil(self.numel / self.world)
        full = self._flat(lambda p: p.detach())
        lo = self.rank * self.shard_numel
        self.param = torch.nn.Parameter(full[lo:lo + self.shard_numel].clone())

    def _flat(self, of):
        """The parameters' `of(p)` (None: zeros) flattened and padded to W shards."""
        p0 = self._params[0]
        flat = torch.zeros(self.shard_numel * self.world, dtype=p0.dtype, device=p0.device)
        off = 0
        for p in self._params:
            v = of(p)
            if v is not None:
                flat[off:off + p.numel()].copy_(v.reshape(-1))
            off += p.numel()
        return flat

    def gather(self):
        """The full parameters from every rank's shard into the module."""
        full = torch.empty(self.shard_numel * self.world, dtype=self.param.dtype, device=self.param.device)
        dist.all_gather(list(full.chunk(self.world)), self.param.detach(), group=self.group)
        off = 0
        with torch.no_grad():
            for p in self._params:
                p.copy_(full[off:off + p.numel()].view_as(p))
                off += p.numel()

    def reduce_gradients(self):
        """param.grad = this rank's slice of the gradients averaged over the group (Gloo has no reduce-scatter on
        this torch: an all-reduce, then the slice); the module's gradients are cleared."""
        flat = self._flat(lambda p: p.grad)
        self.module.zero_grad(set_to_none=True)
        dist.all_reduce(flat, group=self.group)
        flat /= self.world
        lo = self.rank * self.shard_numel
        self.param.grad = flat[lo:lo + self.shard_numel].clone()


class GridReplica:
    """One rank of a sharded replica in a pccl run: its shard is averaged with the same shard of the other replicas
    through pccl (peer group = the shard's rank), and the shard's parameters and optimizer state are its peer
    group's shared state (a restarted replica receives them).

    comm: the master's address (a Communicator in peer group shard.rank is created and connected with a deadline,
    connect_timeout_s) or such a Communicator that connect() just returned. optimizer: over [shard.param].
    timeout_s: deadline of each prologue (waiting for a full grid included). group_timeout: see step().

    The constructor blocks until the grid is full (every replica present has all its ranks accepted) and this rank
    holds its shard's state. Raises PCCLError (fatal), TimeoutError.
    """

    def __init__(self, comm, shard: FlatShard, optimizer: torch.optim.Optimizer, *, timeout_s: float = 300.0,
                 connect_timeout_s: float = 120.0, max_failures: int = 50):
        if isinstance(comm, str):
            comm = Communicator(comm, peer_group=shard.rank, p2p_connection_pool_size=1)
            try:
                comm.connect(n_attempts=15, timeout_s=connect_timeout_s)
            except BaseException:
                comm.close(leave=False)
                raise
        self.shard = shard
        self.optimizer = optimizer
        state = StateDictSync(lambda: {"shard": shard.param.data}, {"optim": optimizer}, 1)
        self.session = Session(comm, state, min_world=1, timeout_s=timeout_s, max_failures=max_failures,
                               ready=lambda: grid_full(self.comm, shard.world))
        self.comm = comm
        self.stats = self.session.stats
        self.session.begin()

    @property
    def revision(self) -> int:
        """Committed steps of this shard's peer group; equal on every rank of the grid after each step()."""
        return self.session.revision

    @property
    def replicas(self) -> int:
        """Replicas in this shard's peer group as of the last topology update."""
        return self.comm.get_attribute(Attribute.PEER_GROUP_WORLD_SIZE)

    def step(self) -> bool:
        """After backward: reduces the gradients inside the replica (shard.reduce_gradients), averages the shard's
        gradient over the replicas through pccl, then commits (optimizer.step(), revision + 1) or skips on every rank
        of every replica alike: the replica's ranks agree (a MIN over the group) and pccl gives every member of a
        shard's all-reduce the same outcome. Then the next prologue (topology, full grid, sync).
        Returns True when committed. Raises PCCLError (fatal), TimeoutError."""
        self.shard.reduce_gradients()
        ok = self._average()
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.shard.group)
        return self.session.conclude(bool(flag.item()), self.optimizer.step)

    def _average(self) -> bool:
        if self.replicas < 2:
            self.stats.world_size = 1
            return True
        g = self.shard.param.grad
        try:
            info = self.comm.all_reduce(g, g, op=ReduceOp.AVG, tag=0)
        except PCCLError as e:
            self.session.failed(e, "shard all-reduce")
            return False
        self.stats.world_size = info.local_world_size
        return True

    def close(self):
        """Leaves the run and closes the communicator."""
        self.comm.close()
