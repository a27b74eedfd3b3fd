"""Boxing on 2 ranks: every 1-D conversion of a 16 MiB float32 tensor, globaltensor vs DTensor.

    python benchmarks/bench_boxing.py [--rows 2048] [--cols 2048] [--json out.json]

For each (src, dst) SBP pair: median time of x.to_global(sbp=dst) and the bytes the plan
moves; in the same run DTensor's redistribute (torch, gloo) for the same pair when torch is
importable. Also to_local() and B->S, which should cost microseconds (no copy, no collective).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import human_time, median_seconds, print_table, run_torch_peer, write_json  # noqa: E402

PAIRS = [(s, d) for s in ("S0", "S1", "B", "P") for d in ("S0", "S1", "B", "P") if s != d]


def gt_worker(rows, cols, iters):
    import globaltensor as gt
    from globaltensor import distributed as dist
    from globaltensor.boxing import plan
    sbps = {"S0": gt.sbp.split(0), "S1": gt.sbp.split(1), "B": gt.sbp.broadcast, "P": gt.sbp.partial_sum}
    pl = gt.placement("cpu", [0, 1])
    out = {}
    for src, dst in PAIRS:
        x = gt.randn(rows, cols, placement=pl, sbp=sbps[src])
        p = plan(pl, (sbps[src],), pl, (sbps[dst],), x.shape, 4)
        out[f"{src}->{dst}"] = (median_seconds(lambda: x.to_global(sbp=sbps[dst]), iters, dist.barrier), p.bytes)
    x = gt.randn(rows, cols, placement=pl, sbp=sbps["S0"])
    out["to_local"] = (median_seconds(x.to_local, 1000, dist.barrier), 0)
    return out


def dtensor_worker(rows, cols, iters, port):
    import torch
    import torch.distributed as tdist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    os.environ["MASTER_PORT"] = str(port)
    tdist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    places = {"S0": Shard(0), "S1": Shard(1), "B": Replicate(), "P": Partial()}
    torch.manual_seed(0)
    full = torch.randn(rows, cols)
    out = {}
    for src, dst in PAIRS:
        try:
            if src == "P":  # a partial tensor is made from local summands
                x = DTensor.from_local(full / 2, mesh, [Partial()], run_check=False)
            else:
                x = distribute_tensor(full, mesh, [places[src]])
            out[f"{src}->{dst}"] = median_seconds(lambda: x.redistribute(mesh, [places[dst]]), iters, tdist.barrier)
        except Exception as exc:  # noqa: BLE001 - a pair DTensor cannot do is reported, not fatal
            out[f"{src}->{dst}"] = f"unsupported: {type(exc).__name__}"
    x = distribute_tensor(full, mesh, [Shard(0)])
    out["to_local"] = median_seconds(x.to_local, 1000, tdist.barrier)
    tdist.destroy_process_group()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--cols", type=int, default=2048)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--json", default="benchmarks/results/boxing.json")
    args = p.parse_args()
    from globaltensor.distributed import spawn
    ours = spawn(gt_worker, args=(args.rows, args.cols, args.iters), nprocs=2, timeout=900)[0]
    peer, peer_name = run_torch_peer(dtensor_worker, (args.rows, args.cols, args.iters))
    mib = args.rows * args.cols * 4 / 2**20
    print(f"2 ranks, {args.rows}x{args.cols} float32 ({mib:.0f} MiB), median per conversion. Peer: {peer_name}")
    rows = []
    for key in [f"{s}->{d}" for s, d in PAIRS] + ["to_local"]:
        t, nbytes = ours[key]
        theirs = peer.get(key)
        ratio = f"{theirs / t:.1f}x" if isinstance(theirs, float) else "-"
        rows.append([key, human_time(t), f"{nbytes / 2**20:.1f}", human_time(theirs) if isinstance(theirs, float)
                     else (theirs or "-"), ratio])
    print_table("conversions", ["src->dst", "globaltensor", "MiB moved", "DTensor", "DTensor/gt"], rows)
    write_json(args.json, {"peer": peer_name, "globaltensor": ours, "dtensor": peer})


if __name__ == "__main__":
    main()
