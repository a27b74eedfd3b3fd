"""Real models on 2 ranks against PyTorch (issue 19): a GPT's tokens/s (DP vs DDP, TP vs DTensor
TP) and a CNN's images/s (DP vs DDP), ratios in one run.

    python benchmarks/bench_models.py [--rounds 2] [--json benchmarks/results/models.json]

GPT: examples/gpt.py's model, d_model 256, 8 heads, 12 layers, vocabulary 64 (about 9.5M
parameters), sequence 128; DP: batch 4 per rank (8 in all), TP: batch 8 on both ranks (Megatron
layouts). The torch peer is the same architecture written in torch (separate q/k/v Linear, pre-norm,
GELU, SDPA with is_causal), DDP over gloo, and for TP parallelize_module with ColwiseParallel on
q/k/v and the first feed-forward Linear, RowwiseParallel on the output projections (embeddings and
head replicated). CNN: examples/cnn.py's conv blocks widened (3-32-64 channels), 32x32 images,
batch 32 per rank. SGD steps (forward, loss, backward, update); medians of timed windows. Each
case runs eagerly and as a graph (the step traced with gt.jit.trace: replayed with buffer reuse
and no per-op dispatch), against the same torch figure of the round.
"""
import argparse
import importlib.util
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name, print_table, run_torch_peer, window_rate, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT_CFG = dict(vocab=64, d_model=256, heads=8, layers=12, seq=128)
STEPS = {"gpt": 3, "cnn": 5}


def _example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rate(step, iters, barrier):
    return window_rate(step, iters, barrier, warmup=1, windows=3)  # few, long steps


def gt_gpt(layout, graph=False):
    """Tokens per second of the GPT on 2 ranks, dp or tp; graph: the step traced (gt.jit.trace)."""
    import numpy as np
    import globaltensor as gt
    from globaltensor import distributed as dist
    gpt = _example("gpt")
    c = GPT_CFG
    gt.manual_seed(0)
    model = gpt.GPT(c["vocab"], c["d_model"], c["heads"], c["layers"], c["seq"])
    mesh = gt.placement("cpu", [0, 1])
    data_sbp = gpt.lay_out(model, mesh, layout)
    batch = 8
    rng = np.random.default_rng(0)
    x = gt.tensor(rng.integers(0, c["vocab"], (batch, c["seq"]))).to_global(mesh, gt.sbp.broadcast).to_global(
        sbp=data_sbp)
    y = gt.tensor(rng.integers(0, c["vocab"], (batch, c["seq"]))).to_global(mesh, gt.sbp.broadcast).to_global(
        sbp=data_sbp)
    opt = gt.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        loss = gt.nn.functional.cross_entropy(model(x).reshape(batch * c["seq"], c["vocab"]),
                                              y.reshape(batch * c["seq"]))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = gt.jit.trace(step) if graph else step
    return _rate(lambda: run(x, y), STEPS["gpt"], dist.barrier) * batch * c["seq"]


def torch_gpt_model(c):
    """The GPT of examples/gpt.py in torch (config dict c: vocab, seq, d_model, heads, layers)."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as F

    class Block(tnn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h, self.hd = h, d // h
            self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (tnn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)

        def forward(self, x):
            b, n, _ = x.shape
            h = self.ln1(x)

            def heads(t):
                return t.view(b, n, t.shape[-1] // self.hd, self.hd).transpose(1, 2)
            a = F.scaled_dot_product_attention(heads(self.q(h)), heads(self.k(h)), heads(self.v(h)), is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, n, -1))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class TGPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(c["vocab"], c["d_model"]), tnn.Embedding(c["seq"], c["d_model"])
            self.blocks = tnn.ModuleList(Block(c["d_model"], c["heads"]) for _ in range(c["layers"]))
            self.ln, self.head = tnn.LayerNorm(c["d_model"]), tnn.Linear(c["d_model"], c["vocab"], bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return TGPT()


def torch_gpt(layout, port):
    """The same GPT in torch: DDP (dp) or DTensor tensor parallel (tp)."""
    import torch
    import torch.distributed as tdist
    import torch.nn as tnn
    import torch.nn.functional as F
    torch.set_num_threads(1)
    os.environ["MASTER_PORT"] = str(port)
    tdist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    c = GPT_CFG
    torch.manual_seed(0)

    model = torch_gpt_model(c)
    batch = 8
    if layout == "dp":
        model = tnn.parallel.DistributedDataParallel(model)
        per_rank = batch // 2
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh("cpu", (2,))
        for blk in model.blocks:
            parallelize_module(blk, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                                           "o": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        per_rank = batch
    x = torch.randint(0, c["vocab"], (per_rank, c["seq"]))
    y = torch.randint(0, c["vocab"], (per_rank, c["seq"]))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss = F.cross_entropy(model(x).reshape(-1, c["vocab"]), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    try:
        return _rate(step, STEPS["gpt"], tdist.barrier) * batch * c["seq"]
    finally:
        tdist.destroy_process_group()


def _cnn_layers(nn):
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
    return [*block(3, 32), *block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]


def gt_cnn(graph=False):
    """Images per second of the CNN, data-parallel on 2 ranks; graph: the step traced."""
    import globaltensor as gt
    from globaltensor import distributed as dist
    gt.manual_seed(0)
    net = gt.nn.Sequential(*_cnn_layers(gt.nn))
    mesh = gt.placement("cpu", [0, 1])
    net.to_global(mesh, gt.sbp.broadcast)
    x = gt.randn(64, 3, 32, 32, placement=mesh, sbp=gt.sbp.split(0))
    y = gt.randint(0, 10, (64,), placement=mesh, sbp=gt.sbp.split(0))
    opt = gt.optim.SGD(net.parameters(), lr=0.01)

    def step(x, y):
        loss = gt.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = gt.jit.trace(step) if graph else step
    return _rate(lambda: run(x, y), STEPS["cnn"], dist.barrier) * 64


def torch_cnn(port):
    import torch
    import torch.distributed as tdist
    torch.set_num_threads(1)
    os.environ["MASTER_PORT"] = str(port)
    tdist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    torch.manual_seed(0)
    net = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*_cnn_layers(torch.nn)))
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def step():
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        opt.zero_grad()

    try:
        return _rate(step, STEPS["cnn"], tdist.barrier) * 64
    finally:
        tdist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", default="benchmarks/results/models.json")
    args = p.parse_args()
    from globaltensor.distributed import spawn

    def ours(fn, *fixed):
        return lambda graph: spawn(fn, args=fixed + (graph,), nprocs=2, timeout=1800)[0]
    cases = [("GPT DP tokens/s", ours(gt_gpt, "dp"), lambda: run_torch_peer(torch_gpt, ("dp",))[0], "DDP gloo"),
             ("GPT TP tokens/s", ours(gt_gpt, "tp"), lambda: run_torch_peer(torch_gpt, ("tp",))[0], "DTensor TP"),
             ("CNN DP images/s", ours(gt_cnn), lambda: run_torch_peer(torch_cnn, ())[0], "DDP gloo")]
    results, rows = {}, []
    for label, mine, theirs, peer in cases:
        eager, graph, peers = [], [], []
        for _ in range(args.rounds):  # eager, graph and the peer back to back in each round
            eager.append(mine(False))
            graph.append(mine(True))
            try:
                value = theirs()
                if isinstance(value, (int, float)):
                    peers.append(value)
            except Exception as exc:  # noqa: BLE001 - a torch peer dies now and then: report without it
                print(f"{label}: torch peer failed: {type(exc).__name__}", file=sys.stderr)
        for mode, values in (("eager", eager), ("graph", graph)):
            r = {"globaltensor": statistics.median(values), "mode": mode}
            if peers:
                r[peer] = statistics.median(peers)
                r["ratio"] = r["globaltensor"] / r[peer]
            results[f"{label} ({mode})"] = r
            rows.append([label, mode, f"{r['globaltensor']:.1f}", f"{r.get(peer, float('nan')):.1f}", peer,
                         f"{r.get('ratio', float('nan')):.2f}x"])
    results["cpu"] = cpu_name()
    print_table(f"real models on 2 ranks (medians of rounds; {results['cpu']})",
                ["case", "mode", "globaltensor", "torch", "peer", "ratio"], rows)
    write_json(args.json, results)


if __name__ == "__main__":
    main()
