"""Tensor parallelism Megatron-style on the tutorial's ToyModel: the same model, data and seed as
oneflow_tutorial_dp.py, with net1 split by output features and net2 by input features.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/megatron_tp.py
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/megatron_tp.py cuda

The second line runs it on GPUs (two ranks may share one GPU). Its losses equal the data-parallel
script's to float32 rounding (the sums run in another order).
"""
import sys

import globaltensor as flow
import globaltensor.nn as nn
import globaltensor.optim as optim

PLACEMENT = flow.placement(sys.argv[1] if len(sys.argv) > 1 else "cpu", [0, 1])
S0 = flow.sbp.split(0)
S1 = flow.sbp.split(1)
B = flow.sbp.broadcast


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(20, 16)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


model = ToyModel()
model.to_global(placement=PLACEMENT, sbp=B)
# Megatron style: net1 is split by output features (columns of x @ W.T), net2 by input
# features, so the hidden activation stays split and net2 gives a partial sum.
model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=S0))
model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=S0))
model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=S1))

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

flow.save(model.state_dict(), "./toy_model_tp", global_dst_rank=0)
state = flow.load("./toy_model_tp", global_src_rank=0)
model.load_state_dict(state)
print(f"rank {flow.env.get_rank()}: reloaded {len(state)} tensors, net1.weight is {model.net1.weight.sbp}")
