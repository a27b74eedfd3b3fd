"""Collectives on 2-4 ranks: globaltensor vs torch.distributed (gloo) vs Open MPI, in one run.

    python benchmarks/bench_collectives.py [--sizes 8,4096,...] [--nprocs 2] [--json out.json]

Sizes are the full message: the all_reduce/broadcast buffer, the all_gather output, the
reduce_scatter and all_to_all input (each rank sends size/k to each). Time is the median per
call in a job, then the median over --jobs jobs of each side, run alternated (a job's figures
move with how its ranks land on the cores: one job a side read 0.6x-1.7x apart); bandwidth is
size / time. "gt shm" uses arrays from gt.distributed.empty_shared; "gt numpy" plain np.empty
arrays (in a job, numpy's allocator places those of 256 KiB and more in the rank's arena, so
peers read them in place too); "gt heap" arrays numpy did not allocate (bytearray-backed: small
ones staged through shared memory, all_gather and all_to_all inputs from 64 KiB copied by their
owners into the outputs, large all_reduces by cross-memory attach or staged). "Open MPI" runs on
numpy arrays (numpy asks for huge pages from 4 MiB, which its cross-memory attach reads ~2x
faster), "Open MPI heap" on the same bytearray memory as "gt heap"; the ratios pair each peer
with our side on the same memory, and "Open MPI/gt heap" across. Peers are skipped when not
importable.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import (ITERS, SIZES, free_port, heap_array, human_size, human_time, median_seconds,  # noqa: E402
                     print_table, write_json)

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
# the ratios printed, peer / ours: each peer against our side on the same kind of memory
RATIOS = [("Open MPI", "gt shm"), ("Open MPI", "gt numpy"), ("Open MPI heap", "gt heap"), ("Open MPI", "gt heap"),
          ("gloo", "gt shm")]


def gt_worker(sizes, kind):
    from globaltensor import distributed as dist
    import globaltensor as gt
    k = gt.env.get_world_size()
    make = {"shm": dist.empty_shared, "numpy": np.empty, "heap": heap_array}[kind]
    out = {}
    for size in sizes:
        n = max(1, size // 4)
        buf = make((n,), np.float32)
        buf[...] = 1
        part = make((max(1, n // k),), np.float32)
        part[...] = 1
        rows = max(1, n // k)
        a2a = make((rows * k,), np.float32)
        a2a[...] = 1
        # the sizes lists are made once, as the peers' output buffers are (a loop of calls passes the same ones)
        gather_sizes, a2a_sizes = [part.shape[0]] * k, [rows] * k
        calls = {"all_reduce": lambda: dist.all_reduce(buf),
                 "all_gather": lambda: dist.all_gather(part, sizes=gather_sizes),
                 "reduce_scatter": lambda: dist.reduce_scatter(buf),
                 "broadcast": lambda: dist.broadcast(buf, src=0),
                 "all_to_all": lambda: dist.all_to_all(a2a, a2a_sizes, recv_sizes=a2a_sizes)}
        for op in OPS:
            out[f"{op}/{size}"] = median_seconds(calls[op], ITERS.get(size, 20), dist.barrier)
    return out


def gloo_worker(sizes, port):
    import torch
    import torch.distributed as tdist
    rank, k = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=k)
    out = {}
    for size in sizes:
        n = max(1, size // 4)
        buf = torch.ones(n)
        part = torch.ones(max(1, n // k))
        gathered = torch.empty(part.numel() * k)
        a2a, a2a_out = torch.ones(part.numel() * k), torch.empty(part.numel() * k)
        rs_in = buf[:part.numel() * k] if buf.numel() >= part.numel() * k else torch.ones(part.numel() * k)
        calls = {"all_reduce": lambda: tdist.all_reduce(buf),
                 "all_gather": lambda: tdist.all_gather_into_tensor(gathered, part),
                 "reduce_scatter": lambda: tdist.reduce_scatter_tensor(part, rs_in),
                 "broadcast": lambda: tdist.broadcast(buf, src=0),
                 "all_to_all": lambda: tdist.all_to_all_single(a2a_out, a2a)}
        for op in OPS:
            try:
                out[f"{op}/{size}"] = median_seconds(calls[op], ITERS.get(size, 20), tdist.barrier)
            except (RuntimeError, ValueError):  # gloo lacks reduce_scatter_tensor in some builds
                out[f"{op}/{size}"] = None
    tdist.destroy_process_group()
    return out


def mpi_worker(sizes, path, kind="numpy"):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    k = comm.Get_size()
    make = {"numpy": np.empty, "heap": heap_array}[kind]

    def ones(n):
        a = make((n,), np.float32)
        a[...] = 1
        return a
    out = {}
    for size in sizes:
        n = max(1, size // 4)
        buf = ones(n)
        part = ones(max(1, n // k))
        gathered = ones(part.size * k)
        a2a, a2a_out = ones(part.size * k), ones(part.size * k)
        rs_in = buf[:part.size * k] if buf.size >= part.size * k else ones(part.size * k)
        calls = {"all_reduce": lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM),
                 "all_gather": lambda: comm.Allgather(part, gathered),
                 "reduce_scatter": lambda: comm.Reduce_scatter_block(rs_in, part, op=MPI.SUM),
                 "broadcast": lambda: comm.Bcast(buf, root=0),
                 "all_to_all": lambda: comm.Alltoall(a2a, a2a_out)}
        for op in OPS:
            out[f"{op}/{size}"] = median_seconds(calls[op], ITERS.get(size, 20), comm.Barrier)
    if comm.Get_rank() == 0:
        with open(path, "w") as f:
            json.dump({**out, "_library": mpi_library_note()}, f)


def run_mpi(sizes, nprocs=2, kind="numpy"):
    return run_mpi_script(os.path.abspath(__file__), ["--sizes", ",".join(map(str, sizes)), "--kind", kind], nprocs)


def run_mpi_script(script, extra_args, nprocs=2):
    """`mpirun -n NPROCS PY script --mpi-worker PATH ...`: the figures rank 0 wrote to PATH and a
    note naming the MPI library (None and why when it cannot run). PY is $GT_BENCH_MPI_PYTHON when
    set (a venv whose mpi4py is built on Open MPI, next to an MPICH mpi4py in the main one), else
    this interpreter; mpirun is $GT_BENCH_MPIRUN, else the one beside PY, else the one on PATH."""
    python = os.environ.get("GT_BENCH_MPI_PYTHON", sys.executable)
    beside = os.path.join(os.path.dirname(python), "mpirun")
    mpirun = os.environ.get("GT_BENCH_MPIRUN") or (beside if os.path.exists(beside) else shutil.which("mpirun"))
    if not mpirun:
        return None, "mpirun not found"
    probe = subprocess.run([python, "-c", "import mpi4py"], capture_output=True, text=True)
    if probe.returncode != 0:
        return None, f"mpi4py not importable by {python}"
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gt_bench_mpi_{os.getpid()}.json")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    if python != sys.executable:  # the other venv must not pick up this one's packages
        env.pop("PYTHONPATH", None)
    version = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout
    open_mpi = any(name in version for name in ("Open MPI", "OpenRTE", "PRRTE"))  # v4's mpirun says OpenRTE
    over = ["--oversubscribe"] if open_mpi and nprocs > (os.cpu_count() or 1) else []
    cmd = [mpirun, "-n", str(nprocs), *over, "--bind-to", "none", python, script, "--mpi-worker", path, *extra_args]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        return None, f"mpirun failed: {res.stderr[-500:]}"
    with open(path) as f:
        data = json.load(f)
    os.unlink(path)
    return data, data.pop("_library", "MPI")


def mpi_library_note():
    """The MPI library and mpi4py version of this process, for the worker's figures."""
    import mpi4py
    from mpi4py import MPI
    return f"{MPI.Get_library_version().splitlines()[0].strip().strip(chr(0))} (mpi4py {mpi4py.__version__})"


def run_mpi_heap(sizes, nprocs=2):
    """Open MPI on the "gt heap" side's memory: arrays numpy did not allocate (a bytearray's)."""
    return run_mpi(sizes, nprocs, "heap")


def run_gloo(sizes, nprocs=2):
    try:
        import torch
    except ImportError:
        return None, "torch not importable"
    from globaltensor.distributed import spawn
    return spawn(gloo_worker, args=(sizes, free_port()), nprocs=nprocs, timeout=900)[0], \
        f"gloo (torch {torch.__version__})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="message sizes in bytes, comma-separated")
    p.add_argument("--nprocs", type=int, default=2, help="ranks (2-4 on one machine)")
    p.add_argument("--peers", default="mpi,gloo", help="peers to run beside globaltensor: mpi, gloo, or none")
    p.add_argument("--json", default="benchmarks/results/collectives.json", help="where to write the figures")
    p.add_argument("--jobs", type=int, default=5, help="jobs a side, alternated; each cell is their median")
    p.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    p.add_argument("--kind", default="numpy", help=argparse.SUPPRESS)  # the MPI worker's arrays: numpy or heap
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.mpi_worker:
        return mpi_worker(sizes, args.mpi_worker, args.kind)
    from globaltensor.distributed import spawn
    k = args.nprocs
    spawn(gt_worker, args=([8], "numpy"), nprocs=k, timeout=900)  # untimed: the first job read 5-40% slower
    runs, peers = {}, {}
    for _ in range(args.jobs):  # every side's jobs alternated: how a job's ranks land on the cores moves its figures
        for kind in ("shm", "numpy", "heap"):
            runs.setdefault(f"gt {kind}", []).append(spawn(gt_worker, args=(sizes, kind), nprocs=k, timeout=900)[0])
        for name, key, runner in (("Open MPI", "mpi", run_mpi), ("Open MPI heap", "mpi", run_mpi_heap),
                                  ("gloo", "gloo", run_gloo)):
            if key in args.peers.split(","):
                data, peers[name] = runner(sizes, k)
                if data:
                    runs.setdefault(name, []).append(data)
    results = {name: {cell: statistics.median(run[cell] for run in jobs) for cell in jobs[0]}
               for name, jobs in runs.items()}
    print(f"{k} ranks, float32, median per call, median of {args.jobs} alternated jobs a side. Peers: "
          + "; ".join(f"{n}: {v}" for n, v in peers.items()))
    ratios = [(peer, ours) for peer, ours in RATIOS if peer in results and ours in results]
    for op in OPS:
        header = ["size"] + [f"{name}" for name in results] + ["gt shm GB/s"]
        header += [f"{peer}/{ours}" for peer, ours in ratios]
        rows = []
        for size in sizes:
            times = {name: data.get(f"{op}/{size}") for name, data in results.items()}
            row = [human_size(size)] + [human_time(t) for t in times.values()]
            row += [f"{size / times['gt shm'] / 1e9:.2f}"]
            row += [f"{times[peer] / times[ours]:.2f}x" if times[peer] else "-" for peer, ours in ratios]
            rows.append(row)
        print_table(op, header, rows)
    write_json(args.json, {"peers": peers, "seconds": results, "jobs": runs})


if __name__ == "__main__":
    main()
