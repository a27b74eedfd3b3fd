"""Optimizer updates as registered ops (issue 29): the registry has them with their rows; a graph
records one update instruction per parameter, bitwise equal to eager steps; lr and step are read
at each replay (a scheduler needs no recapture); a split parameter's state stays split and its
update runs no collective."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from globaltensor.registry import REGISTRY

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
UPDATES = {"sgd_update": True, "momentum_update": True, "adam_update": False, "adamw_update": False}  # name: has P row

OPTIMIZERS = {
    "sgd": lambda ps: gt.optim.SGD(ps, lr=0.05),
    "sgd_wd": lambda ps: gt.optim.SGD(ps, lr=0.05, weight_decay=0.01),
    "momentum": lambda ps: gt.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "nesterov": lambda ps: gt.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True),
    "adam": lambda ps: gt.optim.Adam(ps, lr=0.01, weight_decay=0.1),
    "adamw": lambda ps: gt.optim.AdamW(ps, lr=0.01),
    "amsgrad": lambda ps: gt.optim.AdamW(ps, lr=0.01, amsgrad=True),
}
OP_OF = {"sgd": "sgd_update", "sgd_wd": "sgd_update", "momentum": "momentum_update", "nesterov": "momentum_update",
         "adam": "adam_update", "adamw": "adamw_update", "amsgrad": "adamw_update"}


def test_the_registry_has_the_updates_with_their_rows():
    for name, linear in UPDATES.items():
        opdef = REGISTRY[name]
        assert opdef.backward is None  # not differentiable: optimizers run them outside autograd
        n_scalars = 1 if name == "sgd_update" else 2
        n_arrays = {"sgd_update": 2, "momentum_update": 3}.get(name, 4)
        shapes = [(4, 6)] * n_arrays + [()] * n_scalars
        rows = opdef.rules(shapes, [(4, 6)] * (n_arrays - 1), {})
        scalars = (B,) * n_scalars
        assert ((S0,) * n_arrays + scalars, (S0,) * (n_arrays - 1)) in rows
        assert ((S1,) * n_arrays + scalars, (S1,) * (n_arrays - 1)) in rows
        assert ((B,) * n_arrays + scalars, (B,) * (n_arrays - 1)) in rows
        assert (((P,) * n_arrays + scalars, (P,) * (n_arrays - 1)) in rows) == linear
        out_shapes, _ = opdef.meta(shapes, [gt.float32] * len(shapes), {})
        assert [tuple(s) for s in out_shapes] == [(4, 6)] * (n_arrays - 1)


class _Step(nn.Graph):
    def __init__(self, model, opt, lr_sch=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=lr_sch)

    def build(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss


def _train(kind, graph, steps=5, schedule=None, outside=False):
    """(losses, parameters, graph or None) after `steps` steps; schedule: a StepLR stepped by the
    graph (add_optimizer's lr_sch) or, with outside=True, by the caller between the calls."""
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = OPTIMIZERS[kind](model.parameters())
    sch = None if schedule is None else gt.optim.lr_scheduler.StepLR(opt, step_size=schedule, gamma=0.5)
    step = _Step(model, opt, None if outside else sch) if graph else None
    losses = []
    for _ in range(steps):
        x, y = gt.randn(5, 6), gt.randn(5, 3)
        if graph:
            loss = step(x, y)
        else:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        if sch is not None and (outside or not graph):
            sch.step()
        losses.append(loss.numpy().tolist())
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}, step


def _assert_bitwise(eager, graph):
    assert eager[0] == graph[0]
    for k in eager[1]:
        assert eager[1][k].tobytes() == graph[1][k].tobytes(), k


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_graph_records_one_update_per_parameter_bitwise_equal_to_eager(kind):
    eager, graph = _train(kind, False), _train(kind, True)
    _assert_bitwise(eager, graph)
    step = graph[2]
    text = step.program()
    name = OP_OF[kind]
    assert text.count(f"= {name}(") + text.count(f"  {name}(") == 4, text  # 4 parameters
    assert "scalar" in text and ".lr" in text and len(step.captures) == 1


@pytest.mark.parametrize("outside", [False, True])
def test_a_scheduler_changes_the_lr_without_recapture(outside):
    eager = _train("momentum", False, schedule=2)
    graph = _train("momentum", True, schedule=2, outside=outside)
    _assert_bitwise(eager, graph)
    assert graph[2].captures == ["first call"]
    assert "StepLR.step()" in graph[2].program() or outside


def _split_state_step():
    """A split parameter on 2 ranks: its Adam state is split alike, and steps (eager and in a
    graph) run no collective; the pieces equal one process's update of the whole."""
    placement = gt.placement("cpu", [0, 1])
    rng = np.random.default_rng(3)
    w0, grads = rng.standard_normal((6, 4)), [rng.standard_normal((6, 4)) for _ in range(3)]
    found = {}
    for sbp in (S0, S1):
        w = nn.Parameter(gt.tensor(w0).to_global(placement=placement, sbp=B).to_global(sbp=sbp))
        opt = gt.optim.AdamW([w], lr=0.1, amsgrad=True)
        counts = []
        for g in grads:
            w.grad = gt.tensor(g).to_global(placement=placement, sbp=B).to_global(sbp=sbp)
            with gt.debug.count_collectives() as c:
                opt.step()
            counts.append(dict(c))
        st = opt.state[id(w)]
        found[str(sbp)] = (counts, [st[n].sbp == w.sbp for n in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")],
                           w._local.shape, w.numpy())

    @gt.jit.trace
    def traced(x):
        opt.step()
        return x

    w.grad = gt.tensor(grads[0]).to_global(placement=placement, sbp=B).to_global(sbp=S1)
    with gt.debug.count_collectives() as c:
        traced(w.grad)  # capture
        traced(w.grad)  # replay
    program = traced.program(rank=gt.env.get_rank())
    return found, dict(c), program


def test_a_split_parameter_keeps_its_state_split_and_updates_without_collectives():
    ref = nn.Parameter(gt.tensor(np.random.default_rng(3).standard_normal((6, 4))))
    rng = np.random.default_rng(3)
    rng.standard_normal((6, 4))
    opt = gt.optim.AdamW([ref], lr=0.1, amsgrad=True)
    for g in [rng.standard_normal((6, 4)) for _ in range(3)]:
        ref.grad = gt.tensor(g)
        opt.step()
    for rank, (found, traced_counts, program) in enumerate(run_ranks(_split_state_step, 2)):
        for sbp, (counts, state_split, piece, whole) in found.items():
            assert counts == [{}] * 3, (rank, sbp, counts)
            assert all(state_split), (rank, sbp)
            assert piece == ((3, 4) if sbp == "S(0)" else (6, 2)), (rank, sbp, piece)
            assert whole.tobytes() == ref.numpy().tobytes(), (rank, sbp)
        assert traced_counts == {}, traced_counts
        assert "adamw_update(" in program and "all_reduce(" not in program and "to_global(" not in program


def _reload_midway(graph):
    """4 steps with opt.load_state_dict(state after step 1) before step 3: a replay reads the
    optimizer's state entries as they are then (new tensors after a load)."""
    gt.manual_seed(0)
    model = nn.Linear(6, 3)
    opt = gt.optim.AdamW(model.parameters(), lr=0.01, amsgrad=True)
    step = _Step(model, opt) if graph else None
    saved = None
    for i in range(4):
        x, y = gt.randn(5, 6), gt.randn(5, 3)
        if i == 2:
            opt.load_state_dict(saved)
        if graph:
            step(x, y)
        else:
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
        if i == 0:
            saved = {"state": {k: {n: (v.numpy().copy() if hasattr(v, "numpy") else v) for n, v in st.items()}
                               for k, st in opt.state_dict()["state"].items()},
                     "param_groups": opt.state_dict()["param_groups"]}
    return {k: v.numpy() for k, v in model.state_dict().items()}


def test_a_replay_reads_the_optimizer_state_after_load_state_dict():
    eager, graph = _reload_midway(False), _reload_midway(True)
    for k in eager:
        assert eager[k].tobytes() == graph[k].tobytes(), k
