"""Consecutive eager steps as the benchmark runs them (issue 35): per step, page faults, CPU
time (time.process_time) and this rank's arena in use, on rank 0 of 2.

    python benchmarks/profile_eager_steps.py [--case gpt_dp|gpt_tp|cnn_dp] [--steps 8]
"""
import argparse
import os
import resource
import sys
import time

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__))]


def worker(case, steps):
    import globaltensor as gt
    import profile_eager
    step, x, y = profile_eager._setup(case, False)
    step(x, y)  # warm-up: decisions, buffers
    rows = []
    for _ in range(steps):
        flt, t = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
        step(x, y)
        rows.append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt, 1e3 * (time.process_time() - t),
                     gt.memory.memory_allocated() >> 20))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="gpt_dp", choices=["gpt_dp", "gpt_tp", "cnn_dp"])
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    from globaltensor.distributed import spawn
    rows = spawn(worker, args=(args.case, args.steps), nprocs=2, timeout=1800)[0]
    print("faults  cpu_ms  arena_MiB")
    for f, ms, mib in rows:
        print(f"{f:6d} {ms:7.1f} {mib:9d}")
    print(f"mean   {sum(r[0] for r in rows) / len(rows):.0f} faults, {sum(r[1] for r in rows) / len(rows):.1f} cpu ms")


if __name__ == "__main__":
    main()
