#!/usr/bin/env python3
"""Data-parallel training of the Fashion-MNIST MLP over pccl (a peer program).

Every step each peer computes the gradient of its own mini-batch and
pccl.train.FaultTolerantManager averages the gradients over the peers present,
then every peer applies the same SGD (Nesterov momentum) step, or, when the
all-reduce failed, every peer skips it. Shared state (from state_dict()s): the
model and the optimizer's state, so a newcomer receives both (the momentum
buffers too, created by the optimizer at its first step) and continues
bit-identically.

usage: ddp.py --master HOST:PORT --steps N [--seed S] [--min-world N] [--out DIR] ...
Prints one JSON object per line ("step", "done" with test_accuracy).
"""
import torch
import torch.nn.functional as F
from pccl.train import FaultTolerantManager

import fashion_mnist
import peer_common


def main():
    p = peer_common.parser(__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--momentum", type=float, default=0.9, help="Nesterov momentum")
    args = p.parse_args()
    (x, y), (tx, ty) = peer_common.setup(args)

    model = fashion_mnist.make_model(args.init_seed)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, nesterov=True)
    mgr = FaultTolerantManager(peer_common.connect(args), model, opt, min_world=args.min_world,
                               timeout_s=args.timeout)
    batches = fashion_mnist.batches(len(y), args.batch, args.seed)

    def train_step():
        idx = next(batches)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        mgr.step()
        return loss.item()

    stats = peer_common.train(args, mgr, train_step)
    named = {**{k: v for k, v in model.state_dict().items()}, **peer_common.optimizer_tensors(opt, "optim")}
    peer_common.finish(args, mgr.revision, named, fashion_mnist.accuracy(model, tx, ty), stats)


if __name__ == "__main__":
    peer_common.main_guard(main)
