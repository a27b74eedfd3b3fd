# %% [markdown]
# # 09 · Pipeline parallelism with data or tensor parallelism inside each stage
#
# Four ranks as a 2x2 mesh `[[0, 1], [2, 3]]`: mesh axis 0 for the pipeline stages, mesh axis
# 1 inside each stage. `mesh[i]` is row `i` of the mesh as a 1-D placement: stage 0 lives on
# ranks `[0, 1]`, stage 1 on ranks `[2, 3]`. What happens inside a stage is simply the SBP of
# its parameters and of the batch, as in tutorials 02 to 04:
#
# - data parallel: the parameters broadcast on their row, the batch `split(0)` along mesh axis
#   1, so each rank of a row computes half of each micro-batch;
# - tensor parallel: the first Linear of each stage split by output features, the second by
#   input features (Megatron, tutorial 03), the batch broadcast.
#
# The pipeline moves the batch to the first stage's row and the target to the last stage's
# (a batch laid out `(broadcast, split(0))` on the mesh becomes `split(0)` on the row), and the
# activations from row to row, keeping their layout. Both layouts give the losses of a
# one-process run of the same model to float32 rounding.

# %%
import os
import tempfile

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast


def build():
    gt.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))


def data(batch=12):
    rng = np.random.default_rng(7)
    return rng.standard_normal((batch, 6)).astype(np.float32), rng.standard_normal((batch, 3)).astype(np.float32)


def pipe_for(inside):
    """Two stages on the mesh's rows, data ("dp") or tensor ("tp") parallel inside each; also
    returns the batch's layout on the mesh."""
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    model = build()
    stages = [model[:4], model[4:]]  # Linear ReLU Linear ReLU | Linear ReLU Linear
    for i, stage in enumerate(stages):
        stage.to_global(mesh[i], B)
    if inside == "tp":
        for stage in stages:
            first, second = [m for m in stage if isinstance(m, nn.Linear)]
            first.weight = nn.Parameter(first.weight.to_global(sbp=S0))  # column parallel
            first.bias = nn.Parameter(first.bias.to_global(sbp=S0))
            second.weight = nn.Parameter(second.weight.to_global(sbp=S1))  # row parallel
    pipe = gt.pipeline.Pipeline(stages, schedule="1f1b", micro_batches=4, loss_fn=nn.MSELoss())
    return pipe, mesh, (B, S0 if inside == "dp" else B)


def train_alone(steps=4, clip=None):
    model = build()
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    x, y = (gt.tensor(a) for a in data())
    losses, norms = [], []
    for _ in range(steps):
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        if clip is not None:
            norms.append(nn.utils.clip_grad_norm_(model.parameters(), clip).item())
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, norms, model


def train_pipelined(inside, steps=4, clip=None, path=None):
    pipe, mesh, sbp = pipe_for(inside)
    params = [p for stage in pipe.stages for p in stage.parameters()]  # on mesh[0] and mesh[1]
    opt = gt.optim.SGD(params, lr=0.1)
    x, y = (gt.tensor(a).to_global(mesh, (B, B)).to_global(sbp=sbp) for a in data())
    losses, norms = [], []
    for _ in range(steps):
        loss = pipe.step(x, target=y)
        if clip is not None:
            norms.append(nn.utils.clip_grad_norm_(params, clip).item())
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    if path is not None:
        gt.save(pipe.state_dict(), path, global_dst_rank=0)  # the model's own names: "0.weight", ..., "6.bias"
    layouts = {name: str(p.placement.rank_list()) + " " + ",".join(map(str, p.sbp))
               for name, p in pipe.state_dict().items() if name.endswith("weight")}
    out = pipe(x).numpy()  # forward only: the trained model's output for the whole batch
    return losses, norms, layouts, {k: v.numpy() for k, v in pipe.state_dict().items()}, out


alone, _, alone_model = train_alone()
alone_out = alone_model(gt.tensor(data()[0])).numpy()
print("one process:   ", np.round(alone, 6))
for inside in ("dp", "tp"):
    losses, _, layouts, _, out = dist.spawn(train_pipelined, args=(inside,), nprocs=4)[0]
    print(f"2 stages x 2 {inside}:", np.round(losses, 6), layouts)
    assert np.allclose(losses, alone, rtol=1e-5, atol=1e-6)  # to float32 rounding
    assert np.allclose(out, alone_out, rtol=1e-4, atol=1e-6)  # pipe(x) after training
    if inside == "dp":
        assert layouts["0.weight"] == "[0, 1] B" and layouts["6.weight"] == "[2, 3] B"
    else:
        assert layouts["0.weight"] == "[0, 1] S(0)" and layouts["6.weight"] == "[2, 3] S(1)"

# %% [markdown]
# ## Checkpoints and gradient clipping across stages
#
# `pipe.state_dict()` names each parameter as the whole model does, so `gt.save` of it writes
# the same checkpoint as the unpipelined model would, and it loads into any other layout:
# here into a plain one-process model, with exactly the values the pipeline had.
#
# `nn.utils.clip_grad_norm_` takes the parameters of every stage at once, although they live
# on two placements: each placement's sum of squares moves once to a placement holding every
# rank involved, and the total norm (the one-process run's, on every rank) scales every gradient. Its `.item()`, like the loss's, is
# collective: every rank calls it.

# %%
folder = tempfile.mkdtemp()
path = os.path.join(folder, "pipeline")
alone_losses, alone_norms, alone_model = train_alone(steps=3, clip=0.5)
losses, norms, _, saved, _ = dist.spawn(train_pipelined, args=("dp", 3, 0.5, path), nprocs=4)[0]
print("norms, one process:", np.round(alone_norms, 6))
print("norms, 2x2 pipeline:", np.round(norms, 6))
assert np.allclose(norms, alone_norms, rtol=1e-5) and np.allclose(losses, alone_losses, rtol=1e-5, atol=1e-6)
assert alone_norms[0] > 0.5  # so the gradients were clipped

plain = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                      nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))  # other initial values
plain.load_state_dict(gt.load(path))
loaded = {k: v.numpy() for k, v in plain.state_dict().items()}
print("checkpoint keys:", list(loaded))
assert list(loaded) == list(saved) and all(np.array_equal(loaded[k], saved[k]) for k in saved)
assert all(np.allclose(loaded[k], v.numpy(), rtol=1e-5, atol=1e-6) for k, v in alone_model.state_dict().items())
