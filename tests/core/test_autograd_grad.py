"""gt.autograd.grad with PyTorch's signature: create_graph=True gives second derivatives (vs torch),
also of global tensors on 2 ranks; allow_unused and materialize_grads as PyTorch."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

FNS = {  # name -> (ours, torch): composites and primitives whose backward is written with ops
    "tanh": (gt.tanh, lambda x: torch.tanh(x)), "sigmoid": (gt.sigmoid, lambda x: torch.sigmoid(x)), "exp_sin": (
        lambda x: gt.exp(gt.sin(x)), lambda x: torch.exp(torch.sin(x))),
    "softmax": (lambda x: gt.softmax(x, dim=1), lambda x: torch.softmax(x, dim=1)),
    "gelu": (gt.nn.functional.gelu, lambda x: torch.nn.functional.gelu(x)),  # a fused primitive whose backward has a backward
    "matmul_self": (lambda x: x @ x.T * x, lambda x: x @ x.T * x),
}


def _second(name, placement=None, sbp=None):
    """(dx, d2x, d(dx)/d(grad_output)) as in OneFlow's higher-derivative tests, ours and torch's."""
    rng = np.random.default_rng(len(name))
    xa, ga, ha = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3))

    def make(a):
        t = gt.tensor(a) if placement is None else gt.tensor(a, placement=placement, sbp=sbp)
        return t.requires_grad_()
    ours, theirs = FNS[name]
    x, gy = make(xa), make(ga)
    dx = gt.autograd.grad(ours(x), x, gy, True, True)[0]  # retain_graph, create_graph: positional, as OneFlow's tests
    ddx, ddy = gt.autograd.grad(dx, [x, gy], make(ha))
    xt, gyt = torch.tensor(xa, requires_grad=True), torch.tensor(ga, requires_grad=True)
    dxt = torch.autograd.grad(theirs(xt), xt, gyt, True, True)[0]
    ddxt, ddyt = torch.autograd.grad(dxt, [xt, gyt], torch.tensor(ha))
    for a, b in [(dx, dxt), (ddx, ddxt), (ddy, ddyt)]:
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    return dx.requires_grad


@pytest.mark.parametrize("name", sorted(FNS))
def test_create_graph_second_derivative_matches_torch(name):
    assert _second(name)


def _on_ranks():
    pl = gt.placement("cpu", [0, 1])
    for name in sorted(FNS):
        for sbp in (gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast):
            _second(name, pl, sbp)
    return True


def test_create_graph_global_on_two_ranks():
    assert run_ranks(_on_ranks, 2, timeout=300) == [True, True]


def test_without_create_graph_gradients_are_constants():
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    (dx,) = gt.autograd.grad((x * x).sum(), x)
    assert not dx.requires_grad and dx.numpy().tolist() == [2.0, 4.0]
    assert x.grad is None


def test_unused_input_messages_and_options():
    x, y = gt.ones(4, 4).requires_grad_(), gt.ones(4, 4).requires_grad_()
    z = x * x
    with pytest.raises(RuntimeError, match="allow_unused=True if this is the desired behavior"):
        gt.autograd.grad(z, [x, y], gt.ones_like(z))
    assert gt.autograd.grad(z, [x, y], gt.ones_like(z), allow_unused=True)[1] is None
    zero = gt.autograd.grad(z, [x, y], gt.ones_like(z), materialize_grads=True)[1]
    assert zero.shape == (4, 4) and not zero.numpy().any()
    with pytest.raises(ValueError, match="allow_unused"):
        gt.autograd.grad(z, [x, y], gt.ones_like(z), allow_unused=False, materialize_grads=True)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        gt.autograd.grad(gt.ones(2), x)
    with pytest.raises(NotImplementedError, match="is_grads_batched"):
        gt.autograd.grad(z, x, gt.ones_like(z), is_grads_batched=True)
