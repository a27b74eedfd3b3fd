"""Checkpoints of ZeRO-sharded training (model and optimizer state) saved in sharded mode: each
rank writes the pieces it holds, nothing is gathered; they load on 1 rank (local tensors) and on 4
ranks under ZeRO stage 1, and training resumes there as if never stopped."""
import os

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from globaltensor import zero
from test_zero_stages import ToyModel

S0, B = gt.sbp.split(0), gt.sbp.broadcast
STEPS, CUT = 4, 2


def _batch(step, pl):
    """Step `step`'s batch, the same values on any layout (drawn from a seed of its own)."""
    gt.manual_seed(100 + step)
    kw = {} if pl is None else {"placement": pl, "sbp": S0}
    return gt.randn(12, 10, **kw), gt.randn(12, 16, **kw)


def _model(stage):
    """ToyModel and AdamW: one process (stage None), or ZeRO `stage` on all the job's ranks."""
    gt.manual_seed(0)
    model = ToyModel()
    pl = None
    if stage is not None:
        pl = gt.placement("cpu", list(range(gt.env.get_world_size())))
        model.to_global(pl, B)
        if stage == 3:
            for m in (model.net1, model.net2, model):
                gt.distributed.fully_shard(m)
    opt = gt.optim.AdamW(model.parameters(), lr=0.01)
    if stage in (1, 2):
        zero.attach(opt, stage)
    return model, opt, pl


def _steps(model, opt, pl, steps):
    losses = []
    for step in steps:
        x, y = _batch(step, pl)
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def _save(path):
    """ZeRO-3 on 2 ranks: CUT steps, a sharded save (counted), the rest of the steps."""
    model, opt, pl = _model(3)
    _steps(model, opt, pl, range(CUT))
    with gt.debug.count_collectives() as counted:
        gt.save({"model": model.state_dict(), "optim": opt.state_dict()}, path, sharded=True)
    rest = _steps(model, opt, pl, range(CUT, STEPS))
    return rest, {k: v.numpy() for k, v in model.state_dict().items()}, dict(counted)


def _resume(path, stage):
    model, opt, pl = _model(stage)
    ck = gt.load(path)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    layouts = sorted({str(v.sbp) for st in opt.state.values() for k, v in st.items() if k != "step"}) if pl else []
    rest = _steps(model, opt, pl, range(CUT, STEPS))
    return rest, {k: v.numpy() for k, v in model.state_dict().items()}, layouts


def test_zero3_checkpoint_loads_on_one_rank_and_under_stage1_on_four(tmp_path):
    path = str(tmp_path / "zero3")
    saved = run_ranks(_save, 2, path)
    want_losses, want_params, counted = saved[0]
    assert "all_gather" not in counted and "all_reduce" not in counted  # each rank writes its own pieces
    files = os.listdir(path)
    assert any(f.endswith(".r1.npy") for f in files)  # rank 1 wrote its halves (parameters and states)
    for name, layouts in [("one rank", None), ("stage 1 on four", 4)]:
        got = _resume(path, None) if layouts is None else run_ranks(_resume, 4, path, 1)[3]
        np.testing.assert_allclose(got[0], want_losses, rtol=1e-5, err_msg=name)
        for k, v in want_params.items():
            np.testing.assert_allclose(got[1][k], v, rtol=1e-5, atol=1e-7, err_msg=f"{name} {k}")
        if layouts:
            assert got[2] == ["(gt.sbp.split(dim=0),)"]  # the states loaded into stage 1's shards
