"""Training throughput on 2 ranks: globaltensor vs one process vs torch DDP and DTensor.

    python benchmarks/bench_training.py [--model toy|mlp|both|tp] [--json out.json]

toy: the OneFlow tutorial's ToyModel (Linear 10-20, ReLU, Linear 20-16), batch 20 per rank,
     MSE loss, SGD. mlp: Linear 1024-4096, ReLU, Linear 4096-1024, global batch 256.
tp: the mlp tensor-parallel, Megatron style (first Linear split by output features, second by
input features; every rank sees the whole batch of 256) against DTensor's parallelize_module
with ColwiseParallel / RowwiseParallel on the same model.
Iterations per second (forward, backward, optimizer step), median of 5 timed windows. "one
process" runs the same global batch in one process, numpy free to use both cores.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import print_table, run_torch_peer, window_rate, write_json  # noqa: E402

MODELS = {"toy": ((10, 20, 16), 20, 600), "mlp": ((1024, 4096, 1024), 128, 6)}  # sizes, batch per rank, iters


def _rate(step, iters, barrier):
    return window_rate(step, iters, barrier, warmup=max(3, iters // 10))


def gt_worker(name, world, batch_ranks=None):
    """Iterations per second of globaltensor on `world` ranks (batch: per rank x batch_ranks)."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor import distributed as dist
    (d_in, d_hidden, d_out), batch, iters = MODELS[name]
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))
    kwargs = {}
    if world > 1:
        placement = gt.placement.all("cpu")
        model.to_global(placement, gt.sbp.broadcast)
        kwargs = {"placement": placement, "sbp": gt.sbp.split(0)}
    rows = batch * (batch_ranks or world)
    x = gt.randn(rows, d_in, **kwargs)
    y = gt.randn(rows, d_out, **kwargs)
    return _gt_rate(model, x, y, iters, dist.barrier if world > 1 else (lambda: None))


def _gt_rate(model, x, y, iters, barrier):
    """Iterations per second of globaltensor SGD steps on an MSE loss."""
    import globaltensor as gt
    opt = gt.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = gt.nn.MSELoss()

    def step():
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return _rate(step, iters, barrier)


def gt_tp_worker(name):
    """Iterations per second of the mlp tensor-parallel on 2 ranks (Megatron column/row split)."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor import distributed as dist
    (d_in, d_hidden, d_out), batch, iters = MODELS[name]
    gt.manual_seed(0)
    placement = gt.placement.all("cpu")
    B, S0, S1 = gt.sbp.broadcast, gt.sbp.split(0), gt.sbp.split(1)
    model = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))
    model.to_global(placement, B)
    model[0].weight = nn.Parameter(model[0].weight.to_global(sbp=S0))  # column parallel
    model[0].bias = nn.Parameter(model[0].bias.to_global(sbp=S0))
    model[2].weight = nn.Parameter(model[2].weight.to_global(sbp=S1))  # row parallel: a partial output
    x = gt.randn(batch * 2, d_in, placement=placement, sbp=B)
    y = gt.randn(batch * 2, d_out, placement=placement, sbp=B)
    return _gt_rate(model, x, y, iters, dist.barrier)


def _torch_peer(name, port):
    """This rank of the torch peer: its gloo process group, and the model of `name` (seeded) with
    (d_in, d_out, batch per rank, iterations)."""
    import torch
    import torch.distributed as tdist
    torch.set_num_threads(1)
    os.environ["MASTER_PORT"] = str(port)
    tdist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    (d_in, d_hidden, d_out), batch, iters = MODELS[name]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(d_in, d_hidden), torch.nn.ReLU(), torch.nn.Linear(d_hidden, d_out))
    return model, d_in, d_out, batch, iters


def torch_tp_worker(name, port):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    model, d_in, d_out, batch, iters = _torch_peer(name, port)
    mesh = init_device_mesh("cpu", (2,))
    model = parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x, y = torch.randn(batch * 2, d_in), torch.randn(batch * 2, d_out)  # the whole batch on every rank
    return _torch_rate(model, x, y, iters)


def _torch_rate(model, x, y, iters):
    """Iterations per second of SGD steps on an MSE loss; ends the process group."""
    import torch
    import torch.distributed as tdist
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()

    def step():
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    try:
        return _rate(step, iters, tdist.barrier)
    finally:
        tdist.destroy_process_group()


def _measure_tp(name):
    """One round of the tensor-parallel mlp: globaltensor, then DTensor TP."""
    from globaltensor.distributed import spawn
    r = {"one process": spawn(_one_process, args=(name,), nprocs=1, timeout=1800)[0],
         "globaltensor TP": spawn(gt_tp_worker, args=(name,), nprocs=2, timeout=1800)[0]}
    for attempt in range(2):
        try:
            r["DTensor TP"], _ = run_torch_peer(torch_tp_worker, (name,))
            break
        except Exception as exc:  # noqa: BLE001 - report, do not fail the table
            r["DTensor TP"] = f"failed: {type(exc).__name__}"
    return r


def torch_worker(name, kind, port):
    import torch
    model, d_in, d_out, batch, iters = _torch_peer(name, port)
    x, y = torch.randn(batch, d_in), torch.randn(batch, d_out)
    if kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_module, distribute_tensor
        mesh = init_device_mesh("cpu", (2,))
        model = distribute_module(model, mesh)
        x = distribute_tensor(torch.randn(batch * 2, d_in), mesh, [Shard(0)])
        y = distribute_tensor(torch.randn(batch * 2, d_out), mesh, [Shard(0)])
    return _torch_rate(model, x, y, iters)


def _one_process(name):
    """The same global batch in one process (numpy may use both cores): the practical ceiling."""
    return gt_worker(name, 1, batch_ranks=2)


def _measure(name):
    """One round: every system once, back to back."""
    from globaltensor.distributed import spawn
    r = {"one process": spawn(_one_process, args=(name,), nprocs=1, timeout=1800)[0],
         "globaltensor DP": spawn(gt_worker, args=(name, 2), nprocs=2, timeout=1800)[0]}
    for kind, label in (("ddp", "DDP gloo"), ("dtensor", "DTensor")):
        for attempt in range(2):  # a torch peer dies now and then ("terminate called ..."): once more
            try:
                r[label], _ = run_torch_peer(torch_worker, (name, kind))
                break
            except Exception as exc:  # noqa: BLE001 - report, do not fail the table
                r[label] = f"failed: {type(exc).__name__}"
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["toy", "mlp", "both", "tp"], default="both")
    p.add_argument("--rounds", type=int, default=3, help="rounds of all systems, interleaved (VMs are noisy)")
    p.add_argument("--json", default="benchmarks/results/training.json")
    args = p.parse_args()
    if args.model == "tp":
        return main_tp(args)
    names = ["toy", "mlp"] if args.model == "both" else [args.model]
    results, rows = {}, []
    for name in names:
        rounds = [_measure(name) for _ in range(args.rounds)]
        r = {}
        for label in rounds[0]:
            values = [x[label] for x in rounds]
            r[label] = statistics.median(values) if all(isinstance(v, float) for v in values) else values[-1]
        ratios = [x["globaltensor DP"] / x["DDP gloo"] for x in rounds if isinstance(x["DDP gloo"], float)]
        results[name] = dict(r, rounds=rounds, ratios=ratios)
        rows.append([name] + [f"{v:.1f}" if isinstance(v, float) else str(v) for v in r.values()] +
                    ([f"{statistics.median(ratios):.2f}x", " ".join(f"{x:.2f}" for x in ratios)] if ratios else
                     ["-", "-"]))
    print_table(f"iterations per second, 2 ranks (median of {args.rounds} interleaved rounds)",
                ["model", "one process", "globaltensor DP", "DDP gloo", "DTensor", "gt/DDP", "per round"], rows)
    write_json(args.json, results)


def main_tp(args):
    rounds = [_measure_tp("mlp") for _ in range(args.rounds)]
    r = {label: statistics.median([x[label] for x in rounds]) if all(isinstance(x[label], float) for x in rounds)
         else rounds[-1][label] for label in rounds[0]}
    ratios = [x["globaltensor TP"] / x["DTensor TP"] for x in rounds if isinstance(x["DTensor TP"], float)]
    row = ["mlp TP"] + [f"{v:.1f}" if isinstance(v, float) else str(v) for v in r.values()]
    row += [f"{statistics.median(ratios):.2f}x", " ".join(f"{x:.2f}" for x in ratios)] if ratios else ["-", "-"]
    print_table(f"iterations per second, 2 ranks tensor-parallel (median of {args.rounds} interleaved rounds)",
                ["model", "one process", "globaltensor TP", "DTensor TP", "gt/DTensor", "per round"], [row])
    path = args.json if args.json != "benchmarks/results/training.json" else "benchmarks/results/training_tp.json"
    write_json(path, {"mlp TP": dict(r, rounds=rounds, ratios=ratios)})


if __name__ == "__main__":
    main()
