"""Graph mode against eager mode, in one run (ratios; SPEC §9, issue 16).

    python benchmarks/bench_graph.py [--rounds 3] [--json benchmarks/results/graph.json] [--no-torch]

toy DP: the OneFlow tutorial's ToyModel (Linear 10-20, ReLU, Linear 20-16), batch 20 per rank,
  MSE, SGD, data-parallel on 2 ranks: iterations per second of a gt.nn.Graph step against the
  same step in eager mode (and torch DDP over gloo when torch is installed).
mlp DP / TP: Linear 1024-4096, ReLU, Linear 4096-1024 on 2 ranks, data-parallel (batch 128 per
  rank) and tensor-parallel (Megatron column/row, batch 256 on every rank).
adds: a traced program of 1000 `add`s on 8x8 broadcast tensors (one process): microseconds per
  op replayed, against numpy's own loop of np.add and against eager global ops.
capture: the milliseconds of the ToyModel step's first call (capture, planning, compile).
Medians over --rounds rounds, graph and eager interleaved in each round.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import print_table, run_torch_peer, write_json  # noqa: E402
from bench_training import MODELS, _rate, torch_worker  # noqa: E402


def _model(name, mode):
    """(model, x, y) of `name` laid out for mode ("dp" or "tp") on every rank of the job."""
    import globaltensor as gt
    import globaltensor.nn as nn
    (d_in, d_hidden, d_out), batch, _ = MODELS[name]
    B, S0, S1 = gt.sbp.broadcast, gt.sbp.split(0), gt.sbp.split(1)
    gt.manual_seed(0)
    placement = gt.placement.all("cpu")
    model = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out)).to_global(placement, B)
    data = S0
    if mode == "tp":
        model[0].weight = nn.Parameter(model[0].weight.to_global(sbp=S0))
        model[0].bias = nn.Parameter(model[0].bias.to_global(sbp=S0))
        model[2].weight = nn.Parameter(model[2].weight.to_global(sbp=S1))
        data = B
    rows = batch * 2
    return model, gt.randn(rows, d_in, placement=placement, sbp=data), gt.randn(rows, d_out, placement=placement,
                                                                                   sbp=data)


def step_worker(name, mode, graph):
    """(iterations per second, first call in ms) of one SGD step, as a graph or eagerly."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor import distributed as dist
    model, x, y = _model(name, mode)
    opt = gt.optim.SGD(model.parameters(), lr=0.01)

    class TrainGraph(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            return loss

    def eager():
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()

    if graph:
        g = TrainGraph()
        dist.barrier()
        t = time.perf_counter()
        g(x, y)
        first = (time.perf_counter() - t) * 1e3
        return _rate(lambda: g(x, y), MODELS[name][2], dist.barrier), first
    return _rate(eager, MODELS[name][2], dist.barrier), None


def adds_worker(n=1000, reps=200):
    """Microseconds per op: the replayed program, numpy's loop, eager global ops."""
    import numpy as np
    import globaltensor as gt
    placement = gt.placement("cpu", [0])
    x = gt.randn(8, 8, placement=placement, sbp=gt.sbp.broadcast)
    y = gt.randn(8, 8, placement=placement, sbp=gt.sbp.broadcast)

    def chain(a, b):
        for _ in range(n):
            a = a + b
        return a

    traced = gt.jit.trace(chain)
    traced(x, y)
    a, b = x._local.copy(), y._local.copy()

    def numpy_chain():
        z = a
        for _ in range(n):
            z = np.add(z, b)
        return z

    def best(fn, count):
        times = []
        for _ in range(count):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times) / n * 1e6

    return {"replay": best(lambda: traced(x, y), reps), "numpy": best(numpy_chain, reps),
            "eager": best(lambda: chain(x, y), max(3, reps // 20)),
            "same bits": bool(np.array_equal(traced(x, y)._local, chain(x, y)._local))}


def _round(name, mode):
    from globaltensor.distributed import spawn
    eager = spawn(step_worker, args=(name, mode, False), nprocs=2, timeout=1800)[0][0]
    graph, first = spawn(step_worker, args=(name, mode, True), nprocs=2, timeout=1800)[0]
    return {"eager": eager, "graph": graph, "first call ms": first}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default="benchmarks/results/graph.json")
    p.add_argument("--no-torch", action="store_true", help="skip the torch DDP column")
    args = p.parse_args()
    from globaltensor.distributed import spawn
    results, rows = {}, []
    for name, mode in (("toy", "dp"), ("mlp", "dp"), ("mlp", "tp")):
        rounds = [_round(name, mode) for _ in range(args.rounds)]
        r = {k: statistics.median(x[k] for x in rounds) for k in rounds[0]}
        r["graph / eager"] = r["graph"] / r["eager"]
        if name == "toy" and not args.no_torch:
            ddp = []
            for _ in range(args.rounds):
                try:
                    ddp.append(run_torch_peer(torch_worker, ("toy", "ddp"))[0])
                except Exception:  # noqa: BLE001 - a torch peer dies now and then; report without it
                    pass
            ddp = [v for v in ddp if isinstance(v, (int, float))]
            if ddp:
                r["DDP gloo"] = statistics.median(ddp)
                r["graph / DDP"] = r["graph"] / r["DDP gloo"]
        results[f"{name} {mode}"] = r
        rows.append([f"{name} {mode}", f"{r['eager']:.1f}", f"{r['graph']:.1f}", f"{r['graph / eager']:.2f}x",
                     f"{r['first call ms']:.1f}", f"{r.get('graph / DDP', float('nan')):.2f}x"])
    print_table("graph vs eager, iterations per second on 2 ranks (medians of rounds)",
                ["model", "eager it/s", "graph it/s", "graph/eager", "first call ms", "graph/DDP"], rows)
    adds = spawn(adds_worker, nprocs=1, timeout=600)[0]
    results["1000 adds 8x8 B+B"] = adds
    print_table("a program of 1000 adds on 8x8 broadcast tensors, microseconds per op",
                ["replay", "numpy loop", "eager", "replay - numpy", "same bits as eager"],
                [[f"{adds['replay']:.3f}", f"{adds['numpy']:.3f}", f"{adds['eager']:.2f}",
                  f"{adds['replay'] - adds['numpy']:+.3f}", str(adds["same bits"])]])
    write_json(args.json, results)


if __name__ == "__main__":
    main()
