"""Every name of ops-target.txt as a small program over inputs whose dims have size n (0, 1 or
2, beside fixed sizes), with its numpy reference on the full values.

CASES: name -> (make(n) -> input arrays, call(g, *tensors) -> tensor(s), reference).
`g` makes factories (test_every_op's Local/Global: on the placement with one SBP).
`reference(*arrays)` gives the expected values (one array or a list, numpy semantics); for the
random ops it is a check(values, arrays) of what numpy can say (shape, range, a permutation),
and the values are compared with a one-process run of the same seed as well (SPEC §3: the
same values whatever the placement). Calls use signatures that hold for both the current and
the OneFlow/PyTorch argument orders (Paddle's keyword names where they differ).
"""
import math
import zlib

import numpy as np

import globaltensor as gt

_R = np.random.default_rng(5)


def F(*shape, lo=0.2, hi=0.9):
    """Floats in a range every unary op of the list accepts (acos, log, sqrt, ...)."""
    return _R.uniform(lo, hi, shape)


def S(*shape):
    """Floats of both signs."""
    return _R.uniform(-1.0, 1.0, shape)


def I(*shape, hi=3):  # noqa: E743
    return _R.integers(0, max(hi, 1), shape).astype(np.int64)


def BOOL(*shape):
    return _R.integers(0, 2, shape).astype(bool)


def some(n, k=3):
    """k positions when the indexed dim has any (n > 0), none otherwise."""
    return k if n else 0


def values(r):
    """The values of a (values, indices) result, or the result."""
    return r[0] if isinstance(r, tuple) else r


def spd(n):
    a = S(n, n)
    return a @ a.T + 3 * np.eye(n)


_erf = np.vectorize(math.erf, otypes=[float])


class Random:
    """A reference for random ops: a check of what numpy can say about the values."""

    def __init__(self, check):
        self.check = check


UNARY = {
    "abs": np.abs, "acos": np.arccos, "asin": np.arcsin, "atan": np.arctan, "ceil": np.ceil, "cos": np.cos,
    "cosh": np.cosh, "erf": _erf, "exp": np.exp, "floor": np.floor, "log": np.log, "log10": np.log10,
    "log1p": np.log1p, "log2": np.log2, "reciprocal": np.reciprocal, "round": np.round,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sign": np.sign, "sin": np.sin, "sinh": np.sinh, "sqrt": np.sqrt,
    "square": np.square, "tan": np.tan, "tanh": np.tanh, "isfinite": np.isfinite, "isinf": np.isinf,
    "isnan": np.isnan, "conj": np.conj, "real": np.real, "imag": np.zeros_like,
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide,
    "floor_divide": np.floor_divide, "mod": np.mod, "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
    "greater_equal": np.greater_equal, "greater_than": np.greater, "less_equal": np.less_equal,
    "less_than": np.less,
}


def _softmax(x, d):
    e = np.exp(x - (x.max(d, keepdims=True) if x.shape[d] else 0))
    return e / e.sum(d, keepdims=True)


def _gelu(x):
    return x * 0.5 * (1 + _erf(x / math.sqrt(2)))


def _scatter(x, i, s):
    out = x.copy()
    np.put_along_axis(out, i, s[:, :i.shape[1]], 1)
    return out


def _add_at(x, i, u):
    out = x.copy()
    np.add.at(out, tuple(i.T), u)
    return out


def _split_ones(x):
    return [x[j:j + 1] for j in range(len(x))] or [x]


def _chunk2(x):
    """torch.chunk(x, 2, 0): pieces of ceil(n / 2); an empty dim gives 2 empty pieces."""
    size = -(-len(x) // 2)
    return [x[j:j + size] for j in range(0, len(x), size)] if size else [x, x]


def _topk(x, k, d):
    idx = np.argsort(-x, axis=d, kind="stable")
    idx = np.take(idx, np.arange(k), axis=d)
    return [np.take_along_axis(x, idx, d), idx]


def _layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def _cross_entropy(x, t):
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    with np.errstate(all="ignore"):
        return -np.mean(logp[np.arange(len(t)), t]) if len(t) else np.float64(np.nan)


def _permutation(v, a):
    assert sorted(v[0].tolist()) == list(range(len(v[0])))


def _within(lo, hi, integer=False):
    def check(v, a):
        assert ((v[0] >= lo) & (v[0] < hi)).all(), v[0]
        if integer:
            assert (v[0] == np.round(v[0])).all()
    return check


def _shape_only(v, a):
    pass


def _dropout_check(v, a):
    x, y = a[0], v[0]
    assert np.all(np.isclose(y, 0) | np.isclose(y, 2 * x)), (x, y)
    np.testing.assert_allclose(v[1], x)


def _multinomial_check(v, a):
    out = v[0]
    assert ((out >= 0) & (out < a[0].shape[1])).all()
    assert all(len(set(row)) == len(row) for row in out.tolist())  # without replacement


CASES = {
    # --- elementwise unary
    **{name: (lambda n: [F(n, 2)], lambda g, x, _n=name: getattr(gt, _n)(x), fn) for name, fn in UNARY.items()},
    "logical_not": (lambda n: [BOOL(n, 2)], lambda g, x: gt.logical_not(x), np.logical_not),
    "stanh": (lambda n: [S(n, 2)], lambda g, x: gt.stanh(x), lambda x: 1.7159 * np.tanh(0.67 * x)),
    "scale": (lambda n: [S(n, 2)], lambda g, x: gt.scale(x, 2.0, 0.5), lambda x: x * 2 + 0.5),
    "increment": (lambda n: [S(n, 2)], lambda g, x: gt.increment(x, 2.0), lambda x: x + 2),
    "clip": (lambda n: [S(n, 2)], lambda g, x: gt.clip(x, -0.3, 0.4), lambda x: np.clip(x, -0.3, 0.4)),
    "cast": (lambda n: [S(n, 2)], lambda g, x: gt.cast(x, "float32"), lambda x: x.astype(np.float32)),
    # --- elementwise binary (numpy broadcasting: (n, 2) with (2,) and (n, 1))
    **{name: (lambda n: [F(n, 2), F(2), F(n, 1)], lambda g, x, y, z, _n=name: [getattr(gt, _n)(x, y),
                                                                            getattr(gt, _n)(z, x)],
              lambda x, y, z, fn=fn: [fn(x, y), fn(z, x)]) for name, fn in BINARY.items()},
    "equal": (lambda n: [I(n, 2), I(2)], lambda g, x, y: gt.equal(x, y), np.equal),
    "not_equal": (lambda n: [I(n, 2), I(2)], lambda g, x, y: gt.not_equal(x, y), np.not_equal),
    "logical_and": (lambda n: [BOOL(n, 2), BOOL(2)], lambda g, x, y: gt.logical_and(x, y), np.logical_and),
    "logical_or": (lambda n: [BOOL(n, 2), BOOL(2)], lambda g, x, y: gt.logical_or(x, y), np.logical_or),
    "logical_xor": (lambda n: [BOOL(n, 2), BOOL(2)], lambda g, x, y: gt.logical_xor(x, y), np.logical_xor),
    "where": (lambda n: [BOOL(n, 2), S(n, 2), S(2)], lambda g, c, x, y: gt.where(c, x, y), np.where),
    "allclose": (lambda n: [S(n, 2), S(n, 2)], lambda g, x, y: gt.allclose(x, x + y * 1e-9),
                 lambda x, y: np.array(np.allclose(x, x + y * 1e-9))),
    "equal_all": (lambda n: [S(n, 2)], lambda g, x: gt.equal_all(x, x * 1), lambda x: np.array(True)),
    "add_n": (lambda n: [S(n, 2), S(n, 2), S(2)], lambda g, x, y, z: gt.add_n([x, y, z]),
              lambda x, y, z: x + y + z),
    # --- reductions and scans (over the size-n dim where numpy accepts an empty one)
    "sum": (lambda n: [S(n, 3)], lambda g, x: [gt.sum(x, 0), gt.sum(x, 1), gt.sum(x)],
            lambda x: [x.sum(0), x.sum(1), x.sum()]),
    "mean": (lambda n: [S(n, 3)], lambda g, x: [gt.mean(x, 1), gt.mean(x, 0)],
             lambda x: [x.mean(1), x.mean(0)]),
    "max": (lambda n: [S(n, 3)], lambda g, x: values(gt.max(x, 1)), lambda x: x.max(1)),
    "min": (lambda n: [S(n, 3)], lambda g, x: values(gt.min(x, 1)), lambda x: x.min(1)),
    "prod": (lambda n: [S(n, 3)], lambda g, x: [gt.prod(x, 1), gt.prod(x, 0)], lambda x: [x.prod(1), x.prod(0)]),
    "std": (lambda n: [S(n, 3)], lambda g, x: gt.std(x, 1), lambda x: x.std(1, ddof=1)),
    "var": (lambda n: [S(n, 3)], lambda g, x: gt.var(x, 1), lambda x: x.var(1, ddof=1)),
    "median": (lambda n: [S(n, 3)], lambda g, x: values(gt.median(x, 1)), lambda x: np.median(x, 1)),
    "logsumexp": (lambda n: [S(n, 3)], lambda g, x: gt.logsumexp(x, 1), lambda x: np.log(np.exp(x).sum(1))),
    "norm": (lambda n: [S(n, 3)], lambda g, x: [gt.norm(x, 2, 1), gt.norm(x)],
             lambda x: [np.sqrt((x * x).sum(1)), np.sqrt((x * x).sum())]),
    "all": (lambda n: [BOOL(n, 3)], lambda g, x: [gt.all(x, 0), gt.all(x, 1), gt.all(x)],
            lambda x: [x.all(0), x.all(1), x.all()]),
    "any": (lambda n: [BOOL(n, 3)], lambda g, x: [gt.any(x, 0), gt.any(x, 1), gt.any(x)],
            lambda x: [x.any(0), x.any(1), x.any()]),
    "argmax": (lambda n: [S(n, 3)], lambda g, x: gt.argmax(x, 1), lambda x: x.argmax(1)),
    "argmin": (lambda n: [S(n, 3)], lambda g, x: gt.argmin(x, 1), lambda x: x.argmin(1)),
    "cumsum": (lambda n: [S(n, 3)], lambda g, x: [gt.cumsum(x, 0), gt.cumsum(x, 1)],
               lambda x: [x.cumsum(0), x.cumsum(1)]),
    "trace": (lambda n: [S(n, 2)], lambda g, x: gt.trace(x), np.trace),
    "dist": (lambda n: [S(n, 2), S(n, 2)], lambda g, x, y: gt.dist(x, y),
             lambda x, y: np.sqrt(((x - y) ** 2).sum())),
    "numel": (lambda n: [S(n, 2)], lambda g, x: gt.numel(x), lambda x: np.array(x.size)),
    # --- linear algebra (a size-n dim kept, and one contracted)
    "matmul": (lambda n: [S(n, 2), S(2, n)], lambda g, x, y: [gt.matmul(x, y), gt.matmul(y, x)],
               lambda x, y: [x @ y, y @ x]),
    "mm": (lambda n: [S(n, 2), S(2, n)], lambda g, x, y: [gt.mm(x, y), gt.mm(y, x)], lambda x, y: [x @ y, y @ x]),
    "bmm": (lambda n: [S(2, n, 3), S(2, 3, n)], lambda g, x, y: [gt.bmm(x, y), gt.bmm(y, x)],
            lambda x, y: [x @ y, y @ x]),
    "mv": (lambda n: [S(n, 2), S(2), S(n)], lambda g, x, v, w: [gt.mv(x, v), gt.mv(gt.t(x), w)],
           lambda x, v, w: [x @ v, x.T @ w]),
    "dot": (lambda n: [S(n), S(n)], lambda g, x, y: gt.dot(x, y), np.dot),
    "addmm": (lambda n: [S(n, n), S(n, 2), S(2, n)], lambda g, a, x, y: gt.addmm(a, x, y, beta=0.5, alpha=2.0),
              lambda a, x, y: 0.5 * a + 2.0 * (x @ y)),
    "kron": (lambda n: [S(n, 2), S(2, n)], lambda g, x, y: gt.kron(x, y), np.kron),
    "cross": (lambda n: [S(n, 3), S(n, 3)], lambda g, x, y: gt.cross(x, y, 1), lambda x, y: np.cross(x, y, axis=1)),
    "cholesky": (lambda n: [spd(n)], lambda g, x: gt.cholesky(x), np.linalg.cholesky),
    "inverse": (lambda n: [spd(n)], lambda g, x: gt.inverse(x), np.linalg.inv),
    "t": (lambda n: [S(n, 2)], lambda g, x: gt.t(x), np.transpose),
    # --- creation (factories take the placement and one SBP from g)
    "arange": (lambda n: [], lambda g, n: [g.arange(0, n), g.arange(1, 1 + 2 * n, 2)],
               lambda n: [np.arange(n), np.arange(1, 1 + 2 * n, 2)]),
    "linspace": (lambda n: [], lambda g, n: g.linspace(0, 1, n), lambda n: np.linspace(0, 1, n)),
    "eye": (lambda n: [], lambda g, n: [g.eye(n, 2), g.eye(n)], lambda n: [np.eye(n, 2), np.eye(n)]),
    "full": (lambda n: [], lambda g, n: g.full((n, 2), 2.5), lambda n: np.full((n, 2), 2.5)),
    "full_like": (lambda n: [S(n, 2)], lambda g, x: gt.full_like(x, 7.0), lambda x: np.full_like(x, 7.0)),
    "empty": (lambda n: [], lambda g, n: gt.zeros_like(g.empty(n, 2)), lambda n: np.zeros((n, 2))),
    "empty_like": (lambda n: [S(n, 2)], lambda g, x: gt.zeros_like(gt.empty_like(x)), np.zeros_like),
    "ones": (lambda n: [], lambda g, n: g.ones(n, 2), lambda n: np.ones((n, 2))),
    "ones_like": (lambda n: [S(n, 2)], lambda g, x: gt.ones_like(x), np.ones_like),
    "zeros": (lambda n: [], lambda g, n: g.zeros(n, 2), lambda n: np.zeros((n, 2))),
    "zeros_like": (lambda n: [S(n, 2)], lambda g, x: gt.zeros_like(x), np.zeros_like),
    "diag": (lambda n: [S(n), S(n, 2)], lambda g, v, m: [gt.diag(v), gt.diag(v, 1), gt.diag(m), gt.diag(m, 1),
                                                         gt.diag(m, -1)],
             lambda v, m: [np.diag(v), np.diag(v, 1), np.diag(m), np.diag(m, 1), np.diag(m, -1)]),
    "meshgrid": (lambda n: [S(n), S(2)], lambda g, x, y: gt.meshgrid(x, y),
                 lambda x, y: np.meshgrid(x, y, indexing="ij")),
    "tril": (lambda n: [S(n, 2), S(2, 2, n)], lambda g, x, y: [gt.tril(x), gt.tril(y, -1)],
             lambda x, y: [np.tril(x), np.tril(y, -1)]),
    "triu": (lambda n: [S(n, 2), S(2, 2, n)], lambda g, x, y: [gt.triu(x, 1), gt.triu(y)],
             lambda x, y: [np.triu(x, 1), np.triu(y)]),
    # --- random (checked by what numpy can say, and against one process with the same seed)
    "rand": (lambda n: [], lambda g, n: g.rand(n, 2), Random(_within(0, 1))),
    "randn": (lambda n: [], lambda g, n: g.randn(n, 2), Random(_shape_only)),
    "randint": (lambda n: [], lambda g, n: g.randint(0, 9, (n, 2)), Random(_within(0, 9, integer=True))),
    "randperm": (lambda n: [], lambda g, n: g.randperm(n), Random(_permutation)),
    "normal": (lambda n: [], lambda g, n: g.normal(1.0, 2.0, (n, 2)), Random(_shape_only)),
    "uniform": (lambda n: [], lambda g, n: g.uniform((n, 2), -1.0, 1.0), Random(_within(-1, 1))),
    "bernoulli": (lambda n: [F(n, 2)], lambda g, x: gt.bernoulli(x), Random(_within(0, 2, integer=True))),
    "multinomial": (lambda n: [F(n, 4)], lambda g, x: gt.multinomial(x, 2), Random(_multinomial_check)),
    "dropout": (lambda n: [F(n, 2)], lambda g, x: [gt.dropout(x, 0.5), gt.dropout(x, 0.0)],
                Random(_dropout_check)),
    # --- shape and layout
    "reshape": (lambda n: [S(n, 2)], lambda g, x: [gt.reshape(x, (2, x.shape[0])), gt.reshape(x, (-1,))],
                lambda x: [x.reshape(2, len(x)), x.reshape(-1)]),
    "reshape_": (lambda n: [S(n, 2)], lambda g, x: gt.reshape_(x * 1, (2, x.shape[0])), lambda x: x.reshape(2, len(x))),
    "flatten": (lambda n: [S(n, 2, 2)], lambda g, x: [gt.flatten(x, 1), gt.flatten(x)],
                lambda x: [x.reshape(len(x), 4), x.reshape(-1)]),
    "squeeze": (lambda n: [S(n, 1, 2)], lambda g, x: [gt.squeeze(x, 1), gt.squeeze(x)],
                lambda x: [x.squeeze(1), x.squeeze()]),
    "squeeze_": (lambda n: [S(n, 1, 2)], lambda g, x: gt.squeeze_(x * 1, 1), lambda x: x.squeeze(1)),
    "unsqueeze": (lambda n: [S(n, 2)], lambda g, x: [gt.unsqueeze(x, 1), gt.unsqueeze(x, 0)],
                  lambda x: [x[:, None], x[None]]),
    "unsqueeze_": (lambda n: [S(n, 2)], lambda g, x: gt.unsqueeze_(x * 1, 2), lambda x: x[:, :, None]),
    "transpose": (lambda n: [S(n, 2, 3)], lambda g, x: gt.transpose(x, 0, 2), lambda x: np.swapaxes(x, 0, 2)),
    "expand": (lambda n: [S(n, 1), S(1, 2)],
               lambda g, x, y: [gt.expand(x, 2, x.shape[0], 3), gt.expand(y, x.shape[0], 2)],
               lambda x, y: [np.broadcast_to(x, (2, len(x), 3)), np.broadcast_to(y, (len(x), 2))]),
    "expand_as": (lambda n: [S(n, 1), S(n, 3)], lambda g, x, y: gt.expand_as(x, y),
                  lambda x, y: np.broadcast_to(x, y.shape)),
    "broadcast_to": (lambda n: [S(2), S(n, 1)], lambda g, x, y: gt.broadcast_to(x, (y.shape[0], 2)),
                     lambda x, y: np.broadcast_to(x, (len(y), 2))),
    "tile": (lambda n: [S(n, 2)], lambda g, x: [gt.tile(x, (2, 1)), gt.tile(x, (1, 2, 1))],
             lambda x: [np.tile(x, (2, 1)), np.tile(x, (1, 2, 1))]),
    "flip": (lambda n: [S(n, 2)], lambda g, x: [gt.flip(x, 0), gt.flip(x, 1)],
             lambda x: [np.flip(x, 0), np.flip(x, 1)]),
    "roll": (lambda n: [S(n, 2)], lambda g, x: [gt.roll(x, 1, 0), gt.roll(x, 1)],
             lambda x: [np.roll(x, 1, 0), np.roll(x, 1)]),
    "concat": (lambda n: [S(n, 2), S(1, 2), S(n, 3)], lambda g, x, y, z: [gt.concat([x, y], 0), gt.concat([x, z], 1)],
               lambda x, y, z: [np.concatenate([x, y], 0), np.concatenate([x, z], 1)]),
    "stack": (lambda n: [S(n, 2), S(n, 2)], lambda g, x, y: [gt.stack([x, y], 1), gt.stack([x, y], 0)],
              lambda x, y: [np.stack([x, y], 1), np.stack([x, y], 0)]),
    "split": (lambda n: [S(n, 3)], lambda g, x: gt.split(x, [1, 2], 1) + gt.split(x, 1, 0),
              lambda x: [x[:, :1], x[:, 1:]] + _split_ones(x)),
    "chunk": (lambda n: [S(n, 3)], lambda g, x: gt.chunk(x, 2, 0), _chunk2),
    "unbind": (lambda n: [S(n, 3)], lambda g, x: gt.unbind(x, 0) + gt.unbind(x, 1),
               lambda x: list(x) + [x[:, j] for j in range(3)]),
    "unstack": (lambda n: [S(n, 3)], lambda g, x: gt.unstack(x, 1), lambda x: [x[:, j] for j in range(3)]),
    "slice": (lambda n: [S(2, n)], lambda g, x: [gt.slice(x, [1], [0], [1]), gt.slice(x, [0, 1], [1, 1], [2, 2])],
              lambda x: [x[:, 0:1], x[1:2, 1:2]]),
    "strided_slice": (lambda n: [S(n, 3)], lambda g, x: gt.strided_slice(x, [0, 1], [0, 2], [2, 0], [2, -1]),
                      lambda x: x[0:2:2, 2:0:-1]),
    # --- indexing, sorting, selection (index values always in range: n = 1 gives only zeros)
    "gather": (lambda n: [S(n, 2), I(some(n), 2, hi=n), S(2, n), I(2, some(n), hi=n)],
               lambda g, x, i, y, j: [gt.gather(x, 0, i), gt.gather(y, 1, j)],
               lambda x, i, y, j: [np.take_along_axis(x, i, 0), np.take_along_axis(y, j, 1)]),
    "gather_nd": (lambda n: [S(n, 2), np.stack([I(some(n), hi=n), I(some(n), hi=2)], 1), I(some(n), 1, hi=n)],
                  lambda g, x, i, j: [gt.gather_nd(x, i), gt.gather_nd(x, j)],
                  lambda x, i, j: [x[tuple(i.T)], x[j[:, 0]]]),
    "index_select": (lambda n: [S(n, 2), I(some(n), hi=n), S(2, n), I(some(n, 4), hi=n)],
                     lambda g, x, i, y, j: [gt.index_select(x, index=i, axis=0), gt.index_select(y, index=j, axis=1)],
                     lambda x, i, y, j: [x[i], y[:, j]]),
    "index_sample": (lambda n: [S(n, 2), I(n, 3, hi=2), S(2, n), I(2, some(n), hi=n)],
                     lambda g, x, i, y, j: [gt.index_sample(x, i), gt.index_sample(y, j)],
                     lambda x, i, y, j: [np.take_along_axis(x, i, 1), np.take_along_axis(y, j, 1)]),
    "masked_select": (lambda n: [S(n, 2), BOOL(n, 2), BOOL(2)],
                      lambda g, x, m, r: [gt.masked_select(x, m), gt.masked_select(x, r)],
                      lambda x, m, r: [x[m], x[np.broadcast_to(r, x.shape)]]),
    "nonzero": (lambda n: [I(n, 2, hi=2)], lambda g, x: gt.nonzero(x), lambda x: np.stack(np.nonzero(x), 1)),
    "scatter": (lambda n: [S(n, 3), np.argsort(S(n, 3), 1)[:, :2], S(n, 2)],
                lambda g, x, i, s: gt.scatter(x, 1, i, s), _scatter),
    "scatter_": (lambda n: [S(n, 3), np.argsort(S(n, 3), 1)[:, :2], S(n, 2)],
                 lambda g, x, i, s: gt.scatter_(x * 1, 1, i, s), _scatter),
    "scatter_nd": (lambda n: [np.stack([I(some(n), hi=n), I(some(n), hi=2)], 1), S(some(n)), np.zeros((n, 2))],
                   lambda g, i, u, z: gt.scatter_nd(i, u, z.shape), lambda i, u, z: _add_at(z, i, u)),
    "scatter_nd_add": (lambda n: [S(n, 2), np.stack([I(some(n), hi=n), I(some(n), hi=2)], 1), S(some(n))],
                       lambda g, x, i, u: gt.scatter_nd_add(x, i, u), _add_at),
    "shard_index": (lambda n: [I(n, 1, hi=20)], lambda g, x: gt.shard_index(x, 20, 2, 1),
                    lambda x: np.where(x // 10 == 1, x % 10, -1)),
    "sort": (lambda n: [S(n, 3)], lambda g, x: list(gt.sort(x, 1, True)) + list(gt.sort(x, 0)),
             lambda x: [-np.sort(-x, 1), np.argsort(-x, 1, kind="stable"), np.sort(x, 0),
                        np.argsort(x, 0, kind="stable")]),
    "argsort": (lambda n: [S(n, 3)], lambda g, x: [gt.argsort(x, 0), gt.argsort(x, 1)],
                lambda x: [np.argsort(x, 0, kind="stable"), np.argsort(x, 1, kind="stable")]),
    "topk": (lambda n: [S(n, 3)], lambda g, x: list(gt.topk(x, 2, 1)) + list(gt.topk(x, min(len(x), 1), 0)),
             lambda x: _topk(x, 2, 1) + _topk(x, min(len(x), 1), 0)),
    "unique": (lambda n: [I(3 * n, hi=3)], lambda g, x: gt.unique(x), np.unique),
    "histogram": (lambda n: [F(n, 2)], lambda g, x: gt.histogram(x, 4, 0, 1),
                  lambda x: np.histogram(x, 4, (0, 1))[0]),
    "multiplex": (lambda n: [S(n, 2), S(n, 2), I(n, 1, hi=2)], lambda g, x, y, i: gt.multiplex([x, y], i),
                  lambda x, y, i: np.where(i == 0, x, y)),
    # --- nn.functional
    "relu": (lambda n: [S(n, 2)], lambda g, x: gt.relu(x), lambda x: np.maximum(x, 0)),
    "gelu": (lambda n: [S(n, 2)], lambda g, x: gt.gelu(x), _gelu),
    "sigmoid": (lambda n: [S(n, 2)], lambda g, x: gt.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
    "softmax": (lambda n: [S(n, 3)], lambda g, x: [gt.softmax(x, 1), gt.softmax(x, 0)],
                lambda x: [_softmax(x, 1), _softmax(x, 0)]),
    "log_softmax": (lambda n: [S(n, 3)], lambda g, x: [gt.log_softmax(x, 1), gt.log_softmax(x, 0)],
                    lambda x: [np.log(_softmax(x, 1)), np.log(_softmax(x, 0))]),
    "layer_norm": (lambda n: [S(n, 3), S(3), S(3)], lambda g, x, w, b: gt.layer_norm(x, 3, w, b), _layer_norm),
    "embedding": (lambda n: [I(n, 2, hi=3), S(3, 2), I(2, hi=1), S(1, n)],
                  lambda g, i, w, j, v: [gt.embedding(i, w), gt.embedding(j, v)],
                  lambda i, w, j, v: [w[i], v[j]]),
    "linear": (lambda n: [S(n, 3), S(2, 3), S(2), S(2, n), S(3, n)],
               lambda g, x, w, b, y, v: [gt.linear(x, w, b), gt.linear(y, v)],
               lambda x, w, b, y, v: [x @ w.T + b, y @ v.T]),
    "cross_entropy": (lambda n: [S(n, 4), I(n, hi=4)], lambda g, x, t: gt.cross_entropy(x, t), _cross_entropy),
    "mse_loss": (lambda n: [S(n, 2), S(n, 2)], lambda g, x, y: gt.mse_loss(x, y),
                 lambda x, y: np.mean((x - y) ** 2) if x.size else np.float64(np.nan)),
}


def inputs(name, n):
    """The input arrays of CASES[name] for size n: the same on every rank (seeded by name, n)."""
    global _R
    _R = np.random.default_rng([zlib.crc32(name.encode()), n])
    return [np.asarray(a) for a in CASES[name][0](n)]
