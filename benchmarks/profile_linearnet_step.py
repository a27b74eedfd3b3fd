"""The Paddle face's DataParallel step by part (issue 28), ours or real Paddle's: CPU and wall time
per step and rank of forward, loss, backward (all_reduce apart), optimizer step and clear_grad.

    python benchmarks/profile_linearnet_step.py [--model linearnet|mlp] [--side ours|paddle]
        [--steps N] [--comm-mb MB] [--cprofile] [--calls]

linearnet = the DataParallel seed's (Linear 10-10, Linear 10-1, 10 rows per rank, MSELoss, Adam lr
0.001); mlp = bench_paddle_face's (Linear 1024-4096, ReLU, Linear 4096-1024, 128 rows per rank,
MSELoss, SGD lr 0.01). 2 ranks under the side's own launcher (Paddle: gloo), 1 thread each.
CPU time is per thread (the main thread's `time.thread_time` per part; the other threads', e.g. our
collectives' worker, from /proc/self/task/*/schedstat over the run), so other processes' load is
left out; `runq` is the time the rank's threads were runnable but not running (CPU contention).
`alone` rows: the model's GEMMs in numpy (ours) or paddle.matmul (Paddle) and one all_reduce of all
the gradients' floats, timed in the same ranks after the steps. --comm-mb sets both DataParallel
bucket sizes (e.g. 100: one bucket, all_reduced after backward on the calling thread).
Run it from outside the tree: ranks put the working directory first on `sys.path`.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

PARTS = ("forward", "loss", "backward", "all_reduce", "step", "clear_grad")
MODELS = {"linearnet": ((10, 10, 1), 10), "mlp": ((1024, 4096, 1024), 128)}  # sizes, rows per rank


def _import(side):
    if side == "paddle":
        import paddle
        import paddle.distributed as dist
        import paddle.nn as nn
        import paddle.optimizer as opt
    else:
        import globaltensor.paddle as paddle
        import globaltensor.paddle.distributed as dist
        import globaltensor.paddle.nn as nn
        import globaltensor.paddle.optimizer as opt
    return paddle, dist, nn, opt


def _model(side, model, comm_mb):
    paddle, dist, nn, opt = _import(side)
    dist.init_parallel_env()
    paddle.seed(2023)
    (d_in, d_hidden, d_out), rows = MODELS[model]
    if model == "linearnet":
        layer = nn.Sequential(nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out))
    else:
        layer = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))
    sizes = {} if comm_mb is None else {"comm_buffer_size": comm_mb, "last_comm_buffer_size": comm_mb}
    dp = paddle.DataParallel(layer, **sizes)
    if model == "linearnet":
        optimizer = opt.Adam(learning_rate=0.001, parameters=dp.parameters())
    else:
        optimizer = opt.SGD(learning_rate=0.01, parameters=dp.parameters())
    x, y = paddle.randn([rows, d_in], "float32"), paddle.randn([rows, d_out], "float32")
    return paddle, dist, dp, nn.MSELoss(), optimizer, x, y


def _timed_all_reduce(acc):
    """Wrap our collectives' all_reduce entry points: the calling thread's CPU and wall in them
    (an all_reduce started on the worker thread costs the caller only its hand-off here)."""
    from globaltensor.distributed import collectives
    for name in ("all_reduce", "all_reduce_mean"):
        def timed(*a, _fn=getattr(collectives, name), **k):
            t, w = time.thread_time(), time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                acc["all_reduce"][0] += time.thread_time() - t
                acc["all_reduce"][1] += time.perf_counter() - w
        setattr(collectives, name, timed)


def _threads():
    """{tid: (run ns, runnable-but-waiting ns)} of this process's threads (/proc/self/task/*/schedstat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait = f.read().split()[:2]
            out[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            pass
    return out


def _steal():
    with open("/proc/stat") as f:
        cpu = f.readline().split()
    return int(cpu[8]), sum(int(v) for v in cpu[1:9])  # steal, all (jiffies)


def _alone(side, paddle, dist, model, dp, steps):
    """CPU and wall of the model's GEMMs (forward and backward's) and of one all_reduce of the
    gradients' floats, each alone, in ms; a barrier before each."""
    import numpy as np
    (d_in, d_hidden, d_out), rows = MODELS[model]
    rng = np.random.default_rng(0)
    a = {k: rng.standard_normal(s, dtype=np.float32) for k, s in (
        ("x", (rows, d_in)), ("w1", (d_in, d_hidden)), ("h", (rows, d_hidden)), ("w2", (d_hidden, d_out)),
        ("dy", (rows, d_out)))}
    if side == "paddle":
        a = {k: paddle.to_tensor(v) for k, v in a.items()}
        mm, tr = paddle.matmul, (lambda t: t.T)
    else:
        mm, tr = np.matmul, (lambda t: t.T)
    gemms = [(a["x"], a["w1"]), (a["h"], a["w2"]), (tr(a["h"]), a["dy"]), (a["dy"], tr(a["w2"])),
             (tr(a["x"]), a["h"])]
    numel = sum(int(np.prod(p.shape)) for p in dp.parameters())
    grads = paddle.ones([numel], "float32") if side == "paddle" else np.ones(numel, np.float32)
    if side == "ours":
        from globaltensor.distributed import collectives
        reduce_fn = lambda: collectives.all_reduce(grads)  # noqa: E731
    else:
        reduce_fn = lambda: dist.all_reduce(grads)  # noqa: E731
    out = {}
    for name, fn in (("gemms", lambda: [mm(p, q) for p, q in gemms]), ("all_reduce", reduce_fn)):
        fn()
        dist.barrier()
        t, w = time.thread_time(), time.perf_counter()
        for _ in range(steps):
            fn()
        out[name] = (1e3 * (time.thread_time() - t) / steps, 1e3 * (time.perf_counter() - w) / steps)
    return out


def worker(side, model, steps, mode, comm_mb, out_dir, nice=None):
    if nice is not None:  # this rank's session (a launcher starts each in its own) at that autogroup nice
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    acc = {k: [0.0, 0.0] for k in PARTS}
    if side == "ours" and mode == "parts":
        _timed_all_reduce(acc)
    paddle, dist, dp, loss_fn, optimizer, x, y = _model(side, model, comm_mb)
    box = {}
    parts = [("forward", lambda: box.__setitem__("out", dp(x))),
             ("loss", lambda: box.__setitem__("loss", loss_fn(box["out"], y))),
             ("backward", lambda: box["loss"].backward()),
             ("step", optimizer.step), ("clear_grad", optimizer.clear_grad)]
    for _ in range(5 if model == "mlp" else 20):
        for _, fn in parts:
            fn()
    dist.barrier()
    rank = dist.get_rank()
    if mode == "cprofile":
        import cProfile
        import pstats
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        for _ in range(steps):
            for _, fn in parts:
                fn()
        prof.disable()
        dist.barrier()
        if rank == 0:
            pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(40)
        return
    if mode == "calls":
        counts = dict.fromkeys(PARTS, 0)
        for _ in range(steps):
            for name, fn in parts:
                n = [0]

                def count(frame, event, arg):
                    if event == "call":
                        n[0] += 1
                sys.setprofile(count)
                fn()
                sys.setprofile(None)
                counts[name] += n[0]
        dist.barrier()
        _write(out_dir, rank, {k: v / steps for k, v in counts.items()})
        return
    main_tid = threading_native_id()
    th0, st0, flt0 = _threads(), _steal(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        for name, fn in parts:
            t, w = time.thread_time(), time.perf_counter()
            fn()
            acc[name][0] += time.thread_time() - t
            acc[name][1] += time.perf_counter() - w
    cpu, wall = time.process_time() - p0, time.perf_counter() - w0
    th1, st1, flt1 = _threads(), _steal(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    dist.barrier()
    for i in (0, 1):
        acc["backward"][i] -= acc["all_reduce"][i]  # the caller's all_reduce runs inside backward
    row = {k: [1e3 * v / steps for v in pair] for k, pair in acc.items()}
    others = sum(th1[t][0] - th0.get(t, (0, 0))[0] for t in th1 if t != main_tid)
    row["other_threads"] = [others / 1e6 / steps, None]
    row["runq"] = [sum(th1[t][1] - th0.get(t, (0, 0))[1] for t in th1) / 1e6 / steps, None]
    row["total"] = [1e3 * cpu / steps, 1e3 * wall / steps]
    row["minflt"] = (flt1 - flt0) / steps
    row["steal_pct"] = 100.0 * (st1[0] - st0[0]) / max(1, st1[1] - st0[1])
    row["alone"] = _alone(side, paddle, dist, model, dp, max(3, steps // 4)) if model == "mlp" else {}
    _write(out_dir, rank, row)


def threading_native_id():
    import threading
    return threading.get_native_id()


def _write(out_dir, rank, row):
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(row, f)


def run(side, model, steps, mode, comm_mb, nice=None, timeout=900):
    """The rows of both ranks (a list of dicts; empty for cprofile), launched as bench_paddle_face does."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    launcher = "paddle.distributed.launch" if side == "paddle" else "globaltensor.paddle.distributed.launch"
    env = dict(os.environ, GLOG_v="0", PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", launcher, "--nproc_per_node", "2", "--log_dir", os.path.join(tmp, "log"),
               os.path.abspath(__file__), "--worker", side, "--model", model, "--steps", str(steps),
               "--mode", mode, "--out-dir", tmp] + (["--comm-mb", str(comm_mb)] if comm_mb else []) + \
            (["--nice", str(nice)] if nice is not None else [])
        p = subprocess.run(cmd, env=env, capture_output=mode != "cprofile", text=True, timeout=timeout, cwd=tmp)
        if mode == "cprofile":
            log = os.path.join(tmp, "log", "workerlog.0")
            print(open(log).read()[-20000:] if os.path.exists(log) else "")
            return []
        rows = []
        for r in range(2):
            path = os.path.join(tmp, f"rank{r}.json")
            if not os.path.exists(path):
                raise RuntimeError(f"rank {r} wrote nothing:\n{(p.stdout + p.stderr)[-3000:]}")
            with open(path) as f:
                rows.append(json.load(f))
        return rows


def _print(side, model, mode, rows):
    if mode == "calls":
        print(f"{side} {model}: Python calls per step")
        for rank, row in enumerate(rows):
            print(f"  rank {rank}: " + " ".join(f"{k} {row[k]:.0f}" for k in PARTS) + f"  sum {sum(row.values()):.0f}")
        return
    unit = "ms" if model == "mlp" else "us"
    scale = 1.0 if model == "mlp" else 1e3
    keys = list(PARTS) + ["other_threads", "runq", "total"]
    print(f"{side} {model}: per step, CPU {unit} (wall {unit}); other_threads and runq: CPU and wait of all threads")
    print("rank " + " ".join(f"{k:>15}" for k in keys) + "  minflt  steal%")
    for rank, row in enumerate(rows):
        cells = [f"{row[k][0] * scale:7.2f}" + (f"({row[k][1] * scale:6.2f})" if row[k][1] is not None else " " * 8)
                 for k in keys]
        print(f"{rank:4d} " + " ".join(cells) + f"  {row['minflt']:6.0f}  {row['steal_pct']:5.1f}")
        for name, (c, w) in row["alone"].items():
            print(f"       alone: {name} {c:.2f} ms CPU ({w:.2f} wall)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="linearnet", choices=sorted(MODELS))
    p.add_argument("--side", default="ours", choices=["ours", "paddle"])
    p.add_argument("--steps", type=int, help="timed steps (default 2000 linearnet, 40 mlp)")
    p.add_argument("--comm-mb", type=float, help="DataParallel's comm_buffer_size and last_comm_buffer_size")
    p.add_argument("--cprofile", action="store_true", help="cProfile (CPU time) of rank 0, top 40 by own time")
    p.add_argument("--calls", action="store_true", help="Python calls per part (sys.setprofile counter)")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--nice", type=int, help="each rank's autogroup nice (root; -20: the machine's other sessions "
                   "hardly run beside it, a quiet machine for an experiment)")
    p.add_argument("--worker", choices=["ours", "paddle"], help=argparse.SUPPRESS)
    p.add_argument("--mode", default="parts", help=argparse.SUPPRESS)
    p.add_argument("--out-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    steps = args.steps or (2000 if args.model == "linearnet" else 40)
    if args.worker:
        return worker(args.worker, args.model, steps, args.mode, args.comm_mb, args.out_dir, args.nice)
    mode = "cprofile" if args.cprofile else "calls" if args.calls else "parts"
    rows = run(args.side, args.model, steps, mode, args.comm_mb, args.nice)
    if rows:
        _print(args.side, args.model, mode, rows)
    if args.json and rows:
        with open(args.json, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
