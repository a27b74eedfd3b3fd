"""Launch to first step of the CTR job (ours_ctr.py) and the whole job's CPU: one short launch per repeat.

    python benchmarks/ps/first_step.py --mode geo --servers 2 [--repeats 3] [--tree PATH]

Each repeat runs `globaltensor.paddle.distributed.launch --server_num=S --worker_num=2` on ours_ctr.py with one
step and no warm-up, and prints the wall time from the launch to the slowest trainer's `first_step` report
(bench_ps.py's "launch to first step") and the CPU seconds of every process of the job (the launcher's
children, user + system). --tree: the source tree to run (another checkout, for A/B pairs). Byte-compile the
tree first (`python -m compileall -q globaltensor`) where PYTHONDONTWRITEBYTECODE is set: otherwise every
process compiles its imports, which this counts.
"""
import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_launch(tree, mode, servers, timeout):
    """(seconds from launch to the last trainer's first step, the job's CPU seconds)."""
    out_dir = tempfile.mkdtemp(prefix="ps_first_step_")
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "globaltensor.paddle.distributed.launch", f"--server_num={servers}",
           "--worker_num=2", os.path.join(tree, "benchmarks", "ps", "ours_ctr.py"), "--mode", mode, "--steps", "1",
           "--windows", "1", "--warmup", "0", "--out-dir", out_dir]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    subprocess.run(cmd, env=env, timeout=timeout, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    firsts = []
    for path in glob.glob(os.path.join(out_dir, "trainer_*.jsonl")):
        with open(path) as f:
            firsts += [json.loads(line.split("PSBENCH ", 1)[1])["t"] for line in f if '"first_step"' in line]
    if len(firsts) != 2:
        raise RuntimeError(f"{len(firsts)} trainers reported a first step (logs in {out_dir})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return max(firsts) - t0, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["sync", "async", "geo"], default="geo")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--tree", default=ROOT)
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    for _ in range(args.repeats):
        wall, cpu = one_launch(os.path.abspath(args.tree), args.mode, args.servers, args.timeout)
        print(f"{args.mode}, {args.servers} server(s), 2 trainers: first step {wall:.2f} s after launch, "
              f"job CPU {cpu:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
