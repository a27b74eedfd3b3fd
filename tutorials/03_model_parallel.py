# %% [markdown]
# # 03 · Model parallelism (Megatron style)
#
# Split the first linear layer's weight by output features (`split(0)` of its (out, in)
# weight: column parallel) and the second's by input features (`split(1)`: row parallel). The
# hidden activation stays split, the second layer gives a partial sum, and the loss reduces it:
# the only communication of the forward pass. The losses equal a one-process run's to float32
# rounding (the second layer's sums run in two halves).

# %%
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast


def build():
    gt.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Linear(32, 16))


def tensor_parallel(model, placement):
    model.to_global(placement, B)
    first, last = model[0], model[2]
    first.weight = nn.Parameter(first.weight.to_global(sbp=S0))  # column parallel
    first.bias = nn.Parameter(first.bias.to_global(sbp=S0))
    last.weight = nn.Parameter(last.weight.to_global(sbp=S1))    # row parallel
    return model


def train(steps=4):
    model = build()
    kwargs = {}
    if gt.env.get_world_size() > 1:
        placement = gt.placement.all("cpu")
        tensor_parallel(model, placement)
        kwargs = {"placement": placement, "sbp": B}
    opt = gt.optim.Adam(model.parameters(), lr=0.01)
    losses, layouts = [], None
    for _ in range(steps):
        x, y = gt.randn(12, 10, **kwargs), gt.randn(12, 16, **kwargs)
        hidden = model[1](model[0](x))
        out = model[2](hidden)
        layouts = (str(hidden.sbp[0]) if hidden.is_global else "local", str(out.sbp[0]) if out.is_global else "local")
        loss = nn.MSELoss()(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 6))
    return losses, layouts


alone = train()
losses, (hidden_sbp, out_sbp) = dist.spawn(train, nprocs=2)[0]
print("one process:", alone)
print("two ranks:  ", losses, f"(hidden activation {hidden_sbp}, output {out_sbp})")
assert np.allclose(losses, alone[0], rtol=1e-5, atol=1e-6) and (hidden_sbp, out_sbp) == ("S(1)", "P")


# %% [markdown]
# A table can be split by rows too: `nn.Embedding` with its weight `split(0)` looks up on each
# rank the indices that fall in its rows and returns a partial result (the model-parallel
# embedding), with no communication until the value is needed.

# %%
def embed():
    placement = gt.placement.all("cpu")
    gt.manual_seed(0)
    table = nn.Embedding(100, 8).to_global(placement, B)
    table.weight = nn.Parameter(table.weight.to_global(sbp=S0))
    ids = gt.tensor([[1, 50, 99]], placement=placement, sbp=B)
    with gt.debug.count_collectives() as c:
        out = table(ids)
    return str(out.sbp[0]), dict(c), out.numpy().shape


print(dist.spawn(embed, nprocs=2)[0])
