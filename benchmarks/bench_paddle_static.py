"""Paddle's static mode beside real Paddle's: one training step of a static program (Executor.run).

    python benchmarks/bench_paddle_static.py [--threads 1] [--iters 8] [--json out.json]

The model (issue 29's figure): Linear 1024-4096, ReLU, Linear 4096-1024, batch 128, MSE loss,
SGD, built in static mode (paddle.static.data, program_guard, minimize) and run with
Executor.run(main, feed, fetch_list=[loss]) in one process. Both sides run this file's worker,
the same code but the imports; real Paddle runs with FLAGS_enable_pir_api=0 (the Program API the
seed's code uses). OMP/BLAS threads = --threads on both. Steps per second: the median of 5 timed
windows. The CPU model is named beside the figures (these VMs differ from day to day).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import print_table, write_json  # noqa: E402
from bench_paddle_face import cpu_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES, ROWS = (1024, 4096, 1024), 128


def worker(side, iters, out):
    """One side's steps per second, written to `out` as {"it_s": ...}."""
    import numpy as np
    if side == "paddle":
        import paddle
    else:
        import globaltensor.paddle as paddle
    paddle.enable_static()
    d_in, d_hidden, d_out = SIZES
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [None, d_in], "float32")
        y = paddle.static.data("y", [None, d_out], "float32")
        h = paddle.nn.functional.relu(paddle.static.nn.fc(x, d_hidden))
        loss = paddle.mean(paddle.square(paddle.static.nn.fc(h, d_out) - y))
        paddle.optimizer.SGD(learning_rate=0.01).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    r = np.random.default_rng(0)
    feed = {"x": r.standard_normal((ROWS, d_in)).astype("float32"),
            "y": r.standard_normal((ROWS, d_out)).astype("float32")}

    def step():
        return exe.run(main, feed=feed, fetch_list=[loss])

    for _ in range(3):
        step()
    rates = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(iters):
            step()
        rates.append(iters / (time.perf_counter() - t))
    with open(out, "w") as f:
        json.dump({"it_s": statistics.median(rates)}, f)


def run_side(side, threads, iters):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), GLOG_v="0",
               FLAGS_enable_pir_api="0")
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    out = os.path.join(ROOT, "benchmarks", "results", f".static_{side}.json")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", side, "--iters", str(iters),
                        "--out", out], env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0 or not os.path.exists(out):
        print(f"{side} failed:\n{(p.stdout + p.stderr)[-3000:]}", file=sys.stderr)
        return None
    with open(out) as f:
        rate = json.load(f)["it_s"]
    os.remove(out)
    return rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results", "paddle_static.json"))
    ap.add_argument("--worker", choices=["ours", "paddle"])
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.iters, args.out)
    import paddle
    ours, theirs = run_side("ours", args.threads, args.iters), run_side("paddle", args.threads, args.iters)
    ratio = ours / theirs if ours and theirs else None
    title = (f"Paddle static MLP {'-'.join(map(str, SIZES))} batch {ROWS}, SGD, Executor.run, 1 process, "
             f"{args.threads} thread(s): ours vs Paddle {paddle.__version__}, {cpu_model()}")
    print_table(title, ["case", "ours it/s", "paddle it/s", "ours/paddle"],
                [["static mlp", f"{ours:.2f}" if ours else "-", f"{theirs:.2f}" if theirs else "-",
                  f"{ratio:.2f}x" if ratio else "-"]])
    write_json(args.json, {"title": title, "cpu": cpu_model(), "paddle": paddle.__version__, "threads": args.threads,
                           "ours_it_s": ours, "paddle_it_s": theirs, "ratio": ratio})


if __name__ == "__main__":
    main()
