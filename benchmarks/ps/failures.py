"""What a PS job does when a server or a trainer is killed mid-training (Paddle 3.0.0's or ours).

    python benchmarks/ps/failures.py --side paddle --mode async --kill server [--observe 40]

Starts the CTR job of paddle_ctr.py (2 trainers + 1 server, a 'step' line every 5 steps), waits for
every trainer's first step, SIGKILLs the victim (server 0, or trainer 1), then watches for
--observe seconds: which trainers still report steps, which processes still live, the launcher's
exit code and the errors in the logs. Prints one JSON summary line (`FAILURE {...}`); everything it
started is killed at the end.
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from _jobwatch import Watched, descendants, environ_value, role_of  # noqa: E402
from bench_ps import command, environment, failure_tail, records  # noqa: E402


def victim_pid(job, kill):
    for pid in descendants(job.proc.pid):
        role = role_of(pid)
        if kill == "server" and role == "server":
            return pid
        if kill == "trainer" and role == "trainer" and environ_value(pid, "PADDLE_TRAINER_ID") == "1":
            return pid
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", choices=["paddle", "ours"], default="paddle")
    ap.add_argument("--mode", choices=["sync", "async", "geo"], default="async")
    ap.add_argument("--kill", choices=["server", "trainer"], default="server")
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--k-steps", type=int, default=10)
    ap.add_argument("--observe", type=float, default=40.0)
    ap.add_argument("--start-timeout", type=float, default=60.0)
    ap.add_argument("--paddle-python", default=os.environ.get("PADDLE300_PYTHON", "/work/venv-paddle300/bin/python"))
    args = ap.parse_args()
    run = argparse.Namespace(paddle_python=args.paddle_python, k_steps=args.k_steps, steps=10 ** 6, windows=1,
                             warmup=0, batch=512)
    work = tempfile.mkdtemp(prefix=f"ps_failure_{args.side}_{args.mode}_{args.kill}_")
    out_dir = os.path.join(work, "out")
    cmd = command(args.side, args.mode, args.servers, run, out_dir) + ["--progress-every", "5"]
    job = Watched(cmd, work, environment(args.side, 1), os.path.join(work, "launch.out"))
    summary = {"side": args.side, "mode": args.mode, "killed": args.kill, "work_dir": work}
    try:
        while time.time() - job.t0 < args.start_timeout and job.poll() is None:
            if sum(r["event"] == "first_step" for r in records(out_dir)) >= 2:
                break
            time.sleep(0.2)
        victim = victim_pid(job, args.kill)
        if victim is None or job.proc.poll() is not None:
            summary["outcome"] = "the job did not reach its first steps"
            summary["errors"] = failure_tail(work)
            return summary
        os.kill(victim, signal.SIGKILL)
        t_kill = time.time()
        rc, _ = job.wait(t_kill - job.t0 + args.observe)
        after = [r for r in records(out_dir) if r["event"] == "step" and r["t"] > t_kill + 1.0]
        summary.update({
            "launcher_rc": rc, "launcher_exit_s": round(time.time() - t_kill, 1) if rc is not None else None,
            "steps_after_kill": {t: sum(r["trainer"] == t for r in after) for t in (0, 1)},
            "alive_after": sorted(role_of(p) or "launcher-child" for p in descendants(job.proc.pid)),
            "errors": failure_tail(work)})
        return summary
    finally:
        job.kill()
        print("FAILURE " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
