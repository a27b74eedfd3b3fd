# %% [markdown]
# # 04 · Hybrid parallelism on a 2x2 mesh
#
# Four ranks as a 2x2 mesh: mesh axis 0 for data parallelism (the batch is `split(0)` along it,
# the weights broadcast), mesh axis 1 for tensor parallelism (the weights split along it). Each
# tensor's SBP has one entry per mesh axis.

# %%
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast


def train(steps=4):
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16))
    kwargs = {}
    if gt.env.get_world_size() == 4:
        mesh = gt.placement("cpu", [[0, 1], [2, 3]])
        model.to_global(mesh, (B, B))
        model[0].weight = nn.Parameter(model[0].weight.to_global(sbp=(B, S0)))
        model[0].bias = nn.Parameter(model[0].bias.to_global(sbp=(B, S0)))
        model[2].weight = nn.Parameter(model[2].weight.to_global(sbp=(B, S1)))
        kwargs = {"placement": mesh, "sbp": (S0, B)}
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        x, y = gt.randn(16, 10, **kwargs), gt.randn(16, 16, **kwargs)
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 6))
    layout = gt.debug.layout_text(model[0].weight) if gt.env.get_world_size() == 4 else ""
    return losses, layout


alone = train()[0]
losses, layout = dist.spawn(train, nprocs=4)[0]
print("one process:", alone)
print("2x2 mesh:   ", losses)
assert np.allclose(losses, alone, rtol=1e-5, atol=1e-6)  # to float32 rounding: other summation orders
print(layout)
