"""Model parallelism as in the OneFlow distributed tutorial; only the import line differs (and the
tutorial's class name, ModelParallelLiner, is spelled ModelParallelLinear here).

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/oneflow_tutorial_mp.py
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/oneflow_tutorial_mp.py cuda

Each rank builds its own slice of a layer as a local nn.Linear(in, out // ranks), and
`to_global(placement, split(0))` makes the slices one global layer: a local tensor is this
rank's component, so the global weight is (out, in) and each rank holds out // ranks rows.
The second line runs it on GPUs, as the tutorial does (two ranks may share one GPU).
"""
import sys

import globaltensor as flow
import globaltensor.nn as nn
import globaltensor.optim as optim

PLACEMENT = flow.placement(sys.argv[1] if len(sys.argv) > 1 else "cpu", [0, 1])
B = flow.sbp.broadcast


class ModelParallelLinear(nn.Module):
    def __init__(self, in_features, out_features, placement):
        super(ModelParallelLinear, self).__init__()
        self.linear = nn.Linear(in_features, out_features // placement.ranks.size)
        self.linear.to_global(placement, flow.sbp.split(0))

    def forward(self, x):
        return self.linear(x)


class ToyModel(nn.Module):
    def __init__(self, placement):
        super(ToyModel, self).__init__()
        self.net1 = ModelParallelLinear(10, 20, placement)
        self.relu = nn.ReLU()
        self.net2 = ModelParallelLinear(20, 16, placement)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


model = ToyModel(PLACEMENT)
weight = model.net1.linear.weight
print(f"rank {flow.env.get_rank()}: net1 weight global {tuple(weight.shape)} local {tuple(weight.to_local().shape)}")

loss_fn = nn.MSELoss()
optimizer = optim.SGD(model.parameters(), lr=0.001)

for step in range(10):
    x = flow.randn(20, 10, placement=PLACEMENT, sbp=B)  # every rank sees the whole batch
    labels = flow.randn(20, 16, placement=PLACEMENT, sbp=B)
    outputs = model(x)
    loss = loss_fn(outputs, labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    value = loss.item()  # collective on a global tensor: every rank calls it
    if flow.env.get_rank() == 0:
        print(f"step {step} loss {value:.6f}")

flow.save(model.state_dict(), "./toy_model_mp", global_dst_rank=0)
state = flow.load("./toy_model_mp", global_src_rank=0)
model.load_state_dict(state)
print(f"rank {flow.env.get_rank()}: reloaded {len(state)} tensors, net1 weight is {model.net1.linear.weight.sbp}")
