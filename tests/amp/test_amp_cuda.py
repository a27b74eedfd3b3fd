"""Autocast and GradScaler on cuda placements (2 ranks sharing one GPU, or simulated): CUDA's lists
(softmax in float32), bfloat16 products through the device kernels, the agreed inf skip."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks
from test_cuda_placement import MODES

F = gt.nn.functional


def _data():
    rng = np.random.default_rng(5)
    return (rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((6, 16)).astype(np.float32),
            rng.integers(0, 6, 8))


def _on_cuda():
    x0, w0, t0 = _data()
    pl = gt.placement("cuda", [0, 1])
    x = gt.tensor(x0).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    w = gt.tensor(w0).to_global(pl, gt.sbp.broadcast)
    w.requires_grad = True
    t = gt.tensor(t0).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    with gt.autocast("cpu", dtype=gt.bfloat16):
        untouched = F.linear(x, w).dtype.name  # a cpu policy leaves cuda tensors alone
    with gt.autocast("cuda", dtype=gt.bfloat16):
        y = F.linear(x, w)
        p = F.softmax(y, dim=-1)
        loss = F.cross_entropy(y, t)
    scaler = gt.amp.GradScaler("cuda", init_scale=2.0 ** 12)
    opt = gt.optim.SGD([w], lr=0.1)
    scaler.scale(loss).backward()
    if gt.env.get_rank() == 1:  # an inf on one rank's copy of the gradient only
        w.grad._local[0, 0] = float("inf")
    with gt.debug.count_collectives() as counted:
        scaler.step(opt)
    scaler.update()
    full = lambda a: np.asarray(a.to_global(sbp=gt.sbp.broadcast).to_local().float().numpy())  # noqa: E731
    return {"dtypes": (untouched, y.dtype.name, p.dtype.name, loss.dtype.name, w.grad.dtype.name),
            "y": full(y), "loss": float(full(loss)), "skipped": bool(np.array_equal(full(w.detach()), w0)),
            "scale": scaler.get_scale(), "collectives": counted.get("all_reduce", 0)}


@pytest.mark.parametrize("env", MODES)
def test_autocast_and_scaler_on_cuda_placements(env):
    x0, w0, t0 = _data()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(torch.tensor(x0), torch.tensor(w0))
        loss = torch.nn.functional.cross_entropy(y, torch.tensor(t0))
    for got in run_ranks(_on_cuda, 2, env=env, timeout=300):
        assert got["dtypes"] == ("float32", "bfloat16", "float32", "float32", "float32")
        np.testing.assert_allclose(got["y"], y.float().numpy(), rtol=2 ** -7, atol=2e-2)
        np.testing.assert_allclose(got["loss"], loss.item(), rtol=5e-3)
        assert got["skipped"] and got["scale"] == 2.0 ** 11 and got["collectives"] == 1
