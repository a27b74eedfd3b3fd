"""Memory and step time of ZeRO on 4 ranks: plain DP, ZeRO-1/2/3 (globaltensor) and PyTorch FSDP2.

    python benchmarks/bench_sharding.py [--d_model 512 --layers 4 --batch 4 --seq 32 --steps 6]
    python benchmarks/bench_sharding.py --smoke        # 1 step of a tiny GPT per mode (a check, no figures)

The GPT of examples/gpt.py (token and position embeddings, pre-norm blocks, head), sized so that
AdamW's state (two float32 copies of every parameter) dominates a rank's memory, trained with
AdamW on a batch split over 4 ranks. Each mode runs in fresh processes (a high-water mark only
grows): dp (parameters broadcast, gradients all-reduced), zero1 (states split), zero2 (also
gradients reduce-scattered), zero3 (gt.distributed.fully_shard per block and on the root), and
fsdp2 (torch's fully_shard, per block and root, over gloo on the CPU: the same model in torch).
Per rank: the resident-set high-water mark (resource.getrusage, all memory of the process),
globaltensor's peak bytes of live arrays (gt.max_memory_allocated: the shared arena that holds
tensor pieces; torch: none), the median step time (forward, backward, step; barrier first) and
the median CPU time of a step (time.process_time: all threads of the rank; on a loaded machine,
where wall times mostly measure the others' load, the figure to compare).
The table gives each mode's figures and its ratio to dp; the JSON goes to benchmarks/results/.
"""
import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from _timing import cpu_name, free_port, print_table, write_json  # noqa: E402

NPROCS = 4
MODES = ("dp", "zero1", "zero2", "zero3", "fsdp2")


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _tokens(cfg, step):
    import numpy as np
    rng = np.random.default_rng(step)
    x = rng.integers(0, cfg["vocab"], (cfg["batch"] * NPROCS, cfg["seq"]))
    return x, np.roll(x, -1, axis=1)


def gt_worker(mode, cfg):
    """Figures of one globaltensor mode on this rank."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor import zero
    from gpt import GPT
    gt.manual_seed(0)
    model = GPT(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["seq"])
    mesh = gt.placement("cpu", list(range(NPROCS)))
    model.to_global(mesh, gt.sbp.broadcast)
    if mode == "zero3":
        for block in model.blocks.layers:
            gt.distributed.fully_shard(block)
        gt.distributed.fully_shard(model)
    opt = gt.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    if mode in ("zero1", "zero2"):
        zero.attach(opt, int(mode[-1]))
    gt.reset_peak_memory_stats()
    times, cpus, losses = [], [], []
    for step in range(cfg["steps"]):
        x, y = (gt.tensor(a).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0)) for a in _tokens(cfg, step))
        gt.distributed.barrier()
        start, cpu = time.perf_counter(), time.process_time()
        logits = model(x)
        n = logits.shape[0] * logits.shape[1]
        loss = nn.functional.cross_entropy(logits.reshape(n, cfg["vocab"]), y.reshape(n))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        del logits, loss  # the step's graph (its activations) goes now, not when the next forward is done
    return {"rss_mb": _rss_mb(), "live_mb": gt.max_memory_allocated() / 2**20, "step_s": _median(times),
            "cpu_s": _median(cpus), "losses": losses}


def torch_worker(cfg, port):
    """Figures of torch FSDP2 (fully_shard per block and root, gloo) on this rank."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from globaltensor.env import get_rank
    rank = get_rank()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=NPROCS)
    try:
        torch.manual_seed(0)
        model = _TorchGPT(cfg)
        init_device_mesh("cpu", (NPROCS,))
        for block in model.blocks.layers:
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        times, cpus, losses = [], [], []
        rows = slice(rank * cfg["batch"], (rank + 1) * cfg["batch"])
        for step in range(cfg["steps"]):
            x, y = (torch.tensor(a[rows]) for a in _tokens(cfg, step))
            dist.barrier()
            start, cpu = time.perf_counter(), time.process_time()
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab"]), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
            times.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            del logits, loss
        return {"rss_mb": _rss_mb(), "live_mb": None, "step_s": _median(times), "cpu_s": _median(cpus),
                "losses": losses}
    finally:
        dist.destroy_process_group()


class _TorchGPT:
    """examples/gpt.py's GPT in torch (built lazily: torch imports only in its worker)."""

    def __new__(cls, cfg):
        import torch
        import torch.nn as tnn

        class GPT(tnn.Module):
            def __init__(self):
                super().__init__()
                d = cfg["d_model"]
                self.tok, self.pos = tnn.Embedding(cfg["vocab"], d), tnn.Embedding(cfg["seq"], d)
                block = tnn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, 0.0, activation="gelu", batch_first=True,
                                                    norm_first=True)
                self.blocks = tnn.TransformerEncoder(block, cfg["layers"], norm=tnn.LayerNorm(d),
                                                     enable_nested_tensor=False)
                self.head = tnn.Linear(d, cfg["vocab"], bias=False)

            def forward(self, idx):
                seq = idx.shape[1]
                mask = tnn.Transformer.generate_square_subsequent_mask(seq)
                h = self.tok(idx) + self.pos(torch.arange(seq))
                return self.head(self.blocks(h, mask=mask, is_causal=True))
        return GPT()


def _median(times):
    return statistics.median(times[1:] if len(times) > 1 else times)  # the first step makes the states


def run(cfg, modes):
    from globaltensor.distributed import spawn
    figures = {}
    for mode in modes:
        if mode == "fsdp2":
            ranks = spawn(torch_worker, args=(cfg, free_port()), nprocs=NPROCS, timeout=1800)
        else:
            ranks = spawn(gt_worker, args=(mode, cfg), nprocs=NPROCS, timeout=1800)
        figures[mode] = ranks
    return figures


def _table(cfg, figures):
    base = figures.get("dp")
    rows = []
    for mode, ranks in figures.items():
        rss = max(r["rss_mb"] for r in ranks)
        live = max((r["live_mb"] or 0) for r in ranks)
        step = statistics.median(r["step_s"] for r in ranks)
        cpu = statistics.mean(r["cpu_s"] for r in ranks)
        ratio = ""
        if base is not None:
            b_rss, b_live = max(r["rss_mb"] for r in base), max(r["live_mb"] for r in base)
            b_step = statistics.median(r["step_s"] for r in base)
            b_cpu = statistics.mean(r["cpu_s"] for r in base)
            live_ratio = f"{live / b_live:.2f}" if live and b_live else "-"
            ratio = f"rss x{rss / b_rss:.2f}, live x{live_ratio}, time x{step / b_step:.2f}, cpu x{cpu / b_cpu:.2f}"
        rows.append([mode, f"{rss:.0f}", f"{live:.0f}" if live else "-", f"{step * 1e3:.1f}", f"{cpu * 1e3:.1f}",
                     ratio])
    title = (f"ZeRO on {NPROCS} ranks, GPT d_model {cfg['d_model']} x {cfg['layers']} layers, batch {cfg['batch']}"
             f"/rank x seq {cfg['seq']}, AdamW; CPU: {cpu_name()}")
    print_table(title, ["mode", "peak RSS MB/rank", "peak live MB/rank", "step ms", "cpu ms/rank", "vs dp"], rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d_model", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--batch", type=int, default=4, help="sequences per rank")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--smoke", action="store_true", help="1 step of a tiny GPT per mode; no JSON")
    p.add_argument("--json", default=os.path.join(HERE, "results", "sharding.json"))
    args = p.parse_args()
    cfg = {k: getattr(args, k) for k in ("d_model", "layers", "heads", "batch", "seq", "vocab", "steps")}
    if args.smoke:
        cfg.update(d_model=16, layers=1, heads=2, batch=1, seq=8, vocab=16, steps=1)
    figures = run(cfg, [m for m in args.modes.split(",") if m])
    _table(cfg, figures)
    if not args.smoke:
        write_json(args.json, {"config": cfg, "cpu": cpu_name(), "nprocs": NPROCS, "figures": figures})


if __name__ == "__main__":
    main()
