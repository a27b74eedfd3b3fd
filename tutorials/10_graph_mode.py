# %% [markdown]
# # 10 · Graph mode
#
# Eager mode decides every op when it runs it: Python picks the SBP signature, boxes the
# inputs, runs the kernel and records the op for backward, a few microseconds each time. A
# training step repeats the same ops with the same shapes and layouts every iteration, so
# graph mode decides them once. Subclass `gt.nn.Graph` (OneFlow's `nn.Graph`), write the
# step in `build()`, and call the graph:
#
# * the first call with an input signature (shapes, dtypes, placements, SBPs) runs the step
#   eagerly while recording every kernel, every boxing step, the backward's ops and the
#   optimizer's update (`add_optimizer`);
# * planning passes then look at the step as a whole: conversions that follow each other are
#   fused (P→B then a split becomes one reduce_scatter), the gradients' all_reduces are packed
#   into buckets started as soon as their gradients are final, dead ops are dropped and each
#   buffer is freed after its last use (an element-wise op writes into a dead buffer);
# * later calls replay the program: one generated Python function of prepared calls, with no
#   dispatch, no decision lookup and no autograd tape. Parameters and optimizer state are
#   updated in place, and the results are the eager step's, bit for bit.
#
# `gt.jit.trace(fn)` does the same for a plain function of tensors.

# %%
import os
import time

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

B, S0 = gt.sbp.broadcast, gt.sbp.split(0)


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(20, 16)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)  # each call also runs opt.step() and clears the gradients

    def build(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss


def train(graph, steps=5):
    """Data-parallel training of the ToyModel on every rank of the job, eagerly or as a graph."""
    gt.manual_seed(0)
    placement = gt.placement("cpu", list(range(gt.env.get_world_size())))
    model = ToyModel().to_global(placement, B)
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = TrainGraph(model, opt) if graph else None
    losses = []
    for _ in range(steps):
        x = gt.randn(40, 10, placement=placement, sbp=S0)
        y = gt.randn(40, 16, placement=placement, sbp=S0)
        if graph:
            loss = step(x, y)
        else:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(loss.item())  # outside the graph: reading a value is fine here
    return losses


eager = dist.spawn(train, args=(False,), nprocs=2)[0]
graph = dist.spawn(train, args=(True,), nprocs=2)[0]
print("eager:", eager)
print("graph:", graph)
assert graph == eager  # the same floats, not just close

# %% [markdown]
# ## Reading the program
#
# `print(g)` (or `g.program()`) shows the serial program: global ops with their global shapes
# and SBPs, each boxing step with the collectives it runs. `g.program(rank=r)` shows rank r's
# program: the pieces' shapes, which buffer each element-wise op writes into, where each
# register is freed, and the peak memory of a replay. Below, the data-parallel step: the
# gradients of the four parameters come out `partial_sum` and go to the optimizer through
# one bucket, `all_reduce_start` right after the last gradient is computed and
# `all_reduce_wait` before the first `.grad` is set.

# %%
def show_program():
    gt.manual_seed(0)
    placement = gt.placement("cpu", [0, 1])
    model = ToyModel().to_global(placement, B)
    g = TrainGraph(model, gt.optim.SGD(model.parameters(), lr=0.05))
    g(gt.randn(40, 10, placement=placement, sbp=S0), gt.randn(40, 16, placement=placement, sbp=S0))
    return repr(g), g.program(rank=1)


serial, rank1 = dist.spawn(show_program, nprocs=2)[0]
print(serial)
print()
print(rank1)
assert "all_reduce_start" in serial and "SGD.step()" in serial

# %% [markdown]
# ## How much faster
#
# The ToyModel is small: eager mode's time goes to deciding ops, not to computing them, and
# that is what a replay no longer does. (Timings on a shared 2-core machine vary from run to
# run; `benchmarks/bench_graph.py` measures properly, in rounds.)

# %%
def steps_per_second(graph, iters=200):
    gt.manual_seed(0)
    placement = gt.placement("cpu", [0, 1])
    model = ToyModel().to_global(placement, B)
    opt = gt.optim.SGD(model.parameters(), lr=0.01)
    x = gt.randn(40, 10, placement=placement, sbp=S0)
    y = gt.randn(40, 16, placement=placement, sbp=S0)
    g = TrainGraph(model, opt)

    def eager_step():
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    step = (lambda: g(x, y)) if graph else eager_step
    step()
    dist.barrier()
    t = time.perf_counter()
    for _ in range(iters):
        step()
    dist.barrier()
    return iters / (time.perf_counter() - t)


eager_rate = dist.spawn(steps_per_second, args=(False,), nprocs=2)[0]
graph_rate = dist.spawn(steps_per_second, args=(True,), nprocs=2)[0]
print(f"eager {eager_rate:.0f} steps/s, graph {graph_rate:.0f} steps/s: {graph_rate / eager_rate:.1f}x")

# %% [markdown]
# ## A new signature captures again, and says why
#
# Programs are kept per input signature. A call with another shape (a last, smaller batch),
# another SBP or another non-tensor argument captures a new program; the graph logs which part
# of the signature changed (logger `globaltensor.graph`, level INFO) and keeps the reasons in
# `g.captures`. Past `g.max_programs` programs (8) it raises with that history instead of
# capturing forever.

# %%
@gt.jit.trace
def scaled(x, factor):
    return (x * factor).sum(0)


scaled(gt.ones(4, 3), 2.0)
scaled(gt.ones(4, 3), 2.0)  # replayed
scaled(gt.ones(6, 3), 2.0)  # a new shape
scaled(gt.ones(6, 3), 0.5)  # a new factor
for i, why in enumerate(scaled.captures):
    print(f"capture {i + 1}: {why}")
assert len(scaled.captures) == 3

# %% [markdown]
# ## What cannot be captured
#
# A replay runs no Python between its ops, so a step may not read a value into Python:
# `item()`, `numpy()`, `bool(x)` (an `if` on a tensor) raise inside a capture, naming the read
# and the op that made the tensor. Return the tensor from `build()` and read it after the call.
# Ops whose output shape depends on the values (`nonzero`, `masked_select`, `unique`) raise too.
# To debug a step, `GLOBALTENSOR_GRAPH=0` runs every graph eagerly, where all of this is allowed.

# %%
@gt.jit.trace
def clipped(x):
    total = x.abs().sum()
    if total.item() > 10:  # a Python branch on a value
        return x / total
    return x


try:
    clipped(gt.randn(8))
except RuntimeError as e:
    print(e)

os.environ["GLOBALTENSOR_GRAPH"] = "0"
print(clipped(gt.ones(20)).numpy()[:3])  # eager: the branch runs in Python
del os.environ["GLOBALTENSOR_GRAPH"]
np.testing.assert_allclose(clipped.fn(gt.ones(20)).numpy(), np.full(20, 0.05, np.float32))
