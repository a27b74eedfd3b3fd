"""Every rank decides alike: mixed layouts train to the numpy reference on 4 ranks, run after
run, and each group sees one sequence of collectives on all its members."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
import globaltensor.optim as optim
from conftest import run_ranks
from reference import draws, train_mlp

B, S0, S1 = gt.sbp.broadcast, gt.sbp.split(0), gt.sbp.split(1)
MESH, LINE = [[0, 1], [2, 3]], [0, 1, 2, 3]
STEPS, SEED, LR = 6, 11, 0.05

# name: (ranks, hidden width, {parameter: sbp}, data sbp). The first mixes S on both mesh axes of a 2-D mesh.
LAYOUTS = {
    "2d-weights-split-on-axis-1": (MESH, 24, {"0.weight": (B, S0), "2.weight": (B, S1)}, (S0, B)),
    "2d-megatron-on-axis-0": (MESH, 22, {"0.weight": (S0, B), "0.bias": (S0, B), "2.weight": (S1, B)}, (B, S0)),
    "2d-weight-split-both-axes": (MESH, 22, {"0.weight": (S0, S1), "2.weight": (B, S1)}, (S0, B)),
    "2d-data-over-both-axes": (MESH, 24, {}, (S0, S0)),
    "1d-megatron": (LINE, 22, {"0.weight": S0, "0.bias": S0, "2.weight": S1}, B),
    "1d-input-features-split": (LINE, 22, {"0.weight": S1, "2.bias": B}, S1),
}


def _train(ranks, hidden, params, data_sbp):
    gt.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(10, hidden), nn.ReLU(), nn.Linear(hidden, 6))
    mesh = gt.placement("cpu", ranks)
    model.to_global(mesh, (B,) * mesh.ndim)
    for name, sbp in params.items():
        layer, attr = name.split(".")
        setattr(model[int(layer)], attr, nn.Parameter(getattr(model[int(layer)], attr).to_global(sbp=sbp)))
    opt = optim.SGD(model.parameters(), lr=LR)
    losses = []
    with gt.debug.trace_collectives() as trace:
        for _ in range(STEPS):
            x = gt.randn(8, 10, placement=mesh, sbp=data_sbp)
            y = gt.randn(8, 6, placement=mesh, sbp=data_sbp)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    return losses, [(kind, ranks) for kind, ranks, _ in trace]


def _every_layout():
    return {name: _train(*layout) for name, layout in LAYOUTS.items()}


def _per_group(trace):
    groups = {}
    for kind, ranks in trace:
        groups.setdefault(ranks, []).append(kind)
    return groups


@pytest.mark.parametrize("run", range(3))
def test_mixed_layouts_agree_with_numpy_and_across_ranks(run):
    results = run_ranks(_every_layout, 4, timeout=240)
    for name, (_, hidden, _, _) in LAYOUTS.items():
        want = train_mlp(*draws(SEED, [(10, hidden), (hidden, 6)], (8, 10), (8, 6), STEPS), lr=LR)
        for rank, by_layout in enumerate(results):
            losses, trace = by_layout[name]
            np.testing.assert_allclose(losses, want, rtol=1e-5, err_msg=f"{name}, rank {rank}")
        traces = [_per_group(by_layout[name][1]) for by_layout in results]
        for rank, groups in enumerate(traces):
            for ranks, kinds in groups.items():
                for peer in ranks:
                    assert traces[peer].get(ranks) == kinds, f"{name}: ranks {rank} and {peer} disagree on {ranks}"
