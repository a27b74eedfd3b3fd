"""The Tensor API a PyTorch/OneFlow user reaches for, local and global:
max/min/median named tuples, bitwise operators, to()/cpu()/cuda()/device, clone, contiguous,
view, repeat, masked_fill, in-place ops and x[k] = v, zero_grad, clip_grad_norm_,
CosineAnnealingLR, Embedding(padding_idx), gt.cat and `from globaltensor import *`.
Values are checked against torch where it is installed, against numpy always."""
import math
import os

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks
from targets import OPS_TARGET

try:
    if "RANK" in os.environ:  # a spawned rank compares nothing with torch: skip its slow import
        raise ImportError
    import torch
except ImportError:  # CI has no torch: numpy references only
    torch = None

R = np.random.default_rng(13)
X = R.permutation(15).reshape(5, 3).astype(np.float64) - 7  # distinct values: no ties to argue about
TIES = np.array([[1., 1, 1, 2], [3, 1, 3, 3], [2, 2, 1, 1], [5, 5, 5, 5]])
INTS = R.integers(-50, 50, (5, 3))
MASK_ROWS = np.array([True, False, True, False, False])


# --- numpy references ---------------------------------------------------------------------------

def np_extreme(name, a, dim, keepdim=False):
    values = (np.max if name == "max" else np.min)(a, axis=dim, keepdims=keepdim)
    return values, (np.argmax if name == "max" else np.argmin)(a, axis=dim, keepdims=keepdim)


def np_median(a, dim=None, keepdim=False):
    """The lower middle (rank (n - 1) // 2 of a stable sort), as torch.median."""
    if dim is None:
        flat = np.sort(a.reshape(-1), kind="stable")
        return flat[(flat.size - 1) // 2]
    order = np.argsort(a, axis=dim, kind="stable")
    idx = np.take(order, [(a.shape[dim] - 1) // 2], axis=dim)
    values = np.take_along_axis(a, idx, axis=dim)
    return (values, idx) if keepdim else (values.squeeze(dim), idx.squeeze(dim))


def one_hot_along(shape, idx, dim):
    out = np.zeros(shape)
    np.put_along_axis(out, np.expand_dims(idx, dim), 1.0, axis=dim)
    return out


def check(got, want, **kw):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-12, atol=1e-12, **kw)


# --- reductions with indices --------------------------------------------------------------------

def test_max_min_median_return_named_tuples_like_pytorch():
    for a in (X, TIES):
        t = gt.tensor(a)
        for name in ("max", "min", "median"):
            for dim in (0, 1, -1):
                for keep in (False, True):
                    r = getattr(gt, name)(t, dim, keep)
                    assert type(r).__name__ == name and r._fields == ("values", "indices")
                    values, indices = r
                    assert values is r.values and indices is r.indices and indices.dtype == gt.int64
                    want = np_median(a, dim % 2, keep) if name == "median" else np_extreme(name, a, dim, keep)
                    check(values.numpy(), want[0], err_msg=f"{name} {dim} {keep}")
                    check(indices.numpy(), want[1], err_msg=f"{name} {dim} {keep}")
                    if torch is not None:
                        tr = getattr(torch, name)(torch.tensor(a), dim, keep)
                        check(values.numpy(), tr.values.numpy())
                        check(indices.numpy(), tr.indices.numpy())
                    m = getattr(t, name)(dim=dim, keepdim=keep)  # the method, keyword arguments
                    check(m.indices.numpy(), want[1])
    t = gt.tensor(TIES)
    assert gt.max(t).shape == () and float(gt.max(t)) == 5.0 and float(gt.min(t)) == 1.0
    assert float(gt.median(gt.tensor([4.0, 1.0, 3.0, 2.0]))) == 2.0  # lower middle, not 2.5
    assert float(gt.median(gt.tensor([4, 1, 3, 2]))) == 2 and gt.median(gt.tensor([4, 1])).dtype == gt.int64
    check(gt.max(t, gt.tensor(TIES[::-1].copy())).numpy(), np.maximum(TIES, TIES[::-1]))  # gt.max(x, y)
    check(gt.min(t, other=gt.tensor(TIES.T.copy())).numpy(), np.minimum(TIES, TIES.T))
    check(t.max(gt.tensor(3.0)).numpy(), np.maximum(TIES, 3.0))
    check(gt.max(t, (0, 1)).numpy(), 5.0)  # a tuple of dims: values only (amax)
    check(gt.amax(t, 1).numpy(), TIES.max(1))
    check(gt.amin(t, (0,), True).numpy(), TIES.min(0, keepdims=True))
    nan = gt.tensor([3.0, 1.0, np.nan, 2.0, np.nan])
    for name in ("max", "min", "median"):  # NaN wins, at its first position (PyTorch)
        r = getattr(gt, name)(nan, 0)
        assert math.isnan(float(r.values)) and int(r.indices) == 2, name
    assert math.isnan(float(gt.median(nan)))
    with pytest.raises(TypeError):
        gt.median(t, (0, 1))


def test_gradients_of_max_min_median_go_where_pytorch_sends_them():
    x = gt.tensor(TIES, requires_grad=True)
    (gt.max(x, 1).values.sum() + gt.min(x, 0).values.sum() * 2 + gt.median(x, 1).values.sum() * 3
     + gt.max(x) * 5 + gt.median(x) * 7).backward()
    want = one_hot_along(TIES.shape, TIES.argmax(1), 1) + 2 * one_hot_along(TIES.shape, TIES.argmin(0), 0)
    want += 3 * one_hot_along(TIES.shape, np_median(TIES, 1)[1], 1)
    want += 5 * (TIES == TIES.max()) / (TIES == TIES.max()).sum()  # max(): ties share
    want += 7 * (TIES == np_median(TIES)) / (TIES == np_median(TIES)).sum()  # median(): ties share too
    check(x.grad.numpy(), want)
    if torch is not None:
        tx = torch.tensor(TIES, requires_grad=True)
        (torch.max(tx, 1).values.sum() + torch.min(tx, 0).values.sum() * 2 + torch.median(tx, 1).values.sum() * 3
         + torch.max(tx) * 5 + torch.median(tx) * 7).backward()
        check(x.grad.numpy(), tx.grad.numpy())


# --- bitwise operators --------------------------------------------------------------------------

def test_bitwise_operators_on_integer_and_bool_tensors():
    a, b = INTS, INTS[::-1].copy()
    for dt in (np.int64, np.int32, np.uint8, np.int8):
        na, nb = a.astype(dt), b.astype(dt)
        x, y = gt.tensor(na), gt.tensor(nb)
        for got, want in [(~x, ~na), (x & y, na & nb), (x | y, na | nb), (x ^ y, na ^ nb), (x & 6, na & 6),
                          (5 | x, 5 | na), (gt.bitwise_xor(x, 3), na ^ 3), (x.bitwise_not(), ~na)]:
            assert got.dtype.np == want.dtype, (dt, got.dtype)
            check(got.numpy(), want)
    p, q = gt.tensor(a > 0), gt.tensor(b > 0)
    assert (~p).dtype == gt.bool and np.array_equal((~p).numpy(), ~(a > 0))
    assert np.array_equal((p & q | ~q ^ p).numpy(), (a > 0) & (b > 0) | ~(b > 0) ^ (a > 0))
    mixed = p & gt.tensor(a)  # bool with int: int, bitwise (as PyTorch)
    assert mixed.dtype == gt.int64 and np.array_equal(mixed.numpy(), (a > 0) & a)
    if torch is not None:
        ta, tb = torch.tensor(a), torch.tensor(b)
        check((~gt.tensor(a) & gt.tensor(b) ^ 7).numpy(), (~ta & tb ^ 7).numpy())
        check((gt.tensor(a > 0) | gt.tensor(a)).numpy(), (torch.tensor(a > 0) | ta).numpy())
    f = gt.tensor([1.5, 2.0])
    for bad in (lambda: ~f, lambda: f & f, lambda: f | 1, lambda: gt.bitwise_xor(f, f)):
        with pytest.raises(TypeError):
            bad()
    z = gt.tensor(a)
    z &= 12
    z |= gt.tensor(b)
    z ^= 1
    check(z.numpy(), ((a & 12) | b) ^ 1)


# --- conversions and small methods --------------------------------------------------------------

def test_to_cpu_device_dim_and_what_needs_a_gpu():
    x = gt.tensor(X, dtype=gt.float32)
    assert x.dim() == 2 and x.device == "cpu" and x.device.type == "cpu" and x.device.index == 0 and not x.is_cuda
    assert x.to("cpu") is x and x.cpu() is x and x.to(gt.float32) is x and x.to(device="cpu", dtype="float32") is x
    assert x.to(gt.float64).dtype == gt.float64 and x.to("cpu", gt.int64).dtype == gt.int64
    assert x.to(gt.tensor([1], dtype=gt.int32)).dtype == gt.int32  # another tensor: its dtype and device
    c = x.to(gt.float32, copy=True)
    assert c is not x and np.array_equal(c.numpy(), x.numpy()) and not np.shares_memory(c._local, x._local)
    from globaltensor.backends import cuda
    if cuda.is_available() or os.environ.get("GLOBALTENSOR_CUDA_SIMULATE", "0") not in ("", "0"):
        return
    for call in (lambda: x.to("cuda"), x.cuda, lambda: x.to("cuda:0")):
        with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            call()
    with pytest.raises(ValueError, match="unknown device"):
        x.to(device="tpu")


def test_clone_contiguous_view_repeat_masked_fill():
    x = gt.tensor(X, requires_grad=True)
    c = x.clone()
    assert not np.shares_memory(c._local, x._local) and c.requires_grad and gt.clone(x).shape == x.shape
    (c * c).sum().backward()
    check(x.grad.numpy(), 2 * X)
    t = gt.tensor(X).T
    assert not t._local.flags.c_contiguous and t.contiguous()._local.flags.c_contiguous
    y = gt.tensor(X)
    assert y.contiguous() is y
    v = y.view(15)
    assert np.shares_memory(v._local, y._local) and v.shape == (15,) and y.view(3, -1).shape == (3, 5)
    with pytest.raises(RuntimeError, match="view"):
        t.view(15)  # a transposed piece cannot be seen flat without a copy (as PyTorch)
    assert t.reshape(15).shape == (15,)
    for sizes in [(2, 1), (1, 3), (2, 2, 1)]:
        want = np.tile(X, sizes)
        check(y.repeat(*sizes).numpy(), want)
        check(y.repeat(sizes).numpy(), want)
        if torch is not None:
            check(y.repeat(*sizes).numpy(), torch.tensor(X).repeat(*sizes).numpy())
    with pytest.raises(RuntimeError):
        y.repeat(2)
    m = gt.tensor(X, requires_grad=True)
    out = m.masked_fill(gt.tensor(X > 0), -1.0)
    check(out.numpy(), np.where(X > 0, -1.0, X))
    out.sum().backward()
    check(m.grad.numpy(), X <= 0)
    rows = gt.masked_fill(gt.tensor(INTS), gt.tensor(MASK_ROWS[:, None]), 2.7)  # broadcast mask; x's dtype
    assert rows.dtype == gt.int64 and np.array_equal(rows.numpy(), np.where(MASK_ROWS[:, None], 2, INTS))
    with pytest.raises(TypeError):
        y.masked_fill(gt.tensor(INTS), 0)
    if torch is not None:
        check(rows.numpy(), torch.tensor(INTS).masked_fill(torch.tensor(MASK_ROWS[:, None]), 2.7).numpy())


# --- in-place ops and x[key] = value -------------------------------------------------------------

KEYS = [0, -1, (1, 2), (slice(1, 4), 1), (slice(None, None, 2),), (slice(None, None, -2), slice(1, None)),
        (Ellipsis, 2), (None, 1), (slice(4, 1, -1), None, slice(None, 2)), (3, Ellipsis)]


def _value_for(key, a):
    """A value of the key's selection shape (minus a leading 1 where one fits, to broadcast)."""
    shape = np.shape(a[key])
    return np.arange(1, 1 + int(np.prod(shape)), dtype=np.float64).reshape(shape) * 10


def _negative_step(key):
    return any(isinstance(k, slice) and (k.step or 1) < 0 for k in (key if isinstance(key, tuple) else (key,)))


def test_setitem_basic_and_advanced_keys_against_numpy_and_torch():
    advanced = [np.array([0, 3]), [1, 1, 4], MASK_ROWS, X > 0, (np.array([0, 2]), np.array([1, 0])),
                (slice(1, 3), [0, 2])]
    for key in KEYS + advanced:
        k = tuple(gt.tensor(i) if isinstance(i, np.ndarray) else i for i in key) if isinstance(key, tuple) else \
            (gt.tensor(key) if isinstance(key, np.ndarray) else key)
        for value in (5.5, _value_for(key, X)):
            x = gt.tensor(X)
            x[k] = value if np.isscalar(value) else gt.tensor(value)
            want = X.copy()
            want[key] = value
            check(x.numpy(), want, err_msg=repr(key))
            if torch is not None and not _negative_step(key):  # torch has no negative steps: numpy's rule here
                tx = torch.tensor(X)
                tk = tuple(torch.tensor(i) if isinstance(i, np.ndarray) else i for i in key) if isinstance(key, tuple) \
                    else (torch.tensor(key) if isinstance(key, np.ndarray) else key)
                tx[tk] = value if np.isscalar(value) else torch.tensor(value)
                check(x.numpy(), tx.numpy(), err_msg=repr(key))
    i = gt.tensor(INTS)
    i[0] = 2.9  # cast to the tensor's dtype (truncated, as PyTorch)
    assert i.dtype == gt.int64 and list(i.numpy()[0]) == [2, 2, 2]
    x = gt.tensor(X)
    x[1] = gt.tensor([[1.0, 2.0, 3.0]])  # a leading 1 broadcasts away
    check(x.numpy()[1], [1, 2, 3])
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[1:3] = gt.tensor([1.0, 2.0])
    with pytest.raises(IndexError):
        x[5] = 1.0
    with pytest.raises(IndexError):
        x[0, 0, 0] = 1.0


def test_inplace_arithmetic_and_fills_keep_the_tensor_and_its_dtype():
    x = gt.tensor(X)
    same = x
    x.add_(1).mul_(2).sub_(gt.tensor(X), alpha=0.5).div_(4)
    x += 1
    x -= gt.tensor(X)
    x *= 3
    x /= 2
    assert x is same
    check(x.numpy(), (((X + 1) * 2 - 0.5 * X) / 4 + 1 - X) * 3 / 2)
    x.clamp_(-1, 1).exp_()
    check(x.numpy(), np.exp(np.clip((((X + 1) * 2 - 0.5 * X) / 4 + 1 - X) * 3 / 2, -1, 1)))
    assert x.zero_() is x and not x.numpy().any()
    x.fill_(2.5)
    check(x.numpy(), np.full(X.shape, 2.5))
    x.copy_(gt.tensor([1.0, 2.0, 3.0]))  # broadcast
    check(x.numpy(), np.tile([1.0, 2.0, 3.0], (5, 1)))
    x.copy_(gt.tensor(INTS))  # any dtype into x's
    assert x.dtype == gt.float64 and np.array_equal(x.numpy(), INTS)
    x.masked_fill_(gt.tensor(INTS > 0), 0.0)
    check(x.numpy(), np.where(INTS > 0, 0, INTS))
    i = gt.tensor(INTS)
    i.add_(3)
    i.div_(2, rounding_mode="floor")
    check(i.numpy(), (INTS + 3) // 2)
    i.fill_(7.9)
    assert i.dtype == gt.int64 and (i.numpy() == 7).all()
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.mul_(2.5)  # a float result into an integer tensor (PyTorch raises too)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.div_(2)
    with pytest.raises(RuntimeError, match="shape"):
        gt.tensor([1.0, 2.0]).add_(gt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    view = gt.tensor(X)
    alias = view.detach()
    view.add_(1)  # written into the piece, as PyTorch's storage: a detach() alias sees it
    check(alias.numpy(), X + 1)
    if torch is not None:
        t = torch.tensor(X)
        t.add_(1).mul_(2).sub_(torch.tensor(X), alpha=0.5).div_(4)
        y = gt.tensor(X).add_(1).mul_(2).sub_(gt.tensor(X), alpha=0.5).div_(4)
        check(y.numpy(), t.numpy())


def _inplace_program(lib, x, w):
    """A program of in-place ops and assignments through autograd (lib: gt or torch)."""
    y = x * 2
    y[1:3] = 0
    y.mul_(x)
    y[:, 0] = w[:, 1] * 3
    y.add_(w, alpha=0.5)
    y[y > 20] = 1.0
    z = y.clone()
    z.masked_fill_(lib.tensor(MASK_ROWS)[:, None], 0.0)
    return (z * w).sum() + y.sum()


def test_inplace_ops_record_autograd_like_pytorch():
    x, w = gt.tensor(X, requires_grad=True), gt.tensor(X[::-1].copy() / 3, requires_grad=True)
    _inplace_program(gt, x, w).backward()
    y = 2 * X * X
    y[1:3] = 0
    y[:, 0] = X[::-1, 1]
    y += 0.5 * X[::-1] / 3
    big = y > 20
    gy = (~MASK_ROWS[:, None]) * (X[::-1] / 3) + 1.0  # d loss / d y (before the last assignment)
    gy[big] = 0
    gx = gy * 4 * X
    gx[1:3] = 0
    gx[:, 0] = 0
    gw = gy * 0.5
    gw[:, 1] += 3 * gy[:, 0]
    zy = y.copy()
    zy[big] = 1.0
    gw += np.where(MASK_ROWS[:, None], 0.0, zy)
    check(x.grad.numpy(), gx)
    check(w.grad.numpy(), gw)
    if torch is not None:
        tx, tw = torch.tensor(X, requires_grad=True), torch.tensor(X[::-1].copy() / 3, requires_grad=True)
        _inplace_program(torch, tx, tw).backward()
        check(x.grad.numpy(), tx.grad.numpy())
        check(w.grad.numpy(), tw.grad.numpy())
    leaf = gt.tensor(X, requires_grad=True)
    for bad in (lambda: leaf.add_(1), lambda: leaf.zero_(), lambda: leaf.__setitem__(0, 1.0)):
        with pytest.raises(RuntimeError, match="leaf Tensor that requires grad"):
            bad()
    with gt.no_grad():
        leaf.mul_(2)
        leaf[0] = 0.0
    assert leaf.is_leaf and leaf.requires_grad
    check(leaf.numpy(), np.vstack([np.zeros(3), 2 * X[1:]]))
    w = gt.tensor(X, requires_grad=True)
    y = w * 2
    with pytest.raises(RuntimeError):
        y.add_(gt.tensor(np.ones((2, 5, 3))))  # a failed in-place op leaves the graph as it was
    y.sum().backward()
    check(w.grad.numpy(), np.full(X.shape, 2.0))
    with pytest.raises(TypeError):
        y + gt.max(y, 0)  # a (values, indices) tuple is not data
    c = gt.tensor(X)  # a constant that takes a value requiring grad becomes part of the graph
    c[0] = leaf[1]
    assert c.requires_grad and not c.is_leaf
    c.sum().backward()
    check(leaf.grad.numpy(), np.vstack([np.zeros(3), np.ones(3), np.zeros((3, 3))]))


# --- nn and optim --------------------------------------------------------------------------------

def test_zero_grad_clip_grad_norm_cosine_and_padding_idx():
    model = nn.Linear(3, 2)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    model(gt.tensor(X, dtype=gt.float32)).sum().backward()
    grads = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=False)
    assert [p.grad for p in model.parameters()] == grads and all(not g.numpy().any() for g in grads)
    model(gt.tensor(X, dtype=gt.float32)).sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g.numpy().any() for g in grads)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is g and not g.numpy().any() for p, g in zip(model.parameters(), grads))
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())

    for norm_type in (2.0, 1.0, 3.0, float("inf")):
        ps = [nn.Parameter(gt.tensor(np.zeros(a.shape))) for a in (X, INTS[:2])]
        for p, a in zip(ps, (X, INTS[:2] / 7)):
            p.grad = gt.tensor(a)
        total = gt.nn.utils.clip_grad_norm_(ps, 2.0, norm_type)
        flat = np.concatenate([X.reshape(-1), (INTS[:2] / 7).reshape(-1)])
        want = np.abs(flat).max() if norm_type == float("inf") else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
        assert isinstance(total, gt.Tensor) and total.shape == () and total == pytest.approx(want)
        coef = min(2.0 / (want + 1e-6), 1.0)
        check(ps[0].grad.numpy(), X * coef)
        if torch is not None:
            tps = [torch.zeros(a.shape, dtype=torch.float64, requires_grad=True) for a in (X, INTS[:2])]
            for p, a in zip(tps, (X, INTS[:2] / 7)):
                p.grad = torch.tensor(a)
            check(total.numpy(), torch.nn.utils.clip_grad_norm_(tps, 2.0, norm_type).numpy())
            check(ps[1].grad.numpy(), tps[1].grad.numpy())

    p = nn.Parameter(gt.tensor(np.zeros(2)))
    opt = gt.optim.SGD([p], lr=1.0)
    cos = gt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.1)
    lrs = [cos.get_last_lr()[0]]
    for _ in range(11):
        cos.step()
        lrs.append(cos.get_last_lr()[0])
    want = [0.1 + 0.9 * (1 + math.cos(math.pi * t / 4)) / 2 for t in range(12)]
    np.testing.assert_allclose(lrs, want, atol=1e-12)  # past T_max the cosine goes on (back up at 2 T_max)
    assert lrs[8] == pytest.approx(1.0) and lrs[4] == pytest.approx(0.1)
    if torch is not None:
        tp = torch.zeros(2, requires_grad=True)
        topt = torch.optim.SGD([tp], lr=1.0)
        tcos = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=4, eta_min=0.1)
        tlrs = [tcos.get_last_lr()[0]]
        for _ in range(11):
            topt.step()
            tcos.step()
            tlrs.append(tcos.get_last_lr()[0])
        np.testing.assert_allclose(lrs, tlrs, atol=1e-9)

    for padding_idx, row in ((1, 1), (-1, 4)):
        emb = nn.Embedding(5, 3, padding_idx=padding_idx)
        assert emb.padding_idx == row and not emb.weight.numpy()[row].any() and emb.weight.numpy()[row - 2].any()
        emb(gt.tensor([[0, row], [row, 3]])).sum().backward()
        assert not emb.weight.grad.numpy()[row].any() and emb.weight.grad.numpy()[0].all()


def test_cat_and_star_import():
    check(gt.cat([gt.tensor(X), gt.tensor(X[:2])], 0).numpy(), np.concatenate([X, X[:2]]))
    check(gt.tensor(X).max(1).values.numpy(), X.max(1))
    namespace = {}
    exec("from globaltensor import *", namespace)
    for name in ("nn", "optim", "save", "load", "no_grad", "enable_grad", "Tensor", "placement", "sbp", "float32",
                 "int64", "bool", "tensor", "zeros", "cat", "max", "bitwise_and", "manual_seed", "autograd"):
        assert name in namespace, name
    path = OPS_TARGET
    if os.path.exists(path):
        names = [w for line in open(path) if not line.startswith("#") for w in line.split()]
        assert [n for n in names if n not in namespace] == ["slice"]  # Paddle's slice would hide the builtin
        assert all(hasattr(gt, n) for n in names)
    assert "slice" not in namespace and namespace["max"] is gt.max


# --- global tensors on 2 ranks -------------------------------------------------------------------

def _sbps():
    return {"B": gt.sbp.broadcast, "S0": gt.sbp.split(0), "S1": gt.sbp.split(1), "P": gt.sbp.partial_sum}


def _global_api():
    """Everything above on global tensors of shape (5, 3) (split 3 | 2 rows) in every SBP."""
    pl = gt.placement("cpu", [0, 1])
    B = gt.sbp.broadcast
    out = {}

    def g(a, sbp, requires_grad=False):
        """A global tensor of value a; partial_sum: pieces that differ on the two ranks (a - d, d)."""
        if sbp is not gt.sbp.partial_sum:
            return gt.tensor(a, placement=pl, sbp=sbp, requires_grad=requires_grad)
        d = (np.arange(a.size).reshape(a.shape) % 5 - 2).astype(a.dtype)
        piece = a - d if gt.env.get_rank() == 0 else d
        return gt.tensor(piece).to_global(placement=pl, sbp=sbp).requires_grad_(requires_grad)

    for name, s in _sbps().items():
        x = g(X, s)
        for f in ("max", "min", "median"):
            for dim in (0, 1):
                for keep in (False, True):
                    r = getattr(gt, f)(x, dim, keep)
                    assert r.values.placement == pl and type(r).__name__ == f
                    out[f, name, dim, keep] = (r.values.numpy(), r.indices.numpy())
        out["whole", name] = (gt.max(x).numpy(), gt.min(x).numpy(), gt.median(x).numpy(),
                              gt.max(x, x * 0.5 + 1).numpy())
        xg = g(TIES, s, requires_grad=True)
        (gt.max(xg, 1).values.sum() + gt.median(xg, 0).values.sum() * 3 + gt.max(xg) * 5).backward()
        out["grad_reductions", name] = xg.grad.numpy()

        y = x.clone()
        y.add_(1).mul_(2).sub_(x, alpha=0.5).div_(4)
        y[1:4, 1] = -7.0
        y[0] = g(np.array([1.0, 2.0, 3.0]), B)
        y[-1, ::2] = 9.0
        y[y > 3] = 0.0
        y[g(np.array([0, 4]), B)] = 5.0
        y[:, 2] += 1.0
        assert y.placement == pl and y.sbp == x.sbp
        out["inplace", name] = y.numpy()
        z = x.clone()
        before = z.to_local().numpy().copy()
        z[4, 1:] = 100.0
        out["pieces", name] = (before, z.to_local().numpy().copy(), z.numpy())
        f = x.clone()
        f.fill_(2.5)
        filled = f.numpy()
        f.zero_()
        zeroed = f.numpy()
        f.copy_(g(np.array([1.0, 2.0, 3.0]), B))
        f.masked_fill_(x > 0, -1.0)
        assert f.sbp == x.sbp
        out["fills", name] = (filled, zeroed, f.numpy())

        xw, ww = g(X, s, requires_grad=True), g(X[::-1].copy() / 3, s, requires_grad=True)
        _inplace_program(_GlobalLib(pl), xw, ww).backward()
        assert xw.grad.sbp == xw.sbp
        out["grad_inplace", name] = (xw.grad.numpy(), ww.grad.numpy())

        out["repeat", name] = x.repeat(2, 1, 2).numpy()
        out["masked_fill", name] = x.masked_fill(x > 0, 0.5).numpy()
        out["clone", name] = (x.clone().sbp == x.sbp, x.contiguous() is x)
        views = []
        for shape in ((5, 3, 1), (15,), (5, 1, 3)):
            try:
                v = x.view(*shape)
                views.append((shape, v.sbp == x.sbp, v.numpy()))
            except RuntimeError as exc:
                views.append((shape, "raised", str(exc)))
        out["view", name] = views
        i, j = g(INTS, s), g(INTS[::-1].copy(), s)
        out["bitwise", name] = ((i & 6 | ~j ^ i).numpy(), (~(i > 0) | (j > 0)).numpy())
        out["to", name] = (x.to(gt.float32).dtype.name, x.placement == pl, x.to(pl) is x, x.to("cpu") is x, x.dim())

    params = [nn.Parameter(g(np.zeros((5, 3)), gt.sbp.split(0))), nn.Parameter(g(np.zeros((2, 3)), B))]
    params[0].grad, params[1].grad = g(X, gt.sbp.split(0)), g(INTS[:2] / 7, B)
    on_one = gt.placement("cpu", [1])  # a gradient on another placement (a pipeline stage) counts too
    params.append(nn.Parameter(gt.tensor(np.zeros(3), placement=on_one, sbp=B)))
    params[2].grad = gt.tensor(np.array([1.0, -2.0, 2.0]), placement=on_one, sbp=B)
    total = gt.nn.utils.clip_grad_norm_(params, 2.0)
    out["clip"] = (total.is_global, total.shape, total.numpy(), params[0].grad.numpy(), params[0].grad.sbp,
                   params[2].grad.numpy())
    module = nn.Linear(3, 2).to_global(pl, B)
    module(g(X, gt.sbp.split(0)).float()).sum().backward()
    grads = [p.grad for p in module.parameters()]
    module.zero_grad(set_to_none=False)
    out["zero_grad"] = all(p.grad is q and p.grad.sbp == p.sbp and not p.grad.numpy().any()
                           for p, q in zip(module.parameters(), grads))
    emb = nn.Embedding(5, 3, padding_idx=2).to_global(pl, gt.sbp.split(0))
    out["embedding"] = emb.weight.numpy()[2]
    return out


class _GlobalLib:
    """gt with gt.tensor broadcast on a placement (for _inplace_program)."""

    def __init__(self, placement):
        self.placement = placement

    def tensor(self, data):
        return gt.tensor(data, placement=self.placement, sbp=gt.sbp.broadcast)


def _expected_inplace():
    y = ((X + 1) * 2 - 0.5 * X) / 4
    y[1:4, 1] = -7.0
    y[0] = [1.0, 2.0, 3.0]
    y[-1, ::2] = 9.0
    y[y > 3] = 0.0
    y[[0, 4]] = 5.0
    y[:, 2] += 1.0
    return y


def test_global_tensors_in_every_sbp():
    results = run_ranks(_global_api, 2, timeout=180)
    out, other = results
    for name in _sbps():
        for f in ("max", "min", "median"):
            for dim in (0, 1):
                for keep in (False, True):
                    want = np_median(X, dim, keep) if f == "median" else np_extreme(f, X, dim, keep)
                    for got, w in zip(out[f, name, dim, keep], want):
                        check(got, w, err_msg=f"{f} {name} {dim} {keep}")
        for got, want in zip(out["whole", name], (X.max(), X.min(), np_median(X), np.maximum(X, X * 0.5 + 1))):
            check(got, want, err_msg=name)
        want = one_hot_along(TIES.shape, TIES.argmax(1), 1) + 3 * one_hot_along(TIES.shape, np_median(TIES, 0)[1], 0)
        want += 5 * (TIES == TIES.max()) / (TIES == TIES.max()).sum()
        check(out["grad_reductions", name], want, err_msg=name)
        check(out["inplace", name], _expected_inplace(), err_msg=name)
        before, after, whole = out["pieces", name]
        want = X.copy()
        want[4, 1:] = 100.0
        check(whole, want)
        for rank, (b, a) in enumerate([(before, after), other["pieces", name][:2]]):
            changed = not np.array_equal(b, a)
            holds_row_4 = name in ("B", "S1", "P") or (name == "S0" and rank == 1)  # P: rank 1 writes zeros
            assert changed == holds_row_4, (name, rank)  # only the ranks holding those elements change
        filled, zeroed, last = out["fills", name]
        check(filled, np.full(X.shape, 2.5))
        check(zeroed, np.zeros(X.shape))
        check(last, np.where(X > 0, -1.0, np.tile([1.0, 2.0, 3.0], (5, 1))))
        xg = gt.tensor(X, requires_grad=True)
        wg = gt.tensor(X[::-1].copy() / 3, requires_grad=True)
        _inplace_program(gt, xg, wg).backward()  # the local run (checked against torch above)
        check(out["grad_inplace", name][0], xg.grad.numpy(), err_msg=name)
        check(out["grad_inplace", name][1], wg.grad.numpy(), err_msg=name)
        check(out["repeat", name], np.tile(X, (2, 1, 2)))
        check(out["masked_fill", name], np.where(X > 0, 0.5, X))
        assert out["clone", name] == (True, True)
        views = dict((v[0], v[1:]) for v in out["view", name])
        assert views[(5, 3, 1)][0] is True and np.array_equal(views[(5, 3, 1)][1], X.reshape(5, 3, 1))
        # as OneFlow's view of a global tensor (its reshape op): where the split does not survive
        # ((5, 3) as (15,)) the input is boxed, and S(1) of (5, 3) is S(2) of (5, 1, 3)
        assert np.array_equal(views[(15,)][1], X.reshape(15))
        assert np.array_equal(views[(5, 1, 3)][1], X.reshape(5, 1, 3))
        assert views[(5, 1, 3)][0] is (name != "S1")
        got_bits, got_bool = out["bitwise", name]
        check(got_bits, INTS & 6 | ~INTS[::-1] ^ INTS)
        assert np.array_equal(got_bool, ~(INTS > 0) | (INTS[::-1] > 0))
        assert out["to", name] == ("float32", True, True, True, 2)
    is_global, shape, total, grad0, sbp, grad2 = out["clip"]
    flat = np.concatenate([X.reshape(-1), (INTS[:2] / 7).reshape(-1), [1.0, -2.0, 2.0]])
    norm = np.sqrt((flat ** 2).sum())
    assert is_global and shape == () and sbp == (gt.sbp.split(0),)
    check(total, norm)
    check(grad0, X * min(2.0 / (norm + 1e-6), 1.0))
    check(grad2, np.array([1.0, -2.0, 2.0]) * min(2.0 / (norm + 1e-6), 1.0))
    assert out["zero_grad"] and not out["embedding"].any()


def _on_cuda():
    """.to("cuda") / .cuda() / .cpu() / device on local and global tensors (simulated cuda)."""
    from globaltensor.backends import simulated_cupy
    x = gt.tensor(X, requires_grad=True)
    c = x.to("cuda")
    assert type(c._local) is simulated_cupy.ndarray and c.device == "cuda:0" and c.is_cuda and c.device.index == 0
    assert x.cuda().device.type == "cuda" and c.to("cuda") is c and c.to("cuda:0") is c
    back = (c * 2).cpu()
    assert type(back._local) is np.ndarray and back.device == "cpu"
    back.sum().backward()  # the gradient comes back to the host
    assert type(x.grad._local) is np.ndarray and np.array_equal(x.grad.numpy(), np.full(X.shape, 2.0))
    assert c.to(x).device == "cpu" and x.to(c).device == "cuda:0"
    try:
        x.to("cuda:1")
    except ValueError as exc:
        assert "cuda:0" in str(exc)
    else:
        raise AssertionError("to('cuda:1') on a rank whose GPU is cuda:0")
    pl = gt.placement("cpu", [0, 1])
    out = []
    for sbp in (gt.sbp.split(0), gt.sbp.partial_sum):
        g = gt.tensor(X, placement=pl, sbp=sbp)
        d = g.to("cuda")
        assert d.placement == gt.placement("cuda", [0, 1]) and d.sbp == g.sbp and d.placement.type == "cuda" and d.is_cuda
        assert type(d.to_local()._local) is simulated_cupy.ndarray and d.cuda() is d
        d[1:3] = 0.0
        d.add_(1)
        h = d.cpu()
        assert h.placement == pl and h.sbp == g.sbp and g.to(d.placement).placement == d.placement and g.to(d).placement == d.placement
        out.append(h.numpy())
    return out


def test_to_cuda_and_back_on_simulated_cuda():
    want = X + 1
    want[1:3] = 1.0
    for got in run_ranks(_on_cuda, 2, env={"GLOBALTENSOR_CUDA_SIMULATE": "1"}, timeout=120)[0]:
        check(got, want)


def test_shape_changing_in_place_ops_keep_the_gradient_path():
    """reshape_/squeeze_/unsqueeze_ move the tensor to the op's node: the gradient reaches w."""
    w = gt.tensor(np.arange(6.0, dtype=np.float32), requires_grad=True)
    y = w * 2
    y.reshape_(2, 3)
    y.unsqueeze_(0)
    y.squeeze_(0)
    assert tuple(y.shape) == (2, 3)
    (y * gt.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.arange(6.0))


# --- x[index tensors]: the gradient, local and global ---------------------------------------------

GETITEM_X = np.arange(20.0).reshape(5, 4) / 7 - 1


def _getitem_keys(idx):
    """(name, key for gt, key for numpy): index tensors (made by idx) and lists with repeated
    positions, next to slices and ints, two index tensors, a 2-D index and a bool mask."""
    i, j = np.array([0, 3, 3, 1]), np.array([2, 2, 0])
    m, ii = np.array([True, False, True, True, False]), np.array([[1, 1], [0, 4]])
    return [("tensor", idx(i), i), ("list", [4, 1, 1], [4, 1, 1]),
            ("tensor_slice", (idx(i), slice(1, None)), (i, slice(1, None))),
            ("slice_tensor", (slice(None), idx(j)), (slice(None), j)),
            ("two_tensors", (idx(i[:3]), idx(j)), (i[:3], j)), ("int_tensor", (2, idx(j)), (2, j)),
            ("mask_slice", (idx(m), slice(None, 3)), (m, slice(None, 3))), ("2d_index", idx(ii), ii)]


def _getitem_weights(shape):
    return np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape) / 3


def _getitem_grad_reference(key):
    """d sum(x[key] * W) / dx from the definition: element k of x moves x[key] by E_k[key]."""
    want = np.zeros(GETITEM_X.size)
    w = _getitem_weights(GETITEM_X[key].shape)
    for k in range(GETITEM_X.size):
        e = np.zeros(GETITEM_X.size)
        e[k] = 1.0
        want[k] = (e.reshape(GETITEM_X.shape)[key] * w).sum()
    return want.reshape(GETITEM_X.shape)


def _getitem_grads(mesh_2d):
    """Every SBP of x (each axis of a 1-D or 2x2 mesh), index tensors B or split: x[key] and x.grad."""
    import itertools
    pl = gt.placement("cpu", [[0, 1], [2, 3]] if mesh_2d else [0, 1])
    options = [gt.sbp.broadcast, gt.sbp.split(0), gt.sbp.split(1), gt.sbp.partial_sum]
    out = {}
    for n, sbp in enumerate(itertools.product(options, repeat=pl.ndim)):
        idx_sbp = (gt.sbp.split(0) if n % 2 else gt.sbp.broadcast,) * pl.ndim
        for name, key, np_key in _getitem_keys(lambda a: gt.tensor(a, placement=pl, sbp=idx_sbp)):
            x = gt.tensor(GETITEM_X, placement=pl, sbp=sbp).requires_grad_(True)
            y = x[key]
            w = gt.tensor(_getitem_weights(GETITEM_X[np_key].shape), placement=pl, sbp=(gt.sbp.broadcast,) * pl.ndim)
            (y * w).sum().backward()
            assert x.grad.sbp == x.sbp and x.grad.placement == pl, (name, sbp, x.grad.sbp)
            out[name, str(sbp)] = (y.numpy(), x.grad.numpy())
    return out


def test_getitem_with_index_tensors_is_differentiable_local_and_global():
    """x[index tensor or list] sends g back to the selected positions, repeats adding up (as
    PyTorch's index backward), for local tensors and for global ones in every SBP."""
    for name, key, np_key in _getitem_keys(gt.tensor):
        x = gt.tensor(GETITEM_X, requires_grad=True)
        y = x[key]
        (y * gt.tensor(_getitem_weights(GETITEM_X[np_key].shape))).sum().backward()
        check(y.numpy(), GETITEM_X[np_key], err_msg=name)
        check(x.grad.numpy(), _getitem_grad_reference(np_key), err_msg=name)
    keys = {name: np_key for name, _, np_key in _getitem_keys(np.asarray)}
    for nprocs, mesh_2d in ((2, False), (4, True)):
        results = run_ranks(_getitem_grads, nprocs, mesh_2d, timeout=300)
        for (name, sbp), (value, grad) in results[0].items():
            check(value, GETITEM_X[keys[name]], err_msg=f"{name} {sbp}")
            check(grad, _getitem_grad_reference(keys[name]), err_msg=f"{name} {sbp} (x.grad)")
        for other in results[1:]:
            assert other.keys() == results[0].keys()
            for k, (value, grad) in other.items():
                check(grad, results[0][k][1], err_msg=f"{k}: another rank's x.grad")


def test_loss_modules_take_pytorchs_arguments():
    """nn.CrossEntropyLoss / nn.MSELoss with PyTorch's signatures, against numpy."""
    logits = np.array([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]], np.float32)
    target = np.array([1, 2])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    want = -logp[np.arange(2), target]
    got = gt.nn.CrossEntropyLoss()(gt.tensor(logits), gt.tensor(target))
    np.testing.assert_allclose(got.numpy(), want.mean(), rtol=1e-6)
    got = gt.nn.CrossEntropyLoss(reduction="sum", ignore_index=2)(gt.tensor(logits), gt.tensor(target))
    np.testing.assert_allclose(got.numpy(), want[0], rtol=1e-6)
    w = np.array([1.0, 2.0, 0.5], np.float32)
    got = gt.nn.CrossEntropyLoss(gt.tensor(w))(gt.tensor(logits), gt.tensor(target))
    np.testing.assert_allclose(got.numpy(), (want * w[target]).sum() / w[target].sum(), rtol=1e-6)
    y = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(gt.nn.MSELoss(reduction="sum")(gt.tensor(logits), gt.tensor(y)).numpy(),
                               ((logits - y) ** 2).sum(), rtol=1e-6)
