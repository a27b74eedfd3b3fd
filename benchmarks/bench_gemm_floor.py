"""The GEMM floor of the bench GPT's data-parallel step (issue 35): every matrix product of one
rank's training step (bench_models.py's GPT: d_model 256, 12 layers, 8 heads, sequence 128, batch 4
per rank), timed shape by shape with numpy (OpenBLAS: what our kernels call) and with torch (MKL:
what DDP's ranks call), one thread each, in --procs processes at once (2: as the ranks run).

    python benchmarks/bench_gemm_floor.py [--procs 2] [--models results/models.json] [--json PATH]

Prints GFLOP/s per product and the step's GEMM time on each library; with --models (a
bench_models.py JSON of the same machine) also the step time a ratio of --goal over DDP needs
and what it leaves for everything that is not a GEMM (attention's softmax, GELU, LayerNorm,
the optimizer, the gradients' all_reduce, the runtime).
"""
import argparse
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS: one thread, as in a rank
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name, median_seconds, print_table, write_json  # noqa: E402

CFG = dict(d=256, ff=1024, vocab=64, layers=12, heads=8, seq=128, batch=4)  # bench_models.GPT_CFG, 4 a rank


def products(c=CFG):
    """[(name, batch, m, k, n, a transposed, b transposed, count a step)]: C[m, n] = A[m, k] B[k, n]."""
    t, d, ff, dh = c["batch"] * c["seq"], c["d"], c["ff"], c["d"] // c["heads"]
    linears = [("q/k/v/out", d, d, 4 * c["layers"]), ("ff1", d, ff, c["layers"]), ("ff2", ff, d, c["layers"]),
               ("head", d, c["vocab"], 1)]
    rows = []
    for name, i, o, count in linears:  # y = x W^T; dx = g W; dW = g^T x
        rows += [(f"{name} forward", 1, t, i, o, False, True, count), (f"{name} dx", 1, t, o, i, False, False, count),
                 (f"{name} dW", 1, o, t, i, True, False, count)]
    bh, s = c["batch"] * c["heads"], c["seq"]
    rows += [("attention q k^T", bh, s, dh, s, False, True, c["layers"]),  # and dP = dO V^T
             ("attention P v", bh, s, s, dh, False, False, c["layers"]),  # and dQ = dS K
             ("attention P^T dO", bh, s, s, dh, True, False, c["layers"]),  # dV, and dK = dS^T Q
             ("attention dO v^T", bh, s, dh, s, False, True, c["layers"]),
             ("attention dS k", bh, s, s, dh, False, False, c["layers"]),
             ("attention dS^T q", bh, s, s, dh, True, False, c["layers"])]
    return rows


def _operands(rng, b, m, k, n, ta, tb):
    import numpy as np
    a = rng.standard_normal((b, k, m) if ta else (b, m, k), dtype=np.float32)
    w = rng.standard_normal((b, n, k) if tb else (b, k, n), dtype=np.float32)
    a, w = (a.swapaxes(1, 2) if ta else a), (w.swapaxes(1, 2) if tb else w)
    return (a[0], w[0]) if b == 1 else (a, w)


def _median_us(fn, reps):
    return 1e6 * median_seconds(fn, reps, lambda: None, warmup=1)


def measure(reps, barrier=None):
    """{name: (numpy us, torch us)} per product, the two libraries alternated shape by shape."""
    import numpy as np
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    out = {}
    for name, b, m, k, n, ta, tb, _ in products():
        a, w = _operands(rng, b, m, k, n, ta, tb)
        ta_, tw_ = torch.from_numpy(a), torch.from_numpy(w)  # the same strides: transposed views
        if barrier is not None:
            barrier.wait()
        ours = _median_us(lambda: np.matmul(a, w), reps)
        theirs = _median_us(lambda: torch.matmul(ta_, tw_), reps)
        out[name] = (ours, theirs)
    return out


def _worker(reps, barrier, queue, index):
    queue.put((index, measure(reps, barrier)))


def run(procs, reps):
    if procs == 1:
        return measure(reps)
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(reps, barrier, queue, i)) for i in range(procs)]
    for w in workers:
        w.start()
    results = dict(queue.get(timeout=600) for _ in workers)
    for w in workers:
        w.join(timeout=60)
    return results[0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", type=int, default=2, help="processes timing at once (the bench's ranks: 2)")
    p.add_argument("--reps", type=int, default=40)
    p.add_argument("--models", help="a bench_models.py JSON from this machine: the step a --goal ratio needs")
    p.add_argument("--goal", type=float, default=1.2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    times = run(args.procs, args.reps)
    rows, total = [], [0.0, 0.0]
    for name, b, m, k, n, ta, tb, count in products():
        ours, theirs = times[name]
        flop = 2.0 * b * m * k * n
        total[0] += count * ours / 1e3
        total[1] += count * theirs / 1e3
        rows.append([name, f"{b}x{m}x{k}x{n}", count, f"{ours:.0f}", f"{theirs:.0f}", f"{flop / ours / 1e3:.1f}",
                     f"{flop / theirs / 1e3:.1f}"])
    rows.append(["all products, ms a step", "", "", f"{total[0]:.1f}", f"{total[1]:.1f}", "", ""])
    print_table(f"the bench GPT's GEMMs, one rank's step ({cpu_name()}; {args.procs} processes at once)",
                ["product", "b x m x k x n", "a step", "numpy us", "torch us", "numpy GFLOP/s", "torch GFLOP/s"], rows)
    figures = {"cpu": cpu_name(), "procs": args.procs, "per_product_us": times, "gemm_ms": total}
    if args.models:
        with open(args.models) as f:
            ddp = json.load(f)["GPT DP tokens/s (eager)"]["DDP gloo"]
        tokens = 2 * CFG["batch"] * CFG["seq"]
        step, need = 1e3 * tokens / ddp, 1e3 * tokens / ddp / args.goal
        print(f"\nDDP's step {step:.1f} ms; {args.goal}x needs {need:.1f} ms, of which the GEMMs at numpy's rate take "
              f"{total[0]:.1f}: {need - total[0]:.1f} ms left for all else (at torch's rate {need - total[1]:.1f})")
        figures.update(ddp_step_ms=step, goal_step_ms=need, left_ms=need - total[0])
    if args.json:
        write_json(args.json, figures)


if __name__ == "__main__":
    main()
