"""ZeRO on 2 ranks: stage 3 in graph mode (the replayed program starts each unit's all_gather one unit
ahead, at most two units gathered at once, torch's losses), a fully_shard forward that raises, and the
flat buckets of stages 1-2 (updated shards all-gathered, stage 2's gradients reduce-scattered)."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

WIDTH, ROWS, BLOCKS, STEPS = 8, 64, 3, 2  # rows >> width: the dispatcher gathers the weights, not the batch


def _mlp():
    return nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(BLOCKS)])


def _units(instrs):
    """The prefetched gathers of a program by unit (a run of adjacent all_gather waits): for each
    unit, the positions of its starts and the positions of the waits of the unit before it."""
    waits = [i for i, ins in enumerate(instrs) if ins.kind == "wait" and ins.name == "all_gather"]
    start_of = {ins.outs[0]: i for i, ins in enumerate(instrs) if ins.kind == "start" and ins.name == "all_gather"}
    units = []
    for i in waits:
        if units and units[-1][-1] == i - 1:
            units[-1].append(i)
        else:
            units.append([i])
    return [([start_of[instrs[w].ins[0]] for w in unit], unit) for unit in units]


def _most_live(program):
    """The most gathered parameters live at once in a replay (waited and not yet freed, or in flight)."""
    live, most = set(), 0
    for ins in program.instrs:
        if ins.kind == "start" and ins.name == "all_gather":
            live.add(ins.outs[0])
        if ins.kind == "wait" and ins.name == "all_gather":
            live.discard(ins.ins[0])
            live.add(ins.outs[0])
        most = max(most, len(live))
        live -= set(ins.drops)
    return most


def _graph_stage3():
    """3 AdamW steps of a Graph with enable_zero(stage=3): losses, and the replayed program's gathers."""
    gt.manual_seed(0)
    model = _mlp()
    start = [p.numpy().copy() for p in model.parameters()]
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    opt = gt.optim.AdamW(model.parameters(), lr=0.01)

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).square().mean()
            loss.backward()
            return loss

    step = Step()
    step.config.enable_zero(True, stage=3, shard_min_size=1)
    xs = [np.random.default_rng(s).standard_normal((ROWS, WIDTH)).astype(np.float32) for s in range(STEPS)]
    losses = [step(gt.tensor(x).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))).item() for x in xs]
    program = step._cache()["last"]
    units = _units(program.instrs)
    kinds = [(ins.kind, ins.name) for ins in program.instrs]
    return start, xs, losses, program.report["prefetch_gathers"], units, kinds, _most_live(program)


def _torch_losses(start, xs, adamw=True):
    from lazy_torch import torch
    ws = [torch.tensor(a, requires_grad=True) for a in start]
    opt = torch.optim.AdamW(ws, lr=0.01) if adamw else torch.optim.SGD(ws, lr=0.1)
    losses = []
    for x in xs:
        h = torch.tensor(x)
        for i in range(len(ws) // 2):
            h = torch.relu(h @ ws[2 * i].T + ws[2 * i + 1])
        loss = h.square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_graph_stage3_starts_each_units_gather_one_unit_ahead():
    """The captured step's weight all_gathers are split into start and wait; unit k+1's start comes
    right after unit k's wait, before unit k computes; backward gathers a unit again (its forward copy
    was freed) except the last unit's, used on at once; at most two units gathered at once; the
    replays' losses are torch's."""
    for start, xs, losses, report, units, kinds, most in run_ranks(_graph_stage3, 2, timeout=120):
        np.testing.assert_allclose(losses, _torch_losses(start, xs), rtol=1e-5)
        # forward: 3 units of (weight, bias); backward: block 1's weight again (block 0 needs no input
        # gradient, block 2's copy is still live: no other gather is used between)
        assert report == {"gathers": 7, "ahead": 5, "regathered": 1}, report
        assert [len(w) for _, w in units] == [2, 2, 2, 1], units
        starts, waits = units[0]
        assert max(starts) < min(waits)  # the first unit: nothing to overlap with
        for (_, before), (starts, _) in zip(units, units[1:]):
            after = max(before) + 1
            assert all(after <= s for s in starts), (before, starts)
            between = kinds[after:max(starts) + 1]
            assert set(between) <= {("read", k) for _, k in between} | {("start", "all_gather")}, between
        assert most <= 4, most  # two units of (weight, bias)
        assert kinds.count(("start", "all_gather")) == 7


def _raising_then_steps(batches):
    """A fully_shard model whose forward raises (a batch of the wrong width), then SGD steps: losses,
    the forward depth after the failure, the gathers prefetch served in the last step."""
    from globaltensor import fsdp, fsdp_group
    gt.manual_seed(0)
    model = _mlp()
    start = [p.numpy().copy() for p in model.parameters()]
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    for block in model:
        gt.distributed.fully_shard(block)
    gt.distributed.fully_shard(model)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    losses, depth, served = [], None, 0
    for n, x in enumerate(batches):
        if n == 1:
            bad = gt.randn(4, WIDTH + 1, placement=pl, sbp=gt.sbp.split(0))
            with pytest.raises(Exception):
                model(bad)
            depth = fsdp._forwards.depth
        before = fsdp_group.taken[0]
        loss = model(gt.tensor(x).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.item()))
        served = fsdp_group.taken[0] - before
    shards = all(tuple(p.sbp) == (gt.sbp.split(0),) for m in model.modules() for p in m._parameters.values())
    return start, losses, depth, served, shards


def test_a_forward_that_raises_leaves_fsdp_as_it_was():
    """A unit's forward raising (inside the first block, after its gather, within the root's) resets the
    thread's forward depth and puts the shards back; the steps after train as torch (the root keeps
    its PyTorch rule, prefetch serves the next blocks' gathers again)."""
    batches = [np.random.default_rng(s).standard_normal((4, WIDTH)).astype(np.float32) for s in range(3)]
    for start, losses, depth, served, shards in run_ranks(_raising_then_steps, 2, batches, timeout=120):
        assert depth == 0 and shards
        assert served == 2, served
        np.testing.assert_allclose(losses, _torch_losses(start, batches, adamw=False), rtol=1e-5)


def _small_buckets(batches):
    """ZeRO stages 1 and 2 with buckets of ~300 bytes (several a step, started on the worker thread as
    they fill): {stage: (losses, the last step's backward and step collectives)}."""
    from globaltensor import zero, zero_buckets
    zero.GATHER_BUCKET_BYTES = zero_buckets.SHARD_BUCKET_BYTES = 300  # this rank process only
    pl = gt.placement("cpu", [0, 1])
    out = {}
    for stage in (1, 2):
        gt.manual_seed(0)
        model = _mlp()
        start = [p.numpy().copy() for p in model.parameters()]
        model.to_global(pl, gt.sbp.broadcast)
        opt = zero.attach(gt.optim.AdamW(model.parameters(), lr=0.01), stage)
        losses = []
        for x in batches:
            loss = model(gt.tensor(x).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))).square().mean()
            with gt.debug.count_collectives() as backward:
                loss.backward()
            with gt.debug.count_collectives() as step:
                opt.step()
            opt.zero_grad()
            losses.append(float(loss.item()))
        out[stage] = (start, losses, dict(backward), dict(step))
    return out


def test_stage1_2_buckets_give_torchs_values():
    """Stages 1-2 on a 1-D cpu mesh: the updated shards all-gathered in flat buckets (a bucket closes
    at 300 bytes of whole values: 3 parameters here, weights 256 B, biases 32 B), stage 2's gradients
    reduce-scattered in buckets (one a layer: a bucket stays under 300 bytes); torch AdamW's losses on
    the joined batch, step after step (the tiny models of test_zero_stages use one bucket, on this thread)."""
    batches = [np.random.default_rng(s).standard_normal((4, WIDTH)).astype(np.float32) for s in range(3)]
    for got in run_ranks(_small_buckets, 2, batches, timeout=120):
        for stage, (start, losses, backward, step) in got.items():
            np.testing.assert_allclose(losses, _torch_losses(start, batches), rtol=1e-5, err_msg=f"stage {stage}")
            assert step == {"all_gather": 2}, step  # (w0, b0, w1), (b1, w2, b2): each started as it filled
            assert backward == ({"all_reduce": 1} if stage == 1 else {"reduce_scatter": 3}), backward
