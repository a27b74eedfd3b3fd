"""Numpy references for tests/ops/test_every_op.py: what each op computes, written plainly with numpy
(float64) on the full values, independent of globaltensor; checks of what numpy can say about the
random ops; central finite differences for the gradients.

A reference takes the input arrays and returns one array or a list of arrays (one per output of
the op, in order: e.g. values and indices). PyTorch's semantics where numpy's differ (median is
the lower middle value, std/var are unbiased, topk/sort/max/median give indices too).
"""
import math
import zlib

import numpy as np

# --- plain references --------------------------------------------------------------------------

erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    """The exact (erf) form."""
    return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """The tanh approximation (approximate="tanh")."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, dim):
    e = np.exp(x - x.max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


def log_softmax(x, dim):
    s = x - x.max(dim, keepdims=True)
    return s - np.log(np.exp(s).sum(dim, keepdims=True))


def logsumexp(x, dim):
    m = x.max(dim, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(dim, keepdims=True))).squeeze(dim)


def stanh(x, a=0.67, b=1.7159):
    return b * np.tanh(a * x)


def max_dim(x, dim):
    return [x.max(dim), x.argmax(dim)]


def min_dim(x, dim):
    return [x.min(dim), x.argmin(dim)]


def median(x, dim):
    """PyTorch's median along dim: the lower of the two middle values, and its index."""
    order = np.argsort(x, axis=dim, kind="stable")
    k = (x.shape[dim] - 1) // 2
    idx = np.take(order, [k], axis=dim)
    return [np.take_along_axis(x, idx, dim).squeeze(dim), idx.squeeze(dim)]


def sort(x, dim, descending=False):
    idx = np.argsort(-x if descending else x, axis=dim, kind="stable")
    return [np.take_along_axis(x, idx, dim), idx]


def topk(x, k, dim):
    idx = np.take(np.argsort(-x, axis=dim, kind="stable"), np.arange(k), axis=dim)
    return [np.take_along_axis(x, idx, dim), idx]


def norm(x, p, dim):
    return (np.abs(x) ** p).sum(dim) ** (1.0 / p)


def scatter(x, dim, index, src):
    """torch.scatter with a src tensor: out[i][index[i][j]] = src[i][j] (dim 1)."""
    out = x.copy()
    np.put_along_axis(out, index, src[tuple(slice(0, s) for s in index.shape)], dim)
    return out


def scatter_nd_add(x, index, updates):
    """Paddle's scatter_nd_add: updates added at the index tuples (repeats accumulate)."""
    out = x.copy()
    np.add.at(out, tuple(index[..., j] for j in range(index.shape[-1])), updates)
    return out


def scatter_nd(index, updates, shape):
    return scatter_nd_add(np.zeros(shape, updates.dtype), index, updates)


def gather_nd(x, index):
    return x[tuple(index[..., j] for j in range(index.shape[-1]))]


def shard_index(x, index_num, nshards, shard_id, ignore_value=-1):
    size = (index_num + nshards - 1) // nshards
    return np.where(x // size == shard_id, x - shard_id * size, ignore_value)


def multiplex(inputs, index):
    """Paddle's multiplex: row i of inputs[index[i]]."""
    rows = index.reshape(-1)
    return np.stack([inputs[k][i] for i, k in enumerate(rows)])


def chunk(x, chunks, dim):
    """torch.chunk: pieces of ceil(n / chunks) along dim (the last one smaller)."""
    n = x.shape[dim]
    size = -(-n // chunks)
    return [np.take(x, np.arange(s, min(s + size, n)), axis=dim) for s in range(0, n, size)]


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def cross_entropy(x, t, reduction="mean", ignore_index=-100):
    """-log_softmax(x)[row, target] per row; rows whose target is ignore_index give 0 and do not
    count in the mean."""
    keep = t != ignore_index
    loss = np.where(keep, -log_softmax(x, 1)[np.arange(len(t)), np.where(keep, t, 0)], 0.0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / keep.sum()}[reduction]


def histogram(x, bins, lo, hi):
    """Counts of `bins` equal bins over [lo, hi], the last one closed (as torch.histc)."""
    return np.histogram(x, bins, (lo, hi))[0].astype(np.int64)


def cholesky(a):
    """The lower factor of the symmetric part (as PyTorch: a gradient for a symmetric input)."""
    return np.linalg.cholesky((a + a.T) / 2)


# --- random ops: checks of what numpy can say ------------------------------------------------

class Random:
    """For a random op: check(values, arrays) asserts what holds for any draw; expected_grads
    (values, arrays, weights) -> the input gradients (or None: none compared)."""

    def __init__(self, check, expected_grads=None):
        self.check, self.expected_grads = check, expected_grads


class Layout:
    """For an uninitialised result (empty, empty_like): only shape and dtype kind are compared
    with the reference's; the values are not."""

    def __init__(self, reference):
        self.reference = reference


def within(lo, hi, kind="f", shape=None):
    def check(values, arrays):
        (v,) = values
        assert v.dtype.kind in ("iu" if kind == "i" else kind), f"dtype {v.dtype}"
        if shape is not None:
            assert v.shape == shape, f"shape {v.shape}, expected {shape}"
        assert ((v >= lo) & (v < hi)).all(), f"values outside [{lo}, {hi}): {v}"
    return check


def shaped(shape):
    def check(values, arrays):
        (v,) = values
        assert v.dtype.kind == "f", f"dtype {v.dtype}"
        assert v.shape == shape, f"shape {v.shape}, expected {shape}"
        assert np.isfinite(v).all()
        assert np.unique(v).size > v.size // 2, f"few distinct values: {v}"
    return check


def permutation(n):
    def check(values, arrays):
        (v,) = values
        assert v.dtype.kind in "iu", f"dtype {v.dtype}"
        assert sorted(v.tolist()) == list(range(n)), f"not a permutation of range({n}): {v}"
    return check


def bernoulli_check(values, arrays):
    (v,), (p,) = values, arrays
    assert v.dtype.kind == "f" and v.shape == p.shape, (v.dtype, v.shape)
    assert np.isin(v, (0.0, 1.0)).all(), v


def multinomial_check(k):
    def check(values, arrays):
        (v,), (w,) = values, arrays
        assert v.dtype.kind in "iu" and v.shape == (w.shape[0], k), (v.dtype, v.shape)
        assert ((v >= 0) & (v < w.shape[1])).all(), v
        assert all(len(set(row)) == len(row) for row in v.tolist()), f"a repeat without replacement: {v}"
    return check


def dropout_check(p):
    def check(values, arrays):
        (v,), (x,) = values, arrays
        assert v.shape == x.shape and v.dtype.kind == "f", (v.shape, v.dtype)
        kept = v != 0
        np.testing.assert_allclose(v[kept], x[kept] / (1 - p), rtol=1e-12, err_msg="kept values are x / (1 - p)")
        assert 0 < kept.sum() < v.size, f"dropout with p={p} kept {kept.sum()} of {v.size}"
    return check


def dropout_grads(p):
    """d sum(out * W) / dx = W on the kept entries, over 1 - p; 0 on the dropped ones."""
    def grads(values, arrays, weights):
        return [np.where(values[0] != 0, weights[0] / (1 - p), 0.0)]
    return grads


# --- gradients ---------------------------------------------------------------------------------

def weights(name, shapes):
    """The fixed weight W of each output (seeded by the op's name): gradients are those of
    sum(out * W) over the float outputs."""
    rng = np.random.default_rng([zlib.crc32(name.encode()), 1])
    return [rng.uniform(-1.0, 1.0, s) for s in shapes]


def as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def finite_difference_grads(fn, arrays, ws, eps=1e-6):
    """Central differences of sum(fn(*arrays)[j] * ws[j]) over the float outputs, for each float
    input (None for the others)."""
    def objective(args):
        outs = [np.asarray(o) for o in as_list(fn(*args))]
        return sum(float(np.sum(o.astype(np.float64) * w)) for o, w in zip(outs, ws) if o.dtype.kind == "f")

    args = [np.array(a, copy=True) for a in arrays]
    grads = []
    for k, a in enumerate(args):
        if a.dtype.kind != "f":
            grads.append(None)
            continue
        g = np.zeros(a.shape)
        for i in np.ndindex(a.shape):
            keep = a[i]
            a[i] = keep + eps
            up = objective(args)
            a[i] = keep - eps
            down = objective(args)
            a[i] = keep
            g[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads
