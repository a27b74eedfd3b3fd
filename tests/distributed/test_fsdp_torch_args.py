"""fully_shard as PyTorch FSDP2: reshard_after_forward=None (every unit reshards after forward but the root, which
keeps its gathered parameters for backward: one all_gather fewer), ignored_params; values as data parallelism."""
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


def _against_plain_dp(option):
    """The SBPs fully_shard(model, <option>) gives, and the sharded and a plain DP model's states after 2 steps."""
    gt.manual_seed(0)
    model = ToyModel()
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    reference = ToyModel()
    reference.load_state_dict(model.state_dict())
    reference.to_global(pl, gt.sbp.broadcast)
    if option == "ignored_params":
        gt.distributed.fully_shard(model, ignored_params={model.net2.weight, model.net2.bias})
    else:
        gt.distributed.fully_shard(model, shard_placement_fn=lambda p: gt.sbp.split(1) if p.ndim == 2 else None)
    sbps = {name: str(p.sbp) for name, p in model.named_parameters()}
    out = []
    for m in (model, reference):
        opt = gt.optim.AdamW(m.parameters(), lr=0.01)
        gt.manual_seed(1)
        for _ in range(2):
            x = gt.randn(12, 10, placement=pl, sbp=gt.sbp.split(0))
            y = gt.randn(12, 16, placement=pl, sbp=gt.sbp.split(0))
            nn.MSELoss()(m(x), y).backward()
            opt.step()
            opt.zero_grad()
        out.append({k: v.numpy() for k, v in m.state_dict().items()})
    return sbps, out


@pytest.mark.parametrize("option,want", [
    ("ignored_params", {"net2.weight": "(gt.sbp.broadcast,)", "net2.bias": "(gt.sbp.broadcast,)",
                        "net1.weight": "(gt.sbp.split(dim=0),)"}),
    ("shard_placement_fn", {"net1.weight": "(gt.sbp.split(dim=1),)", "net2.weight": "(gt.sbp.split(dim=1),)",
                            "net1.bias": "(gt.sbp.split(dim=0),)"}),
])
def test_ignored_params_and_shard_placement_fn_lay_out_and_train_as_data_parallel(option, want):
    import numpy as np
    for sbps, (sharded, plain) in run_ranks(_against_plain_dp, 2, option, timeout=180):
        assert {k: sbps[k] for k in want} == want
        for k in plain:
            np.testing.assert_allclose(sharded[k], plain[k], rtol=1e-5, atol=1e-7, err_msg=f"{option} {k}")


def test_a_bad_shard_placement_is_refused():
    model = ToyModel()
    model.to_global(gt.placement("cpu", [0]), gt.sbp.broadcast)
    with pytest.raises(TypeError, match="Shard"):
        gt.distributed.fully_shard(model, shard_placement_fn=lambda p: "rows")
    with pytest.raises(ValueError, match="out of range"):
        gt.distributed.fully_shard(model, shard_placement_fn=lambda p: gt.sbp.split(2))


def _shard_bytes():
    import gc
    gt.manual_seed(0)
    model = ToyModel(sizes=(64, 256, 64))
    model.to_global(gt.placement("cpu", [0, 1]), gt.sbp.broadcast)
    whole = sum(p._local.nbytes for p in model.parameters())
    gt.distributed.fully_shard(model)
    gc.collect()
    bases = [p._local.base for p in model.parameters()]
    return whole, sum(p._local.nbytes for p in model.parameters()), [b is None or b.nbytes == 0 for b in bases]


def test_a_shard_owns_its_memory_and_frees_the_whole_value():
    """A shard cut as a slice of the broadcast value kept all of it alive (ZeRO-3 held the whole model)."""
    for whole, shards, own in run_ranks(_shard_bytes, 2, timeout=120):
        assert shards * 2 <= whole + 1024 and all(own), (whole, shards, own)
