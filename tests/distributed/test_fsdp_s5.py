"""fully_shard (ZeRO-3) on 2 ranks: a step's peak of live array bytes under the stage-3 bound, and
torch 2.13's fully_shard surface (mp_policy, offload_policy, FSDPModule's methods) against torch FSDP2."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

WIDTH, UNITS, BATCH = 256, 6, 8  # per rank: a unit's weight 256 KB, its shard 128 KB, an activation 8 KB


def _peak_of_a_step():
    """(P: the model's bytes, U: a unit's, bytes at rest before step 2, peak of step 2's forward and
    backward, peak of its optimizer step), in arena bytes: every array of 4 KB or more (deterministic)."""
    gt.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(UNITS)])
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    whole = sum(p._local.nbytes for p in model.parameters())
    unit = sum(p._local.nbytes for p in model[0].parameters())
    for block in model:
        gt.distributed.fully_shard(block)
    gt.distributed.fully_shard(model)
    opt = gt.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):  # the first step makes AdamW's states
        x = gt.randn(2 * BATCH, WIDTH, placement=pl, sbp=gt.sbp.split(0))
        rest = gt.memory_allocated()
        gt.reset_peak_memory_stats()
        loss = model(x).square().mean()
        loss.backward()
        backward = gt.max_memory_allocated()
        gt.reset_peak_memory_stats()
        opt.step()
        opt.zero_grad()
        step = gt.max_memory_allocated()
        del loss
    return whole, unit, rest, backward, step


def test_a_stage3_step_stays_under_the_bound():
    """N ranks, P model bytes, U a unit's bytes, A one activation's: at rest a rank holds its shards
    of the parameters and of AdamW's two states (3P/N) and the batch; forward and backward add the
    gradient shards (P/N), at most two whole units (a unit's gathered parameters with its full
    gradients, or those gradients with their packed copy for the reduce-scatter) and the
    activations (two saved a unit and two by the loss, two gradients in flight). Before: every unit's gathered
    parameters and full gradients lived until the end of backward (3P/N + 2P/N more here)."""
    for whole, unit, rest, backward, step in run_ranks(_peak_of_a_step, 2, timeout=120,
                                                       env={"GLOBALTENSOR_NUMPY_MIN_BYTES": "4096"}):
        act = BATCH * WIDTH * 4
        assert rest <= 3 * whole // 2 + 2 * act, (rest, whole)
        bound = 4 * whole // 2 + 2 * unit + (2 * UNITS + 4) * act
        assert backward <= bound, (backward, bound, whole, unit)
        assert step <= bound, (step, bound)
