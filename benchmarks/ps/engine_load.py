"""The PS engine alone under the CTR model's traffic: CPU ms per step and peak RSS of each server and trainer.

Trainers push and pull exactly what benchmarks/ps/paddle_ctr.py's model moves per step (dense 429x400 + 400x400x2
+ 400x1 and biases, 493,201 floats; 26 slots x batch 512 ids of one table, dim 16, vocabulary 10^6) and compute
nothing else. Each process reports its CPU time (time.process_time) over the steady window, not wall time.

    python benchmarks/ps/engine_load.py --mode async --servers 1 [--steps 60] [--warmup 20] [--prefill 0] [--profile]
    python benchmarks/ps/engine_load.py --mode geo --servers 2 --k-steps 100 --steps 200
"""
import argparse
import cProfile
import io
import json
import os
import pstats
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

VOCAB, DIM, SLOTS, BATCH = 10 ** 6, 16, 26, 512
DENSE_SHAPES = {"fc_0.w_0": (13 + SLOTS * DIM, 400), "fc_0.b_0": (400,), "fc_1.w_0": (400, 400), "fc_1.b_0": (400,),
                "fc_2.w_0": (400, 400), "fc_2.b_0": (400,), "fc_3.w_0": (400, 1), "fc_3.b_0": (1,)}


def job_of(args, ports):
    from globaltensor.ps import DenseSpec, JobSpec, Rule, SparseSpec
    return JobSpec(servers=tuple(f"127.0.0.1:{p}" for p in ports), trainers=args.trainers, mode=args.mode,
                   rule=Rule("sgd", 1e-3), k_steps=args.k_steps if args.mode == "geo" else 0,
                   dense=tuple(DenseSpec(n, s) for n, s in DENSE_SHAPES.items()),
                   sparse=(SparseSpec("emb", DIM, init=("uniform", -0.05, 0.05)),),
                   secret=bytes.fromhex(os.environ["GLOBALTENSOR_SECRET"]), timeout=120.0, dead_after=30.0)


def vm_hwm_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def profiled(args, fn):
    """fn() under cProfile when --profile; returns (result, top functions by own time as text)."""
    if not args.profile:
        return fn(), ""
    prof = cProfile.Profile(time.thread_time)  # this thread's CPU, not the waits
    result = prof.runcall(fn)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    return result, text.getvalue()


def run_server(args, ports):
    from globaltensor.ps import Server

    class WindowServer(Server):
        """Profiles its own thread between the trainers' barriers 2 and 3 (the steady window) when --profile."""
        prof = cProfile.Profile(time.thread_time) if args.profile else None

        def _handle(self, ident, header, arrays):
            if self.prof is not None and header.get("op") == "barrier" and header.get("n") in (2, 3):
                (self.prof.enable if header["n"] == 2 else self.prof.disable)()
            super()._handle(ident, header, arrays)

    server = WindowServer(job_of(args, ports), args.index)
    samples = []  # (wall, cpu) every 0.2 s: the steady window's CPU is read off these
    done = threading.Event()

    def sample():
        while not done.wait(0.2):
            samples.append((time.time(), time.process_time(), os.times().system))
    threading.Thread(target=sample, daemon=True).start()
    server.serve()
    done.set()
    samples.append((time.time(), time.process_time(), os.times().system))
    top = ""
    if server.prof is not None:
        text = io.StringIO()
        pstats.Stats(server.prof, stream=text).sort_stats("tottime").print_stats(22)
        top = text.getvalue()
    return {"role": "server", "index": args.index, "samples": samples, "vm_hwm_mb": vm_hwm_mb(), "profile": top}


def trainer_steps(args, client, grads, rng, n):
    """n steps of the mode's traffic; returns (wall, cpu) at the start and the end of the traffic alone (the batches'
    ids are drawn before it: the executor's lookups give each table's sorted unique ids)."""
    batches = [np.unique(rng.integers(0, VOCAB, SLOTS * BATCH, dtype=np.int64)) for _ in range(n)]
    row_grads = np.full((SLOTS * BATCH, DIM), 1e-4, np.float32)
    geo_held = np.zeros(VOCAB if args.mode == "geo" else 0, bool)
    t0, c0, s0 = time.time(), time.process_time(), os.times().system
    for uniq in batches:
        if args.mode == "geo":  # rows held since the last push (the executor's GEO lookups pull only new ones)
            fresh = uniq[~geo_held[uniq]]
            if len(fresh):
                client.pull_sparse("emb", fresh)
                geo_held[fresh] = True
            client.geo_steps += 1
            if client.geo_steps % args.k_steps == 0:
                client.push_dense_delta(grads)
                held = np.flatnonzero(geo_held)
                client.push_sparse_delta("emb", held, np.full((len(held), DIM), 1e-4, np.float32))
                geo_held[:] = False
                client.pull_dense()
            continue
        client.pull_sparse("emb", uniq)
        client.push_dense(grads)
        client.push_sparse("emb", uniq, row_grads[:len(uniq)])
        client.pull_dense()
    return t0, c0, time.time(), time.process_time(), os.times().system - s0


def run_trainer(args, ports):
    from globaltensor.ps import Client
    rng = np.random.default_rng(1000 + args.index)
    grads = {n: np.full(s, 1e-4, np.float32) for n, s in DENSE_SHAPES.items()}
    client = Client(job_of(args, ports), args.index).connect()
    client.geo_steps = 0
    client.pull_dense()
    if args.prefill and args.index == 0:  # every row of the vocabulary created: the servers' steady state
        for start in range(0, VOCAB, 50_000):
            client.pull_sparse("emb", np.arange(start, min(start + 50_000, VOCAB)))
    client.barrier()
    trainer_steps(args, client, grads, rng, args.warmup)
    client.barrier()
    (t0, c0, t1, c1, sys_s), top = profiled(args, lambda: trainer_steps(args, client, grads, rng, args.steps))
    client.barrier()
    client.stop()
    client.close()
    return {"role": "trainer", "index": args.index, "window": [t0, t1], "cpu_ms_per_step": (c1 - c0) * 1e3 / args.steps,
            "wall_ms_per_step": (t1 - t0) * 1e3 / args.steps, "sys_ms_per_step": sys_s * 1e3 / args.steps, "vm_hwm_mb": vm_hwm_mb(), "profile": top}


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cpu_between(samples, t0, t1):
    """(CPU seconds, of which system) between wall times t0 and t1, interpolated from (wall, cpu, sys) samples."""
    walls, cpus, syss = zip(*samples)
    return tuple(float(np.interp(t1, walls, c) - np.interp(t0, walls, c)) for c in (cpus, syss))


def launch(args):
    ports = free_ports(args.servers)
    env = {**os.environ, "GLOBALTENSOR_SECRET": os.urandom(32).hex(), "OMP_NUM_THREADS": "1"}
    out_dir = tempfile.mkdtemp(prefix="engine_load_")
    base = [sys.executable, os.path.abspath(__file__), "--mode", args.mode, "--servers", str(args.servers),
            "--trainers", str(args.trainers), "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--k-steps", str(args.k_steps), "--prefill", str(args.prefill), "--ports", ",".join(map(str, ports))] + (["--profile"] if args.profile else [])
    roles = [("server", i) for i in range(args.servers)] + [("trainer", t) for t in range(args.trainers)]
    procs = [subprocess.Popen(base + ["--role", r, "--index", str(i), "--out", f"{out_dir}/{r}{i}.json"], env=env)
             for r, i in roles]
    deadline = time.monotonic() + args.timeout
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(p.returncode for p in procs):
        raise SystemExit(f"a process failed: exit codes {[p.returncode for p in procs]}")
    results = [json.load(open(f"{out_dir}/{r}{i}.json")) for r, i in roles]
    report(args, results)


def report(args, results):
    trainers = [r for r in results if r["role"] == "trainer"]
    t0, t1 = max(r["window"][0] for r in trainers), min(r["window"][1] for r in trainers)
    steps = args.steps * (t1 - t0) / max(r["window"][1] - r["window"][0] for r in trainers)
    print(f"mode={args.mode} servers={args.servers} trainers={args.trainers} steps={args.steps} "
          f"(CPU time: time.process_time)")
    for r in results:
        if r["role"] == "trainer":
            print(f"  trainer {r['index']}: {r['cpu_ms_per_step']:.2f} CPU ms/step (system {r['sys_ms_per_step']:.2f}), "
                  f"{r['wall_ms_per_step']:.1f} wall ms/step, VmHWM {r['vm_hwm_mb']:.0f} MB")
        else:
            ms, sys_ms = (x * 1e3 / max(steps, 1e-9) for x in cpu_between(r["samples"], t0, t1))
            print(f"  server {r['index']}: {ms:.2f} CPU ms per step of every trainer (system {sys_ms:.2f}), "
                  f"VmHWM {r['vm_hwm_mb']:.0f} MB")
        if r["profile"]:
            print(r["profile"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["sync", "async", "geo"], default="async")
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--trainers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--k-steps", type=int, default=100)
    ap.add_argument("--prefill", type=int, default=1, help="1: trainer 0 first pulls every id of the vocabulary")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--role", choices=["server", "trainer"])
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--ports")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.role is None:
        return launch(args)
    ports = [int(p) for p in args.ports.split(",")]
    result = (run_server if args.role == "server" else run_trainer)(args, ports)
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
