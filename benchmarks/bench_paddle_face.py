"""The Paddle face beside real Paddle: dygraph DataParallel training steps on 2 ranks.

    python benchmarks/bench_paddle_face.py [--case linearnet|mlp|both] [--threads 1] [--json out.json]

linearnet: the DataParallel seed's LinearNet (Linear 10-10, Linear 10-1; examples/paddle/
data_parallel_spawn.py), batch 10 per rank, MSE loss, Adam (lr 0.001), as the seed.
mlp: Linear 1024-4096, ReLU, Linear 4096-1024, 128 rows per rank, MSE loss, SGD.
Both sides run this file's worker, whose code is the same but for the import lines: ours under
`python -m globaltensor.paddle.distributed.launch --nproc_per_node 2`, Paddle under
`python -m paddle.distributed.launch --nproc_per_node 2` (CPU: gloo). Each rank gets
OMP_NUM_THREADS (and the BLAS variables) = --threads on both sides. Iterations per second
(forward, backward, optimizer step, clear_grad), median of 5 timed windows between barriers.
"others' CPUs": the CPUs' worth of work other processes did during each side's run (/proc/stat's
busy time less the side's own CPU, per second): a 2-rank step on a 2-CPU machine slows by about
that share, so a run with it above ~0.1 did not measure a quiet machine. "CPU ms/step": each
rank's CPU time (all its threads) per step over the warm-up and the windows: the same work, so a
rank whose figure is well above its usual one ran on a slowed vCPU (the host's contention, which
the guest does not see as steal: benchmarks/RESULTS.md, "the MLP's step (s7)").
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name as cpu_model, print_table, window_rate, write_json  # noqa: E402 - cpu_model: bench_ps imports it

CASES = {"linearnet": ((10, 10, 1), 10, 1000), "mlp": ((1024, 4096, 1024), 128, 8)}  # sizes, rows/rank, iters
GOALS = {"linearnet": 3.0, "mlp": 1.5}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(side, case, out, profile=None):
    """Rank body: the same code for both sides but the imports; rank 0 writes {"it_s": ...}."""
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
    dist.init_parallel_env()
    paddle.seed(2023)
    (d_in, d_hidden, d_out), rows, iters = CASES[case]
    if case == "linearnet":
        layer = nn.Sequential(nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out))
    else:
        layer = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))
    dp_layer = paddle.DataParallel(layer)
    loss_fn = nn.MSELoss()
    if case == "linearnet":
        optimizer = opt.Adam(learning_rate=0.001, parameters=dp_layer.parameters())
    else:
        optimizer = opt.SGD(learning_rate=0.01, parameters=dp_layer.parameters())
    inputs = paddle.randn([rows, d_in], "float32")
    labels = paddle.randn([rows, d_out], "float32")

    def step():
        loss = loss_fn(dp_layer(inputs), labels)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    if profile:
        return _profile(step, iters, dist, profile)
    cpu, calls = time.process_time(), [0]

    def counted():
        calls[0] += 1
        step()
    rate = window_rate(counted, iters, dist.barrier, warmup=max(3, iters // 10))
    cpu_ms = 1e3 * (time.process_time() - cpu) / calls[0]  # the rank's CPU per step (all its threads)
    with open(f"{out}.{dist.get_rank()}", "w") as f:
        json.dump({"it_s": rate, "cpu_ms": cpu_ms}, f)


def _profile(step, iters, dist, path):
    """cProfile of `iters` steps on rank 0 (after a warm-up), the top of it written to `path`."""
    import cProfile
    import io
    import pstats
    for _ in range(5):
        step()
    dist.barrier()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(iters):
        step()
    prof.disable()
    dist.barrier()
    if dist.get_rank() == 0:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(40)
        with open(path, "w") as f:
            f.write(s.getvalue())


def _env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["GLOG_v"] = "0"
    return env


def _machine_cpu():
    """(busy, steal) CPU seconds of the whole machine so far (/proc/stat), and this process's
    waited-for children's CPU seconds (a side's launcher and its ranks)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    hz = os.sysconf("SC_CLK_TCK")
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (sum(ticks) - ticks[3] - ticks[4]) / hz, ticks[7] / hz, kids.ru_utime + kids.ru_stime


def others_load(before, after, wall):
    """CPUs' worth of work by other processes during a side's run (busy minus the side's own CPU,
    per second of the run) and the steal, both in CPUs: what the machine's neighbours took."""
    busy, steal, own = (b - a for a, b in zip(before, after))
    return max(0.0, busy - own) / wall, steal / wall


def run_side(side, case, threads, timeout=900, profile=None):
    """(it/s, others' load) of one side on 2 ranks (it/s None and the log's tail if it failed)."""
    launcher = "paddle.distributed.launch" if side == "paddle" else "globaltensor.paddle.distributed.launch"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rate.json")
        cmd = [sys.executable, "-m", launcher, "--nproc_per_node", "2", "--log_dir", os.path.join(tmp, "log"),
               os.path.abspath(__file__), "--worker", side, "--case", case, "--out", out]
        if profile:
            cmd += ["--profile", profile]
        before, t0 = _machine_cpu(), time.perf_counter()
        p = subprocess.run(cmd, env=_env(threads), capture_output=True, text=True, timeout=timeout, cwd=tmp)
        load = others_load(before, _machine_cpu(), time.perf_counter() - t0)
        if profile:
            return None, p.stdout[-2000:] + p.stderr[-2000:], load
        outs = [f"{out}.{rank}" for rank in range(2)]
        if not all(os.path.exists(o) for o in outs):
            return None, (p.stdout + p.stderr)[-2000:], load
        rows = []
        for o in outs:
            with open(o) as f:
                rows.append(json.load(f))
        return rows[0]["it_s"], "", load + tuple(row["cpu_ms"] for row in rows)


def _cpu_cell(per_rank):
    return " / ".join(f"{v:.3g}" for v in per_rank) if per_rank else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="both", choices=["linearnet", "mlp", "both"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results", "paddle_face.json"))
    ap.add_argument("--worker", choices=["ours", "paddle"])
    ap.add_argument("--out")
    ap.add_argument("--profile", help="cProfile rank 0 of this side (with --side-profile) into this file")
    ap.add_argument("--side-profile", choices=["ours", "paddle"])
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.case, args.out, args.profile)
    cases = ["linearnet", "mlp"] if args.case == "both" else [args.case]
    if args.side_profile:
        for case in cases:
            print(run_side(args.side_profile, case, args.threads, profile=os.path.abspath(args.profile))[1])
        return
    import paddle
    rows, figures = [], {}
    for case in cases:
        ours, why_ours, load_ours = run_side("ours", case, args.threads)
        theirs, why_theirs, load_theirs = run_side("paddle", case, args.threads)
        for why in (why_ours, why_theirs):
            if why:
                print(why, file=sys.stderr)
        ratio = ours / theirs if ours and theirs else None
        figures[case] = {"ours_it_s": ours, "paddle_it_s": theirs, "ratio": ratio, "goal": GOALS[case],
                         "others_cpus": [load_ours[0], load_theirs[0]], "steal_cpus": [load_ours[1], load_theirs[1]],
                         "cpu_ms_per_step": [list(load_ours[2:]), list(load_theirs[2:])]}
        rows.append([case, f"{ours:.2f}" if ours else "-", f"{theirs:.2f}" if theirs else "-",
                     f"{ratio:.2f}x" if ratio else "-", f"{GOALS[case]}x",
                     f"{load_ours[0]:.2f} / {load_theirs[0]:.2f}", f"{load_ours[1]:.2f} / {load_theirs[1]:.2f}",
                     _cpu_cell(load_ours[2:]), _cpu_cell(load_theirs[2:])])
    title = (f"Paddle face vs Paddle {paddle.__version__} (CPU, gloo), 2 ranks, "
             f"{args.threads} thread(s) per rank, {cpu_model()}, {os.cpu_count()} cores")
    print_table(title, ["case", "ours it/s", "paddle it/s", "ours/paddle", "goal", "others' CPUs (ours / paddle run)",
                        "steal CPUs", "ours CPU ms/step (rank 0 / 1)", "paddle CPU ms/step"], rows)
    write_json(args.json, {"title": title, "threads_per_rank": args.threads, "cpu": cpu_model(),
                           "paddle": paddle.__version__, "cases": figures})


if __name__ == "__main__":
    main()
