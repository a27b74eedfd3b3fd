"""Parameter-server CTR training beside real PaddlePaddle's CPU parameter server (issue 30's figures).

    python benchmarks/bench_ps.py [--side both|paddle|ours] [--servers 1 2] [--repeats 1]
                                  [--steps 100] [--windows 3] [--paddle-python /work/venv-paddle300/bin/python]

The model and data: benchmarks/ps/paddle_ctr.py (26 sparse slots, vocabulary 10^6, dimension 16,
13 dense features, MLP 400-400-400, batch 512, generated data, SGD). Paddle runs the 3.0.0 wheel
(the newest whose PS runs on CPU; set up in a venv outside the repo, see benchmarks/README.md)
under `python -m paddle.distributed.launch --server_num=S --worker_num=2` with
FLAGS_enable_pir_api=0; ours runs benchmarks/ps/ours_ctr.py (the same code, the imports changed)
under `python -m globaltensor.paddle.distributed.launch`. Rows: Paddle async and GEO (k_steps
100), ours sync, async and GEO, each with 2 trainers + 1 and + 2 servers, and one process without
PS on each side. Paddle's sync mode is run too (it fails in init_worker here: its row records how).

Per row: samples/s of the job (the sum over trainers of each trainer's median over --windows windows
of --steps steps, after --warmup steps; the median over --repeats launches), peak RSS (VmHWM,
polled from /proc every 0.5 s) of the largest server and trainer process, and launch to first step
(the wall time from the driver's Popen to the slowest trainer's end of its first step). Every
launch runs in its own session with a hard timeout; its process group and every process seen
below it are killed at the end. One thread per process (OMP/MKL/OpenBLAS, CPU_NUM) unless --threads.
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "ps"))
from _jobwatch import Watched  # noqa: E402
from _timing import print_table, write_json  # noqa: E402
from bench_paddle_face import cpu_model  # noqa: E402

PADDLE_PYTHON = "/work/venv-paddle300/bin/python"
TRAINERS = 2
GLOG_INFO = re.compile(r"^[IW]\d{4} ")  # glog info and warning lines


def cases(sides, server_counts, paddle_sync):
    out = []
    for side in sides:
        modes = ["sync", "async", "geo"] if side == "ours" else (["sync"] if paddle_sync else []) + ["async", "geo"]
        out += [(side, mode, s) for s in server_counts for mode in modes]
        out.append((side, "local", 0))
    return out


def command(side, mode, servers, args, out_dir):
    python = args.paddle_python if side == "paddle" else sys.executable
    script = os.path.join(HERE, "ps", "paddle_ctr.py" if side == "paddle" else "ours_ctr.py")
    flags = ["--mode", mode, "--k-steps", str(args.k_steps), "--steps", str(args.steps), "--windows",
             str(args.windows), "--warmup", str(args.warmup), "--batch", str(args.batch), "--out-dir", out_dir]
    if side == "ours" and getattr(args, "ours_table", "auto") != "auto":
        flags += ["--table", args.ours_table]
    if mode == "local":
        return [python, script] + flags
    launcher = "paddle.distributed.launch" if side == "paddle" else "globaltensor.paddle.distributed.launch"
    return [python, "-m", launcher, f"--server_num={servers}", f"--worker_num={TRAINERS}", script] + flags


def environment(side, threads):
    env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_v="0", CPU_NUM=str(threads))
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    if side == "ours":
        env["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    else:
        env.pop("PYTHONPATH", None)  # the venv's paddle, nothing of ours
    return env


def records(out_dir):
    recs = []
    for path in glob.glob(os.path.join(out_dir, "*.jsonl")):
        with open(path) as f:
            recs += [json.loads(line.split(" ", 1)[1]) for line in f if line.startswith("PSBENCH ")]
    return recs


def failure_tail(work):
    """The last line naming an error in each of the job's logs (Paddle's launcher writes log/*log.N)."""
    lines = []
    for path in sorted(glob.glob(os.path.join(work, "log", "*"))) + [os.path.join(work, "launch.out")]:
        try:
            with open(path, errors="replace") as f:
                hits = [ln.strip() for ln in f if not GLOG_INFO.match(ln) and ("rror" in ln or "Traceback" in ln)]
        except OSError:
            continue
        if hits:
            lines.append(f"{os.path.basename(path)}: {hits[-1][:300]}")
    return lines[:4]


def run_once(side, mode, servers, args):
    """One launch of a case: its figures and how it ended."""
    work = tempfile.mkdtemp(prefix=f"bench_ps_{side}_{mode}{servers}_")
    out_dir = os.path.join(work, "out")
    n_trainers = 1 if mode == "local" else TRAINERS
    job = Watched(command(side, mode, servers, args, out_dir), work, environment(side, args.threads),
                  os.path.join(work, "launch.out"), default_role="trainer" if mode == "local" else None)

    def done():
        return sum(r["event"] == "result" for r in records(out_dir)) >= n_trainers

    try:
        rc, why = job.wait(args.timeout, done=done)
    finally:
        job.kill()
    recs = records(out_dir)
    results = [r for r in recs if r["event"] == "result"]
    firsts = [r["t"] for r in recs if r["event"] == "first_step"]
    row = {"side": side, "mode": mode, "servers": servers, "launcher_rc": rc, "ended": why, "work_dir": work,
           "per_trainer_samples_s": [r["samples_s"] for r in sorted(results, key=lambda r: r["trainer"])],
           "losses": [(r["loss_first"], r["loss_last"]) for r in results],
           "first_step_s": max(firsts) - job.t0 if len(firsts) == n_trainers else None,
           "rss_server_mb": job.peak_mb("server"), "rss_trainer_mb": job.peak_mb("trainer")}
    ok = len(results) == n_trainers
    row["samples_s"] = sum(row["per_trainer_samples_s"]) if ok else None
    row["status"] = "ok" if ok else f"failed ({why}, launcher rc {rc})"
    if not ok:
        row["errors"] = failure_tail(work)
    elif not args.keep:
        shutil.rmtree(work, ignore_errors=True)
        row["work_dir"] = None
    return row


def run_case(side, mode, servers, args):
    runs = [run_once(side, mode, servers, args) for _ in range(args.repeats)]
    good = [r for r in runs if r["samples_s"] is not None]
    if not good:
        return runs[0]

    def med(key):
        vals = [r[key] for r in good if r[key] is not None]
        return statistics.median(vals) if vals else None
    row = dict(good[0], samples_s=med("samples_s"), first_step_s=med("first_step_s"),
               rss_server_mb=max((r["rss_server_mb"] or 0) for r in good) or None,
               rss_trainer_mb=max((r["rss_trainer_mb"] or 0) for r in good) or None,
               runs=[r["samples_s"] for r in runs])
    return row


def ratios(rows):
    """Issue 30's goals: ours sync and async >= 1.5x Paddle's async, ours GEO >= 1.5x Paddle's GEO."""
    rate = {(r["side"], r["mode"], r["servers"]): r["samples_s"] for r in rows}
    out = {}
    for (side, mode, servers), value in rate.items():
        if side != "ours" or mode == "local":
            continue
        peer = rate.get(("paddle", "geo" if mode == "geo" else "async", servers))
        if value and peer:
            out[f"ours {mode} / paddle {'geo' if mode == 'geo' else 'async'}, {servers} server(s)"] = value / peer
    if rate.get(("ours", "local", 0)) and rate.get(("paddle", "local", 0)):
        out["ours local / paddle local"] = rate[("ours", "local", 0)] / rate[("paddle", "local", 0)]
    return out


def paddle_version(python):
    try:
        p = subprocess.run([python, "-c", "import paddle; print(paddle.__version__)"], capture_output=True,
                           text=True, timeout=120, env=environment("paddle", 1))
        return p.stdout.strip().splitlines()[-1] if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", choices=["both", "paddle", "ours"], default="both")
    ap.add_argument("--servers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--no-paddle-sync", action="store_true", help="skip Paddle's sync row (it fails here)")
    ap.add_argument("--repeats", type=int, default=1, help="launches per case (the median is reported)")
    ap.add_argument("--steps", type=int, default=100, help="steps per timed window (GEO's k_steps divides it)")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--k-steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ours-table", choices=["auto", "sparse_embedding", "embedding"], default="auto",
                    help="the table layer of our rows (auto: as Paddle's, embedding(is_sparse=True) for GEO)")
    ap.add_argument("--keep", action="store_true", help="keep the work folders (logs) of rows that passed")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per launch, then killed")
    ap.add_argument("--paddle-python", default=os.environ.get("PADDLE300_PYTHON", PADDLE_PYTHON))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "bench_ps.json"))
    args = ap.parse_args()
    sides = ["paddle", "ours"] if args.side == "both" else [args.side]
    version = paddle_version(args.paddle_python) if "paddle" in sides else None
    if "paddle" in sides and version is None:
        sys.exit(f"no Paddle at {args.paddle_python}: set up the 3.0.0 venv (benchmarks/README.md) "
                 "or pass --paddle-python / --side ours")
    rows = []
    for side, mode, servers in cases(sides, args.servers, not args.no_paddle_sync):
        print(f"running {side} {mode} {servers} server(s) ...", flush=True)
        rows.append(run_case(side, mode, servers, args))
    title = (f"CTR (26 slots, vocab 1e6, dim 16, 13 dense, MLP 400-400-400, batch {args.batch}), "
             f"{TRAINERS} trainers; ours vs Paddle {version} Fleet PS, {cpu_model()}, {args.threads} thread(s)")
    table = [[r["side"], r["mode"] + (f" k={args.k_steps}" if r["mode"] == "geo" else ""),
              r["servers"] or "-", fmt(r["samples_s"], ",.0f"),
              " / ".join(f"{v:,.0f}" for v in r["per_trainer_samples_s"]) or "-", fmt(r["first_step_s"], ".2f"),
              fmt(r["rss_server_mb"], ".0f"), fmt(r["rss_trainer_mb"], ".0f"), r["status"]] for r in rows]
    print_table(title, ["side", "mode", "servers", "samples/s", "per trainer", "first step s", "RSS server MB",
                        "RSS trainer MB", "status"], table)
    goals = ratios(rows)
    for name, value in goals.items():
        print(f"{name}: {value:.2f}x (goal 1.5x)" if "local" not in name else f"{name}: {value:.2f}x")
    for r in rows:
        for line in r.get("errors", []):
            print(f"  {r['side']} {r['mode']} {r['servers']}: {line}")
    write_json(args.json, {"title": title, "cpu": cpu_model(), "paddle": version, "trainers": TRAINERS,
                           "settings": {k: getattr(args, k) for k in ("steps", "windows", "warmup", "batch",
                                                                       "k_steps", "threads", "repeats")},
                           "rows": rows, "ratios": goals})


if __name__ == "__main__":
    main()
