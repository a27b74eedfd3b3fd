# %% [markdown]
# # 02 · Data parallelism
#
# Broadcast the parameters, split the batch: `model.to_global(placement, broadcast)` and
# inputs with `split(0)`. Each rank computes its rows; a broadcast parameter's gradient comes
# out partial and is summed over the ranks, in buckets (one all_reduce per 25 MB by default).
# The losses equal a one-process run's to float32 rounding (the ranks add their rows' sums in
# another order than one process does).

# %%
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

S0, B = gt.sbp.split(0), gt.sbp.broadcast


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(20, 16)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def train(steps=5):
    """The same script for one process and for several (the placement covers every rank)."""
    gt.manual_seed(0)
    model = ToyModel()
    kwargs = {}
    if gt.env.get_world_size() > 1:
        placement = gt.placement.all("cpu")
        model.to_global(placement, B)
        kwargs = {"placement": placement, "sbp": S0}
    opt = gt.optim.SGD(model.parameters(), lr=0.05)
    losses, counts = [], None
    for step in range(steps):
        x, y = gt.randn(40, 10, **kwargs), gt.randn(40, 16, **kwargs)
        with gt.debug.count_collectives() as c:
            loss = nn.MSELoss()(model(x), y)
            loss.backward()
        counts = dict(c)
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 6))
    return losses, counts


alone, (two_ranks, counts) = train(), dist.spawn(train, nprocs=2)[0]
print("one process:", alone)
print("two ranks:  ", (two_ranks, counts))
assert np.allclose(two_ranks, alone[0], rtol=1e-5, atol=1e-6) and counts == {"all_reduce": 1}


# %% [markdown]
# ## Feeding a global batch
#
# `gt.utils.data.DataLoader(..., placement=, sbp=split(0))` gives each batch as global tensors;
# every rank reads only its own rows, in a shuffle order that does not depend on the number of
# ranks.

# %%
def batches():
    data = gt.utils.data.TensorDataset(np.arange(20.0).reshape(10, 2))
    gt.manual_seed(1)
    loader = gt.utils.data.DataLoader(data, batch_size=4, shuffle=True, placement=gt.placement.all("cpu"), sbp=S0)
    return [(b.to_local().numpy()[:, 0].tolist(), b.numpy()[:, 0].tolist()) for (b,) in loader]


for rank, result in enumerate(dist.spawn(batches, nprocs=2)):
    print(f"rank {rank}: (its rows, the whole batch) per step: {result}")


# %% [markdown]
# ## Buckets, overlap, and accumulating without communicating
#
# The partial gradients are not reduced one parameter at a time: backward gathers them into
# buckets of about 25 MB (`gt.distributed.set_bucket_size(mb)`) in the order they are
# finished, and starts each bucket's all_reduce on a worker thread as soon as its last gradient
# is done, while backward computes the earlier layers. Every rank starts the buckets in the
# same order. A bucket is one shared-memory buffer kept from step to step: the backward matmul
# writes each weight's gradient straight into its place there, and the all_reduce runs in
# place, so `.grad` is a view of the reduced bucket (it is never overwritten while you hold it:
# the next backward then takes a fresh buffer).
#
# Inside `model.no_sync()` backward keeps the partial gradients; the next backward outside it
# reduces everything accumulated at once. Users with local tensors can wrap a module in
# `gt.distributed.DataParallel(module, comm_buffer_size=25, last_comm_buffer_size=1,
# find_unused_parameters=False)` instead: the same buckets, with gradients averaged as in
# PyTorch's DDP or Paddle's DataParallel. A parameter that a rank did not use contributes zeros;
# `find_unused_parameters=True` finds such parameters when backward starts, so their buckets
# do not wait until the end.

# %%
def accumulate():
    placement = gt.placement.all("cpu")
    model = ToyModel().to_global(placement, B)
    x, y = gt.randn(8, 10, placement=placement, sbp=S0), gt.randn(8, 16, placement=placement, sbp=S0)
    with model.no_sync(), gt.debug.count_collectives() as quiet:
        nn.MSELoss()(model(x), y).backward()
        nn.MSELoss()(model(x), y).backward()
    with gt.debug.count_collectives() as synced:
        nn.MSELoss()(model(x), y).backward()
    return dict(quiet), dict(synced)


print(dist.spawn(accumulate, nprocs=2)[0])
