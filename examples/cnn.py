"""A small CNN (conv blocks with BatchNorm) on synthetic images, one process or data-parallel.

    python examples/cnn.py
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/cnn.py --layout dp

The images are noise with a bright square whose corner is the class (4 classes); dp splits each
batch over the ranks (BatchNorm's statistics stay those of the whole batch), so both runs print
the same losses.
"""
import argparse

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn


def images(batch, size=16, seed=0, steps=20):
    """(images [batch, 3, size, size], labels [batch]) batches: a bright square in one corner."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        labels = rng.integers(0, 4, batch)
        x = rng.standard_normal((batch, 3, size, size)).astype(np.float32) * 0.5
        half = size // 2
        for i, c in enumerate(labels):
            r, q = divmod(int(c), 2)
            x[i, :, r * half + 2:r * half + 6, q * half + 2:q * half + 6] += 2.0
        yield x, labels


def model():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*block(3, 8), *block(8, 16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))


def train(layout="local", steps=20, batch=16, quiet=False, device="cpu"):
    gt.manual_seed(0)
    net = model()
    placement = None
    if layout == "dp":
        placement = gt.placement(device, [0, 1])
        net.to_global(placement, gt.sbp.broadcast)
    opt = gt.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step, (x, y) in enumerate(images(batch, steps=steps)):
        x, y = gt.tensor(x), gt.tensor(y)
        if placement is not None:
            x, y = (t.to_global(placement, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0)) for t in (x, y))
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if not quiet and gt.env.get_rank() == 0 and (step % 5 == 0 or step == steps - 1):
            print(f"step {step} loss {losses[-1]:.6f}", flush=True)
    return losses


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layout", choices=["local", "dp"], default="local")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="the placement's type (dp)")
    args = p.parse_args()
    train(args.layout, args.steps, device=args.device)
