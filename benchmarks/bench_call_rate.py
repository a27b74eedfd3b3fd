"""Small collectives back to back: the mean time per call of a loop, globaltensor vs Open MPI, 2-4 ranks, in one run.

    python benchmarks/bench_call_rate.py [--nprocs 3] [--calls 3000] [--rounds 7] [--json out.json]

bench_collectives.py times each call and takes the median; this times loops of `--calls` calls of one 8-byte
op between barriers and takes the median of the rounds' means (rank 0's): a rate, in which a root that
returns early (a posted broadcast, an eager fragment) counts only as far as its readers keep up, and rare
slow calls count as often as they happen. Open MPI runs through mpi4py under mpirun (`--bind-to none`, as
bench_collectives.py: $GT_BENCH_MPI_PYTHON / $GT_BENCH_MPIRUN choose them).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import print_table, window_rate, write_json  # noqa: E402
from bench_collectives import run_mpi_script  # noqa: E402

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]


def _rate(fn, calls, rounds, barrier):
    """Seconds per call: _timing.window_rate's median rate of `rounds` loops of `calls` calls, inverted."""
    return 1.0 / window_rate(fn, calls, barrier, windows=rounds)


def gt_worker(calls, rounds):
    import globaltensor as gt
    from globaltensor import distributed as dist
    k = gt.env.get_world_size()
    one, row, sizes = np.ones(2, np.float32), np.ones(k * 2, np.float32), [2] * k
    fns = {"all_reduce": lambda: dist.all_reduce(one), "all_gather": lambda: dist.all_gather(one, sizes=sizes),
           "reduce_scatter": lambda: dist.reduce_scatter(row), "broadcast": lambda: dist.broadcast(one, src=0),
           "all_to_all": lambda: dist.all_to_all(row, sizes, recv_sizes=sizes)}
    return {op: _rate(fns[op], calls, rounds, dist.barrier) for op in OPS}


def mpi_worker(path, calls, rounds):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    k = comm.Get_size()
    one, row, out, piece = (np.ones(2, np.float32), np.ones(k * 2, np.float32), np.empty(k * 2, np.float32),
                            np.empty(2, np.float32))
    fns = {"all_reduce": lambda: comm.Allreduce(MPI.IN_PLACE, one), "all_gather": lambda: comm.Allgather(one, out),
           "reduce_scatter": lambda: comm.Reduce_scatter_block(row, piece),
           "broadcast": lambda: comm.Bcast(one, root=0), "all_to_all": lambda: comm.Alltoall(row, out)}
    rates = {op: _rate(fns[op], calls, rounds, comm.Barrier) for op in OPS}
    if comm.Get_rank() == 0:
        with open(path, "w") as f:
            json.dump({**rates, "_library": MPI.Get_library_version().splitlines()[0].strip().strip(chr(0))}, f)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", default=None, help="where to write the figures")
    p.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.mpi_worker:
        return mpi_worker(args.mpi_worker, args.calls, args.rounds)
    from globaltensor.distributed import spawn
    spawn(gt_worker, args=(100, 2), nprocs=args.nprocs, timeout=600)  # untimed: the first job runs slower
    ours = spawn(gt_worker, args=(args.calls, args.rounds), nprocs=args.nprocs, timeout=600)[0]
    peer, note = run_mpi_script(os.path.abspath(__file__), ["--calls", str(args.calls), "--rounds", str(args.rounds)],
                                args.nprocs)
    print(f"{args.nprocs} ranks, 8 B, mean per call over {args.calls} calls (median of {args.rounds} rounds). "
          f"Peer: {note}")
    rows = [[op, f"{ours[op] * 1e6:.2f} us", f"{peer[op] * 1e6:.2f} us" if peer else "-",
             f"{peer[op] / ours[op]:.2f}x" if peer else "-"] for op in OPS]
    print_table("call rate", ["op", "globaltensor", "Open MPI", "Open MPI / ours"], rows)
    if args.json:
        write_json(args.json, {"nprocs": args.nprocs, "ours": ours, "open_mpi": peer, "peer": note})


if __name__ == "__main__":
    main()
