"""Collectives across two hosts (two network namespaces on this machine, 2 ranks each): our API vs mpi4py called directly.

    sudo python benchmarks/bench_multinode.py [--sizes 1024,65536,...] [--smoke] [--json out.json]

Both sides run in the same job on the same 4 ranks over the same veth: "gt" is
gt.distributed.all_reduce / all_gather (the path each size takes: docs/multinode.md, interhost.py),
"mpi4py" is the job's MPI communicator's Allreduce / Allgather over all 4 ranks (what a user of
mpi4py would call); ours and mpi4py's call of one kind alternate in rounds after the same MPI
barrier. Sizes are the full message (the all_reduce buffer, the all_gather output); time is rank
0's median over rounds of the mean per call. Needs root (namespaces) and mpi4py.
"""
import argparse
import json
import os
import sys
import statistics
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _timing import human_size, human_time, print_table, write_json  # noqa: E402

SIZES = [1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


ROUNDS = 30  # samples per cell: with 10 (s5-s10), two runs of one cell at 1-4 MiB differed by up to 30%


def _iters(size, smoke):
    """Calls per cell: at most 500, about 32 MiB moved, at least three a round up to 4 MiB (one above)."""
    if smoke:
        return 3
    return max(ROUNDS * (3 if size <= (4 << 20) else 1), min(500, (256 << 20) // (size * 8)))


def worker(out_path, sizes, smoke):
    """One rank: time each collective both ways; rank 0 writes the table's data."""
    import globaltensor as gt
    from globaltensor import distributed as dist
    from globaltensor.distributed.world import world
    dist.barrier()
    comm = world()._mpi.comm
    k, rank = comm.size, comm.rank
    results = []
    for size in sizes:
        n = max(1, size // 4)
        x = np.zeros(n, np.float32)  # all_reduced in place again and again: zeros stay finite
        piece = np.ones(max(1, n // k), np.float32)
        gathered = np.empty(piece.size * k, np.float32)
        sizes_list = [piece.size] * k  # made once, as mpi4py's output buffer is
        # one kind at a time: with all four in one rotation each call always follows the same other call
        # (the rotation keeps neighbours), and the all_gather after an all_reduce read up to 15% slower
        reduces = {"gt all_reduce": lambda: dist.all_reduce(x),
                   "mpi4py all_reduce": lambda: comm.Allreduce(comm_in_place(), x)}
        gathers = {"gt all_gather": lambda: dist.all_gather(piece, sizes=sizes_list),
                   "mpi4py all_gather": lambda: comm.Allgather(piece, gathered)}
        iters = _iters(size, smoke)
        row = {"size": size, **_alternated(reduces, iters, comm.Barrier), **_alternated(gathers, iters, comm.Barrier)}
        results.append(row)
    training = _training(smoke)
    if rank == 0:
        write_json(out_path, {"ranks": k, "hosts": 2, "rows": results, "training": training,
                              "rank": gt.env.get_rank()})


def _training(smoke, batch=64):
    """ToyModel (OneFlow's tutorial: Linear 10-20, ReLU, Linear 20-16) data parallel on the 4 ranks,
    SGD steps per second: ours (parameters broadcast, the batch split), then PyTorch DDP over gloo
    on the same ranks and link (its own TCP rendezvous on MASTER_PORT + 1)."""
    import torch
    import torch.distributed as tdist
    import globaltensor as gt
    from globaltensor import distributed as dist, nn
    steps, k = (3 if smoke else 200), gt.env.get_world_size()
    placement = gt.placement("cpu", list(range(k)))
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 16))
    model.to_global(placement, gt.sbp.broadcast)
    opt = gt.optim.SGD(model.parameters(), lr=0.01)
    x = gt.randn(batch * k, 10, placement=placement, sbp=gt.sbp.split(0))
    y = gt.randn(batch * k, 16, placement=placement, sbp=gt.sbp.split(0))

    def gt_step():
        nn.MSELoss()(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    torch.set_num_threads(1)
    tdist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT']) + 1}",
                             rank=gt.env.get_rank(), world_size=k)
    torch.manual_seed(0)
    tmodel = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 16)))
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.01)
    tx, ty = torch.randn(batch, 10), torch.randn(batch, 16)

    def ddp_step():
        torch.nn.functional.mse_loss(tmodel(tx), ty).backward()
        topt.step()
        topt.zero_grad()
    rates = {}
    for name, step, barrier in (("gt DP", gt_step, dist.barrier), ("DDP gloo", ddp_step, tdist.barrier)):
        step()
        barrier()
        t = time.perf_counter()
        for _ in range(steps):
            step()
        barrier()
        rates[name] = steps / (time.perf_counter() - t)
    tdist.destroy_process_group()
    return rates


def _alternated(calls, iters, barrier):
    """Each call's median seconds: up to ROUNDS rounds, each timing every call `iters // rounds` times
    back to back after the same barrier, in turn, the order rotated each round (a busy machine slows
    both sides alike, and neither side always runs first). Give it calls of one kind: a rotation
    keeps neighbours, so with more kinds each call would always follow the same other one."""
    for fn in calls.values():
        fn()
    times = {name: [] for name in calls}
    rounds = min(ROUNDS, iters)
    burst = max(1, iters // rounds)
    order = list(calls.items())
    for i in range(rounds):
        for name, fn in order[i % len(order):] + order[:i % len(order)]:  # rotated: no call always first
            barrier()
            t = time.perf_counter()
            for _ in range(burst):
                fn()
            times[name].append((time.perf_counter() - t) / burst)
    return {name: statistics.median(v) for name, v in times.items()}


def comm_in_place():
    from mpi4py import MPI
    return MPI.IN_PLACE


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--smoke", action="store_true", help="1 KiB and 64 KiB, 3 calls each: does it run")
    p.add_argument("--json", default=None)
    p.add_argument("--worker", nargs=2, metavar=("OUT", "SIZES"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker[0], [int(s) for s in args.worker[1].split(",")], args.smoke)
    sys.path.insert(0, REPO)
    from globaltensor.distributed import mpi_backend, netns
    for ok, why in (netns.available(), mpi_backend.available()):
        if not ok:
            sys.exit(f"bench_multinode: {why}")
    sizes = "1024,65536" if args.smoke else args.sizes
    out = os.path.join(tempfile.mkdtemp(prefix="gt_bench_multinode_"), "rank0.json")
    env = {**os.environ, "GLOBALTENSOR_SECRET": os.urandom(32).hex(), "PYTHONPATH": REPO}
    with netns.TwoHosts(shm_bytes=4 << 30) as hosts:
        procs = [hosts.popen(i, [sys.executable, "-m", "globaltensor.distributed.launch", "--nnodes", "2",
                                 "--node_rank", str(i), "--master_addr", hosts.addrs[0], "--master_port", "29500",
                                 "--nproc_per_node", "2", os.path.abspath(__file__), "--worker", out, sizes,
                                 *(["--smoke"] if args.smoke else [])],
                             env={**env, "GLOO_SOCKET_IFNAME": hosts.links[i]}) for i in (0, 1)]
        for proc in procs:
            proc.wait(timeout=1800)
    if any(proc.returncode for proc in procs):
        sys.exit("bench_multinode: the job failed (see above)")
    with open(out) as f:
        data = json.load(f)
    rows = []
    for r in data["rows"]:
        ar, ag = r["mpi4py all_reduce"] / r["gt all_reduce"], r["mpi4py all_gather"] / r["gt all_gather"]
        rows.append([human_size(r["size"]), human_time(r["gt all_reduce"]), human_time(r["mpi4py all_reduce"]),
                     f"{ar:.2f}x", human_time(r["gt all_gather"]), human_time(r["mpi4py all_gather"]), f"{ag:.2f}x"])
    print_table("2 hosts x 2 ranks over a veth pair (speed: mpi4py time / gt time; >= 1 means gt is faster)",
                ["size", "gt all_reduce", "mpi4py", "speed", "gt all_gather", "mpi4py", "speed"], rows)
    t = data.get("training")
    if t:
        print(f"ToyModel DP, 4 ranks on 2 hosts: gt {t['gt DP']:.0f} steps/s, PyTorch DDP (gloo) {t['DDP gloo']:.0f} "
              f"steps/s ({t['gt DP'] / t['DDP gloo']:.2f}x)")
    if args.json:
        write_json(args.json, data)


if __name__ == "__main__":
    main()
