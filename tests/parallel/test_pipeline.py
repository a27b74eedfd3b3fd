"""Pipeline parallelism (SPEC §8): loss, every gradient and pipe(x) equal numpy's on the whole
batch for each schedule, micro-batch count and stage layout; failures name the stage; checkpoints
move between pipeline layouts."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

S0, S1, B = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast
WIDTHS = [6, 16, 16, 16, 3]  # four Linear blocks, ReLU between them


def _mlp():
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers.append(nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i < len(WIDTHS) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _reference(params, x, y):
    """Loss (MSE, mean) and the gradient of every parameter, in numpy, on the whole batch."""
    n_lin = len(WIDTHS) - 1
    hs, h = [x], x
    for i in range(n_lin):
        h = h @ params[f"{2 * i}.weight"].T + params[f"{2 * i}.bias"]
        if i < n_lin - 1:
            h = np.maximum(h, 0)
        hs.append(h)
    loss = np.mean((h - y) ** 2)
    g = 2 * (h - y) / h.size
    grads = {}
    for i in reversed(range(n_lin)):
        if i < n_lin - 1:
            g = g * (hs[i + 1] > 0)
        grads[f"{2 * i}.weight"] = g.T @ hs[i]
        grads[f"{2 * i}.bias"] = g.sum(0)
        g = g @ params[f"{2 * i}.weight"]
    return loss, grads, h


def _cuts(n_stages):
    """Stage boundaries over the 7 modules of _mlp (4 Linear, 3 ReLU)."""
    return {1: [(0, 7)], 2: [(0, 4), (4, 7)], 4: [(0, 2), (2, 4), (4, 6), (6, 7)]}[n_stages]


def _build(layout_name):
    """(stages, data placement, data sbp) for a layout of the 7-module MLP."""
    model = _mlp()
    if layout_name == "1d":  # 2 stages, one rank each
        places = [gt.placement("cpu", [0]), gt.placement("cpu", [1])]
        sbps = [B, B]
    elif layout_name == "interleaved":  # 4 stages on 2 ranks: 0, 1, 0, 1
        places = [gt.placement("cpu", [s % 2]) for s in range(4)]
        sbps = [B] * 4
    else:  # 2x2 mesh: axis 0 = stages, axis 1 = data (dp) or tensor (tp) parallel
        mesh = gt.placement("cpu", [[0, 1], [2, 3]])
        places, sbps = [mesh[0], mesh[1]], [B, B]
    stages = [model[a:b] for a, b in _cuts(len(places))]
    for stage, pl, sbp in zip(stages, places, sbps):
        stage.to_global(pl, sbp)
    if layout_name == "2x2tp":  # Megatron inside each stage: column- then row-parallel Linear
        for stage in stages:
            first, second = [m for m in stage.children() if isinstance(m, nn.Linear)][:2]
            first.weight = nn.Parameter(first.weight.to_global(sbp=S0))
            first.bias = nn.Parameter(first.bias.to_global(sbp=S0))
            second.weight = nn.Parameter(second.weight.to_global(sbp=S1))
    if layout_name.startswith("2x2"):
        mesh = gt.placement("cpu", [[0, 1], [2, 3]])
        return stages, mesh, (B, S0 if layout_name == "2x2dp" else B)
    return stages, gt.placement("cpu", [0, 1]), B


def _data(batch):
    rng = np.random.default_rng(7)
    return (rng.standard_normal((batch, WIDTHS[0])).astype(np.float32),
            rng.standard_normal((batch, WIDTHS[-1])).astype(np.float32))


def _step_worker(layout_name, schedule, m, batch):
    gt.manual_seed(0)
    stages, data_pl, data_sbp = _build(layout_name)
    pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=m, loss_fn=nn.MSELoss())
    params = {k: v.numpy() for k, v in pipe.state_dict().items()}
    xn, yn = _data(batch)
    x = gt.tensor(xn).to_global(data_pl, (B,) * data_pl.ndim).to_global(sbp=data_sbp)
    y = gt.tensor(yn).to_global(data_pl, (B,) * data_pl.ndim).to_global(sbp=data_sbp)
    loss = pipe.step(x, target=y)
    grads = {name: p.grad.numpy() for stage in stages for name, p in stage.named_parameters()}
    out_tensor = pipe(x)
    out = out_tensor.numpy()
    norm = nn.utils.clip_grad_norm_([p for s in stages for p in s.parameters()], 1e9).numpy()
    return float(loss.numpy()), grads, params, out, float(norm), loss.placement.rank_list(), out_tensor.sbp


CASES = [(lay, sch, m) for lay in ("1d", "2x2dp", "2x2tp") for sch in ("gpipe", "1f1b")
         for m in (2, 4, 3)] + [("interleaved", "interleaved", m) for m in (2, 4, 3)]


@pytest.mark.parametrize("layout_name,schedule,m", CASES)
def test_step_matches_numpy_on_the_whole_batch(layout_name, schedule, m):
    nprocs = 4 if layout_name.startswith("2x2") else 2
    batch = 11  # uneven: micro-batches of different sizes, uneven data-parallel pieces
    results = run_ranks(_step_worker, nprocs, layout_name, schedule, m, batch, timeout=180)
    params = results[0][2]
    xn, yn = _data(batch)
    loss, grads, out = _reference(params, xn, yn)
    total_norm = np.sqrt(sum((g ** 2).sum() for g in grads.values()))
    for got_loss, got_grads, _, got_out, got_norm, loss_ranks, out_sbp in results:
        assert loss_ranks == list(range(nprocs))  # the loss is on every rank
        if layout_name == "2x2dp":  # the output keeps the batch's split: pieces joined where they are
            assert out_sbp == (S0,)
        np.testing.assert_allclose(got_loss, loss, rtol=1e-5)
        assert set(got_grads) == set(grads)
        for name, g in grads.items():
            np.testing.assert_allclose(got_grads[name], g, rtol=1e-4, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(got_out, out, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got_norm, total_norm, rtol=1e-4)


@pytest.mark.parametrize("repeat", range(3))
def test_mixed_layouts_decide_alike_every_run(repeat):
    """Tensor parallel inside 2 stages of a 2x2 mesh, uneven micro-batches: the same plan on every
    rank, run after run (no decision from rank-local facts or ordering)."""
    results = run_ranks(_step_worker, 4, "2x2tp", "1f1b", 3, 11, timeout=180)
    loss, grads, _ = _reference(results[0][2], *_data(11))
    for got in results:
        np.testing.assert_allclose(got[0], loss, rtol=1e-5)
        for name, g in grads.items():
            np.testing.assert_allclose(got[1][name], g, rtol=1e-4, atol=1e-6, err_msg=name)


def _train_worker(layout_name, schedule, steps):
    """A few SGD steps; the losses must follow the unpipelined model's."""
    gt.manual_seed(0)
    stages, data_pl, data_sbp = _build(layout_name)
    pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=4, loss_fn=nn.MSELoss())
    opt = gt.optim.SGD([p for s in stages for p in s.parameters()], lr=0.1)
    xn, yn = _data(12)
    x = gt.tensor(xn).to_global(data_pl, (B,) * data_pl.ndim).to_global(sbp=data_sbp)
    y = gt.tensor(yn).to_global(data_pl, (B,) * data_pl.ndim).to_global(sbp=data_sbp)
    losses = []
    for _ in range(steps):
        losses.append(float(pipe.step(x, target=y).numpy()))
        opt.step()
        opt.zero_grad()
    return losses


def _train_local(steps):
    gt.manual_seed(0)
    model = _mlp()
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    xn, yn = _data(12)
    losses = []
    for _ in range(steps):
        loss = nn.MSELoss()(model(gt.tensor(xn)), gt.tensor(yn))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.numpy()))
    return losses


@pytest.mark.parametrize("layout_name,schedule", [("1d", "1f1b"), ("2x2dp", "1f1b"), ("interleaved", "interleaved")])
def test_training_follows_the_unpipelined_model(layout_name, schedule):
    nprocs = 4 if layout_name.startswith("2x2") else 2
    want = _train_local(4)
    for got in run_ranks(_train_worker, nprocs, layout_name, schedule, 4, timeout=180):
        np.testing.assert_allclose(got, want, rtol=1e-4)


class _Boom(nn.Module):
    """Fails on its third micro-batch on the ranks that hold it."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x):
        if gt.env.get_rank() in x.placement:
            self.calls += 1
            if self.calls == 3:
                raise ValueError("boom")
        return self.inner(x)


def _failing_worker(schedule):
    gt.manual_seed(0)
    stages, data_pl, data_sbp = _build("1d")
    stages[1] = _Boom(stages[1])
    pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=4, loss_fn=nn.MSELoss())
    xn, yn = _data(8)
    x = gt.tensor(xn).to_global(data_pl, B)
    y = gt.tensor(yn).to_global(data_pl, B)
    try:
        pipe.step(x, target=y)
    except gt.pipeline.PipelineError as e:
        return str(e)
    return "no error"


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_a_stage_that_raises_fails_every_rank_naming_it(schedule):
    for message in run_ranks(_failing_worker, 2, schedule, timeout=60):
        assert "stage 1, micro-batch 2" in message and "boom" in message, message


def _checkpoint_worker(path, target_layout):
    gt.manual_seed(0)
    if target_layout == "save":
        stages, _, _ = _build("1d")
        pipe = gt.pipeline.Pipeline(stages, micro_batches=2, loss_fn=nn.MSELoss())
        gt.save(pipe.state_dict(), path, global_dst_rank=0)
        return {k: v.numpy() for k, v in pipe.state_dict().items()}
    gt.manual_seed(123)  # other initial values: the checkpoint must overwrite them
    loaded = gt.load(path)
    if target_layout == "one stage":
        model = _mlp()
        model.to_global(gt.placement("cpu", list(range(gt.env.get_world_size()))), B)
        model.load_state_dict(loaded)
        return {k: v.numpy() for k, v in model.state_dict().items()}
    stages, _, _ = _build(target_layout)
    schedule = "interleaved" if target_layout == "interleaved" else "1f1b"
    pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=2, loss_fn=nn.MSELoss())
    pipe.load_state_dict(loaded)
    return {k: v.numpy() for k, v in pipe.state_dict().items()}


@pytest.mark.parametrize("target_layout,nprocs", [("one stage", 1), ("one stage", 2), ("2x2tp", 4),
                                                 ("interleaved", 2)])
def test_checkpoint_of_two_stages_loads_into_other_layouts(tmp_path, target_layout, nprocs):
    path = str(tmp_path / "ckpt")
    saved = run_ranks(_checkpoint_worker, 2, path, "save", timeout=120)[0]
    for got in run_ranks(_checkpoint_worker, nprocs, path, target_layout, timeout=120):
        assert set(got) == set(saved)
        for k in saved:
            np.testing.assert_array_equal(got[k], saved[k], err_msg=k)


def test_placement_rows_are_sub_placements():
    mesh = gt.placement("cpu", [[0]])
    assert mesh[0] == gt.placement("cpu", [0]) and mesh[0:1] == mesh and len(mesh) == 1
    with pytest.raises(IndexError):
        mesh[1]
    with pytest.raises(TypeError):
        mesh["a"]


def test_sequential_slices_keep_names():
    model = _mlp()
    assert list(model[4:7].state_dict()) == ["4.weight", "4.bias", "6.weight", "6.bias"]


def test_explain_prints_the_grid_with_its_bubble(capsys):
    stage = _mlp()
    stage.to_global(gt.placement("cpu", [0]), B)
    pipe = gt.pipeline.Pipeline([stage], schedule="gpipe", micro_batches=4, loss_fn=nn.MSELoss())
    text = pipe.explain()
    assert "bubble" in text and "rank 0" in text and text in capsys.readouterr().out


def test_bad_arguments_raise_before_any_step():
    stage = _mlp()
    with pytest.raises(ValueError, match="local parameters"):
        gt.pipeline.Pipeline([stage])
    stage.to_global(gt.placement("cpu", [0]), B)
    with pytest.raises(ValueError, match="micro_batches"):
        gt.pipeline.Pipeline([stage], micro_batches=0)
    with pytest.raises(ValueError, match="gpipe"):
        gt.pipeline.Pipeline([stage], schedule="zigzag")
    pipe = gt.pipeline.Pipeline([stage], micro_batches=4, loss_fn=nn.MSELoss())
    x = gt.ones(3, 6, placement=gt.placement("cpu", [0]), sbp=B)
    with pytest.raises(ValueError, match="micro_batches=4"):
        pipe.step(x, target=gt.ones(3, 3, placement=gt.placement("cpu", [0]), sbp=B))


def _plan_worker(layout_name, m):
    """The collectives of one step on this rank: (kind, ranks) -> count."""
    gt.manual_seed(0)
    stages, data_pl, data_sbp = _build(layout_name)
    pipe = gt.pipeline.Pipeline(stages, schedule="1f1b", micro_batches=m, loss_fn=nn.MSELoss())
    xn, yn = _data(12)
    x = gt.tensor(xn).to_global(data_pl, (B,) * data_pl.ndim).to_global(sbp=data_sbp)
    y = gt.tensor(yn).to_global(data_pl, (B,) * data_pl.ndim).to_global(sbp=data_sbp)
    pipe.step(x, target=y)  # the first step also creates the groups
    for stage in stages:
        stage.zero_grad()
    with gt.debug.trace_collectives() as trace:
        pipe.step(x, target=y)
    counts = {}
    for kind, ranks, _ in trace:
        counts[(kind, ranks)] = counts.get((kind, ranks), 0) + 1
    return counts


@pytest.mark.parametrize("m", [2, 4])
def test_the_plan_of_a_step_two_stages_by_two_way_data_parallel(m):
    """Per micro-batch one all_to_all forward and one backward between the stages' rows, plus the
    batch and the target moving to their stages and the loss to every rank; the data-parallel
    gradients reduce once per step (one bucket per stage), not once per micro-batch, and the last
    stage sums its partial loss once."""
    for rank, counts in enumerate(run_ranks(_plan_worker, 4, "2x2dp", m, timeout=120)):
        row = (0, 1) if rank < 2 else (2, 3)
        assert counts.pop(("all_reduce", row)) == (1 if rank < 2 else 2), counts
        assert counts.pop(("all_to_all", (0, 1, 2, 3))) == 2 * m + 3, counts
        assert not counts, counts
