"""Graph mode (SPEC §9): a captured step replays with results bitwise equal to eager mode's, on
one process, 2 ranks data- and tensor-parallel and a 2x2 mesh; recaptures say why; values read
into Python inside a capture raise; GLOBALTENSOR_GRAPH=0 runs eagerly."""
import logging

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from graph_models import ToyModel, TrainGraph

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum


def _layout(model, mode, device="cpu"):
    """The model laid out for a parallel mode; returns (placement, data sbp)."""
    if mode == "local":
        return None, None
    if mode == "2d":
        mesh = gt.placement(device, [[0, 1], [2, 3]])
        model.to_global(mesh, (B, B))
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=(B, S0)))
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=(B, S0)))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=(B, S1)))
        return mesh, (S0, B)
    placement = gt.placement(device, list(range(gt.env.get_world_size())))
    model.to_global(placement, B)
    if mode == "tp":
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=S0))
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=S0))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=S1))
        return placement, B
    return placement, S0


def _train(mode, optimizer, graph, steps=4, dropout=0.0, rows=40, device="cpu"):
    """Losses (exact floats) and final parameters of `steps` training steps, eager or in a graph."""
    gt.manual_seed(0)
    model = ToyModel(dropout)
    placement, data_sbp = _layout(model, mode, device)
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if optimizer == "sgd" else \
        gt.optim.AdamW(model.parameters(), lr=0.01)
    kwargs = {} if placement is None else {"placement": placement, "sbp": data_sbp}
    step = TrainGraph(model, opt) if graph else None
    losses = []
    for _ in range(steps):
        x, y = gt.randn(rows, 10, **kwargs), gt.randn(rows, 16, **kwargs)
        if graph:
            loss = step(x, y)
        else:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(loss.numpy().tolist())
    params = {k: v.numpy() for k, v in model.state_dict().items()}
    return losses, params, (step.program(rank=gt.env.get_rank()) if graph else None)


def _both(mode, optimizer, dropout=0.0, rows=40, device="cpu"):
    eager = _train(mode, optimizer, False, dropout=dropout, rows=rows, device=device)
    graph = _train(mode, optimizer, True, dropout=dropout, rows=rows, device=device)
    return eager, graph


def _assert_bitwise(eager, graph, what):
    assert eager[0] == graph[0], f"{what}: losses differ: {eager[0]} vs {graph[0]}"
    for k in eager[1]:
        assert eager[1][k].tobytes() == graph[1][k].tobytes(), f"{what}: parameter {k} differs"


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_one_process_graph_equals_eager_bitwise(optimizer):
    eager, graph = _both("local", optimizer, dropout=0.25)
    _assert_bitwise(eager, graph, "one process")
    assert eager[0][-1] != eager[0][0]


@pytest.mark.parametrize("mode,nprocs,rows", [("dp", 2, 40), ("dp", 2, 41), ("tp", 2, 40), ("2d", 4, 42)])
def test_parallel_graph_equals_eager_bitwise(mode, nprocs, rows):
    for rank, (eager, graph) in enumerate(run_ranks(_both, nprocs, mode, "sgd", 0.25, rows)):
        _assert_bitwise(eager, graph, f"{mode} rank {rank}")


def test_data_parallel_graph_on_two_ranks_runs_again_alike():
    """Every rank plans alike: three runs of the same program give the same bits."""
    runs = [run_ranks(_train, 2, "dp", "adamw", True)[0][:2] for _ in range(3)]
    for losses, params in runs[1:]:
        assert losses == runs[0][0]
        assert all(params[k].tobytes() == runs[0][1][k].tobytes() for k in params)


def _dp_program():
    _, _, text = _train("dp", "sgd", True, steps=2)
    return text


def test_data_parallel_program_buckets_its_gradient_all_reduces():
    text = run_ranks(_dp_program, 2)[0]
    assert "all_reduce_start" in text and "all_reduce_wait" in text
    assert "bucket_grads: buckets 1, all_reduces 4, written_in_place 2" in text
    assert "SGD.step()" in text and "peak" in text


def test_readback_inside_a_capture_raises_naming_the_read_and_op():
    @gt.jit.trace
    def bad(x):
        y = x.sum()
        if y.item() > 0:
            return x
        return -x

    with pytest.raises(RuntimeError, match=r"item\(\) reads the value .* made by sum"):
        bad(gt.randn(3))

    @gt.jit.trace
    def branch(x):
        return x if (x > 0).all() else -x

    with pytest.raises(RuntimeError, match=r"bool\(x\)"):
        branch(gt.randn(3))


def test_data_dependent_shapes_raise_inside_a_capture():
    @gt.jit.trace
    def nz(x):
        return gt.nonzero(x)

    with pytest.raises(RuntimeError, match="depends on the values"):
        nz(gt.randn(4))


def test_a_new_signature_captures_again_and_says_why(caplog):
    @gt.jit.trace
    def f(x, scale):
        return x * scale + 1

    with caplog.at_level(logging.INFO, logger="globaltensor.graph"):
        a = f(gt.ones(2, 3), 2.0)
        b = f(gt.ones(2, 3), 2.0)
        c = f(gt.ones(4, 3), 2.0)
        d = f(gt.ones(4, 3), 3.0)
    assert a.numpy().tolist() == b.numpy().tolist() == [[3.0] * 3] * 2
    assert c.numpy().shape == (4, 3) and d.numpy().tolist() == [[4.0] * 3] * 4
    assert f.captures[0] == "first call"
    assert "args[0]: local tensor (2, 3) float32 -> local tensor (4, 3) float32" in f.captures[1]
    assert "args[1]: 2.0 -> 3.0" in f.captures[2]
    assert len(f.captures) == 3
    assert sum("capturing" in r.message for r in caplog.records) == 3


def test_too_many_programs_raise_with_the_history():
    @gt.jit.trace
    def f(x):
        return x + 1

    f.max_programs = 2
    f(gt.ones(1))
    f(gt.ones(2))
    with pytest.raises(RuntimeError, match=r"after 2 captured programs.*1\. first call; 2\. args\[0\]"):
        f(gt.ones(3))


def test_graph_off_runs_eagerly(monkeypatch):
    monkeypatch.setenv("GLOBALTENSOR_GRAPH", "0")

    @gt.jit.trace
    def f(x):
        return x.sum().item()  # reading a value is fine when graphs run eagerly

    assert f(gt.ones(3)) == 3.0
    assert f.captures == []


def test_trace_replays_without_dispatch(monkeypatch):
    @gt.jit.trace
    def f(x, y):
        return (x + y) * 2

    x, y = gt.ones(2, 2), gt.full((2, 2), 3.0)
    f(x, y)
    import globaltensor.dispatch as dispatch

    def refuse(*args, **kwargs):
        raise AssertionError("a replay went through the dispatcher")
    monkeypatch.setattr(dispatch, "_apply_global", refuse)
    monkeypatch.setattr(dispatch, "decision_for", refuse)
    assert f(x, y).numpy().tolist() == [[8.0, 8.0], [8.0, 8.0]]
    assert f(y, y).numpy().tolist() == [[12.0, 12.0], [12.0, 12.0]]


def test_a_gradient_left_from_before_raises_instead_of_adding():
    gt.manual_seed(0)
    model = ToyModel()
    opt = gt.optim.SGD(model.parameters(), lr=0.1)

    @gt.jit.trace
    def grads(x):
        model(x).sum().backward()
        return x

    grads(gt.randn(2, 10))
    with pytest.raises(RuntimeError, match="has a .grad from before this call"):
        grads(gt.randn(2, 10))
    opt.zero_grad()
    grads(gt.randn(2, 10))
    assert model.net1.weight.grad is not None


def test_print_shows_the_serial_program_and_rank_programs():
    gt.manual_seed(0)
    model = ToyModel()
    g = TrainGraph(model, gt.optim.SGD(model.parameters(), lr=0.1))
    assert "no program captured yet" in repr(g)
    g(gt.randn(4, 10), gt.randn(4, 16))
    text = repr(g)
    assert text.startswith("program TrainGraph #1: 2 inputs")
    assert "state model.net1.weight" in text and "linear(" in text and "model.net1.weight.grad = " in text
    assert "free" in g.program(rank=0)


def _train_inside(graph, steps=4):
    """The optimizer, its zero_grad, gradient clipping and an lr scheduler called inside the step."""
    gt.manual_seed(0)
    model = ToyModel()
    opt = gt.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    sched = gt.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(x, y):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad()
        sched.step()
        return loss

    if graph:
        step = gt.jit.trace(step)
    losses = [step(gt.randn(8, 10), gt.randn(8, 16)).numpy().tolist() for _ in range(steps)]
    return losses, {k: v.numpy() for k, v in model.state_dict().items()}, opt.param_groups[0]["lr"]


def test_optimizer_clipping_and_scheduler_inside_a_traced_step_replay():
    eager, graph = _train_inside(False), _train_inside(True)
    assert graph[0] == eager[0] and graph[2] == eager[2] == 0.1 * 0.5 ** 4
    assert all(eager[1][k].tobytes() == graph[1][k].tobytes() for k in eager[1])


def _on_subsets():
    """Ops on a placement this rank is outside of, and a move between placements."""
    p0, p1 = gt.placement("cpu", [0]), gt.placement("cpu", [1])
    x = gt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), placement=p0, sbp=B)

    @gt.jit.trace
    def f(x):
        return (x * 2).to_global(placement=p1, sbp=S1) + 1

    f(x)
    return f(x).numpy(), f(x * 3).numpy()


def test_ops_outside_a_rank_and_moves_between_placements_replay():
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    for first, second in run_ranks(_on_subsets, 2):
        np.testing.assert_array_equal(first, want * 2 + 1)
        np.testing.assert_array_equal(second, want * 6 + 1)


def test_eval_mode_captures_another_program():
    gt.manual_seed(0)
    model = ToyModel(dropout=0.5)

    class Forward(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    g, x = Forward(), gt.randn(4, 10)
    g(x)
    model.eval()
    out = g(x)
    assert g.captures == ["first call", "the modules' train/eval mode changed"]
    with gt.no_grad():
        np.testing.assert_array_equal(out.numpy(), model(x).numpy())
