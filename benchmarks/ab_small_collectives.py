"""Small collectives, alternated A/B on a loaded machine: trees (or env variants) of ours and Open MPI, per-call quantiles.

    GT_BENCH_MPI_PYTHON=/work/venv-ompi/bin/python GT_BENCH_MPIRUN=/usr/bin/mpirun.openmpi \\
    python benchmarks/ab_small_collectives.py --trees BASE_TREE,THIS_TREE --rounds 3 [--nprocs 3] [--sizes 8,4096]

A tree may carry environment after a '|': "/path/tree|GLOBALTENSOR_SPIN_RELOADS=0". Each round runs
every tree (a fresh spawn of the ranks, arrays from empty_shared) and then Open MPI (mpi4py,
numpy arrays); printed are the medians over rounds of rank 0's per-call 10th percentile and
median. On a shared machine the median swings with the load; the 10th percentile shows the
path when every rank has a CPU. Sizes as in bench_collectives.py (the whole message).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import call_seconds  # noqa: E402

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
ITERS = {8: 3000, 4096: 2000, 65536: 500}


def _quantiles(fn, iters, barrier):
    times = sorted(call_seconds(fn, iters, barrier))
    return [times[int(len(times) * q)] for q in (0.1, 0.5)]


def _calls(k, size, make, lib):
    n = max(1, size // 4)
    rows = max(1, n // k)
    buf, part, a2a = make(n), make(rows), make(rows * k)
    if lib == "gt":
        from globaltensor import distributed as dist
        sizes = [rows] * k
        return {"all_reduce": lambda: dist.all_reduce(buf), "all_gather": lambda: dist.all_gather(part, sizes=sizes),
                "reduce_scatter": lambda: dist.reduce_scatter(buf), "broadcast": lambda: dist.broadcast(buf, src=0),
                "all_to_all": lambda: dist.all_to_all(a2a, sizes, recv_sizes=sizes)}
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    gathered, a2a_out, rs_in = make(rows * k), make(rows * k), make(rows * k)
    return {"all_reduce": lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM),
            "all_gather": lambda: comm.Allgather(part, gathered),
            "reduce_scatter": lambda: comm.Reduce_scatter_block(rs_in, part, op=MPI.SUM),
            "broadcast": lambda: comm.Bcast(buf, root=0), "all_to_all": lambda: comm.Alltoall(a2a, a2a_out)}


def gt_worker(sizes):
    import globaltensor as gt
    from globaltensor import distributed as dist

    def make(n):
        x = dist.empty_shared((n,), np.float32)
        x[...] = 1
        return x
    k = gt.env.get_world_size()
    return {f"{op}/{s}": _quantiles(fn, ITERS.get(s, 100), dist.barrier)
            for s in sizes for op, fn in _calls(k, s, make, "gt").items()}


def mpi_worker(sizes, path):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    out = {f"{op}/{s}": _quantiles(fn, ITERS.get(s, 100), comm.Barrier)
           for s in sizes for op, fn in _calls(comm.Get_size(), s, lambda n: np.ones(n, np.float32), "mpi").items()}
    if comm.Get_rank() == 0:
        with open(path, "w") as f:
            json.dump(out, f)


def run_tree(spec, sizes, nprocs):
    tree, _, extra = spec.partition("|")
    env = {**os.environ, "PYTHONPATH": tree, **dict(kv.split("=", 1) for kv in extra.split(";") if kv)}
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import json, "
            f"ab_small_collectives as ab; from globaltensor.distributed import spawn; "
            f"print(json.dumps(spawn(ab.gt_worker, args=({sizes!r},), nprocs={nprocs}, timeout=600)[0]))")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_mpi(sizes, nprocs):
    python = os.environ.get("GT_BENCH_MPI_PYTHON", sys.executable)
    mpirun = os.environ.get("GT_BENCH_MPIRUN", "mpirun")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    over = ["--oversubscribe"] if nprocs > (os.cpu_count() or 1) else []
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([mpirun, "-n", str(nprocs), *over, "--bind-to", "none", python, os.path.abspath(__file__),
                        "--mpi-worker", f.name, "--sizes", ",".join(map(str, sizes))],
                       env=env, check=True, capture_output=True, timeout=900)
        return json.load(open(f.name))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--sizes", default="8,4096,65536")
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-mpi", action="store_true")
    p.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.mpi_worker:
        return mpi_worker(sizes, args.mpi_worker)
    trees = args.trees.split(",")
    runs = {name: [] for name in trees + ([] if args.no_mpi else ["Open MPI"])}
    for _ in range(args.rounds):
        for tree in trees:
            runs[tree].append(run_tree(tree, sizes, args.nprocs))
        if not args.no_mpi:
            runs["Open MPI"].append(run_mpi(sizes, args.nprocs))
    keys = list(runs[trees[0]][0])
    for q, label in ((0, "p10"), (1, "median")):
        med = {n: {k: statistics.median(r[k][q] for r in rs) for k in keys} for n, rs in runs.items()}
        print(f"\n{args.nprocs} ranks, per-call {label} (median of {args.rounds} rounds), us; (x) = Open MPI / ours")
        for k in keys:
            cells = [f"{med[t][k] * 1e6:8.2f}" + (f" ({med['Open MPI'][k] / med[t][k]:.2f}x)" if not args.no_mpi else "")
                     for t in trees]
            print(f"{k:22s} " + "  ".join(cells) + ("" if args.no_mpi else f"  Open MPI {med['Open MPI'][k] * 1e6:8.2f}"))


if __name__ == "__main__":
    main()
