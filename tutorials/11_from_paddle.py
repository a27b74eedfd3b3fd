# %% [markdown]
# # 11 · Coming from Paddle
#
# Paddle code runs on globaltensor with its imports changed:
#
# | Paddle | globaltensor |
# |---|---|
# | `import paddle` | `import globaltensor.paddle as paddle` |
# | `import paddle.distributed as dist` | `import globaltensor.paddle.distributed as dist` |
# | `from paddle import nn` | `from globaltensor.paddle import nn` |
# | `from paddle.distributed import fleet` | `from globaltensor.paddle.distributed import fleet` |
# | `python -m paddle.distributed.launch --gpus 0,1 train.py` | `python -m globaltensor.paddle.distributed.launch --gpus 0,1 train.py` |
#
# Underneath it is the same runtime as the rest of these tutorials, and the names map onto it:
#
# | Paddle | what it is here |
# |---|---|
# | `dist.ProcessMesh([[0, 1], [2, 3]], dim_names=["dp", "mp"])` | `gt.placement(kind, [[0, 1], [2, 3]])` with names |
# | `[dist.Shard(0), dist.Replicate()]` (one per mesh dim) | the SBP `(split(0), broadcast)` |
# | `dist.Partial()` | `partial_sum` |
# | `dist.shard_tensor(x, mesh, placements)` (x: the full value) | `x.to_global(mesh, B...).to_global(sbp=...)` |
# | `dist.reshard(x, mesh, placements)` | `x.to_global(mesh, sbp)` |
# | `dist.to_static(layer, loader, loss, opt)` → `DistModel` | one `gt.nn.Graph` per mode (tutorial 10) |
# | `paddle.DataParallel(layer)` | `gt.distributed.DataParallel` (gradients averaged in buckets) |
# | `x.stop_gradient = False` | `x.requires_grad = True` |
# | `nn.Linear(in, out).weight`, shape `[in, out]` | the same layout (`y = x @ W + b`) |
#
# Where Paddle and PyTorch give one name two meanings, `globaltensor.paddle` has Paddle's:
# `paddle.split(x, 2)` makes two sections, `paddle.max(x, axis=1)` returns the values,
# `paddle.transpose(x, perm)` permutes, factories take the shape first. The full list, and every
# name of Paddle's API index with its status, is in `docs/paddle.md`.

# %%
import numpy as np

import globaltensor.paddle as paddle
import globaltensor.paddle.distributed as dist
from globaltensor.paddle import nn

x = paddle.to_tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
print([tuple(p.shape) for p in paddle.split(x, 2, axis=1)])  # two sections of 2 columns
print(paddle.max(x, axis=1).numpy())                           # values only
print(tuple(paddle.transpose(x, [1, 0]).shape))
print(x.stop_gradient, nn.Linear(4, 2).weight.shape)           # True, [in, out]

# %% [markdown]
# ## `dist.to_static`: the seed's DemoNet, tensor-parallel
#
# The first Linear's weight is split by its output features (`Shard(1)` of an `[in, out]`
# weight), the second's by its input features (`Shard(0)`): Megatron's column/row split, so the
# second matmul gives partial sums that the loss needs whole. The biases stay dense: assigning a
# distributed weight replicates the layer's other parameters on its mesh. `to_static` captures
# one program per mode on its first call; `dist_main_program()` prints this rank's, with the
# all_reduce that sums the partial result.

# %%
def demo(steps=4):
    paddle.seed(0)
    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])

    class DemoNet(nn.Layer):
        def __init__(self):
            super().__init__()
            self.linear_0, self.linear_1, self.relu = nn.Linear(16, 16), nn.Linear(16, 8), nn.ReLU()
            self.linear_0.weight = dist.shard_tensor(self.linear_0.weight, mesh, [dist.Shard(1)], stop_gradient=False)
            self.linear_1.weight = dist.shard_tensor(self.linear_1.weight, mesh, [dist.Shard(0)], stop_gradient=False)

        def forward(self, x):
            return self.linear_1(self.relu(self.linear_0(x)))

    layer = DemoNet()
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    model = dist.to_static(layer, None, nn.MSELoss(), opt)
    rng = np.random.default_rng(0)
    image = dist.shard_tensor(paddle.to_tensor(rng.random((4, 16), np.float32)), mesh, [dist.Replicate()])
    label = dist.shard_tensor(paddle.to_tensor(rng.random((4, 8), np.float32)), mesh, [dist.Replicate()])
    losses = [float(model(image, label).numpy()) for _ in range(steps)]
    model.predict()
    out = model(image)["out0"]
    return losses, tuple(out.shape), model.dist_main_program("train")


losses, out_shape, program = dist.spawn(demo, nprocs=2)[0]
print("losses", np.round(losses, 6), "predict out0", out_shape)
print(program)
assert losses[-1] < losses[0] and "all_reduce" in program

# %% [markdown]
# ## `paddle.DataParallel`: every rank its own batch
#
# Each rank runs the layer on its own data; backward averages the gradients over the ranks, so
# the update is the one of the whole batch. Here both ranks draw different batches, and after a
# step their parameters are still equal.

# %%
def data_parallel():
    dist.init_parallel_env()
    paddle.seed(1)
    layer = nn.Linear(10, 1)
    dp = paddle.DataParallel(layer)
    opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=dp.parameters())
    rng = np.random.default_rng(dist.get_rank())  # a different batch on each rank
    x, y = paddle.to_tensor(rng.random((8, 10), np.float32)), paddle.to_tensor(rng.random((8, 1), np.float32))
    loss = nn.MSELoss()(dp(x), y)
    loss.backward()
    opt.step()
    opt.clear_grad()
    return float(loss.numpy()), layer.weight.numpy()


(loss0, w0), (loss1, w1) = dist.spawn(data_parallel, nprocs=2)
print("rank losses", round(loss0, 6), round(loss1, 6), "- parameters equal after the step:", np.array_equal(w0, w1))
assert loss0 != loss1 and np.array_equal(w0, w1)
