"""Each CPU's own speed over time: one single-threaded GEMM in a loop pinned to every CPU at once,
CPU ms per GEMM (the thread's own clock) per window. A host that slows a vCPU (its SMT sibling or
memory busy with other guests) shows as one CPU's figure rising for seconds while steal stays ~0;
a 2-rank data-parallel step then runs at that rank's pace (benchmarks/RESULTS.md, "the MLP's step
(s7)"). Run it before or after a benchmark to see whether the machine was itself.

    python benchmarks/probe_vcpu_speed.py [--seconds 20] [--window 2]
"""
import argparse
import multiprocessing as mp
import os
import statistics
import time


def _probe(cpu, seconds, queue):
    os.sched_setaffinity(0, {cpu})
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 1024), dtype=np.float32)
    w = rng.standard_normal((1024, 4096), dtype=np.float32)
    out = np.empty((128, 4096), np.float32)
    rows, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        c, t = time.thread_time(), time.perf_counter()
        np.matmul(x, w, out=out)
        rows.append((t, 1e3 * (time.thread_time() - c)))
    queue.put((cpu, rows))


def _steal():
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    return ticks[7], sum(ticks)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--window", type=float, default=2.0)
    args = p.parse_args()
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = "1"
    cpus = sorted(os.sched_getaffinity(0))
    queue = mp.get_context("spawn").Queue()
    steal0 = _steal()
    procs = [mp.get_context("spawn").Process(target=_probe, args=(c, args.seconds, queue)) for c in cpus]
    for proc in procs:
        proc.start()
    results = dict(queue.get(timeout=args.seconds + 120) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)
    steal1 = _steal()
    print(f"CPU ms per GEMM (128x1024 @ 1024x4096, 1 thread) per {args.window:g} s window; "
          f"steal {100.0 * (steal1[0] - steal0[0]) / max(1, steal1[1] - steal0[1]):.2f}% of the machine's time")
    for cpu in cpus:
        rows = results[cpu]
        t0, windows = rows[0][0], {}
        for t, ms in rows:
            windows.setdefault(int((t - t0) / args.window), []).append(ms)
        medians = [statistics.median(v) for _, v in sorted(windows.items())]
        print(f"cpu {cpu}: " + " ".join(f"{m:.1f}" for m in medians) +
              f"   (slowest / fastest window {max(medians) / min(medians):.2f})")


if __name__ == "__main__":
    main()
