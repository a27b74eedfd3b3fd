"""Complex dtypes against torch: creation, values, gradients (conjugate Wirtinger), promotion, refusals;
on one process, on 2 ranks with each input SBP and on a 2x2 mesh; the collectives of complex arrays."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

B, P, S = gt.sbp.broadcast, gt.sbp.partial_sum, gt.sbp.split
RNG = np.random.default_rng(7)
A = (RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))).astype(np.complex64)
W = (RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))).astype(np.complex64)
R = RNG.standard_normal((4, 4)).astype(np.float32)


def program(m, x, w, r):
    """One program for both libraries (m: gt or torch): holomorphic ops, matmul, the non-holomorphic
    abs/angle/real/imag/conj, complex/view_as_real, a real tensor promoted; returns (y, real loss)."""
    y = (x * w + m.matmul(x, w)) / (w + 2) - x.conj() * 0.5
    z = m.exp(x * 0.3) + m.sqrt(x) + m.log(x) + m.tanh(x) + x * r
    c = m.complex(r, r * 2.0) * x
    loss = (m.abs(y).sum() + y.real.mean() + m.view_as_real(z).sum() + m.angle(x).sum() + (x.imag * 2).sum()
            + (c.real * c.imag).sum() + m.polar(r * r + 1, r).imag.sum())
    return y, loss


def _torch_reference():
    x, w = torch.tensor(A, requires_grad=True), torch.tensor(W, requires_grad=True)
    r = torch.tensor(R, requires_grad=True)
    y, loss = program(torch, x, w, r)
    loss.backward()
    return y.detach().numpy(), loss.item(), x.grad.numpy(), w.grad.numpy(), r.grad.numpy()


def _close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, err_msg=what)


def _check(found, what):
    for name, g, t in zip(("y", "loss", "x.grad", "w.grad", "r.grad"), found, _torch_reference()):
        _close(g, t, f"{what}: {name}")


def test_values_and_gradients_match_torch_on_one_process():
    x, w = gt.tensor(A, requires_grad=True), gt.tensor(W, requires_grad=True)
    r = gt.tensor(R, requires_grad=True)
    y, loss = program(gt, x, w, r)
    loss.backward()
    assert y.dtype == gt.complex64 and loss.dtype == gt.float32 and x.grad.dtype == gt.complex64
    assert r.grad.dtype == gt.float32  # a real input's gradient stays real
    _check((y.numpy(), loss.item(), x.grad.numpy(), w.grad.numpy(), r.grad.numpy()), "local")


def _whole(t):
    return t.to_global(sbp=(B,) * t.placement.ndim).to_local().numpy()


def _global_program(mesh, sbp, kind="cpu"):
    pl = gt.placement(kind, np.arange(int(np.prod(mesh))).reshape(mesh).tolist())
    whole = (B,) * len(mesh)
    x = gt.tensor(A, placement=pl, sbp=sbp, requires_grad=True)
    w = gt.tensor(W, placement=pl, sbp=whole, requires_grad=True)
    r = gt.tensor(R, placement=pl, sbp=whole, requires_grad=True)
    with gt.debug.count_collectives() as counted:
        back = _whole(x)  # P -> B: an all_reduce of complex pieces; S -> B: an all_gather
    y, loss = program(gt, x, w, r)
    loss.backward()
    moved = _whole(x.to_global(sbp=(S(1),) * len(mesh)))  # S(0) -> S(1): all_to_all of complex
    return (back, dict(counted), _whole(y), float(_whole(loss)), _whole(x.grad), _whole(w.grad), _whole(r.grad),
            moved, x.grad.dtype.name)


SBPS = {"S(0)": S(0), "B": B, "P": P}


@pytest.mark.parametrize("name", SBPS)
def test_two_ranks_each_input_sbp_match_torch(name):
    for out in run_ranks(_global_program, 2, (2,), (SBPS[name],)):
        back, counted, *found, moved, grad_dtype = out
        np.testing.assert_array_equal(back, A)
        assert counted == {"P": {"all_reduce": 1}, "S(0)": {"all_gather": 1}, "B": {}}[name], counted
        _check(found, f"2 ranks, x {name}")
        np.testing.assert_array_equal(moved, A)
        assert grad_dtype == "complex64"


def test_two_by_two_mesh_matches_torch():
    for sbp in ((S(0), S(1)), (P, S(0))):
        for out in run_ranks(_global_program, 4, (2, 2), sbp, timeout=240):
            back, _, *found, moved, _ = out
            np.testing.assert_array_equal(back, A)
            _check(found, f"2x2 mesh, x {sbp}")
            np.testing.assert_array_equal(moved, A)


@pytest.mark.parametrize("env", [pytest.param({"GLOBALTENSOR_CUDA_SIMULATE": "1"}, id="simulated"),
                                 pytest.param({}, id="gpu", marks=pytest.mark.cuda)])
def test_cuda_placement_two_ranks(env):
    """Complex pieces on the device: NCCL has no complex type, so their collectives go through the host."""
    for name in ("P", "S(0)"):
        for out in run_ranks(_global_program, 2, (2,), (SBPS[name],), "cuda", env=env, timeout=240):
            back, counted, *found, moved, _ = out
            np.testing.assert_array_equal(back, A)
            _check(found, f"cuda, x {name}")
            np.testing.assert_array_equal(moved, A)


def _collectives():
    rank = gt.env.get_rank()
    x = np.array([1 + 2j, rank - 1j, 0.5j], np.complex128) * (rank + 1)
    total = gt.distributed.collectives.all_reduce(x.astype(np.complex64).copy())
    total128 = gt.distributed.collectives.all_reduce(x.copy())
    gathered = gt.distributed.collectives.all_gather(x.reshape(1, 3))
    sent = gt.distributed.collectives.broadcast(x.copy() if rank == 0 else np.zeros(3, np.complex128), src=0)
    scattered = gt.distributed.collectives.reduce_scatter(np.tile(x, 2).reshape(2, 3))
    errors = []
    for op in ("max", "min"):
        try:
            gt.distributed.collectives.all_reduce(x.copy(), op=op)
        except TypeError as exc:
            errors.append(str(exc))
    return total, total128, gathered, sent, scattered, errors


def test_collectives_of_complex_arrays_on_two_ranks():
    xs = [np.array([1 + 2j, r - 1j, 0.5j], np.complex128) * (r + 1) for r in range(2)]
    for rank, (total, total128, gathered, sent, scattered, errors) in enumerate(run_ranks(_collectives, 2)):
        assert total.dtype == np.complex64 and total128.dtype == np.complex128
        np.testing.assert_allclose(total, (xs[0] + xs[1]).astype(np.complex64))
        np.testing.assert_array_equal(total128, xs[0] + xs[1])
        np.testing.assert_array_equal(gathered, np.stack(xs))
        np.testing.assert_array_equal(sent, xs[0])
        np.testing.assert_array_equal(scattered, (xs[0] + xs[1])[None])
        assert len(errors) == 2 and all("complex numbers are not ordered" in e for e in errors), errors


def test_creation_and_aliases():
    assert gt.cfloat is gt.complex64 and gt.cdouble is gt.complex128
    assert gt.tensor([1 + 2j, 3]).dtype == gt.complex64  # Python complex: the default's complex, as torch
    assert gt.tensor(np.array([1j])).dtype == gt.complex128  # numpy keeps its dtype
    assert gt.tensor(1j).dtype == torch.tensor(1j).dtype.__str__().split(".")[1] == "complex64"
    for make in (gt.zeros, gt.ones, gt.empty):
        assert make(2, 3, dtype=gt.complex128).dtype == gt.complex128
    np.testing.assert_array_equal(gt.ones(2, dtype=gt.cfloat).numpy(), np.ones(2, np.complex64))
    c = gt.complex(gt.tensor([1.0, 2.0]), gt.tensor([3.0, 4.0]))
    assert c.dtype == gt.complex64 and c.is_complex() and gt.is_complex(c) and not gt.ones(1).is_complex()
    np.testing.assert_array_equal(c.numpy(), [1 + 3j, 2 + 4j])
    assert gt.view_as_real(c).shape == (2, 2) and gt.view_as_real(c).dtype == gt.float32
    np.testing.assert_array_equal(gt.view_as_complex(gt.view_as_real(c)).numpy(), c.numpy())
    np.testing.assert_allclose(gt.polar(gt.tensor([2.0]), gt.tensor([0.5])).numpy(),
                               torch.polar(torch.tensor([2.0]), torch.tensor([0.5])).numpy(), rtol=1e-6)
    assert gt.abs(c).dtype == gt.float32 and gt.angle(c).dtype == gt.float32
    assert gt.tensor(np.array([1j]), dtype=gt.complex64).real.dtype == gt.float32
    np.testing.assert_array_equal(gt.angle(gt.tensor([-1.0, 2.0])).numpy(), torch.angle(torch.tensor([-1.0, 2.0])))
    assert gt.real(c).dtype == gt.float32 and gt.imag(c).numpy().tolist() == [3.0, 4.0]
    np.testing.assert_array_equal(gt.conj(c).numpy(), [1 - 3j, 2 - 4j])


def test_promotion_as_torch():
    c64, f32, f64 = gt.ones(2, dtype=gt.complex64), gt.ones(2), gt.ones(2, dtype=gt.float64)
    assert (c64 + f32).dtype == gt.complex64 and (c64 + f64).dtype == gt.complex128
    assert (f32 * 1j).dtype == gt.complex64 and (f64 * 1j).dtype == gt.complex128
    assert (gt.arange(3) * 1j).dtype == gt.complex64 and (c64 * 2.5).dtype == gt.complex64
    assert (f32 + gt.tensor(1j, dtype=gt.complex128)).dtype == gt.complex64  # a 0-d operand keeps f32's precision
    assert (c64 / 2).dtype == gt.complex64 and (c64 @ gt.ones(2, 2)).dtype == gt.complex64
    assert gt.dtype.promote_types(gt.complex64, gt.float64) is gt.complex128


def test_reductions_and_matmul_values():
    x, w = gt.tensor(A), gt.tensor(W)
    tx, tw = torch.tensor(A), torch.tensor(W)
    _close((x @ w).numpy(), (tx @ tw).numpy(), "matmul")
    _close(x.sum(0).numpy(), tx.sum(0).numpy(), "sum")
    _close(x.mean().numpy(), tx.mean().numpy(), "mean")
    _close(gt.var(x, 1).numpy(), torch.var(tx, 1).numpy(), "var")
    _close(gt.std(x).numpy(), torch.std(tx).numpy(), "std")


@pytest.mark.parametrize("call", [
    lambda x: gt.maximum(x, x), lambda x: gt.floor(x), lambda x: x.max(), lambda x: gt.sort(x),
    lambda x: gt.relu(x), lambda x: x < x, lambda x: gt.clip(x, 0, 1), lambda x: gt.sign(x),
    lambda x: gt.argmax(x), lambda x: gt.nn.functional.softmax(x, -1),
], ids=["maximum", "floor", "max", "sort", "relu", "less_than", "clip", "sign", "argmax", "softmax"])
def test_real_only_ops_refuse_complex_naming_op_and_dtype(call):
    with pytest.raises(TypeError, match=r"not supported for complex tensors \(input 0 is complex64\)"):
        call(gt.tensor(A))


def _refused_on_ranks():
    pl = gt.placement("cpu", [0, 1])
    x = gt.tensor(A, placement=pl, sbp=P)
    try:
        x.max()
    except TypeError as exc:
        return str(exc)


def test_refusal_raises_on_every_rank_before_any_collective():
    for said in run_ranks(_refused_on_ranks, 2):
        assert said.startswith("max: not supported for complex tensors (input 0 is complex64)")


def test_backward_of_a_complex_output_needs_a_gradient():
    x = gt.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="only for real scalar outputs"):
        (x * x).sum().backward()
    (x * x).sum().backward(gt.tensor(1 + 0j, dtype=gt.complex64))
    t = torch.tensor([1 + 1j], requires_grad=True)
    (t * t).sum().backward(torch.tensor(1 + 0j))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_paddle_face_spellings():
    """Paddle's names (paddle.complex64, to_tensor of complex data, real/imag/conj/angle/as_complex/
    as_real/complex) and its methods x.real() / x.imag(), beside PyTorch's attributes x.real / x.imag."""
    import globaltensor.paddle as paddle
    assert paddle.complex64 is gt.complex64 and paddle.complex128 is gt.complex128
    x = paddle.to_tensor([1 + 2j, 3 - 4j], stop_gradient=False)
    assert x.dtype == paddle.complex64 and paddle.to_tensor(np.array([1j])).dtype == paddle.complex128
    assert x.real().numpy().tolist() == x.real.numpy().tolist() == paddle.real(x).numpy().tolist() == [1.0, 3.0]
    assert x.imag().numpy().tolist() == paddle.imag(x).numpy().tolist() == [2.0, -4.0]
    assert paddle.to_tensor([1.5]).real().numpy().tolist() == [1.5]  # a real tensor's part, as Paddle
    np.testing.assert_array_equal(paddle.conj(x).numpy(), [1 - 2j, 3 + 4j])
    np.testing.assert_allclose(paddle.angle(x).numpy(), np.angle([1 + 2j, 3 - 4j]), rtol=1e-6)
    pairs = paddle.as_real(x)
    assert pairs.shape == [2, 2] or tuple(pairs.shape) == (2, 2)
    np.testing.assert_array_equal(paddle.as_complex(pairs).numpy(), x.numpy())
    c = paddle.complex(paddle.to_tensor([1.0]), paddle.to_tensor([2.0]))
    assert c.dtype == paddle.complex64 and c.numpy().tolist() == [1 + 2j] and c.is_complex() and paddle.is_complex(c)
    (x.real() * x.imag()).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2 + 1j, -4 + 3j])  # d/dre + i d/dim


def test_in_place_ops_keep_torchs_categories():
    x = gt.ones(2)
    with pytest.raises(RuntimeError, match="result type complex64 can't be cast to the desired output type float32"):
        x.add_(gt.tensor([1j, 2j]))
    c = gt.zeros(2, dtype=gt.complex64)
    c.add_(gt.ones(2)).mul_(1j)
    c[0] = 3 + 1j
    np.testing.assert_array_equal(c.numpy(), [3 + 1j, 1j])


def test_paddle_seeds_ones_for_a_complex_output_too():
    """Paddle's rule (a non-scalar backward seeds ones) covers complex outputs as real Paddle 3.3.1
    does: x complex128 @ y float32, backward without a gradient, gives x.grad = ones @ y^T (complex)
    and y.grad = real(x^H @ ones); PyTorch's rule still refuses the implicit complex seed."""
    import globaltensor.paddle as paddle
    rng = np.random.default_rng(0)
    xa, ya = rng.random((4, 3)).astype(np.complex128), rng.random((3, 2)).astype(np.float32)
    x, y = paddle.to_tensor(xa), paddle.to_tensor(ya)
    x.stop_gradient = y.stop_gradient = False
    paddle.matmul(x, y).backward()
    ones = np.ones((4, 2))
    np.testing.assert_allclose(x.grad.numpy(), ones @ ya.T.astype(np.float64), rtol=1e-6)
    assert x.grad.dtype == paddle.complex128 and y.grad.dtype == paddle.float32
    np.testing.assert_allclose(y.grad.numpy(), (xa.conj().T @ ones).real, rtol=1e-5)
    z = gt.tensor(xa, requires_grad=True)
    with pytest.raises(RuntimeError, match="implicitly created only for real scalar"):
        (z * 2).sum().backward()
