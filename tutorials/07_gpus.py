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
# copies first and boxes on the cpu side. Only local copies cross the PCIe bus.

# %%
def moves():
    cpu, gpu = gt.placement("cpu", [0, 1]), gt.placement("cuda", [0, 1])
    x = gt.arange(8, dtype="float32", placement=cpu, sbp=gt.sbp.split(0))
    y = x.to_global(placement=gpu, sbp=gt.sbp.broadcast)  # cpu -> cuda, and S(0) -> B
    with gt.debug.count_collectives() as counted:
        z = (y * 2).to_global(sbp=gt.sbp.partial_sum).to_global(sbp=gt.sbp.broadcast)  # P -> B on the GPUs
    back = z.to_global(placement=cpu)  # and back to the host
    return str(y.placement), dict(counted), back.numpy().tolist()


print(dist.spawn(moves, nprocs=2, env=ENV)[0])

# %% [markdown]
# ## The same training on cpu and on cuda
#
# A data-parallel MLP: the parameters are broadcast, the batch split. On GPUs the matmuls run
# through cuBLASLt (the bias added in the same call), and a broadcast parameter's partial
# gradient is summed by the CUDA IPC all-reduce, which works for ranks sharing one GPU too.

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


on_cpu = dist.spawn(train, args=("cpu",), nprocs=2)[0]
on_cuda = dist.spawn(train, args=("cuda",), nprocs=2, env=ENV)[0]
print("cpu :", on_cpu)
print("cuda:", on_cuda)
assert np.allclose(on_cpu, on_cuda, rtol=1e-4)  # GPU kernels sum in another order: close, not equal bits
