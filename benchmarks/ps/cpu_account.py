"""Where a PS step's CPU goes: the CTR job of ours_ctr.py with every process's CPU time per thread and its profile.

    python benchmarks/ps/cpu_account.py --mode async --servers 1 [--steps 30] [--warmup 5] [--profile]

Launches `globaltensor.paddle.distributed.launch --server_num=S --worker_num=2` on this very file as the script;
each process runs paddle_ctr.main (ours) and, at exit, writes CPU seconds per thread (user + system, from
/proc/self/task) over its steady window: a trainer from its first step's report to its result; a server over its
whole life (divided by the trainers' steps, so its start-up is in it). With --profile each process's main thread
runs under cProfile(thread_time) over the same window. Prints ms of CPU per step per process and thread, then
the profiles' tops. CPU time, not wall time: the machine may be shared.
"""
import argparse
import cProfile
import glob
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu():
    """{thread name: CPU seconds (user, system)} of this process's threads (Python's names where known)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for d in glob.glob("/proc/self/task/*"):
        try:
            with open(os.path.join(d, "stat")) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(os.path.join(d, "comm")) as f:
                comm = f.read().strip()
        except OSError:
            continue
        tid = int(os.path.basename(d))
        name = names.get(tid, comm)
        if tid == os.getpid():
            name = "main"
        name = name.split("-")[0] if name.startswith(("ps-communicator", "ps-pinger")) else name
        u, s = int(fields[11]) / TICK, int(fields[12]) / TICK
        pu, ps_ = out.get(name, (0.0, 0.0))
        out[name] = (pu + u, ps_ + s)
    return out


def child(argv):
    """One process of the job: paddle_ctr.main with the window's CPU and profile written at exit."""
    sys.path.insert(0, HERE)
    import paddle_ctr
    import globaltensor.paddle as paddle
    from globaltensor.paddle.distributed import fleet

    out_dir = argv[argv.index("--out-dir") + 1]
    profile = os.environ.get("PSCPU_PROFILE") == "1"
    prof = cProfile.Profile(time.thread_time) if profile else None
    state = {"t0": (time.time(), thread_cpu(), os.times()), "steps": 0}
    role = os.environ.get("TRAINING_ROLE", "local")
    report = paddle_ctr.report

    def hooked(out, name, record):
        if record["event"] == "first_step":
            state["t0"] = (time.time(), thread_cpu(), os.times())
            if prof is not None:
                prof.enable()
        elif record["event"] == "result":
            if prof is not None:
                prof.disable()
            state["t1"] = (time.time(), thread_cpu(), os.times())
        report(out, name, record)
    paddle_ctr.report = hooked
    if role == "PSERVER" and prof is not None:
        prof.enable()
    try:
        paddle_ctr.main(paddle, fleet, argv)
    finally:
        if prof is not None:
            prof.disable()
        t1 = state.get("t1") or (time.time(), thread_cpu(), os.times())
        t0 = state["t0"]
        threads = {k: [v[0] - t0[1].get(k, (0, 0))[0], v[1] - t0[1].get(k, (0, 0))[1]] for k, v in t1[1].items()}
        text = ""
        if prof is not None:
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
            text = s.getvalue()
        who = f"{role.lower()}_{os.environ.get('PADDLE_TRAINER_ID') or os.environ.get('PADDLE_PSERVER_ID', 0)}"
        with open(os.path.join(out_dir, f"cpu_{who}.json"), "w") as f:
            json.dump({"who": who, "wall": t1[0] - t0[0], "threads": threads,
                       "user": t1[2].user - t0[2].user, "system": t1[2].system - t0[2].system,
                       "profile": text}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["sync", "async", "geo"], default="async")
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--windows", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--k-steps", type=int, default=100)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="pscpu_")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PSCPU_PROFILE="1" if args.profile else "0")
    cmd = [sys.executable, "-m", "globaltensor.paddle.distributed.launch", f"--server_num={args.servers}",
           "--worker_num=2", os.path.abspath(__file__), "--child", "--mode", args.mode, "--steps", str(args.steps),
           "--windows", str(args.windows), "--warmup", str(args.warmup), "--k-steps", str(args.k_steps),
           "--out-dir", out_dir]
    subprocess.run(cmd, env=env, timeout=args.timeout, check=True, stdout=subprocess.DEVNULL)
    steps = args.steps * args.windows
    all_steps = 1 + args.warmup + steps
    print(f"{args.mode}, {args.servers} server(s), 2 trainers, batch 512: CPU ms per step (user+system), "
          f"trainers over {steps} steps, servers over their life / {all_steps} steps of each trainer")
    for path in sorted(glob.glob(os.path.join(out_dir, "cpu_*.json"))):
        with open(path) as f:
            r = json.load(f)
        n = all_steps if r["who"].startswith("pserver") else steps
        per = {k: 1000 * (u + s) / n for k, (u, s) in r["threads"].items() if u + s > 0}
        total = 1000 * (r["user"] + r["system"]) / n
        print(f"  {r['who']:<10} total {total:6.1f} (system {1000 * r['system'] / n:5.1f}), wall/step "
              f"{1000 * r['wall'] / n:6.1f}; threads: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items())))
    if args.profile:
        for path in sorted(glob.glob(os.path.join(out_dir, "cpu_*.json"))):
            with open(path) as f:
                r = json.load(f)
            print(f"---- {r['who']} main thread, cProfile(thread_time) over the window\n{r['profile']}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        sys.argv.remove("--child")
        child(sys.argv[1:])
    else:
        main()
