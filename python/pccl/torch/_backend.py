"""ProcessGroupPCCL: torch.distributed's collectives over one pccl Communicator.

Torch's rank r is the rank key r of every pccl collective, so outputs are in torch's rank order. Every
operation runs on the group's worker thread in issue order with the next tag of a per-group counter,
which is the same sequence on every rank.
"""
import time

import torch
import torch.distributed as dist

import pccl
from pccl.torch import _ops
from pccl.torch._rendezvous import join, master_address, stop_master
from pccl.torch._worker import Worker


_CLOSED_KEY = "pccl/closed"  # store counter: ranks whose communicator shutdown() closed


def create_process_group(store, rank, world_size, timeout):
    """The creator torch.distributed.Backend.register_backend calls: (store, rank, world_size, timeout)."""
    return ProcessGroupPCCL(store, rank, world_size, timeout)


class ProcessGroupPCCL(dist.ProcessGroup):
    """A torch.distributed process group whose collectives run on pccl.

    Group rank 0 hosts a pccl master, whose address the store carries, unless PCCL_MASTER_ADDR (HOST:PORT)
    names one for the whole world's group (_rendezvous.master_address). The constructor
    blocks until the run has world_size peers or `timeout` passed (TimeoutError). A world of 1 needs no
    master: every collective is a local copy.
    """

    def __init__(self, store, rank, world_size, timeout):
        super().__init__(rank, world_size)
        self._rank, self._world = rank, world_size
        self._tag = 0
        self._store = store
        self._closed = False
        self._comm = self._master = None
        if world_size > 1:
            address, peer_group, self._master = master_address(store, rank, world_size)
            deadline = time.monotonic() + timeout.total_seconds()
            self._comm = join(address, world_size, deadline, peer_group)
        self._scratch = torch.empty(0, dtype=torch.uint8)
        self._worker = Worker(f"pccl-pg-{rank}")

    def getBackendName(self):
        return "pccl"

    def __repr__(self):
        return f"ProcessGroupPCCL(rank={self._rank}, world_size={self._world})"

    def shutdown(self, timeout_s=60.0):
        """Ends the group: its worker after the operations issued so far, then this rank's communicator. Group
        rank 0 then waits (up to timeout_s) until every rank closed its communicator before it stops its
        hosted master, so no rank sees the master vanish under a live communicator."""
        self._closed = True
        self._worker.stop(timeout_s)
        self._comm = None  # the last reference: pcclDestroyCommunicator
        if self._world > 1:
            self._store.add(_CLOSED_KEY, 1)
        if self._master is not None:
            deadline = time.monotonic() + timeout_s
            while self._store.add(_CLOSED_KEY, 0) < self._world and time.monotonic() < deadline:
                time.sleep(0.02)
            stop_master(self._master)

    # -- issuing -------------------------------------------------------------------------------------

    def _issue(self, prepare):
        """Takes this group's next tag and runs the collective prepare() describes on the worker.

        prepare() checks the arguments and returns (fn, value, local): fn(tag) runs the collective, the
        Work's future yields `value`, and a world of 1 runs local() instead (the copy the collective
        amounts to; None: nothing). Arguments prepare() refuses still take part with a barrier of the tag,
        so the other ranks' operation of that tag is rejected (kinds differ) instead of waiting for this
        rank, and the tags stay in step; this rank's Work then raises the refusal.
        """
        if self._closed:
            raise RuntimeError("pccl: this process group was shut down")
        tag = self._tag
        self._tag += 1
        try:
            fn, value, local = prepare()
        except (ValueError, TypeError) as e:
            error = e
            return self._worker.submit(lambda: self._refuse(tag, error))

        def run():
            if self._world > 1:
                fn(tag)
            elif local is not None:
                local()
            return value
        return self._worker.submit(run)

    def _refuse(self, tag, error):
        if self._world > 1:
            try:
                self._comm.barrier(tag=tag, rank_key=self._rank)
            except pccl.PCCLError:
                pass  # rejected with the others' operation: what it is for
        raise error

    def _check_world(self, info, what):
        """A world that differs from the group's (a peer left, its results unusable for torch)."""
        world = getattr(info, "world_size", None) or info.local_world_size
        if world != self._world:
            raise RuntimeError(f"pccl: {what} ran with {world} peers, the group has {self._world}")

    # -- collectives ---------------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        return self._issue(lambda: self._prepare_allreduce(tensors, opts))

    def _prepare_allreduce(self, tensors, opts):
        t = _ops.single(tensors, "allreduce")
        how, op, view = _ops.plan(dist.ReduceOp.SUM if opts is None else opts.reduceOp, t.dtype)
        if how == "gather":
            return lambda tag: self._gather_reduce(t, op, tag), tensors, None
        return lambda tag: self._all_reduce(t, op, view, tag), tensors, None

    def _all_reduce(self, t, op, view, tag):
        if t.numel() == 0:
            return
        # Out of place: a world smaller than the group's (a rank lost) still reduces, and t must keep its
        # values when that raises.
        src = t.contiguous().reshape(-1).view(view)
        out = self._scratch_for(src)
        self._check_world(self._comm.all_reduce(src, out, op=op, tag=tag), "allreduce")
        t.copy_(out.view(t.dtype).view(t.shape))

    def _scratch_for(self, like):
        """An output shaped and typed like 1-D `like` in this group's scratch memory, which grows to the
        largest operation and is reused (only the worker thread uses it, one operation at a time)."""
        nbytes = like.numel() * like.element_size()
        if self._scratch.numel() < nbytes:
            self._scratch = torch.empty(nbytes, dtype=torch.uint8)
        return self._scratch[:nbytes].view(like.dtype)

    def _gather_reduce(self, t, fn, tag):
        if t.numel() == 0:
            return
        rows = torch.empty((self._world, *t.shape), dtype=t.dtype)
        self._all_gather_into(rows, t, tag)
        t.copy_(_ops.reduce_rows(fn, rows))

    def _all_gather_into(self, out, t, tag):
        """Gathers t of every rank into contiguous out (world_size * t.numel() elements), rank order."""
        src = t.contiguous()
        info = self._comm.all_gather(_ops.as_bytes(src), _ops.as_bytes(out), tag=tag, rank_key=self._rank)[1]
        self._check_world(info, "allgather")

    def allgather(self, output_tensors, input_tensors, opts=None):
        return self._issue(lambda: self._prepare_allgather(output_tensors, input_tensors))

    def _prepare_allgather(self, output_tensors, input_tensors):
        t = _ops.single(input_tensors, "allgather input")
        outs = _ops.per_rank(output_tensors, t, self._world, "allgather output")

        def run(tag):
            if t.numel() == 0:
                return
            rows = torch.empty((self._world, *t.shape), dtype=t.dtype)
            self._all_gather_into(rows, t, tag)
            for o, row in zip(outs, rows.unbind(0)):
                o.copy_(row.view(o.shape))
        return run, output_tensors, lambda: outs[0].copy_(t.view(outs[0].shape))

    def _allgather_base(self, output, input, opts=None):
        return self._issue(lambda: self._prepare_allgather_base(output, input))

    def _prepare_allgather_base(self, output, input):
        _ops.check_tensor(input, "allgather input")
        _ops.check_tensor(output, "allgather output")
        if output.numel() != self._world * input.numel() or output.dtype != input.dtype:
            raise ValueError(f"pccl: the output must hold world_size * {input.numel()} elements of {input.dtype}, "
                             f"got {output.numel()} of {output.dtype}")

        def run(tag):
            if input.numel() == 0:
                return
            buf = output.contiguous()
            self._all_gather_into(buf, input, tag)
            if buf is not output:
                output.copy_(buf)
        return run, [output], lambda: output.copy_(input.view(output.shape))

    def broadcast(self, tensors, opts=None):
        return self._issue(lambda: self._prepare_broadcast(tensors, opts))

    def _prepare_broadcast(self, tensors, opts):
        t = _ops.single(tensors, "broadcast")
        root = 0 if opts is None else opts.rootRank
        if not 0 <= root < self._world:
            raise ValueError(f"pccl: broadcast root {root} is not a rank of a world of {self._world}")

        def run(tag):
            if t.numel() == 0:
                return
            buf = t.contiguous()
            info = self._comm.broadcast(_ops.as_bytes(buf), is_root=self._rank == root, tag=tag, rank_key=self._rank)
            self._check_world(info, "broadcast")
            if buf is not t:
                t.copy_(buf)
        return run, tensors, None

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        return self._issue(lambda: self._prepare_reduce_scatter(output_tensors, input_tensors, opts))

    def _prepare_reduce_scatter(self, output_tensors, input_tensors, opts):
        out = _ops.single(output_tensors, "reduce_scatter output")
        ins = _ops.per_rank(input_tensors, out, self._world, "reduce_scatter input")
        plan = _ops.plan(dist.ReduceOp.SUM if opts is None else opts.reduceOp, out.dtype)
        return (lambda tag: self._reduce_scatter(out, torch.cat([i.reshape(-1) for i in ins]), plan, tag),
                output_tensors, lambda: out.copy_(ins[0].view(out.shape)))

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._issue(lambda: self._prepare_reduce_scatter_base(output, input, opts))

    def _prepare_reduce_scatter_base(self, output, input, opts):
        _ops.check_tensor(input, "reduce_scatter input")
        _ops.check_tensor(output, "reduce_scatter output")
        if input.numel() != self._world * output.numel() or output.dtype != input.dtype:
            raise ValueError(f"pccl: the input must hold world_size * {output.numel()} elements of {output.dtype}, "
                             f"got {input.numel()} of {input.dtype}")
        plan = _ops.plan(dist.ReduceOp.SUM if opts is None else opts.reduceOp, output.dtype)
        return (lambda tag: self._reduce_scatter(output, input.reshape(-1), plan, tag), [output],
                lambda: output.copy_(input.view(output.shape)))

    def _reduce_scatter(self, out, flat_in, plan, tag):
        """out gets block `rank` (out.numel() elements) of flat_in reduced over the ranks."""
        n = out.numel()
        if n == 0:
            return
        how, op, view = plan
        if how == "gather":
            rows = torch.empty((self._world, flat_in.numel()), dtype=flat_in.dtype)
            self._all_gather_into(rows, flat_in, tag)
            block = _ops.reduce_rows(op, rows[:, self._rank * n:(self._rank + 1) * n])
        else:
            src = flat_in.contiguous().view(view)
            recv = torch.empty(n, dtype=view)
            block, info = self._comm.reduce_scatter(src, recv, op=op, tag=tag, rank_key=self._rank)
            self._check_world(info, "reduce_scatter")
            if info.offset != self._rank * n or info.count != n:
                raise RuntimeError(f"pccl: reduce_scatter gave block {info.offset}+{info.count}, "
                                   f"expected {self._rank * n}+{n}")
            block = block.view(out.dtype)
        out.copy_(block.view(out.shape))

    def barrier(self, opts=None):
        def run(tag):
            self._check_world(self._comm.barrier(tag=tag, rank_key=self._rank), "barrier")
        return self._issue(lambda: (run, [], None))
