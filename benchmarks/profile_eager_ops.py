"""Per-op kernel time of one eager step, ours against torch's (issue 35 (2)): our ops' CPU time
inside dispatch's cached path (kernel + boxing, rank 0 of 2) and torch's per-op self CPU time
(torch.profiler, one process, 1 thread, the same model at one rank's batch).

    python benchmarks/profile_eager_ops.py [--case gpt_dp|cnn_dp] [--steps 3] [--tiny] [--side ours|torch|both]

Thread CPU time (time.thread_time) per call, summed over --steps steps and divided by them.
"""
import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests", "core")]


def ours(case, steps, tiny):
    from globaltensor import dispatch
    from profile_eager import _setup
    step, x, y = _setup(case, tiny)
    for _ in range(2):
        step(x, y)
    ms, calls = collections.Counter(), collections.Counter()
    inner = dispatch._apply_global

    def timed(opdef, kernel, tensors, static):
        t = time.thread_time()
        try:
            return inner(opdef, kernel, tensors, static)
        finally:
            ms[opdef.name] += 1e3 * (time.thread_time() - t)
            calls[opdef.name] += 1
    dispatch._apply_global = timed
    t = time.thread_time()
    for _ in range(steps):
        step(x, y)
    total = 1e3 * (time.thread_time() - t) / steps
    dispatch._apply_global = inner
    return total, {k: (calls[k] // steps, v / steps) for k, v in ms.items()}


def theirs(case, steps, tiny):
    import torch
    import torch.nn.functional as F
    import eager_models as em
    from bench_models import _cnn_layers, torch_gpt_model
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if case == "gpt_dp":
        c = em.GPT_TINY if tiny else em.GPT_BENCH
        model = torch_gpt_model(c)
        x = torch.randint(0, c["vocab"], (c["batch"] // 2, c["seq"]))
        y = torch.randint(0, c["vocab"], (c["batch"] // 2, c["seq"]))

        def loss_of():
            return F.cross_entropy(model(x).reshape(-1, c["vocab"]), y.reshape(-1))
    else:
        c = em.CNN_TINY if tiny else em.CNN_BENCH
        model = torch.nn.Sequential(*_cnn_layers(torch.nn))
        x, y = torch.randn(c["batch"] // 2, 3, c["side"], c["side"]), torch.randint(0, 10, (c["batch"] // 2,))

        def loss_of():
            return F.cross_entropy(model(x), y)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss_of().backward()
        opt.step()
        opt.zero_grad()
    for _ in range(2):
        step()
    t = time.thread_time()
    for _ in range(steps):
        step()
    total = 1e3 * (time.thread_time() - t) / steps
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    rows = {e.key: (e.count // steps, e.self_cpu_time_total / 1e3 / steps) for e in prof.key_averages()}
    return total, rows


def _print(title, total, rows):
    print(f"{title}: {total:.1f} CPU ms per step")
    for name, (n, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"  {name:44s} {n:6d} {ms:9.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="gpt_dp", choices=["gpt_dp", "cnn_dp"])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--side", default="both", choices=["ours", "torch", "both"])
    args = p.parse_args()
    if args.side in ("ours", "both"):
        from globaltensor.distributed import spawn
        _print("ours (rank 0, kernel + boxing per op)",
               *spawn(ours, args=(args.case, args.steps, args.tiny), nprocs=2, timeout=1800)[0])
    if args.side in ("torch", "both"):
        _print("torch (self CPU per op)", *theirs(args.case, args.steps, args.tiny))


if __name__ == "__main__":
    main()
