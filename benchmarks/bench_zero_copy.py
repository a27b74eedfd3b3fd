"""The zero-copy data path on 2 ranks (issue 14): the public API against Open MPI, in one run.

    python benchmarks/bench_zero_copy.py [--rounds 3] [--json out.json]

For 16 and 64 MiB float32: x.to_global(sbp=B) from partial_sum and from split(0) (the public
path), dist.all_reduce in place on an empty_shared buffer, on a plain numpy array (in a job
numpy's allocator puts it in the arena) and on a heap array numpy did not allocate (attached or
staged, as the group's first calls measured);
Open MPI's Allreduce (in place) and Allgather through mpi4py, on numpy arrays (huge pages from 4 MiB:
numpy asks the kernel for them) and, for the heap row's second line, on the same bytearray memory. Rounds alternate globaltensor and
Open MPI; each figure is the median over the rounds of each round's median.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import heap_array, human_time, median_seconds, print_table, write_json  # noqa: E402
from bench_collectives import mpi_library_note, run_mpi_script  # noqa: E402

SIZES = [16 << 20, 64 << 20]
ITERS = {16 << 20: 15, 64 << 20: 6}


def gt_worker(sizes):
    import globaltensor as gt
    from globaltensor import distributed as dist
    pl = gt.placement("cpu", [0, 1])
    out = {}
    for size in sizes:
        n, iters = size // 4, ITERS[size]
        rows = n // 1024
        p = gt.ones(rows, 1024, placement=pl, sbp=gt.sbp.partial_sum)
        s = gt.ones(rows, 1024, placement=pl, sbp=gt.sbp.split(0))
        shm = dist.empty_shared((n,), np.float32)
        plain = np.empty(n, np.float32)
        heap = heap_array(n, np.float32)
        for buf in (shm, plain, heap):
            buf[...] = 1
        calls = {"P->B to_global": lambda: p.to_global(sbp=gt.sbp.broadcast),
                 "S0->B to_global": lambda: s.to_global(sbp=gt.sbp.broadcast),
                 "all_reduce shm": lambda: dist.all_reduce(shm),
                 "all_reduce numpy": lambda: dist.all_reduce(plain),
                 "all_reduce heap": lambda: dist.all_reduce(heap)}
        for name, call in calls.items():
            out[f"{name}/{size}"] = median_seconds(call, iters, dist.barrier)
    return out


def mpi_worker(sizes, path):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    out = {}
    for size in sizes:
        n, iters = size // 4, ITERS[size]
        buf = np.ones(n, np.float32)
        heap = heap_array(n, np.float32)
        heap[...] = 1
        part = np.ones(n // 2, np.float32)
        gathered = np.empty(n, np.float32)
        out[f"Allreduce/{size}"] = median_seconds(lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM), iters,
                                                  comm.Barrier)
        out[f"Allreduce heap/{size}"] = median_seconds(lambda: comm.Allreduce(MPI.IN_PLACE, heap, op=MPI.SUM),
                                                       iters, comm.Barrier)
        out[f"Allgather/{size}"] = median_seconds(lambda: comm.Allgather(part, gathered), iters, comm.Barrier)
    if comm.Get_rank() == 0:
        with open(path, "w") as f:
            json.dump({**out, "_library": mpi_library_note()}, f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default="benchmarks/results/zero_copy.json")
    p.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.mpi_worker:
        return mpi_worker(SIZES, args.mpi_worker)
    from globaltensor.distributed import spawn
    rounds = {"gt": [], "mpi": []}
    note = "Open MPI not run"
    for _ in range(args.rounds):
        rounds["gt"].append(spawn(gt_worker, args=(SIZES,), nprocs=2, timeout=900)[0])
        data, note = run_mpi_script(os.path.abspath(__file__), [])
        if data:
            rounds["mpi"].append(data)
    med = {k: float(np.median([r[k] for r in rounds["gt"]])) for k in rounds["gt"][0]}
    mpi = {k: float(np.median([r[k] for r in rounds["mpi"]])) for k in rounds["mpi"][0]} if rounds["mpi"] else {}
    print(f"2 ranks, float32, median of {args.rounds} rounds of medians. {note}")
    rows = []
    for size in SIZES:
        mib = f"{size >> 20} MiB"
        ar, ag = mpi.get(f"Allreduce/{size}"), mpi.get(f"Allgather/{size}")
        ar_heap = mpi.get(f"Allreduce heap/{size}")
        shm = med[f"all_reduce shm/{size}"]
        for name, peer, label in (("P->B to_global", ar, ""), ("S0->B to_global", ag, ""), ("all_reduce shm", ar, ""),
                                  ("all_reduce numpy", ar, ""), ("all_reduce heap", ar, ""),
                                  ("all_reduce heap", ar_heap, " (MPI heap)")):
            t = med[f"{name}/{size}"]
            rows.append([mib, name + label, human_time(t), human_time(peer) if peer else "-",
                         f"{peer / t:.2f}x" if peer else "-", f"{t / shm:.2f}x"])
    print_table("zero-copy path", ["size", "globaltensor", "time", "Open MPI (Allreduce or Allgather)",
                                   "speed vs Open MPI", "time / all_reduce shm"], rows)
    write_json(args.json, {"mpi": note, "globaltensor": med, "open_mpi": mpi, "rounds": rounds})


if __name__ == "__main__":
    main()
