"""fully_shard's reshard_after_forward=None, PyTorch FSDP2's default: every unit reshards after forward but the
root, which keeps its gathered parameters for backward (one all_gather fewer); values equal either way."""
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from test_zero_stages import ToyModel


def _step_counts(rule):
    gt.manual_seed(0)
    model = ToyModel()
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    kw = {} if rule == "default" else {"reshard_after_forward": rule}
    gt.distributed.fully_shard(model.net1, **kw)
    gt.distributed.fully_shard(model, **kw)  # the root owns net2's parameters
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    losses, backward_counts = [], []
    for _ in range(2):
        x = gt.randn(12, 10, placement=pl, sbp=gt.sbp.split(0))
        y = gt.randn(12, 16, placement=pl, sbp=gt.sbp.split(0))
        loss = nn.MSELoss()(model(x), y)
        with gt.debug.count_collectives() as backward:
            loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        backward_counts.append(dict(backward).get("all_gather", 0))
    return losses, backward_counts


def _all_rules():
    return {rule: _step_counts(rule) for rule in ("default", True, False)}


def test_none_reshards_every_unit_but_the_root():
    for got in run_ranks(_all_rules, 2, timeout=180):
        assert got["default"][1] == [1, 1]  # net1 gathered again for its backward; the root kept its own
        assert got[True][1] == [2, 2] and got[False][1] == [0, 0]
        assert got["default"][0] == got[True][0] == got[False][0]


def test_an_int_or_another_type_is_refused_before_any_collective():
    with pytest.raises(NotImplementedError, match="int"):
        gt.distributed.fully_shard(ToyModel(), reshard_after_forward=2)
    with pytest.raises(TypeError, match="None or a bool"):
        gt.distributed.fully_shard(ToyModel(), reshard_after_forward="yes")
