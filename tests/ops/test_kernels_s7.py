"""Issue 35 (s7): BatchNorm's training step as three primitives (ops/batch_norm_train.py), bit for
bit the per-channel composite it replaced, and against torch for values."""
import builtins

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    return x, rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32), \
        rng.standard_normal(shape).astype(np.float32)


def _composite(input, running_mean, running_var, weight, bias, momentum=0.1, eps=1e-5):
    """ops/norms.py's training batch_norm before s7: channel_sums, the [C] arithmetic op by op, channel_affine."""
    from globaltensor.dispatch import apply
    from globaltensor.ops.elementwise import rsqrt

    def whole(t):
        if not t.is_global:
            return t
        keep = [s for s, x in zip(t.sbp, input.sbp) if s is not gt.sbp.partial_sum and x == gt.sbp.split(1)]
        want = tuple(s if s in keep else gt.sbp.broadcast for s in t.sbp)
        return t if want == tuple(t.sbp) else t.to_global(placement=t.placement, sbp=want)
    count = input.numel() // input.shape[1]
    s1, s2 = apply("channel_sums", [input], multi=True)
    mean = whole(s1 * (1.0 / count))
    var = whole(s2 * (1.0 / count) - mean * mean).clip(0, None)
    with gt.no_grad():
        running_mean.mul_(1 - momentum).add_((mean * momentum).astype(running_mean.dtype))
        running_var.mul_(1 - momentum).add_((var * (momentum * count / builtins.max(count - 1, 1))).astype(
            running_var.dtype))
    scale = rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    return apply("channel_affine", [input, scale.astype(input.dtype), shift.astype(input.dtype)])


def _run(fn, x, w, b, g, mesh=None, sbp=None, affine=True):
    def glob(a, s, grad=True):
        t = gt.tensor(a)
        if mesh is not None:
            t = t.to_global(mesh, gt.sbp.broadcast).to_global(sbp=s)
        return t.requires_grad_() if grad else t
    X = glob(x, sbp)
    W, Bb = (glob(w, gt.sbp.broadcast), glob(b, gt.sbp.broadcast)) if affine else (None, None)
    rm, rv = glob(np.zeros(x.shape[1], np.float32), gt.sbp.broadcast, False), \
        glob(np.ones(x.shape[1], np.float32), gt.sbp.broadcast, False)
    with gt.debug.count_collectives() as counted:
        y = fn(X, rm, rv, W, Bb)
        (y * glob(g, sbp, False)).sum().backward()
    whole = [t.to_global(sbp=gt.sbp.broadcast) if mesh is not None else t
             for t in [y, X.grad, rm, rv] + ([W.grad, Bb.grad] if affine else [])]
    return [t.numpy().tobytes() for t in whole], dict(counted)


def _new(X, rm, rv, W, Bb):
    return gt.nn.functional.batch_norm(X, rm, rv, W, Bb, training=True)


def _two_ranks(shape, sbp_dim, affine):
    mesh = gt.placement("cpu", [0, 1])
    x, w, b, g = _data(shape, seed=sbp_dim)
    sbp = gt.sbp.split(sbp_dim)
    new, new_count = _run(_new, x, w, b, g, mesh, sbp, affine)
    old, old_count = _run(_composite, x, w, b, g, mesh, sbp, affine)
    return new == old, new_count, old_count, np.frombuffer(new[1], np.float32)


def test_batch_norm_as_the_composite_bit_for_bit_on_two_ranks():
    cases = [((8, 4, 3, 5), 0, True), ((6, 5, 4, 2), 0, False), ((4, 6, 4, 3), 2, True), ((4, 6, 3, 3), 1, True)]
    for (shape, dim, affine), (same, new_count, old_count, dx) in zip(cases, run_ranks(_all_cases, 2, cases,
                                                                                          timeout=90)[0]):
        assert same, (shape, dim, affine)
        if dim != 1:  # the composite: 3 reduce_scatter + 2 all_gather more; now one all_reduce forward, one backward
            assert "reduce_scatter" not in new_count, new_count
            assert sum(old_count.values()) - sum(new_count.values()) == 5, (new_count, old_count)
        x, w, b, g = _data(shape, seed=dim)
        np.testing.assert_allclose(dx, _torch_dx(x, w, b, g, affine).ravel(), rtol=1e-4, atol=1e-5)


def _all_cases(cases):
    return [_two_ranks(*case) for case in cases]


def _torch_dx(x, w, b, g, affine):
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.batch_norm(tx, torch.zeros(x.shape[1]), torch.ones(x.shape[1]),
                                       torch.tensor(w) if affine else None, torch.tensor(b) if affine else None,
                                       training=True)
    (y * torch.tensor(g)).sum().backward()
    return tx.grad.numpy()


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_against_torch_and_the_composite_in_one_process(affine):
    torch = pytest.importorskip("torch")
    x, w, b, g = _data((6, 4, 3, 5))
    new, _ = _run(_new, x, w, b, g, affine=affine)
    assert new == _run(_composite, x, w, b, g, affine=affine)[0]
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    trm, trv = torch.zeros(4), torch.ones(4)
    ty = torch.nn.functional.batch_norm(tx, trm, trv, tw if affine else None, tb if affine else None, training=True)
    (ty * torch.tensor(g)).sum().backward()
    want = [ty.detach(), tx.grad, trm, trv] + ([tw.grad, tb.grad] if affine else [])
    for got, ref in zip(new, want):
        np.testing.assert_allclose(np.frombuffer(got, np.float32).reshape(ref.shape), ref.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n, c, side, o, groups", [(4, 3, 8, 8, 1), (2, 32, 16, 64, 1), (3, 4, 7, 6, 2)])
def test_conv2d_weight_grad_bit_for_bit_as_before_and_as_torch(n, c, side, o, groups):
    """conv2d_backward's dw: the bits of g . patches^T on every OpenBLAS kernel (OPENBLAS_CORETYPE=Zen
    or Haswell showed that the turned product (patches . g^T)^T differs in the last bit there)."""
    from globaltensor.ops.conv import _conv2d_backward
    from globaltensor.ops.conv_patches import _channel_major_patches
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, c, side, side)).astype(np.float32)
    w = rng.standard_normal((o, c // groups, 3, 3)).astype(np.float32)
    g = rng.standard_normal((n, o, side, side)).astype(np.float32)
    st = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)}
    dx, dw, db = _conv2d_backward(g, x, w, groups=groups, **st)
    cols = _channel_major_patches(x, 3, 3, st)[0].reshape(groups, -1, n * side * side)
    gm = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, o // groups, -1)
    assert dw.tobytes() == np.matmul(gm, cols.transpose(0, 2, 1)).reshape(w.shape).tobytes()
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(tx, tw, padding=1, groups=groups).backward(torch.tensor(g))
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)


def _attention_before(q, k, v, mask, scale, first):
    """ops/attention.py's forward before s7: numpy's passes, the causal -inf by a copy under a mask."""
    lq, lk = q.shape[-2], k.shape[-2]
    if q.shape[-1] <= lk:
        scores = np.matmul(q * q.dtype.type(scale), np.swapaxes(k, -1, -2))
    else:
        scores = np.matmul(q, np.swapaxes(k, -1, -2))
        scores *= scores.dtype.type(scale)
    with np.errstate(invalid="ignore", over="ignore"):
        if mask is not None:
            np.copyto(scores, -np.inf, where=~mask)
        if first is not None:
            np.copyto(scores, -np.inf, where=np.triu(np.ones((lq, lk), bool), first + 1))
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
    return np.matmul(scores, v), scores


def _attention_backward_before(g, q, k, v, w, scale):
    dv = np.matmul(np.swapaxes(w, -1, -2), g)
    ds = np.matmul(g, np.swapaxes(v, -1, -2))
    with np.errstate(invalid="ignore"):
        ds -= np.einsum("...ij,...ij->...i", ds, w)[..., None]
        ds *= w
    dq, dk = np.matmul(ds, k), np.matmul(np.swapaxes(ds, -1, -2), q)
    dq *= dq.dtype.type(scale)
    dk *= dk.dtype.type(scale)
    return dq, dk, dv


@pytest.mark.parametrize("dtype, lq, lk, causal, diagonal, masked", [
    (np.float32, 16, 16, True, None, False), (np.float32, 6, 9, True, 1, False), (np.float64, 7, 7, True, -2, False),
    (np.float32, 5, 13, False, None, True), (np.float32, 9, 5, True, None, False)])
def test_attention_row_passes_bit_for_bit_as_before(dtype, lq, lk, causal, diagonal, masked):
    """softmax_shift / softmax_grad (kernels/softmax.cpp) against the numpy passes they replaced,
    rows that see no key (nan) included, and the forward and backward against torch's."""
    from globaltensor.ops.attention import _attention, _attention_backward_kernel
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(lq * lk)
    q, k = (rng.standard_normal((2, 3, n, 8)).astype(dtype) * 4 for n in (lq, lk))
    v = rng.standard_normal((2, 3, lk, 5)).astype(dtype)
    mask = rng.random((2, 1, lq, lk)) > 0.3 if masked else None
    if masked:
        mask[0, 0, 1] = False  # a row with no key
    first = (lk - lq if diagonal is None else diagonal) if causal else None
    out, w = _attention(q, k, v, mask, scale=0.35, is_causal=causal, diagonal=diagonal)
    want_out, want_w = _attention_before(q, k, v, mask, 0.35, first)
    assert out.tobytes() == want_out.tobytes() and w.tobytes() == want_w.tobytes()
    g = rng.standard_normal(out.shape).astype(dtype)
    got = _attention_backward_kernel(g, q, k, v, w, scale=0.35)
    assert [a.tobytes() for a in got] == [a.tobytes() for a in _attention_backward_before(g, q, k, v, w, 0.35)]
    if masked or (causal and first < 0):  # rows that see no key: nan here (softmax of -inf), 0 in torch
        return
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    t_mask = torch.tensor(np.tril(np.ones((lq, lk), bool), first)) if causal else None
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=t_mask, scale=0.35)
    t_out.backward(torch.tensor(g))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=tol, atol=tol)
    for a, t in zip(got, (tq, tk, tv)):
        np.testing.assert_allclose(a, t.grad.numpy(), rtol=tol, atol=tol)
