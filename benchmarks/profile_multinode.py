"""Where a cross-host all_reduce / all_gather spends its time: each layer alternated with mpi4py in one run (issue 32).

    sudo python benchmarks/profile_multinode.py [--reps 300] [--burst 20] [--sizes 1024,1048576]

Two namespaces x 2 ranks (as bench_multinode.py). Every round runs every variant once, the all_reduces then the
all_gathers, each kind in an order shuffled per round alike on every rank (a rotation keeps each variant's
neighbour, and an all_gather right after an all_reduce read up to 15% slower)
(so a busy machine slows them alike; read the ratios), each after a blocking MPI barrier, each
`--burst` calls back to back; rank 0's median per call. The variants peel the layers:
mpi4py's blocking call, the same on the group's own communicator with the watchdog armed
(mpi_wait.py), the non-blocking call with MPI's Wait, with our bounded poll (mpi_wait.poll), a
persistent request (MPI 4 *_init, Start per call) with our poll, point to point, the
InterHostGroup method, MPI's Allgather called from C++ (mpi_direct.py) alone, in one Python frame and
after gather_rows' plan lookup, gather_rows (C++ since s9), and the public gt.distributed call; wall
and CPU (process_time) medians.
"""
import argparse
import json
import os
import random
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SIZES = (1 << 10, 1 << 20)


def _in_turn(comm, piece, gathered, byte):
    """Allgather into two preallocated outputs in turn (a new address each call, no allocation)."""
    outs, turn = [gathered, np.empty_like(gathered)], [0]

    def call():
        turn[0] ^= 1
        comm.Allgather([piece, byte], [outs[turn[0]], byte])
    return call


def _variants(size, k):
    from globaltensor import distributed as dist
    from globaltensor.distributed import collectives
    from globaltensor.distributed.interhost_pairs import all_gather_pairs, all_reduce_pairs
    from globaltensor.distributed.mpi_wait import poll
    from globaltensor.distributed.world import world
    jc = world()._mpi
    comm, MPI = jc.comm, jc.MPI
    group = collectives._group(None).native("all_reduce")
    ar, ag = jc.sub(tuple(range(k)), "all_reduce"), jc.sub(tuple(range(k)), "all_gather")
    x = np.zeros(size // 4, np.float32)  # all_reduced in place again and again: zeros stay finite
    piece, gathered = np.ones(size // 4 // k, np.float32), np.empty(size // 4, np.float32)
    byte, w, rows = MPI.BYTE, world(), [piece.size] * k
    two = group._host_peer is not None  # two hosts holding equal blocks of the ranks
    if group._gather_comm is None:
        group._gather_comm_first()
    redop = collectives._redop(x, "sum", "all_reduce")
    from globaltensor.distributed.interhost_gather import GatherSide  # the Python method: its plan, its kept output
    shm_out = w.empty_shared(gathered.shape, gathered.dtype)  # a preallocated output in the host's arena
    kept_out = GatherSide.gather_rows(group, piece, rows) if group._gather_direct is not None else None
    return comm, {
        "all_reduce mpi4py Allreduce": lambda: comm.Allreduce(MPI.IN_PLACE, x),
        "all_reduce mpi4py again (A/A)": lambda: comm.Allreduce(MPI.IN_PLACE, x),
        "all_reduce Allreduce armed": _armed(group, lambda: ar.Allreduce(MPI.IN_PLACE, x)),
        "all_reduce Iallreduce+Wait": lambda: ar.Iallreduce(MPI.IN_PLACE, x).Wait(),
        "all_reduce Iallreduce+poll": lambda: poll(group, ar.Iallreduce(MPI.IN_PLACE, x), "", group.ranks),
        "all_reduce persistent+poll": _persistent(group, ar.Allreduce_init(MPI.IN_PLACE, x)),
        "all_reduce Isend/Irecv pairs+sum": lambda: all_reduce_pairs(group, ar, x, x, redop, False),
        "all_reduce shm+Sendrecv": (lambda: group._all_reduce_hosts(ar, x, x, redop)) if two else None,
        "all_reduce InterHostGroup": lambda: group.all_reduce(x, x, redop),
        "all_reduce gt.distributed": lambda: dist.all_reduce(x),
        "all_gather mpi4py Allgather": lambda: comm.Allgather(piece, gathered),
        "all_gather mpi4py again (A/A)": lambda: comm.Allgather(piece, gathered),
        "all_gather Allgather armed": _armed(group, lambda: ag.Allgather(piece, gathered)),
        "all_gather Iallgather+Wait": lambda: ag.Iallgather(piece, gathered).Wait(),
        "all_gather Iallgather+poll": lambda: poll(group, ag.Iallgather(piece, gathered), "", group.ranks),
        "all_gather persistent+poll": _persistent(group, ag.Allgather_init(piece, gathered)),
        "all_gather Isend/Irecv pairs": lambda: all_gather_pairs(group, ag, piece.view(np.uint8), gathered.view(np.uint8),
                                                                 [piece.nbytes] * k),
        "all_gather InterHostGroup": lambda: group.all_gather(piece, gathered, [piece.nbytes] * k),
        "all_gather dup+BYTE armed": _armed(group, lambda: ag.Allgather([piece, byte], [gathered, byte])),
        "all_gather +np.empty out": _armed(group, lambda: ag.Allgather([piece, byte], [np.empty(gathered.shape, gathered.dtype), byte])),
        "all_gather np.empty beside":
            _armed(group, lambda: (np.empty(gathered.shape, gathered.dtype), ag.Allgather([piece, byte], [gathered, byte]))),
        "all_gather np.empty alone": lambda: np.empty(gathered.shape, gathered.dtype),
        "all_gather new output alone": lambda: group._new_output(gathered.shape, gathered.dtype),
        "all_gather two outs in turn": _armed(group, _in_turn(ag, piece, gathered, byte)),
        "all_gather +empty_shared out": _armed(group, lambda: ag.Allgather([piece, byte], [w.empty_shared(gathered.shape, gathered.dtype), byte])),
        "all_gather gather_rows": lambda: group.gather_rows(piece, rows),
        "all_gather C++ Allgather armed": _armed(group, lambda: group._gather_direct(piece, gathered))
        if group._gather_direct is not None else None,
        "all_gather C++ Allgather": (lambda: group._gather_direct(piece, gathered)) if group._gather_direct is not None else None,
        "all_gather C++ Allgather shm out": (lambda: group._gather_direct(piece, shm_out)) if group._gather_direct is not None else None,
        "all_gather C++ armed, returned": _armed(group, lambda: (group._gather_direct(piece, gathered), gathered)[1])
        if group._gather_direct is not None else None,
        "all_gather gather_rows tuple": lambda: group.gather_rows(piece, tuple(rows)),
        "all_gather C++ one frame": (lambda: _one_frame(group, piece, gathered)) if group._gather_direct is not None else None,
        "all_gather C++ one frame kept out": (lambda: _one_frame(group, piece, kept_out)) if group._gather_direct is not None else None,
        "all_gather C++ +lookup": (lambda: _lookup_frame(group, piece, rows, False)) if group._gather_direct is not None else None,
        "all_gather C++ +lookup+refcount": (lambda: _lookup_frame(group, piece, rows, True)) if group._gather_direct is not None else None,
        "all_gather shm+Sendrecv": (lambda: group._gather_hosts(piece, gathered)) if two else None,
        "all_gather shm+Sendrecv new output": (
            lambda: group._gather_hosts(piece, group._new_output(gathered.shape, gathered.dtype))) if two else None,
        "all_gather shm+Sendrecv np.empty": (
            lambda: group._gather_hosts(piece, np.empty(gathered.shape, gathered.dtype))) if two else None,
        "all_gather gt.distributed": lambda: dist.all_gather(piece, sizes=[piece.size] * k),
        "all_gather gt.distributed same sizes": lambda: dist.all_gather(piece, sizes=rows),
        "all_gather world's gather_rows": lambda: collectives._world_native.gather_rows(piece, rows),
    }


def _one_frame(group, x, out):
    """The C++ Allgather armed inside one function frame (gather_rows' frame, less its plan and output)."""
    if group._in_flight:
        group.drain()
    group.armed = ["all_gather", group.ranks]
    try:
        rc = group._gather_direct(x, out)
    finally:
        group.armed = None
    if rc:
        raise RuntimeError(rc)
    return out


def _lookup_frame(group, x, rows, count):
    """_one_frame after gather_rows' plan lookup (and its kept output's reference count): one frame more."""
    plan = group._rows_plans.get((x.shape, x.dtype, rows if type(rows) is tuple else tuple(rows)))
    out = plan[3][0]
    if count and sys.getrefcount(out) > plan[3][1] + 99:  # the check's cost only (kept_out holds it)
        raise RuntimeError("held")
    return _one_frame(group, x, out)


def _armed(group, call):
    """A blocking MPI call between arming and disarming the group's watchdog (as interhost.py does)."""
    def armed():
        group.armed = ["", group.ranks]
        try:
            call()
        finally:
            group.armed = None
    return armed


def _persistent(group, request):
    """A persistent MPI request (made once: collective, every rank alike), started and waited per call."""
    from globaltensor.distributed.mpi_wait import poll

    def call():
        request.Start()
        poll(group, request, "", group.ranks)
    return call


def worker(out_path, reps, burst, sizes, only=()):
    import globaltensor as gt
    from globaltensor import distributed as dist
    dist.barrier()
    results = {}
    for size in sizes:
        comm, variants = _variants(size, gt.env.get_world_size())
        rounds = reps if size < (64 << 10) else max(10, reps // 10)
        variants = {n: f for n, f in variants.items() if f is not None}
        if only:  # the references always run
            keep = ("mpi4py Allreduce", "mpi4py Allgather", *only)
            variants = {n: f for n, f in variants.items() if any(o in n for o in keep)}
        times = {name: [] for name in variants}
        cpu = {name: [] for name in variants}
        kinds = [[item for item in variants.items() if item[0].startswith(kind)] for kind in ("all_reduce", "all_gather")]
        for i in range(rounds):
            order = []
            for kind in kinds:  # each kind in its own order, shuffled alike on every rank: no fixed neighbours
                order += random.Random(i).sample(kind, len(kind))
            for name, fn in order:
                comm.Barrier()
                t, c = time.perf_counter(), time.process_time()
                for _ in range(burst):
                    fn()
                times[name].append((time.perf_counter() - t) / burst)
                cpu[name].append((time.process_time() - c) / burst)
        ref = {kind: times[f"{kind} mpi4py {'Allreduce' if kind == 'all_reduce' else 'Allgather'}"]
               for kind in ("all_reduce", "all_gather")}
        results[size] = {name: [float(np.median(times[name])), float(np.median(cpu[name])),
                                float(np.median(np.array(ref[name.split()[0]]) / np.array(times[name])))]
                         for name in variants}
    if comm.rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--burst", type=int, default=20)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--only", default="", help="comma-separated parts of variant names to run (with mpi4py's)")
    p.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]), int(args.worker[2]),
                      [int(n) for n in args.worker[3].split(",")], [o for o in args.worker[4].split(",") if o])
    sys.path.insert(0, REPO)
    from globaltensor.distributed import mpi_backend, netns
    for ok, why in (netns.available(), mpi_backend.available()):
        if not ok:
            sys.exit(f"profile_multinode: {why}")
    out = os.path.join(tempfile.mkdtemp(prefix="gt_profile_multinode_"), "rank0.json")
    env = {**os.environ, "GLOBALTENSOR_SECRET": os.urandom(32).hex(), "PYTHONPATH": REPO}
    with netns.TwoHosts() as hosts:
        procs = [hosts.popen(i, [sys.executable, "-m", "globaltensor.distributed.launch", "--nnodes", "2",
                                 "--node_rank", str(i), "--master_addr", hosts.addrs[0], "--master_port", "29500",
                                 "--nproc_per_node", "2", os.path.abspath(__file__), "--worker", out,
                                 str(args.reps), str(args.burst), args.sizes, args.only or ","], env=env) for i in (0, 1)]
        for proc in procs:
            proc.wait(timeout=900)
    if any(proc.returncode for proc in procs):
        sys.exit("profile_multinode: the job failed (see above)")
    with open(out) as f:
        data = json.load(f)
    for size, row in data.items():
        base = {kind: row[f"{kind} mpi4py {'Allreduce' if kind == 'all_reduce' else 'Allgather'}"]
                for kind in ("all_reduce", "all_gather")}
        for name, (seconds, cpu, ratio) in row.items():
            ref = base[name.split()[0]]
            print(f"{int(size):>9} B  {name:34s} {seconds * 1e6:9.1f} us  speed {ref[0] / seconds:5.2f}x   "
                  f"median of round ratios {ratio:5.2f}x   cpu {cpu * 1e6:9.1f} us  cpu speed {ref[1] / max(cpu, 1e-9):5.2f}x")


if __name__ == "__main__":
    main()
