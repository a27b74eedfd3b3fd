"""Autograd in one process: gradients against finite differences, and the autograd API."""
import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks
from op_programs import PROGRAMS


def _numeric_grad(program, arrays, i, eps=1e-6):
    base = [gt.tensor(a) for a in arrays]
    grad = np.zeros_like(arrays[i])
    it = np.nditer(arrays[i], flags=["multi_index"])
    for _ in it:
        idx = it.multi_index
        values = []
        for sign in (1, -1):
            shifted = arrays[i].copy()
            shifted[idx] += sign * eps
            args = list(base)
            args[i] = gt.tensor(shifted)
            values.append(program(*args).sum().item())
        grad[idx] = (values[0] - values[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_match_finite_differences(name):
    arrays, program = PROGRAMS[name]
    tensors = [gt.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    program(*tensors).sum().backward()
    for i, (a, t) in enumerate(zip(arrays, tensors)):
        if a.dtype.kind != "f":
            continue
        np.testing.assert_allclose(t.grad.numpy(), _numeric_grad(program, arrays, i), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name}: input {i}")


def test_no_grad_detach_and_accumulation():
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with gt.no_grad():
        y = x * 2
    assert not y.requires_grad and y.is_leaf
    z = (x * x).sum()
    z.backward()
    (x * 3).sum().backward()  # gradients accumulate
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0, 3.0]) + 3)
    assert not x.detach().requires_grad


def test_autograd_grad_leaves_dot_grad_alone():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    y = gt.tensor([3.0, 4.0], requires_grad=True)
    (dx, dy) = gt.autograd.grad((x * y).sum(), [x, y])
    np.testing.assert_allclose(dx.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(dy.numpy(), [1.0, 2.0])
    assert x.grad is None and y.grad is None


def test_backward_errors():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="needs a gradient argument"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        gt.tensor([1.0]).backward()
    (x * 2).backward(gt.tensor([1.0, 1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_backward_computes_only_the_gradients_inputs_need(monkeypatch):
    from globaltensor import registry
    kernel = registry.REGISTRY["matmul"].kernel
    calls = []
    monkeypatch.setattr(registry.REGISTRY["matmul"], "kernel", lambda a, b: calls.append(1) or kernel(a, b))
    x = gt.tensor(np.ones((4, 3), np.float32))              # data: no gradient wanted
    layer = gt.nn.Linear(3, 2)
    w = gt.tensor(np.ones((3, 5), np.float32), requires_grad=True)
    gt.matmul(layer(x), gt.tensor(np.ones((2, 5), np.float32))).sum().backward()  # linear: dW only
    (gt.matmul(x, w)).sum().backward()
    # forward: 2 matmuls; backward: d(layer(x)), dW of the layer, dw. Not: the constant's, x's (twice)
    assert len(calls) == 2 + 3 and x.grad is None
    assert layer.weight.grad.dtype == gt.float32 and w.grad.shape == (3, 5)


def test_leaf_gradient_has_the_leaf_dtype():
    w = gt.tensor(np.ones(3, np.float32), requires_grad=True)
    (w * gt.tensor(np.arange(3.0))).sum().backward()        # float64 data promotes the product
    assert w.grad.dtype == gt.float32 and w.grad.numpy().tolist() == [0.0, 1.0, 2.0]


def test_linear_keeps_one_memory_order_through_backward():
    """A batch with fewer rows than outputs runs as (w @ x.T).T, column-major; backward then gives
    dx column-major too, so relu's backward multiplies arrays of one order (mixed: ~10x slower)."""
    import globaltensor.nn.functional as F
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (1024, 32), (16, 1024)))
    tw1, tw2 = gt.tensor(w1, requires_grad=True), gt.tensor(w2, requires_grad=True)
    h = F.linear(gt.tensor(x), tw1)
    assert h._local.flags.f_contiguous
    y = F.linear(F.relu(h), tw2)
    (gh,) = gt.autograd.grad(y.sum(), [h])
    assert gh._local.flags.f_contiguous and not gh._local.flags.c_contiguous
    hv = x @ w1.T
    np.testing.assert_allclose(gh.numpy(), (np.ones((64, 16)) @ w2) * (hv > 0), rtol=1e-5, atol=1e-5)


def _twice_is_double(mesh_2d):
    """Two backward passes into global leaves of every input SBP give exactly twice one pass's
    gradient (paths: add hands one array to both inputs, sum broadcasts the seed, matmul)."""
    import itertools
    S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
    pl = gt.placement("cpu", [[0, 1], [2, 3]] if mesh_2d else [0, 1])
    one_axis = [S0, S1, B, P]
    sbps = [(a, b) for a, b in itertools.product(one_axis, repeat=2)][::3] if mesh_2d else [(s,) for s in one_axis]
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((5, 6)), rng.standard_normal((6, 3))   # 5 and 3 do not split evenly
    want_x = np.ones((5, 3)) @ y.T + 2
    checked = 0
    for sx, sy in itertools.product(sbps, repeat=2):
        xt = gt.tensor(x, placement=pl, sbp=sx, requires_grad=True)
        yt = gt.tensor(y, placement=pl, sbp=sy, requires_grad=True)
        grads = []
        for _ in range(2):
            ((xt @ yt).sum() + (xt + xt).sum()).backward()
            grads.append((xt.grad.numpy().copy(), yt.grad.numpy().copy()))
        np.testing.assert_allclose(grads[0][0], want_x, rtol=1e-12, err_msg=f"{sx} {sy}")
        for once, twice in zip(grads[0], grads[1]):
            np.testing.assert_array_equal(twice, 2 * once, err_msg=f"x {sx}, y {sy}")
        checked += 1
    return checked


@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (4, True)])
def test_global_gradients_accumulate_exactly(nprocs, mesh_2d):
    assert run_ranks(_twice_is_double, nprocs, mesh_2d)[0] == (16 if not mesh_2d else 36)


def _mlp(distributed):
    """A small MLP, data-parallel on 2 ranks when distributed; (model, where data goes)."""
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(6, 8), gt.nn.ReLU(), gt.nn.Linear(8, 2))
    if not distributed:
        return model, {}
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    return model, {"placement": pl, "sbp": gt.sbp.split(0)}


def _whole_batch_grads(model, where, seed):
    """(x, y) of 16 rows, and the gradients of the whole batch's loss (the .grads cleared after)."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((16, 6)).astype(np.float32), rng.standard_normal((16, 2)).astype(np.float32)
    model.zero_grad()
    gt.nn.functional.mse_loss(model(gt.tensor(x, **where)), gt.tensor(y, **where)).backward()
    whole = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    return x, y, whole


def _micro_batches_equal_the_batch(distributed):
    """Gradients accumulated over 4 micro-batches (each loss a quarter) equal the whole batch's."""
    model, where = _mlp(distributed)
    x, y, whole = _whole_batch_grads(model, where, 5)
    whole = dict(zip((n for n, _ in model.named_parameters()), whole))
    for i in range(4):
        xs, ys = (gt.tensor(a[4 * i:4 * i + 4], **where) for a in (x, y))
        (gt.nn.functional.mse_loss(model(xs), ys) / 4).backward()
    return {n: (whole[n], p.grad.numpy()) for n, p in model.named_parameters()}


@pytest.mark.parametrize("nprocs", [1, 2])
def test_micro_batch_accumulation_equals_the_whole_batch(nprocs):
    for rank_result in run_ranks(_micro_batches_equal_the_batch, nprocs, nprocs > 1):
        for name, (whole, accumulated) in rank_result.items():
            np.testing.assert_allclose(accumulated, whole, rtol=1e-5, atol=1e-6, err_msg=name)


def _graph_micro_batches(distributed):
    """Inside one traced step, 4 micro-batches' backwards accumulate into .grad: the replay gives
    the whole batch's gradients, as eager mode does."""
    model, where = _mlp(distributed)

    @gt.jit.trace
    def accumulate(*pieces):
        for xs, ys in zip(pieces[:4], pieces[4:]):
            (gt.nn.functional.mse_loss(model(xs), ys) / 4).backward()
        return [p.grad for p in model.parameters()]

    results = []
    for seed in (1, 2):  # the capture, then a replay
        x, y, whole = _whole_batch_grads(model, where, seed)
        pieces = [gt.tensor(a[4 * i:4 * i + 4], **where) for a in (x, y) for i in range(4)]
        got = [g.numpy() for g in accumulate(*pieces)]
        model.zero_grad()
        results.append((whole, got))
    return results


@pytest.mark.parametrize("nprocs", [1, 2])
def test_micro_batch_accumulation_in_a_graph_equals_the_whole_batch(nprocs):
    for rank_result in run_ranks(_graph_micro_batches, nprocs, nprocs > 1):
        for whole, got in rank_result:
            for w, g in zip(whole, got):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_custom_function_as_pytorch_writes_it():
    """A torch.autograd.Function subclass runs unchanged (imports aside): save_for_backward,
    saved_tensors, needs_input_grad, a non-tensor argument, one gradient per argument."""
    torch = pytest.importorskip("torch")

    def define(base):
        class ScaledCube(base):
            @staticmethod
            def forward(ctx, x, w, scale):
                ctx.save_for_backward(x, w)
                ctx.scale = scale
                return x * x * x * w * scale

            @staticmethod
            def backward(ctx, g):
                x, w = ctx.saved_tensors
                gx = g * 3 * x * x * w * ctx.scale if ctx.needs_input_grad[0] else None
                gw = g * x * x * x * ctx.scale if ctx.needs_input_grad[1] else None
                return gx, gw, None
        return ScaledCube

    x0, w0 = np.array([1.0, -2.0, 0.5]), np.array([0.5, 1.5, -1.0])
    ours = [gt.tensor(x0, requires_grad=True), gt.tensor(w0)]
    theirs = [torch.tensor(x0, requires_grad=True), torch.tensor(w0)]
    y = define(gt.autograd.Function).apply(*ours, 2.0)
    t = define(torch.autograd.Function).apply(*theirs, 2.0)
    np.testing.assert_allclose(y.numpy(), t.detach().numpy())
    y.sum().backward()
    t.sum().backward()
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy())
    assert ours[1].grad is None and theirs[1].grad is None
    with gt.no_grad():
        assert not define(gt.autograd.Function).apply(*ours, 2.0).requires_grad
