"""Per-op overhead of global ops on a 2-rank CPU mesh (cached path), vs numpy and DTensor.

    python benchmarks/bench_dispatch.py [--iters 20000] [--json out.json]

The cases of ANCHORS.md: add 8x8 (B + B), matmul S(0) 64x64 @ B 64x64, matmul S(1) @ S(0)
(-> partial, no communication), relu 8x8 (B), sum of S(0) 64x64 (-> partial). Median time
per call after warm-up; DTensor (torch, gloo) is timed in the same run when importable.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_seconds, print_table, run_torch_peer, write_json  # noqa: E402

CASES = ["add 8x8 B+B", "matmul S(0)@B 64", "matmul S(1)@S(0)", "relu 8x8 B", "sum S(0) 64x64"]


def gt_worker(iters):
    import numpy as np

    import globaltensor as gt
    from globaltensor import distributed as dist
    pl = gt.placement("cpu", [0, 1])
    S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast
    a, b = gt.randn(8, 8, placement=pl, sbp=B), gt.randn(8, 8, placement=pl, sbp=B)
    m, w = gt.randn(64, 64, placement=pl, sbp=S0), gt.randn(64, 64, placement=pl, sbp=B)
    m1, w0 = gt.randn(64, 64, placement=pl, sbp=S1), gt.randn(64, 64, placement=pl, sbp=S0)
    calls = {"add 8x8 B+B": lambda: a + b, "matmul S(0)@B 64": lambda: m @ w, "matmul S(1)@S(0)": lambda: m1 @ w0,
             "relu 8x8 B": lambda: gt.relu(a), "sum S(0) 64x64": lambda: gt.sum(m)}
    out = {name: median_seconds(fn, iters, dist.barrier) for name, fn in calls.items()}
    an, bn, mn, wn = a.to_local().numpy(), b.to_local().numpy(), m.to_local().numpy(), w.to_local().numpy()
    plain = {"add 8x8 B+B": lambda: np.add(an, bn), "matmul S(0)@B 64": lambda: np.matmul(mn, wn),
             "relu 8x8 B": lambda: np.maximum(an, 0), "sum S(0) 64x64": lambda: np.sum(mn)}
    out.update({f"numpy {k}": median_seconds(fn, iters, dist.barrier) for k, fn in plain.items()})
    return out


def dtensor_worker(iters, port):
    import torch
    import torch.distributed as tdist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    os.environ["MASTER_PORT"] = str(port)
    tdist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    a = distribute_tensor(torch.randn(8, 8), mesh, [Replicate()])
    b = distribute_tensor(torch.randn(8, 8), mesh, [Replicate()])
    m = distribute_tensor(torch.randn(64, 64), mesh, [Shard(0)])
    w = distribute_tensor(torch.randn(64, 64), mesh, [Replicate()])
    m1 = distribute_tensor(torch.randn(64, 64), mesh, [Shard(1)])
    w0 = distribute_tensor(torch.randn(64, 64), mesh, [Shard(0)])
    calls = {"add 8x8 B+B": lambda: a + b, "matmul S(0)@B 64": lambda: m @ w, "matmul S(1)@S(0)": lambda: m1 @ w0,
             "relu 8x8 B": lambda: torch.relu(a), "sum S(0) 64x64": lambda: m.sum()}
    with torch.no_grad():
        out = {name: median_seconds(fn, iters, tdist.barrier) for name, fn in calls.items()}
    tdist.destroy_process_group()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--json", default="benchmarks/results/dispatch.json")
    args = p.parse_args()
    from globaltensor.distributed import spawn
    ours = spawn(gt_worker, args=(args.iters,), nprocs=2, timeout=900)[0]
    peer, peer_name = run_torch_peer(dtensor_worker, (args.iters,))
    rows = []
    for case in CASES:
        t, d, n = ours[case], peer.get(case), ours.get(f"numpy {case}")
        rows.append([case, f"{t * 1e6:.2f}", f"{n * 1e6:.2f}" if n else "-", f"{d * 1e6:.2f}" if d else "-",
                     f"{d / t:.2f}x" if d else "-"])
    print(f"2 ranks, median us per call (cached path). Peer: {peer_name}")
    print_table("per-op time", ["case", "globaltensor us", "numpy us", "DTensor us", "DTensor/gt"], rows)
    write_json(args.json, {"peer": peer_name, "globaltensor": ours, "dtensor": peer})


if __name__ == "__main__":
    main()
