"""Two-process training run: a small MLP learns a synthetic regression, data-parallel.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/train.py
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/train.py cuda   # on GPUs

The model's parameters are broadcast, each batch is split over the ranks (each rank loads
only its rows), gradients are reduced in one bucket per step. Run it with plain
`python examples/train.py` and the losses agree (to float32 rounding: the ranks sum in another
order).
"""
import sys

import numpy as np
from tqdm import tqdm

import globaltensor as gt
import globaltensor.nn as nn

rank, world = gt.env.get_rank(), gt.env.get_world_size()
placement = gt.placement.all(sys.argv[1] if len(sys.argv) > 1 else "cpu")

rng = np.random.default_rng(0)  # the dataset, identical on every rank
features = rng.standard_normal((2048, 16)).astype(np.float32)
targets = np.tanh(features @ rng.standard_normal((16, 4))).astype(np.float32)
loader = gt.utils.data.DataLoader(gt.utils.data.TensorDataset(features, targets), batch_size=128, shuffle=True,
                                  placement=placement, sbp=gt.sbp.split(0))

gt.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4)).to_global(placement, gt.sbp.broadcast)
optimizer = gt.optim.Adam(model.parameters(), lr=3e-3)
loss_fn = nn.MSELoss()

for epoch in range(6):
    total = 0.0
    for x, y in tqdm(loader, desc=f"epoch {epoch}", disable=rank != 0, leave=False):
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total += loss.item()  # collective: every rank reads the loss
    if rank == 0:
        print(f"epoch {epoch}: mean loss {total / len(loader):.5f}  ({world} ranks)")
