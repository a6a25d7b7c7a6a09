"""Peer of test_collectives_ext: MASTER ID OUT.

Joins a run of coll_cases.WORLD peers and runs every case of coll_cases.case_ids() in order, writing one
JSON line per case to OUT: ok or the error (a PCCLError's result name), the CollectiveInfo, a digest of
the output, the counts of an all-gather-v, whether an out-of-place input (or a rejected in-place
buffer) kept its content. The test computes the expected outputs from the ranks the peers report."""
import sys

import numpy as np

import pccl
from cases import cast_values, inputs, make, quant_tolerance
from coll_cases import (COUNT, QUANT, ROOT_ID, SHARED_ID, WORLD, agv_count, as_numpy, block, case_ids, digest,
                        ranked_key, values)
from common import JsonLines, join


def zeros(kind, dt, n):
    return make(kind, dt, np.zeros(n))


class Peer:
    def __init__(self, comm, pid, out):
        self.comm, self.pid, self.log, self.tag = comm, pid, JsonLines(out), 0
        self.multi_ops, self.multi = [], {}

    def next_tag(self):
        self.tag += 1
        return self.tag

    def record(self, case, info=None, output=None, error="", **extra):
        i = info or pccl.CollectiveInfo(-1, 0, 0, 0, 0, 0, 0)
        self.log.write(case=case, id=self.pid, ok=not error, error=error, rank=i.rank, world=i.world_size,
                       root=i.root, offset=i.offset, count=i.count, tx=i.tx_bytes, rx=i.rx_bytes,
                       digest="" if output is None else digest(output), **extra)

    def launch(self, kind, dt, coll, mode):
        """Starts one good case: returns (finish, extra), finish() -> (info, output, counts)."""
        pid, tag = self.pid, self.next_tag()
        key = ranked_key(pid) if mode == "ranked" else None
        v = inputs(dt, "MAX", pid, COUNT) if mode == "quant" else values(coll, dt, pid, mode == "zero")
        if coll == "bcast":
            root = pid == ROOT_ID
            send = make(kind, dt, v) if root and mode == "outofplace" else None
            holds = (root and send is None) or (mode == "shared" and pid == SHARED_ID)
            t = make(kind, dt, values(coll, dt, ROOT_ID)) if holds else zeros(kind, dt, COUNT)
            res = self.call("broadcast", mode)(t, is_root=root, send=send, tag=tag, rank_key=key,
                                               shared_sources=mode == "shared")
            return self._done(res, lambda info: (info, t, None)), self._intact(send, v)
        if coll == "barrier":
            res = self.call("barrier", mode)(tag=tag)
            return self._done(res, lambda info: (info, None, None)), {}
        if coll == "ag":
            if mode == "inplace":
                recv = make(kind, dt, np.concatenate([v, np.zeros((WORLD - 1) * COUNT, v.dtype)]))
                send = recv[:COUNT]
            else:
                send, recv = make(kind, dt, v), None if mode == "alloc" else zeros(kind, dt, WORLD * COUNT)
            res = self.call("all_gather", mode)(send, recv, tag=tag, rank_key=key)
            return self._done(res, lambda r: (r[1], r[0], None)), self._intact(None if mode == "inplace" else send, v)
        if coll == "agv":
            total = sum(agv_count(i, mode == "zero") for i in range(WORLD))
            send = make(kind, dt, v)
            recv = None if mode == "alloc" else zeros(kind, dt, total)
            res = self.call("all_gather_v", mode)(send, recv, tag=tag, rank_key=key,
                                                  **({"max_world": WORLD} if mode == "multi" else {}))
            return self._done(res, lambda r: (r[2], r[0], r[1])), self._intact(send, v)
        op = pccl.ReduceOp[coll[3:]]
        send = make(kind, dt, v)
        recv = {"inplace": send, "alloc": None}.get(mode, zeros(kind, dt, -(-COUNT // WORLD)))
        q = pccl.QuantizationOptions(pccl.DataType[QUANT[3]], pccl.QuantizationAlgorithm[QUANT[2]]) \
            if mode == "quant" else None
        res = self.call("reduce_scatter", mode)(send, recv, op=op, tag=tag, rank_key=key, quantization_options=q)
        return self._done(res, lambda r: (r[1], r[0], None)), self._intact(None if recv is send else send, v)

    def call(self, name, mode):
        """The Communicator's call `name`, its async form, or (mode multi) CollectiveOp's, whose operations
        collect in self.multi_ops."""
        if mode == "async":
            return getattr(self.comm, name + "_async")
        if mode != "multi":
            return getattr(self.comm, name)

        def build(*args, **kw):
            op = getattr(pccl.CollectiveOp, name)(*args, **kw)
            self.multi_ops.append(op)
            return op
        return build

    def run_multi(self):
        """Runs the collected CollectiveOps with collectives_multiple_with_retry."""
        ops, self.multi_ops = self.multi_ops, []
        self.multi = dict(zip((op.tag for op in ops), self.comm.collectives_multiple_with_retry(ops, max_in_flight=2)))

    def _done(self, res, unpack):
        if isinstance(res, pccl.AsyncCollectiveHandle):
            return lambda: unpack(res.result())
        if isinstance(res, pccl.CollectiveOp):
            return lambda: unpack(self.multi.pop(res.tag))
        return lambda: unpack(res)

    @staticmethod
    def _intact(send, v):
        """{'send_intact': check} for an out-of-place input, checked once the operation ended."""
        if send is None:
            return {}
        dt = str(send.dtype).rpartition(".")[2]
        return {"send_intact": lambda: bool(np.array_equal(as_numpy(send), cast_values(v, dt)))}

    def finish(self, case, finish, extra):
        try:
            info, output, counts = finish()
        except pccl.PCCLError as e:
            self.record(case, error=e.result.name)
            return
        more = {k: f() for k, f in extra.items()}
        if counts is not None:
            more["counts"] = counts
        if case.endswith("-quant"):
            more["quant_excess"] = self.quant_excess(info, output)
        self.record(case, info, output, **more)

    def quant_excess(self, info, output):
        """How far the quantized block is above docs/quantization.md's bound (<= 0 within it)."""
        _, dt, algo, wire = QUANT
        exact = sum(cast_values(inputs(dt, "MAX", i, COUNT), dt) for i in range(WORLD))
        off, n = block(COUNT, info.world_size, info.rank)
        err = np.abs(as_numpy(output) - exact[off:off + n])
        return float((err - quant_tolerance(dt, wire, WORLD, COUNT)).max())

    def bad(self, name):
        """A case the master must reject on every peer; records the result and whether buffers kept their content."""
        c, pid, tag = self.comm, self.pid, self.next_tag()
        x = np.arange(COUNT, dtype=np.float32) + pid
        original = x.copy()
        big = np.zeros(WORLD * (COUNT + 1), np.float32)
        try:
            if name in ("bcast_noroot", "bcast_tworoots"):
                c.broadcast(x, is_root=name == "bcast_tworoots" and pid in (0, 1), tag=tag)
            elif name == "ag_counts":
                c.all_gather(np.zeros(COUNT + (pid == 0), np.float32), big, tag=tag)
            elif name == "rs_counts":
                c.reduce_scatter(x[:COUNT - (pid == 2)], big, op=pccl.ReduceOp.SUM, tag=tag)
            elif name == "ag_dtype":
                dt = np.float64 if pid == 1 else np.float32
                c.all_gather(x.astype(dt), big.astype(dt), tag=tag)
            elif name == "ag_small":
                c.all_gather(x, np.zeros((WORLD - 1) * COUNT, np.float32), tag=tag)
            elif name == "agv_maxworld":
                c.all_gather_v(x, big, tag=tag, max_world=2)
            elif name == "rank_key_some":
                c.all_gather(x, big, tag=tag, rank_key=7 if pid == 0 else None)
            elif name == "rank_key_equal":
                c.all_gather(x, big, tag=tag, rank_key=7)
            elif name == "kinds_differ":
                if pid == 0:
                    c.all_gather(x, big, tag=tag)
                else:
                    c.broadcast(x, is_root=pid == ROOT_ID, tag=tag)
            else:
                raise AssertionError(name)
            self.record(f"bad-{name}", error="", intact=bool(np.array_equal(x, original)), tag=tag)
        except pccl.PCCLError as e:
            self.record(f"bad-{name}", error=e.result.name, intact=bool(np.array_equal(x, original)),
                        func=e.func_name, tag=tag)


def main(master, pid, out):
    peer = Peer(join(master, WORLD, 60), pid, out)
    pending = []
    for case in case_ids():
        kind, dt, coll, mode = (case.split("-") + [""] * 3)[:4]
        if kind == "bad":
            peer.bad(dt)
            continue
        kind, dt = ("numpy", "float32") if kind == "none" else (kind, dt)
        launched = peer.launch(kind, dt, coll, mode)
        if mode in ("async", "multi"):
            pending.append((case, *launched))
            if coll not in ("rs_SUM", "barrier"):  # each group ends with them: then wait for all
                continue
            if mode == "multi":
                peer.run_multi()
        for p in pending or [(case, *launched)]:
            peer.finish(*p)
        pending = []


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
