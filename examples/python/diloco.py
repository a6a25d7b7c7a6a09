#!/usr/bin/env python3
"""DiLoCo or Streaming DiLoCo training of the Fashion-MNIST MLP over pccl (a peer program).

Each peer runs inner AdamW steps on its own mini-batches; every H inner steps
(pccl.train.DiLoCo) the peers average their outer gradients (global minus
local parameters) with an all-reduce and every peer applies the same outer
Nesterov SGD step to the global parameters (Douillard et al. 2023,
arXiv:2311.08105). With --fragments K > 1 (pccl.train.StreamingDiLoCo,
Douillard et al. 2025, arXiv:2501.18512) one of K parameter fragments is
synced every H/K inner steps, its all-reduce overlapping --overlap inner
steps. Shared state: the global parameters and the outer momentum; the inner
AdamW state stays private to the peer.

usage: diloco.py --master HOST:PORT --steps N [--inner-steps H] [--fragments K] [--seed S] [--out DIR] ...
Prints one JSON object per line ("step" per outer step, "done" with test_accuracy).
"""
import torch
import torch.nn.functional as F
from pccl import DataType, QuantizationAlgorithm, QuantizationOptions
from pccl.train import StreamingDiLoCo, nesterov_sgd

import fashion_mnist
import peer_common


def main():
    p = peer_common.parser(__doc__.splitlines()[0])
    p.add_argument("--inner-steps", type=int, default=20, help="inner AdamW steps between syncs of a fragment (H)")
    p.add_argument("--fragments", type=int, default=1, help="Streaming DiLoCo fragments (K; 1: DiLoCo)")
    p.add_argument("--overlap", type=int, default=0, help="inner steps a fragment's all-reduce overlaps (< H/K)")
    p.add_argument("--alpha", type=float, default=0.0, help="local share kept when a fragment's global update lands")
    p.add_argument("--quantize", action="store_true", help="outer gradients as uint8 (min-max) on the wire")
    p.add_argument("--inner-lr", type=float, default=3e-3, help="inner AdamW learning rate")
    p.add_argument("--outer-lr", type=float, default=0.7, help="outer Nesterov learning rate")
    p.add_argument("--outer-momentum", type=float, default=0.9, help="outer Nesterov momentum")
    args = p.parse_args()
    (x, y), (tx, ty) = peer_common.setup(args)

    model = fashion_mnist.make_model(args.init_seed)
    inner_opt = torch.optim.AdamW(model.parameters(), lr=args.inner_lr)
    quant = QuantizationOptions(DataType.UINT8, QuantizationAlgorithm.MIN_MAX) if args.quantize else None
    d = StreamingDiLoCo(peer_common.connect(args), model, inner_opt,
                        outer_optimizer=nesterov_sgd(args.outer_lr, args.outer_momentum),
                        inner_steps=args.inner_steps, fragments=args.fragments, overlap_steps=args.overlap,
                        alpha=args.alpha, quantization=quant, min_world=args.min_world, timeout_s=args.timeout)
    batches = fashion_mnist.batches(len(y), args.batch, args.seed)

    def train_step():
        idx = next(batches)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        d.step()  # the inner step (and zero_grad), and on the schedule an outer sync
        return loss.item()

    stats = peer_common.train(args, d, train_step)
    d.use_global_params()
    named = {**{n: p.detach() for n, p in model.named_parameters()},
             **peer_common.optimizer_tensors(d.outer_optimizer, "outer")}
    peer_common.finish(args, d.revision, named, fashion_mnist.accuracy(model, tx, ty), stats)


if __name__ == "__main__":
    peer_common.main_guard(main)
