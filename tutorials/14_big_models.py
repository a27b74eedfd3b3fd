# %% [markdown]
# # 14 · Models bigger than one rank: ZeRO, recompute, mixed precision
#
# Data parallelism keeps a whole copy of the model on every rank: parameters, gradients and
# (for Adam) two optimizer states, four times the parameters' bytes before a single activation.
# With global tensors, ZeRO is nothing but a choice of layouts along the data-parallel axis:
#
# | stage | parameter | gradient | optimizer state | how to switch it on |
# |---|---|---|---|---|
# | DP | `B` | `B` (all-reduced) | `B` | `model.to_global(mesh, broadcast)` |
# | 1 | `B` | `B` | `S(0)` | `gt.zero.attach(opt, 1)` |
# | 2 | `B` | `S(0)` (reduce-scattered) | `S(0)` | `gt.zero.attach(opt, 2)` |
# | 3 | `S(0)` | `S(0)` | `S(0)` | `gt.distributed.fully_shard(block)` per block, then the root (FSDP2's shape) |
#
# The other faces switch on the same layouts: OneFlow's `graph.config.enable_zero(True, stage=)`,
# Paddle's `dist.shard_optimizer(opt, dist.ShardingStage3("dp"))` and `Strategy.sharding`
# (reference: `docs/big_models.md`). Activation recompute (`gt.utils.checkpoint`) trades the
# activations of a block for a second forward in backward, and `gt.autocast` + `gt.amp.GradScaler`
# run the matmuls in bfloat16 with float32 master weights.
#
# Below: a GPT (`examples/gpt.py`) whose model state does not fit a per-rank budget under plain
# data parallelism trains on 2 ranks with ZeRO-3 and recompute, with the same losses.

# %%
import importlib.util
import os

import numpy as np

from globaltensor import distributed as dist

# the tutorial's folder: beside this file when run as a script, the working folder in a notebook
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
GPT = os.path.join(HERE, "..", "examples", "gpt.py")
VOCAB, SEQ, BATCH = 64, 16, 8


def state_bytes(model, opt):
    """The bytes of model state this rank holds: its pieces of parameters, gradients, optimizer states."""
    params = list(model.parameters())
    held = sum(p.to_local().numpy().nbytes for p in params)
    held += sum(p.grad.to_local().numpy().nbytes for p in params if p.grad is not None)
    for st in opt.state.values():
        held += sum(v.to_local().numpy().nbytes for v in st.values() if hasattr(v, "to_local"))
    return held


def train(mode, steps=4):
    """Train the GPT on this job's ranks under one layout: 'dp', 'zero1', 'zero2', 'zero3', 'zero3+recompute'."""
    import globaltensor as gt
    import globaltensor.nn as nn
    spec = importlib.util.spec_from_file_location("gpt", GPT)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    gt.manual_seed(0)
    model = gpt.GPT(VOCAB, d_model=64, heads=4, layers=2, seq=SEQ)
    mesh = gt.placement.all("cpu")
    model.to_global(mesh, gt.sbp.broadcast)
    if mode.startswith("zero3"):
        for block in model.blocks.layers:
            gt.distributed.fully_shard(block)
        gt.distributed.fully_shard(model)
    if mode.endswith("recompute"):  # keep each block's input, not its activations; re-run it in backward
        for block in model.blocks.layers:
            block.forward = (lambda f: lambda *a, **k: gt.utils.checkpoint(f, *a, use_reentrant=False, **k))(block.forward)
    opt = gt.optim.AdamW(model.parameters(), lr=1e-3)
    if mode in ("zero1", "zero2"):
        gt.zero.attach(opt, int(mode[-1]))
    rng = np.random.default_rng(0)
    losses, held = [], 0
    for _ in range(steps):
        x = rng.integers(0, VOCAB, (BATCH, SEQ))
        # the same whole batch on every rank, then split: each rank keeps its rows
        x, y = (gt.tensor(a).to_global(mesh, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
                for a in (x, np.roll(x, -1, axis=1)))
        loss = nn.functional.cross_entropy(model(x).reshape(BATCH * SEQ, VOCAB), y.reshape(BATCH * SEQ))
        loss.backward()
        opt.step()
        held = max(held, state_bytes(model, opt))  # after the step: gradients and states both alive
        opt.zero_grad()
        losses.append(loss.item())
    return losses, held


# %% [markdown]
# ## Same losses, a fraction of the state
#
# Each mode runs in a fresh 2-rank job. The losses are plain DP's (the update is element-wise, so
# it does not care which rank updates which rows); the model state a rank holds shrinks stage by
# stage, to about half (1/N) under ZeRO-3.

# %%
results = {mode: dist.spawn(train, args=(mode,), nprocs=2)[0]
           for mode in ("dp", "zero1", "zero2", "zero3", "zero3+recompute")}
dp_losses, dp_bytes = results["dp"]
for mode, (losses, held) in results.items():
    print(f"{mode:16} losses {np.round(losses, 5)}  state per rank {held / 2**20:5.2f} MiB ({held / dp_bytes:.2f} of DP)")
    assert np.allclose(losses, dp_losses, rtol=1e-5), mode
assert results["zero1"][1] < dp_bytes and results["zero2"][1] < results["zero1"][1]
assert results["zero3"][1] < 0.6 * dp_bytes

# %% [markdown]
# ## A budget DP cannot meet
#
# Say each rank may hold 60% of what data parallelism needs for its model state. DP does not fit;
# ZeRO-3 with recompute does, and trains to the same losses.

# %%
budget = 0.6 * dp_bytes
for mode in ("dp", "zero3+recompute"):
    held = results[mode][1]
    print(f"{mode:16} {held / 2**20:6.2f} MiB against a budget of {budget / 2**20:.2f} MiB:",
          "fits" if held <= budget else "does not fit")
assert dp_bytes > budget >= results["zero3+recompute"][1]

# %% [markdown]
# ## Mixed precision
#
# `gt.autocast(dtype=gt.bfloat16)` runs the ops on its lists (matmul, linear, conv) in bfloat16
# and keeps reductions and losses in float32; the parameters stay float32 (the master weights).
# `gt.amp.GradScaler` scales the loss and skips a step whose gradients hold an inf or a nan, on
# every rank alike (one all-reduce a step agrees on it).

# %%
def train_amp(steps=3):
    import globaltensor as gt
    import globaltensor.nn as nn
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    mesh = gt.placement.all("cpu")
    model.to_global(mesh, gt.sbp.broadcast)
    opt, scaler = gt.optim.SGD(model.parameters(), lr=0.1), gt.amp.GradScaler()
    rng, out = np.random.default_rng(0), []
    for _ in range(steps):
        x, y = (gt.tensor(rng.standard_normal(s).astype(np.float32)).to_global(mesh, gt.sbp.broadcast)
                .to_global(sbp=gt.sbp.split(0)) for s in ((8, 16), (8, 4)))
        with gt.autocast(device_type="cpu", dtype=gt.bfloat16):
            hidden = model[0](x)
            loss = nn.functional.mse_loss(model[2](model[1](hidden)).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        out.append((str(hidden.dtype), str(model[0].weight.dtype), round(loss.item(), 4)))
    return out


for row in dist.spawn(train_amp, nprocs=2)[0]:
    print(row)

# %% [markdown]
# What else: `docs/big_models.md` has each face's spelling, gradient merge
# (`gt.optim.GradientMerge`, `graph.config.set_gradient_accumulation_steps`), Paddle's
# `Strategy.pipeline`, sharded checkpoints that reload under another stage or number of ranks,
# and `benchmarks/bench_sharding.py`, which measures peak memory and step time of DP, ZeRO-1/2/3
# and PyTorch's FSDP2 side by side.
