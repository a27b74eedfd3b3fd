"""gt.utils.checkpoint as torch.utils.checkpoint: gradients bitwise equal, dropout replayed, activations dropped."""
import gc
import weakref

import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from globaltensor.utils.checkpoint import checkpoint, checkpoint_sequential


def _model():
    gt.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.5), nn.Linear(8, 3), nn.Dropout(0.3))


def _grads(model, x, how):
    """Gradients of the parameters and of x, the output, and the next draw after backward."""
    for p in model.parameters():
        p.grad = None
    x.grad = None
    gt.manual_seed(1)
    y = model(x) if how is None else how(model, x)
    (y * y).sum().backward()
    after = gt.rand(3)  # the stream goes on as without recompute: backward put the RNG state back
    return [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy(), y.detach().numpy(), after.numpy()]


@pytest.mark.parametrize("how", [
    lambda m, x: checkpoint(m, x, use_reentrant=False),
    lambda m, x: checkpoint(m, x, use_reentrant=True),
    lambda m, x: gt.utils.checkpoint(m, x, use_reentrant=False),  # the module is callable too
    lambda m, x: checkpoint_sequential(m, 2, x, use_reentrant=False),
    lambda m, x: checkpoint(lambda a, scale: m(a) * scale, x, scale=2.0, use_reentrant=False) / 2.0,
])
def test_gradients_equal_bitwise_with_dropout_replayed(how):
    model = _model()
    x = gt.randn(5, 4, requires_grad=True)
    plain, again = _grads(model, x, None), _grads(model, x, how)
    assert all(np.array_equal(a, b) for a, b in zip(plain, again))


def test_without_preserved_rng_state_the_mask_differs():
    model = _model()
    x = gt.randn(64, 4, requires_grad=True)
    plain = _grads(model, x, None)
    loose = _grads(model, x, lambda m, a: checkpoint(m, a, use_reentrant=False, preserve_rng_state=False))
    assert not np.array_equal(plain[0], loose[0])


def test_intermediate_activations_are_not_kept():
    w = gt.randn(6, 6, requires_grad=True)
    kept = []

    def block(x):
        h = (x @ w).relu()
        kept.append(weakref.ref(h))
        return (h @ w).sum(-1)

    x = gt.randn(3, 6, requires_grad=True)
    plain = block(x)
    gc.collect()
    assert kept[0]() is not None  # without recompute the tape holds h
    y = checkpoint(block, x, use_reentrant=False)
    gc.collect()
    assert kept[1]() is None  # with it, h died after forward
    node = y._node
    assert node.name == "CheckpointFunction" and [id(t) for t in node.ctx.inputs] == [id(x), id(w)]
    y.sum().backward()
    gx, gw = x.grad.numpy(), w.grad.numpy()
    x.grad = w.grad = None
    plain.sum().backward()
    assert np.array_equal(gx, x.grad.numpy()) and np.array_equal(gw, w.grad.numpy())


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")  # both libraries say it; checked below
def test_reentrant_rules_as_torch():
    lin, tlin = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    x, tx = gt.randn(4, 3), torch.randn(4, 3)
    with pytest.warns(UserWarning, match="use_reentrant"):
        out = checkpoint(lin, x)  # PyTorch's default, True, with its warning
    with pytest.warns(UserWarning, match="use_reentrant"):
        tout = torch.utils.checkpoint.checkpoint(tlin, tx)
    assert out.requires_grad == tout.requires_grad == False  # noqa: E712 - no input needs grad: no gradient
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        checkpoint(lin, x, use_reentrant=True)
    tnon = torch.utils.checkpoint.checkpoint(tlin, tx, use_reentrant=False)
    assert checkpoint(lin, x, use_reentrant=False).requires_grad == tnon.requires_grad == True  # noqa: E712
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        checkpoint(lambda a, b: a, x, b=1, use_reentrant=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        torch.utils.checkpoint.checkpoint(lambda a, b: a, tx, b=1, use_reentrant=True)
    with gt.no_grad():
        assert not checkpoint(lin, x, use_reentrant=False).requires_grad


def _split_weight_on_two_ranks():
    pl = gt.placement("cpu", [0, 1])
    gt.manual_seed(0)
    w1 = gt.randn(8, 4, placement=pl, sbp=gt.sbp.split(0), requires_grad=True)  # column-parallel
    w2 = gt.randn(3, 8, placement=pl, sbp=gt.sbp.split(1), requires_grad=True)  # row-parallel
    x = gt.randn(6, 4, placement=pl, sbp=gt.sbp.broadcast, requires_grad=True)

    def block(a):
        h = gt.nn.functional.dropout(gt.nn.functional.linear(a, w1).relu(), 0.4)
        return gt.nn.functional.linear(h, w2)

    out = []
    for ck in (False, True):
        w1.grad = w2.grad = x.grad = None
        gt.manual_seed(5)
        y = checkpoint(block, x, use_reentrant=False) if ck else block(x)
        (y * y).sum().backward()
        out.append([t.numpy() for t in (w1.grad, w2.grad, x.grad, y)] + [w1.grad.sbp == w1.sbp])
    return out


def test_two_ranks_split_weight_bitwise():
    for plain, again in run_ranks(_split_weight_on_two_ranks, 2, timeout=120):
        assert again[-1] and all(np.array_equal(a, b) for a, b in zip(plain[:-1], again[:-1]))
