# %% [markdown]
# # 07 · GPUs
#
# `gt.placement("cuda", ranks)` keeps each rank's piece in GPU memory (a cupy array). Rank r
# uses GPU `LOCAL_RANK` (counted among the GPUs `CUDA_VISIBLE_DEVICES` leaves), and several
# ranks may share one GPU. The rest is as on cpu: the same ops, SBP rules, boxing and autograd,
# and moving between cpu and cuda is one more boxing step,
# `x.to_global(placement=gt.placement("cuda", ...))`.
#
# Install the GPU extras with `pip install -e ".[cuda13]"` (cupy and NCCL for CUDA 13). This
# notebook also runs on a machine without a GPU: it then sets `GLOBALTENSOR_CUDA_SIMULATE=1`,
# which keeps the pieces in host memory behind cupy's API. That mode is for trying scripts and
# for tests, not for speed.

# %%
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist
from globaltensor.backends import cuda

ENV = {} if cuda.is_available() else {"GLOBALTENSOR_CUDA_SIMULATE": "1"}
print("a GPU is here" if cuda.is_available() else "no GPU here: cuda placements are simulated")

# %% [markdown]
# ## Moves between devices
#
# cpu -> cuda boxes on the cpu side and then copies each rank's piece to its GPU; cuda -> cpu
# copies first and boxes on the cpu side. Only local copies cross the PCIe bus. Checked: the
# pieces of `y` are cuda arrays, the P -> B step is one all_reduce (the B -> P before it is
# local), and the value that comes back is numpy's `2 * arange(8)`, exactly.

# %%
def moves():
    cpu, gpu = gt.placement("cpu", [0, 1]), gt.placement("cuda", [0, 1])
    x = gt.arange(8, dtype="float32", placement=cpu, sbp=gt.sbp.split(0))
    y = x.to_global(placement=gpu, sbp=gt.sbp.broadcast)  # cpu -> cuda, and S(0) -> B
    assert y.to_local().is_cuda and not x.to_local().is_cuda
    with gt.debug.count_collectives() as counted:
        z = (y * 2).to_global(sbp=gt.sbp.partial_sum).to_global(sbp=gt.sbp.broadcast)  # P -> B on the GPUs
    back = z.to_global(placement=cpu)  # and back to the host
    return str(y.placement), dict(counted), back.numpy().tolist()


placement_text, counted, back = dist.spawn(moves, nprocs=2, env=ENV)[0]
print((placement_text, counted, back))
assert placement_text == 'gt.placement(type="cuda", ranks=[0, 1])' and counted == {"all_reduce": 1}
assert back == (2 * np.arange(8, dtype=np.float32)).tolist()

# %% [markdown]
# ## The same training on cpu and on cuda
#
# A data-parallel MLP: the parameters are broadcast, the batch split. On GPUs the matmuls run
# through cuBLASLt (the bias added in the same call), and a broadcast parameter's partial
# gradient is summed by the CUDA IPC all-reduce, which works for ranks sharing one GPU too.
# Checked: both runs give the losses of the same five SGD steps written out in numpy (float64,
# from the same initial parameters and data: after `gt.manual_seed(0)` one process draws the
# values the two ranks draw), to float32 rounding.

# %%
def train(kind, steps=5):
    placement = gt.placement(kind, [0, 1])
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to_global(placement, gt.sbp.broadcast)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    x = gt.randn(64, 8, placement=placement, sbp=gt.sbp.split(0))
    y = x.sum(1, keepdim=True)
    losses = []
    for _ in range(steps):
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 6))
    return losses


def train_in_numpy(steps=5):
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))  # the same draws, in one process
    w1, b1, w2, b2 = (p.numpy().astype(np.float64) for p in model.parameters())
    x = gt.randn(64, 8).numpy().astype(np.float64)
    y = x.sum(1, keepdims=True)
    losses = []
    for _ in range(steps):
        h = np.maximum(x @ w1.T + b1, 0)
        error = h @ w2.T + b2 - y
        losses.append((error ** 2).mean())
        d_out = 2 * error / error.size  # d loss / d output
        d_h = (d_out @ w2) * (h > 0)
        w1, b1 = w1 - 0.1 * d_h.T @ x, b1 - 0.1 * d_h.sum(0)
        w2, b2 = w2 - 0.1 * d_out.T @ h, b2 - 0.1 * d_out.sum(0)
    return losses


on_cpu = dist.spawn(train, args=("cpu",), nprocs=2)[0]
on_cuda = dist.spawn(train, args=("cuda",), nprocs=2, env=ENV)[0]
by_hand = train_in_numpy()
print("cpu  :", on_cpu)
print("cuda :", on_cuda)
print("numpy:", np.round(by_hand, 6).tolist())
assert np.allclose(on_cpu, by_hand, rtol=1e-5, atol=1e-6)
assert np.allclose(on_cuda, by_hand, rtol=1e-4)  # GPU kernels sum in another order: close, not equal bits
assert np.allclose(on_cpu, on_cuda, rtol=1e-4)
