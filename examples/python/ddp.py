#!/usr/bin/env python3
"""Data-parallel training of the Fashion-MNIST MLP over pccl (a peer program).

Every step each peer computes the gradient of its own mini-batch, the peers
average the gradients with an all-reduce, and every peer applies the same
SGD (Nesterov momentum) step. Shared state: the parameters and the momentum
buffers, so a newcomer receives both and continues bit-identically.

usage: ddp.py --master HOST:PORT --steps N [--seed S] [--min-world N] [--out DIR] ...
Prints one JSON object per line ("step", "done" with test_accuracy).
"""
import torch.nn.functional as F

import fashion_mnist
import peer_common


def main():
    p = peer_common.parser(__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate")
    p.add_argument("--momentum", type=float, default=0.9, help="Nesterov momentum")
    args = p.parse_args()
    (x, y), (tx, ty) = peer_common.setup(args)

    model = fashion_mnist.make_model(args.init_seed)
    params = dict(model.named_parameters())
    opt, momentum = peer_common.nesterov_sgd(params, args.lr, args.momentum)
    named = {**{n: t.data for n, t in params.items()}, **momentum}
    state = peer_common.shared_state(named)

    peer = peer_common.Peer(args)
    batches = fashion_mnist.batches(len(y), args.batch, args.seed)

    def step():
        idx = next(batches)
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        info = peer.all_reduce_avg([prm.grad for prm in params.values()])
        opt.step()
        return loss.item(), info

    stats = peer_common.train(args, peer, state, step)
    peer_common.finish(args, state, named, fashion_mnist.accuracy(model, tx, ty), stats)


if __name__ == "__main__":
    peer_common.main_guard(main)
