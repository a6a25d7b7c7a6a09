"""Shared state built from state_dict()s at every sync: nothing preallocated, nothing dropped.

Each sync re-collects the tensors from the sources (named tensors such as model.state_dict(), and optimizers'
state_dict()) and builds the TensorInfo list from them, so a tensor the optimizer created or reallocated since the
last sync (Adam's moments after the first step, a momentum buffer) is in the state with its current address.

A sync is two shared-state syncs at one revision:
1. "layout": a uint8 tensor of fixed capacity holding a JSON description of every optimizer's state (per parameter
   index: tensor entries as dtype and shape, other entries as values) and its param_groups' hyperparameters
   (everything but "params"). The capacity depends only on the parameter count, so every peer offers the same layout
   and a newcomer receives the group's description.
2. "state": the tensors. Before it, every optimizer entry the description lists and this peer lacks is created
   (zeros of that dtype and shape on its parameter's device) and the listed scalars and hyperparameters are applied,
   so the newcomer's layout matches the group's and the sync fills it.
"""
import json

import torch

from pccl._enums import SharedStateSyncStrategy
from pccl._shared_state import SharedState, TensorInfo

# Per parameter and per param_group: room for a few state entries' descriptions (name, dtype, shape) each.
_LAYOUT_BYTES_PER_PARAM = 1024
_LAYOUT_BYTES_BASE = 16384


def _syncable(name, t):
    """`t` as a contiguous tensor the library can hash and overwrite in place (bool as uint8).
    Raises ValueError for a non-contiguous tensor (its storage cannot be overwritten through one pointer)."""
    if not t.is_contiguous():
        raise ValueError(f"shared-state tensor {name!r} is not contiguous; the sync writes it in place")
    return t.view(torch.uint8) if t.dtype == torch.bool else t


def _json_value(v):
    """v when it survives a JSON round trip unchanged (numbers, strings, None, lists/tuples of them), else None."""
    try:
        return json.loads(json.dumps(v)) if v is not None else None
    except (TypeError, ValueError):
        return None


def _dtype_name(dtype):
    return str(dtype).rpartition(".")[2]


class StateDictSync:
    """Keeps named tensors and optimizers' state identical on every peer of a communicator's group.

    tensors: a callable returning {name: tensor} (e.g. lambda: model.state_dict()); re-read at every sync.
    optimizers: {prefix: torch.optim.Optimizer}; its state and param_groups are shared.
    n_params: parameters over all optimizers (sizes the layout tensor; equal on every peer).
    """

    def __init__(self, tensors, optimizers, n_params, layout_capacity=None):
        self._tensors = tensors
        self._optimizers = dict(optimizers)
        self.capacity = layout_capacity or _LAYOUT_BYTES_BASE + _LAYOUT_BYTES_PER_PARAM * n_params
        self._layout = torch.zeros(self.capacity, dtype=torch.uint8)
        self.revision = 0

    def describe(self):
        """The JSON description of every optimizer's state layout and hyperparameters (sorted keys: equal bytes on
        every peer holding equal state)."""
        out = {}
        for prefix, opt in self._optimizers.items():
            sd = opt.state_dict()
            state = {}
            for idx, entries in sd["state"].items():
                state[str(idx)] = {k: (["tensor", _dtype_name(v.dtype), list(v.shape)] if torch.is_tensor(v)
                                       else ["value", _json_value(v)]) for k, v in entries.items()}
            groups = [{k: _json_value(v) for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
            out[prefix] = {"state": state, "groups": groups}
        return json.dumps(out, sort_keys=True).encode("utf-8")

    def _fill_layout(self):
        text = self.describe()
        if len(text) + 1 > self.capacity:
            raise ValueError(f"optimizer state description of {len(text)} bytes exceeds the layout capacity "
                             f"{self.capacity}; pass a larger layout_capacity (equal on every peer)")
        self._layout.zero_()
        self._layout[:len(text)] = torch.frombuffer(bytearray(text), dtype=torch.uint8)

    def _apply_layout(self):
        """Makes each optimizer's state hold exactly the entries the (synced) description lists: creates the missing
        ones (zeros), drops the others, applies the listed values and hyperparameters."""
        raw = bytes(self._layout.numpy())
        desc = json.loads(raw[:raw.index(0)].decode("utf-8")) if raw[0] else {}
        for prefix, opt in self._optimizers.items():
            d = desc.get(prefix)
            if d is None:
                continue
            params = [p for g in opt.param_groups for p in g["params"]]
            for i, p in enumerate(params):  # what the group does not have goes: the layouts must be equal
                if str(i) not in d["state"]:
                    opt.state.pop(p, None)
            for idx, entries in d["state"].items():
                p = params[int(idx)]
                st = opt.state[p]
                for k in [k for k in st if k not in entries]:
                    del st[k]
                for k, (kind, *rest) in entries.items():
                    if kind == "tensor":
                        dtype, shape = getattr(torch, rest[0]), rest[1]
                        cur = st.get(k)
                        if not (torch.is_tensor(cur) and cur.dtype == dtype and list(cur.shape) == shape):
                            st[k] = torch.zeros(shape, dtype=dtype, device=p.device)
                    elif rest[0] is not None:
                        st[k] = rest[0]
            for g, values in zip(opt.param_groups, d["groups"]):
                for k, v in values.items():
                    if v is not None and _json_value(g.get(k)) != v:
                        g[k] = tuple(v) if isinstance(g.get(k), tuple) else v

    def collect(self):
        """{name: tensor} of everything shared, in an order equal on every peer: the named tensors, then each
        optimizer's state tensors by parameter index and key."""
        named = {f"t.{k}": _syncable(k, v) for k, v in self._tensors().items() if v.numel() > 0}
        for prefix, opt in self._optimizers.items():
            state = opt.state_dict()["state"]
            for idx in sorted(state):
                for k in sorted(state[idx]):
                    v = state[idx][k]
                    if torch.is_tensor(v) and v.numel() > 0:
                        named[f"{prefix}.{idx}.{k}"] = _syncable(f"{prefix}.{idx}.{k}", v)
        return named

    def sync(self, comm):
        """Both syncs at self.revision; self.revision becomes the group's. Returns (tx_bytes, rx_bytes) summed.
        Raises PCCLError (the caller's retry policy decides), ValueError for a description over capacity."""
        self._fill_layout()
        layout = SharedState([TensorInfo.from_torch(self._layout, "pccl.train.layout")])
        layout.revision = self.revision
        a = comm.sync_shared_state(layout, SharedStateSyncStrategy.ENFORCE_POPULAR)
        self.revision = layout.revision
        self._apply_layout()
        infos = [TensorInfo.from_torch(t, name) for name, t in self.collect().items()]
        state = SharedState(infos)
        state.revision = self.revision
        b = comm.sync_shared_state(state, SharedStateSyncStrategy.ENFORCE_POPULAR)
        self.revision = state.revision
        return a.tx_bytes + b.tx_bytes, a.rx_bytes + b.rx_bytes
