"""flow._C, OneFlow's functional namespace: each name resolves; OneFlow's own ops (slice, slice_update,
split_like, the *_like ops, bias_add, arg_sort, the softmax / sparse cross entropies, smooth_l1_loss)
match torch in values and gradients, on one process and on 2 ranks with split inputs; bad input
raises OneFlow's error class and words (its functional_api.yaml and op checks)."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from globaltensor import _C
from conftest import run_ranks

B, S = gt.sbp.broadcast, gt.sbp.split
RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 6)).astype(np.float64)
LABEL = np.array([1, 5, 0, 3])
PROBS = np.abs(RNG.standard_normal((4, 6))) + 0.1
PROBS /= PROBS.sum(-1, keepdims=True)


def test_every_name_resolves_and_the_extension_is_native():
    for name in _C.__all__:
        assert callable(getattr(_C, name)), name
    assert gt._C is _C and gt._native.CollectiveError.__module__ == "globaltensor._native"
    assert gt._native.__name__ == "globaltensor._native"
    x = gt.tensor([[-1.0, 2.0], [3.0, -4.0]])
    np.testing.assert_array_equal(_C.relu(x).numpy(), [[0, 2], [3, 0]])
    np.testing.assert_allclose(_C.matmul(x, x, transpose_b=True, alpha=0.5).numpy(), 0.5 * x.numpy() @ x.numpy().T)
    np.testing.assert_allclose(_C.softmax(x, 1).numpy(), torch.softmax(torch.tensor(x.numpy()), 1).numpy())
    np.testing.assert_array_equal(_C.arg_sort(gt.tensor([5, 10, 7]), "DESCENDING").numpy(), [1, 2, 0])


def _t(a, grad=False):
    return torch.tensor(a, requires_grad=grad)


def _g(a, grad=False):
    return gt.tensor(a, requires_grad=grad)


def test_slice_and_slice_update_match_torch():
    x = _g(X, True)
    y = _C.slice(x, [1, 0], [4, 6], [2, 3])
    tx = _t(X, True)
    ty = tx[1:4:2, 0:6:3]
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    v = RNG.standard_normal((2, 2))
    ref, val = _g(X, True), _g(v, True)
    out = _C.slice_update(ref, val, [1, 0], [4, 6], [2, 3])
    tref, tval = _t(X, True), _t(v, True)
    tout = tref.clone()
    tout[1:4:2, 0:6:3] = tval
    np.testing.assert_array_equal(out.numpy(), tout.detach().numpy())
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(ref.grad.numpy(), tref.grad.numpy())
    np.testing.assert_allclose(val.grad.numpy(), tval.grad.numpy())
    inplace = _g(X)
    assert _C.slice_update(inplace, _g(v), [1, 0], [4, 6], [2, 3], inplace=True) is inplace
    np.testing.assert_array_equal(inplace.numpy(), tout.detach().numpy())


def test_like_ops_and_bias_add_match_torch():
    a = _g(X, True)
    parts = _C.split_like(a, (gt.zeros(1, 6), gt.zeros(3, 6)), 0)
    want = torch.split(_t(X), [1, 3], 0)
    for p, w in zip(parts, want):
        np.testing.assert_array_equal(p.numpy(), w.numpy())
    np.testing.assert_array_equal(_C.reshape_like(a, gt.zeros(6, 4)).numpy(), X.reshape(6, 4))
    like = gt.zeros(1, 6, dtype=gt.float64)
    np.testing.assert_allclose(_C.reduce_sum_like(a, like, [0]).numpy(), X.sum(0, keepdims=True))
    np.testing.assert_array_equal(_C.broadcast_like(_g(X[:1]), gt.zeros(3, 4, 6)).numpy(),
                                  np.broadcast_to(X[:1], (3, 4, 6)))
    np.testing.assert_array_equal(_C.broadcast_like(_g(X[:, 0]), gt.zeros(4, 5), [1]).numpy(),
                                  np.broadcast_to(X[:, :1], (4, 5)))
    bias = RNG.standard_normal(4)
    b = _g(bias, True)
    out = _C.bias_add(a, b, axis=0)
    ta, tb = _t(X, True), _t(bias, True)
    tout = ta + tb[:, None]
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy())
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())


def _losses(lib):
    """(values, gradient of their sum by x) of the cross entropies, smooth_l1 and the grad op."""
    x = (_g if lib == "gt" else _t)(X, True)
    if lib == "gt":
        outs = [_C.softmax_cross_entropy(x, _g(PROBS)), _C.sparse_softmax_cross_entropy(x, _g(LABEL)),
                _C.sparse_cross_entropy(_C.softmax(x, -1), _g(LABEL), 6),
                _C.smooth_l1_loss(x, _g(PROBS), 0.5, "sum")]
    else:
        F = torch.nn.functional
        outs = [F.cross_entropy(x, _t(PROBS), reduction="none"), F.cross_entropy(x, _t(LABEL), reduction="none"),
                F.nll_loss(torch.log(torch.softmax(x, -1)), _t(LABEL), reduction="none"),
                F.smooth_l1_loss(x, _t(PROBS), reduction="sum", beta=0.5)]
    total = sum(o.sum() for o in outs)
    total.backward()
    return [o.detach().numpy() if lib == "torch" else o.numpy() for o in outs], x.grad.numpy()


def test_losses_match_torch_values_and_gradients():
    got, got_grad = _losses("gt")
    want, want_grad = _losses("torch")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-10, atol=1e-12)
    assert np.allclose(gt.nn.functional.sparse_softmax_cross_entropy(labels=_g(LABEL), logits=_g(X)).numpy(), got[1])
    dy = RNG.standard_normal(4)  # the grad op is the gradient of softmax_cross_entropy by its logits
    x = _t(X, True)
    torch.nn.functional.cross_entropy(x, _t(PROBS), reduction="none").backward(_t(dy))
    prob = torch.softmax(_t(X), -1).numpy()
    np.testing.assert_allclose(_C.softmax_cross_entropy_grad(_g(dy), _g(PROBS), _g(prob)).numpy(), x.grad.numpy())


def _global(n):
    pl = gt.placement("cpu", list(range(n)))
    x = gt.tensor(X, placement=pl, sbp=S(0), requires_grad=True)
    label = gt.tensor(LABEL, placement=pl, sbp=S(0))
    loss = _C.sparse_softmax_cross_entropy(x, label).sum() + _C.softmax_cross_entropy(
        x, gt.tensor(PROBS, placement=pl, sbp=S(0))).sum()
    part = _C.slice(x, [0, 1], [4, 6], [1, 2])
    upd = _C.slice_update(x, part * 0, [0, 1], [4, 6], [1, 2])
    loss = loss + (upd * upd).sum() + _C.bias_add(x, gt.tensor(X[0], placement=pl, sbp=B)).sum()
    loss.backward()
    whole = (B,)
    return (float(loss.to_global(sbp=whole).to_local().numpy()), x.grad.to_global(sbp=whole).to_local().numpy(),
            [p.to_global(sbp=whole).to_local().numpy() for p in _C.split_like(x, (gt.zeros(3, 6), gt.zeros(1, 6)), 0)])


def test_two_ranks_split_inputs_match_torch():
    x = _t(X, True)
    F = torch.nn.functional
    upd = x.clone()
    upd[:, 1:6:2] = 0
    loss = F.cross_entropy(x, _t(LABEL), reduction="sum") + F.cross_entropy(x, _t(PROBS), reduction="sum") + \
        (upd * upd).sum() + (x + _t(X[0])).sum()
    loss.backward()
    for got_loss, got_grad, parts in run_ranks(_global, 2, 2):
        np.testing.assert_allclose(got_loss, loss.item(), rtol=1e-10)
        np.testing.assert_allclose(got_grad, x.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(parts[0], X[:3])
        np.testing.assert_array_equal(parts[1], X[3:])


ERRORS = [  # (call, OneFlow's class, words of its message)
    (lambda: _C.slice(gt.tensor([1]), [-1], [1], [1]), RuntimeError, "The start list elements must be greater"),
    (lambda: _C.slice(gt.tensor([1]), [1], [1], [-1]), RuntimeError, "The step list elements must be greater than 0"),
    (lambda: _C.slice_update(gt.tensor([1, 2]), gt.tensor([1, 2]), [1, 2, 3], [1, 2, 3], [1, 2, 3]), RuntimeError,
     "The size of slice tuple must be equal to the size of value tensor at dimension 0, but got 0 and 2"),
    (lambda: _C.slice_update(gt.tensor([1]), gt.tensor([0.5]), [0], [1], [1]), TypeError,
     "Tensors ref and value must have same type"),
    (lambda: _C.split_like(gt.zeros(4, 4), (gt.zeros(2, 4), gt.zeros(3, 4)), 0), RuntimeError,
     "In non-dynamic shape situation, the total size of like (5)"),
    (lambda: _C.reshape_like(gt.zeros(2), gt.zeros(2, 3)), RuntimeError, "The element number of the in tensor"),
    (lambda: _C.reduce_sum_like(gt.zeros(2, dtype=gt.int64), gt.zeros(2), [1]), TypeError,
     "Tensors x and like must have the same type"),
    (lambda: _C.broadcast_like(gt.zeros(2, 2, 2), gt.zeros(2, 2)), RuntimeError, "The number of sizes provided (2)"),
    (lambda: _C.broadcast_like(gt.zeros(1, 0), gt.zeros(2, 2, 2)), RuntimeError,
     "The expanded size of the tensor (2) must match the existing size (0) at non-singleton dimension 2"),
    (lambda: _C.bias_add(gt.ones(4, 4), gt.ones(5), axis=1), RuntimeError,
     "The size of tensor x (4,4) must match the size of tensor b (5,) at dimension 1"),
    (lambda: _C.bias_add(gt.ones(4, 4), gt.ones(5), axis=3), IndexError,
     "Dimension out of range (expected to be in range of [-2,1], but got 3)"),
    (lambda: _C.arg_sort(gt.tensor([1, 2]), "NONE"), RuntimeError, 'but found the value is "NONE"'),
    (lambda: _C.softmax_cross_entropy(gt.zeros(1, 10), gt.zeros(1, 10, dtype=gt.float64)), TypeError,
     "label and prediction are expected to have the same dtype"),
    (lambda: _C.sparse_cross_entropy(gt.zeros(10, 5), gt.zeros(10), 5), TypeError,
     "The dtype of label must be integer, but found oneflow.float32"),
    (lambda: _C.sparse_softmax_cross_entropy(gt.zeros(10, 10, 5), gt.zeros(10, 9, dtype=gt.int64)), RuntimeError,
     "The size of prediction (10) must match the size of label (9) at dimension 1"),
    (lambda: _C.smooth_l1_loss(gt.zeros(10), gt.zeros(10), -1.0, "mean"), RuntimeError,
     "beta must be greater than or equal to 0"),
    (lambda: _C.normal(0.0, 1.0, (3, 3), dtype=gt.int32), NotImplementedError, "Only support float and double"),
    (lambda: _C.normal(0.0, 1.0, (3, 3), dtype=gt.float32, out=gt.zeros(3, 3, dtype=gt.float64)), RuntimeError,
     "data type oneflow.float32 does not match data type of out parameter oneflow.float64"),
    (lambda: _C.pad(gt.ones(1, 1, 2, 2), (4, 4, 4, 4), mode="test"), NotImplementedError,
     "Pad mode is test, but only constant, reflect and replicate are valid."),
    (lambda: _C.throw_error(gt.ones(2)), RuntimeError, "throw error kernel"),
    (lambda: _C.normalize(gt.ones(3, 3), dim=3), RuntimeError, "Axis should < 2 but axis is 3 now."),
    (lambda: _C.normalize(gt.ones(3, 3), dim=-3), RuntimeError, "Axis should >=0 but axis is -1 now."),
    (lambda: _C.normalization(gt.ones(1, 4, 2), gt.ones(4), None), RuntimeError,
     "Both moving_mean and moving_variance should be None or Tensor."),
    (lambda: _C.normalization(gt.ones(1, 2)), RuntimeError, "Must have moving_mean and moving_variance in eval mode."),
    (lambda: _C.mse_loss(gt.ones(4), gt.ones(4), "just_test"), RuntimeError, "Reduction should be none, sum or mean."),
    (lambda: _C.cross_entropy(gt.ones(4, 4), gt.ones(4, 4), None, 0, "x"), RuntimeError, "Reduction should be none"),
    (lambda: _C.triplet_margin_loss(gt.ones(3, 3), gt.ones(3, 3), gt.ones(3, 3), reduction="x"), RuntimeError,
     "Reduction should be none, sum or mean."),
    (lambda: _C.matmul(gt.ones(()), gt.ones(4, 4)), RuntimeError, "Tensor a's dim should >= 1"),
    (lambda: _C.fused_mlp(gt.ones(4, 4), [gt.ones(4, 4), gt.ones(4, 4)], [gt.ones(4)], False), RuntimeError,
     "The number of weights should be equal to biases"),
    (lambda: _C.fused_mlp(gt.ones(2, 4), [gt.ones(3, 6)], [gt.ones(3)], False), RuntimeError,
     "weight's second dim should be equal to input's second dim."),
    (lambda: _C.pixel_shuffle(gt.ones(1, 8, 4, 4), 2, 3), RuntimeError, "The channels of input tensor must be divisible"),
    (lambda: _C.one_hot(gt.ones(3, 3), 3, 0.9, 0), RuntimeError, "one_hot is only applicable to index tensor."),
]


@pytest.mark.parametrize("call,cls,words", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_oneflow_error_classes_and_words(call, cls, words):
    with pytest.raises(cls) as info:
        call()
    assert words in str(info.value)


def test_normal_fills_out_and_draws_standard_values():
    out = gt.zeros(200, 50, dtype=gt.float64)
    got = _C.normal(2.0, 3.0, (200, 50), out=out)
    assert got is out and out.dtype == gt.float64
    values = out.numpy()
    assert abs(values.mean() - 2.0) < 0.1 and abs(values.std() - 3.0) < 0.1


def test_normalize_and_normalization_match_torch():
    x = RNG.standard_normal((4, 3, 5))
    np.testing.assert_allclose(_C.normalize(_g(x), dim=-1).numpy(), torch.nn.functional.normalize(_t(x), dim=-1))
    mean, var = RNG.standard_normal(3), np.abs(RNG.standard_normal(3)) + 0.5
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    got = _C.normalization(_g(x), _g(mean), _g(var), _g(w), _g(b), 1, 1e-5, 0.9, False).numpy()
    want = torch.nn.functional.batch_norm(_t(x), _t(mean), _t(var), _t(w), _t(b), False, 0.9, 1e-5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10)
    rm, rv, trm, trv = _g(mean), _g(var), _t(mean), _t(var)
    got = _C.normalization(_g(x), rm, rv, _g(w), _g(b), 1, 1e-5, 0.1, True).numpy()
    want = torch.nn.functional.batch_norm(_t(x), trm, trv, _t(w), _t(b), True, 0.1, 1e-5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-10)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-10)


def test_fused_mlp_pixel_shuffle_one_hot_match_torch():
    x, w1, b1, w2, b2 = (RNG.standard_normal(s) for s in ((3, 4), (5, 4), (5,), (2, 5), (2,)))
    gx, gw = _g(x, True), _g(w1, True)
    got = _C.fused_mlp(gx, [gw, _g(w2)], [_g(b1), _g(b2)], True)
    tx, tw = _t(x, True), _t(w1, True)
    F = torch.nn.functional
    want = F.linear(F.relu(F.linear(tx, tw, _t(b1))), _t(w2), _t(b2))
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(gw.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    a = RNG.standard_normal((2, 8, 3, 5))
    np.testing.assert_array_equal(_C.pixel_shuffle(_g(a), 2, 2).numpy(), F.pixel_shuffle(_t(a), 2).numpy())
    idx = np.array([[0, 3], [2, 1]])
    np.testing.assert_array_equal(_C.one_hot(_g(idx), 5).numpy(), F.one_hot(_t(idx), 5).numpy())
    np.testing.assert_array_equal(_C.one_hot(_g(idx)).numpy(), F.one_hot(_t(idx)).numpy())
    np.testing.assert_allclose(_C.one_hot(_g(idx), 4, 0.9, 0.1).numpy(),
                               np.where(F.one_hot(_t(idx), 4).numpy() == 1, 0.9, 0.1).astype(np.float32))
