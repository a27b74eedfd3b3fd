"""Eager opt.step() cost: 20 local parameters, tiny (4 floats: the per-parameter Python overhead)
and 64x64 (10 Linear(64, 64)), for SGD, SGD with momentum and weight decay, AdamW.

    python benchmarks/bench_optimizer_step.py

Process CPU time per step (best and median of 9 windows of 300 steps); compare two trees by
running it with PYTHONPATH pointing at each, interleaved (the machines are noisy).
"""
import time

import numpy as np

import globaltensor as gt


def params_of(size):
    if size == "tiny":
        return [gt.nn.Parameter(gt.tensor(np.zeros(4, np.float32))) for _ in range(20)]
    return [p for _ in range(10) for p in gt.nn.Linear(64, 64).parameters()]


MAKERS = {"sgd": lambda ps: gt.optim.SGD(ps, lr=0.01),
          "momentum": lambda ps: gt.optim.SGD(ps, lr=0.01, momentum=0.9, weight_decay=1e-4),
          "adamw": lambda ps: gt.optim.AdamW(ps, lr=1e-3)}


def main():
    print(f"{'params':8s} {'optimizer':9s} {'best us':>9s} {'median us':>10s}")
    for size in ("tiny", "64x64"):
        for kind, make in MAKERS.items():
            params = params_of(size)
            for p in params:
                p.grad = gt.tensor(np.full(tuple(p.shape), 0.01, np.float32))
            opt = make(params)
            for _ in range(50):
                opt.step()
            times = []
            for _ in range(9):
                t = time.process_time()
                for _ in range(300):
                    opt.step()
                times.append((time.process_time() - t) / 300 * 1e6)
            print(f"{size:8s} {kind:9s} {min(times):9.1f} {np.median(times):10.1f}")


if __name__ == "__main__":
    main()
