#!/usr/bin/env python3
"""DiLoCo training of the Fashion-MNIST MLP over pccl (a peer program).

Each outer step every peer runs H inner AdamW steps on its own mini-batches,
starting from the outer parameters; the peers average their pseudo-gradients
(outer - inner) with an all-reduce, and every peer applies the same outer
Nesterov SGD step to the outer parameters (Douillard et al. 2023,
arXiv:2311.08105). Shared state: the outer parameters and the outer momentum.
The inner AdamW state stays private to the peer.

usage: diloco.py --master HOST:PORT --steps N [--inner-steps H] [--seed S] [--out DIR] ...
Prints one JSON object per line ("step", "done" with test_accuracy).
"""
import torch
import torch.nn.functional as F

import fashion_mnist
import peer_common


def main():
    p = peer_common.parser(__doc__.splitlines()[0])
    p.add_argument("--inner-steps", type=int, default=20, help="inner AdamW steps per outer step (H)")
    p.add_argument("--inner-lr", type=float, default=3e-3, help="inner AdamW learning rate")
    p.add_argument("--outer-lr", type=float, default=0.7, help="outer Nesterov learning rate")
    p.add_argument("--outer-momentum", type=float, default=0.9, help="outer Nesterov momentum")
    args = p.parse_args()
    (x, y), (tx, ty) = peer_common.setup(args)

    model = fashion_mnist.make_model(args.init_seed)
    inner = dict(model.named_parameters())
    inner_opt = torch.optim.AdamW(inner.values(), lr=args.inner_lr)
    outer = {n: torch.nn.Parameter(t.detach().clone()) for n, t in inner.items()}
    # The pseudo-gradients live in the outer parameters' .grad.
    outer_opt, momentum = peer_common.nesterov_sgd(outer, args.outer_lr, args.outer_momentum)
    named = {**{n: t.data for n, t in outer.items()}, **momentum}
    state = peer_common.shared_state(named)

    peer = peer_common.Peer(args)
    batches = fashion_mnist.batches(len(y), args.batch, args.seed)

    def step():
        with torch.no_grad():
            for n, prm in inner.items():
                prm.copy_(outer[n])
        loss = 0.0
        for _ in range(args.inner_steps):
            idx = next(batches)
            inner_opt.zero_grad(set_to_none=False)
            batch_loss = F.cross_entropy(model(x[idx]), y[idx])
            batch_loss.backward()
            inner_opt.step()
            loss += batch_loss.item() / args.inner_steps
        with torch.no_grad():
            for n, prm in outer.items():
                torch.sub(prm, inner[n], out=prm.grad)
        info = peer.all_reduce_avg([prm.grad for prm in outer.values()])
        outer_opt.step()
        return loss, info

    stats = peer_common.train(args, peer, state, step)
    with torch.no_grad():
        for n, prm in inner.items():
            prm.copy_(outer[n])
    peer_common.finish(args, state, named, fashion_mnist.accuracy(model, tx, ty), stats)


if __name__ == "__main__":
    peer_common.main_guard(main)
