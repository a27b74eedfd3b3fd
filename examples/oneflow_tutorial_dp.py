"""Data parallelism as in the OneFlow distributed tutorial; only the import line differs.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/oneflow_tutorial_dp.py
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/oneflow_tutorial_dp.py cuda

The second line runs it on GPUs, as the tutorial does (two ranks may share one GPU).
"""
import sys

import globaltensor as flow
import globaltensor.nn as nn
import globaltensor.optim as optim

PLACEMENT = flow.placement(sys.argv[1] if len(sys.argv) > 1 else "cpu", [0, 1])
S0 = flow.sbp.split(0)
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
model.to_global(placement=PLACEMENT, sbp=B)  # the parameters are broadcast: data parallelism

loss_fn = nn.MSELoss()
optimizer = optim.SGD(model.parameters(), lr=0.001)

for step in range(10):
    x = flow.randn(20, 10, placement=PLACEMENT, sbp=S0)  # the batch is split over the ranks
    labels = flow.randn(20, 16, placement=PLACEMENT, sbp=S0)
    outputs = model(x)
    loss = loss_fn(outputs, labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    value = loss.item()  # collective on a global tensor: every rank calls it
    if flow.env.get_rank() == 0:
        print(f"step {step} loss {value:.6f}")

flow.save(model.state_dict(), "./toy_model_dp", global_dst_rank=0)
state = flow.load("./toy_model_dp", global_src_rank=0)
model.load_state_dict(state)
print(f"rank {flow.env.get_rank()}: reloaded {len(state)} tensors")
