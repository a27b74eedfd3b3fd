"""Every name of ops-target.txt, end to end: run in one process, then on 2 ranks and on a 2x2
mesh with random input SBPs, and compare (values, and gradients where differentiable)."""
import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks
from globaltensor.ops.elementwise import BINARY, UNARY

R = np.random.default_rng(7)
F = lambda *s, lo=-1.0, hi=1.0: R.uniform(lo, hi, s)  # noqa: E731
I = lambda *s, hi=4: R.integers(0, hi, s)  # noqa: E731
POS = lambda *s: R.uniform(0.5, 2.0, s)  # noqa: E731
BOOL = lambda *s: R.integers(0, 2, s).astype(bool)  # noqa: E731


def spd():
    a = F(3, 3)
    return a @ a.T + 3 * np.eye(3)


# name -> (inputs, call(t, *tensors) -> tensor or tuple/list of tensors, differentiable)
SPECS = {
    "acos": ([F(4, 3, lo=-0.9, hi=0.9)], lambda g, x: gt.acos(x), True),
    "asin": ([F(4, 3, lo=-0.9, hi=0.9)], lambda g, x: gt.asin(x), True),
    "log": ([POS(4, 3)], lambda g, x: gt.log(x), True), "log10": ([POS(4, 3)], lambda g, x: gt.log10(x), True),
    "log2": ([POS(4, 3)], lambda g, x: gt.log2(x), True), "log1p": ([POS(4, 3)], lambda g, x: gt.log1p(x), True),
    "sqrt": ([POS(4, 3)], lambda g, x: gt.sqrt(x), True), "rsqrt": ([POS(4, 3)], lambda g, x: gt.rsqrt(x), True),
    "reciprocal": ([POS(4, 3)], lambda g, x: gt.reciprocal(x), True),
    "logical_not": ([BOOL(4, 3)], lambda g, x: gt.logical_not(x), False),
    "stanh": ([F(4, 3)], lambda g, x: gt.stanh(x), True),
    "scale": ([F(4, 3)], lambda g, x: gt.scale(x, 2.0, 0.5), True),
    "increment": ([F(4, 3)], lambda g, x: gt.increment(x, 2.0), True),
    "clip": ([F(4, 3)], lambda g, x: gt.clip(x, -0.3, 0.4), True),
    "cast": ([F(4, 3)], lambda g, x: gt.cast(x, "float32"), True),
    "pow": ([POS(4, 3), F(4, 3)], lambda g, x, y: gt.pow(x, y), True),
    "floor_divide": ([POS(4, 3), POS(3)], lambda g, x, y: gt.floor_divide(x, y), False),
    "mod": ([POS(4, 3), POS(3)], lambda g, x, y: gt.mod(x, y), True),
    "divide": ([F(4, 3), POS(3)], lambda g, x, y: gt.divide(x, y), True),
    "logical_and": ([BOOL(4, 3), BOOL(4, 3)], lambda g, x, y: gt.logical_and(x, y), False),
    "logical_or": ([BOOL(4, 3), BOOL(4, 3)], lambda g, x, y: gt.logical_or(x, y), False),
    "logical_xor": ([BOOL(4, 3), BOOL(4, 3)], lambda g, x, y: gt.logical_xor(x, y), False),
    "where": ([BOOL(4, 3), F(4, 3), F(3)], lambda g, c, x, y: gt.where(c, x, y), True),
    "allclose": ([F(4, 3), F(4, 3)], lambda g, x, y: gt.allclose(x, x + y * 1e-9), False),
    "equal_all": ([F(4, 3)], lambda g, x: gt.equal_all(x, x * 1), False),
    "add_n": ([F(4, 3), F(4, 3), F(4, 3)], lambda g, x, y, z: gt.add_n([x, y, z]), True),
    "sum": ([F(5, 4)], lambda g, x: gt.sum(x, 1), True), "mean": ([F(5, 4)], lambda g, x: gt.mean(x, 0), True),
    "max": ([F(5, 4)], lambda g, x: gt.max(x, 1), True), "min": ([F(5, 4)], lambda g, x: gt.min(x), True),
    "prod": ([POS(5, 4)], lambda g, x: gt.prod(x, 1), True), "std": ([F(5, 4)], lambda g, x: gt.std(x, 0), True),
    "var": ([F(5, 4)], lambda g, x: gt.var(x, 1), True), "median": ([F(5, 4)], lambda g, x: gt.median(x, 1), False),
    "logsumexp": ([F(5, 4)], lambda g, x: gt.logsumexp(x, 1), True),
    "norm": ([F(5, 4)], lambda g, x: gt.norm(x, 2, 1), True),
    "all": ([BOOL(5, 4)], lambda g, x: gt.all(x, 0), False), "any": ([BOOL(5, 4)], lambda g, x: gt.any(x), False),
    "argmax": ([F(5, 4)], lambda g, x: gt.argmax(x, 1), False),
    "argmin": ([F(5, 4)], lambda g, x: gt.argmin(x), False),
    "cumsum": ([F(5, 4)], lambda g, x: gt.cumsum(x, 1), True), "trace": ([F(4, 4)], lambda g, x: gt.trace(x), True),
    "dist": ([F(5, 4), F(5, 4)], lambda g, x, y: gt.dist(x, y), True),
    "numel": ([F(5, 4)], lambda g, x: g.tensor(float(gt.numel(x))), False),
    "matmul": ([F(5, 4), F(4, 3)], lambda g, x, y: gt.matmul(x, y), True),
    "mm": ([F(5, 4), F(4, 3)], lambda g, x, y: gt.mm(x, y), True),
    "bmm": ([F(2, 5, 4), F(2, 4, 3)], lambda g, x, y: gt.bmm(x, y), True),
    "mv": ([F(5, 4), F(4)], lambda g, x, y: gt.mv(x, y), True),
    "dot": ([F(4), F(4)], lambda g, x, y: gt.dot(x, y), True),
    "addmm": ([F(5, 3), F(5, 4), F(4, 3)], lambda g, a, x, y: gt.addmm(a, x, y, 0.5, 2.0), True),
    "kron": ([F(2, 3), F(3, 2)], lambda g, x, y: gt.kron(x, y), False),
    "cross": ([F(4, 3), F(4, 3)], lambda g, x, y: gt.cross(x, y, 1), True),
    "cholesky": ([spd()], lambda g, x: gt.cholesky(x), False),
    "inverse": ([spd()], lambda g, x: gt.inverse(x), True), "t": ([F(5, 4)], lambda g, x: gt.t(x), True),
    "arange": ([], lambda g: g.arange(1, 11, 2), False), "linspace": ([], lambda g: g.linspace(0, 1, 7), False),
    "eye": ([], lambda g: g.eye(4, 5), False), "full": ([], lambda g: g.full((3, 4), 2.5), False),
    "full_like": ([F(3, 4)], lambda g, x: gt.full_like(x, 7.0), False),
    "empty": ([], lambda g: gt.zeros_like(g.empty(3, 4)), False),  # uninitialised: compare layout, not bits
    "empty_like": ([F(3, 4)], lambda g, x: gt.zeros_like(gt.empty_like(x)), False),
    "ones": ([], lambda g: g.ones(3, 4), False), "ones_like": ([F(3, 4)], lambda g, x: gt.ones_like(x), False),
    "zeros": ([], lambda g: g.zeros(3, 4), False), "zeros_like": ([F(3, 4)], lambda g, x: gt.zeros_like(x), False),
    "diag": ([F(4, 4)], lambda g, x: gt.diag(x), True),
    "meshgrid": ([F(4), F(3)], lambda g, x, y: gt.meshgrid(x, y), True),
    "tril": ([F(4, 4)], lambda g, x: gt.tril(x), True), "triu": ([F(4, 4)], lambda g, x: gt.triu(x, 1), True),
    "rand": ([], lambda g: g.rand(4, 3), False), "randn": ([], lambda g: g.randn(4, 3), False),
    "randint": ([], lambda g: g.randint(0, 9, (4, 3)), False),
    "randperm": ([], lambda g: g.randperm(7), False),
    "normal": ([], lambda g: g.normal(1.0, 2.0, (4, 3)), False),
    "uniform": ([], lambda g: g.uniform((4, 3), -1.0, 1.0), False),
    "bernoulli": ([R.uniform(0, 1, (4, 3))], lambda g, x: gt.bernoulli(x), False),
    "multinomial": ([R.uniform(0.1, 1, (4, 5))], lambda g, x: gt.multinomial(x, 3), False),
    "reshape": ([F(4, 6)], lambda g, x: gt.reshape(x, (4, 2, 3)), True),
    "reshape_": ([F(4, 6)], lambda g, x: gt.reshape_(x * 1, (24,)), True),
    "flatten": ([F(4, 2, 3)], lambda g, x: gt.flatten(x, 1), True),
    "squeeze": ([F(4, 1, 3)], lambda g, x: gt.squeeze(x, 1), True),
    "squeeze_": ([F(4, 1, 3)], lambda g, x: gt.squeeze_(x * 1, 1), True),
    "unsqueeze": ([F(4, 3)], lambda g, x: gt.unsqueeze(x, 1), True),
    "unsqueeze_": ([F(4, 3)], lambda g, x: gt.unsqueeze_(x * 1, 0), True),
    "transpose": ([F(4, 3, 2)], lambda g, x: gt.transpose(x, 0, 2), True),
    "expand": ([F(4, 1)], lambda g, x: gt.expand(x, 2, 4, 3), True),
    "expand_as": ([F(4, 1), F(4, 3)], lambda g, x, y: gt.expand_as(x, y), True),
    "broadcast_to": ([F(3)], lambda g, x: gt.broadcast_to(x, (4, 3)), True),
    "tile": ([F(2, 3)], lambda g, x: gt.tile(x, (2, 2)), True),
    "flip": ([F(4, 3)], lambda g, x: gt.flip(x, 1), True),
    "roll": ([F(4, 3)], lambda g, x: gt.roll(x, 1, 0), True),
    "concat": ([F(4, 3), F(2, 3)], lambda g, x, y: gt.concat([x, y], 0), True),
    "stack": ([F(4, 3), F(4, 3)], lambda g, x, y: gt.stack([x, y], 1), True),
    "split": ([F(4, 6)], lambda g, x: gt.split(x, [2, 4], 1), True),
    "chunk": ([F(5, 6)], lambda g, x: gt.chunk(x, 3, 0), True),
    "unbind": ([F(3, 4)], lambda g, x: gt.unbind(x, 0), True),
    "unstack": ([F(3, 4)], lambda g, x: gt.unstack(x, 1), True),
    "slice": ([F(5, 6)], lambda g, x: gt.slice(x, [1], [1], [5]), True),
    "strided_slice": ([F(5, 6)], lambda g, x: gt.strided_slice(x, [1], [0], [6], [2]), True),
    "gather": ([F(5, 4), I(5, 3, hi=4)], lambda g, x, i: gt.gather(x, 1, i), True),
    "gather_nd": ([F(5, 4), np.stack([I(6, hi=5), I(6, hi=4)], 1)], lambda g, x, i: gt.gather_nd(x, i), False),
    "index_select": ([F(5, 4), I(3, hi=5)], lambda g, x, i: gt.index_select(x, i, 0), True),
    "index_sample": ([F(5, 4), I(5, 3, hi=4)], lambda g, x, i: gt.index_sample(x, i), False),
    "masked_select": ([F(5, 4), BOOL(5, 4)], lambda g, x, m: gt.masked_select(x, m), False),
    "nonzero": ([I(5, 4, hi=2)], lambda g, x: gt.nonzero(x), False),
    "scatter": ([F(5, 4), np.argsort(F(5, 4), 1)[:, :3], F(5, 3)], lambda g, x, i, s: gt.scatter(x, 1, i, s), True),
    "scatter_": ([F(5, 4), np.argsort(F(5, 4), 1)[:, :3], F(5, 3)], lambda g, x, i, s: gt.scatter_(x * 1, 1, i, s),
                 True),
    "scatter_nd": ([np.stack([I(6, hi=5), I(6, hi=4)], 1), F(6)], lambda g, i, u: gt.scatter_nd(i, u, (5, 4)), False),
    "scatter_nd_add": ([F(5, 4), np.stack([I(6, hi=5), I(6, hi=4)], 1), F(6)],
                       lambda g, x, i, u: gt.scatter_nd_add(x, i, u), False),
    "shard_index": ([I(6, 1, hi=20)], lambda g, x: gt.shard_index(x, 20, 2, 1), False),
    "sort": ([F(5, 4)], lambda g, x: gt.sort(x, 1, True), True),
    "argsort": ([F(5, 4)], lambda g, x: gt.argsort(x, 0), False),
    "topk": ([F(5, 4)], lambda g, x: gt.topk(x, 2, 1), True),
    "unique": ([I(9, hi=4)], lambda g, x: gt.unique(x), False),
    "histogram": ([F(5, 4)], lambda g, x: gt.histogram(x, 4, -1, 1), False),
    "multiplex": ([F(5, 3), F(5, 3), I(5, 1, hi=2)], lambda g, x, y, i: gt.multiplex([x, y], i), False),
    "relu": ([F(4, 3)], lambda g, x: gt.relu(x), True), "gelu": ([F(4, 3)], lambda g, x: gt.gelu(x), True),
    "sigmoid": ([F(4, 3)], lambda g, x: gt.sigmoid(x), True),
    "softmax": ([F(4, 3)], lambda g, x: gt.softmax(x, 1), True),
    "log_softmax": ([F(4, 3)], lambda g, x: gt.log_softmax(x, 0), True),
    "dropout": ([F(4, 3)], lambda g, x: gt.dropout(x, 0.3), True),
    "layer_norm": ([F(4, 3), F(3), F(3)], lambda g, x, w, b: gt.layer_norm(x, 3, w, b), True),
    "embedding": ([I(4, 2, hi=5), F(5, 3)], lambda g, i, w: gt.embedding(i, w), True),
    "linear": ([F(4, 3), F(2, 3), F(2)], lambda g, x, w, b: gt.linear(x, w, b), True),
    "cross_entropy": ([F(4, 5), I(4, hi=5)], lambda g, x, t: gt.cross_entropy(x, t), True),
    "mse_loss": ([F(4, 3), F(4, 3)], lambda g, x, y: gt.mse_loss(x, y), True),
}
for _n in UNARY:
    SPECS.setdefault(_n, ([F(4, 3)], lambda g, x, _n=_n: getattr(gt, _n)(x), _n not in ("sign", "round", "floor", "ceil", "isfinite", "isinf", "isnan", "imag")))
for _n in BINARY:
    SPECS.setdefault(_n, ([F(4, 3), F(3)], lambda g, x, y, _n=_n: getattr(gt, _n)(x, y), _n in ("add", "subtract", "multiply", "maximum", "minimum")))


class Local:
    """Factories without a placement."""

    def __getattr__(self, name):
        return getattr(gt, name)


class Global:
    """Factories on a placement with a given SBP."""

    def __init__(self, placement, sbp):
        self.placement, self.sbp = placement, sbp

    def __getattr__(self, name):
        fn = getattr(gt, name)
        return lambda *a, **k: fn(*a, placement=self.placement, sbp=self.sbp, **k)


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def run_spec(name, placement=None, rng=None):
    inputs, call, differentiable = SPECS[name]
    tensors = []
    for a in inputs:
        a = np.asarray(a, np.float64 if np.asarray(a).dtype.kind == "f" else np.asarray(a).dtype)
        if placement is None:
            t = gt.tensor(a)
        else:
            options = [gt.sbp.broadcast] + [gt.sbp.split(d) for d in range(a.ndim)]
            if a.dtype.kind == "f":
                options.append(gt.sbp.partial_sum)
            t = gt.tensor(a, placement=placement, sbp=tuple(options[rng.integers(len(options))]
                                                           for _ in range(placement.ndim)))
        t.requires_grad_(differentiable and a.dtype.kind == "f")
        tensors.append(t)
    factory = Local() if placement is None else Global(placement, (gt.sbp.broadcast,) * placement.ndim)
    gt.manual_seed(11)
    outs = _outputs(call(factory, *tensors))
    if placement is not None and placement.type == "cuda":  # pieces stay on the device
        assert not any(isinstance(o.to_local()._local, np.ndarray) for o in outs), name
    values = [o.numpy() for o in outs]
    grads = []
    if differentiable:
        total = None
        for o in outs:
            if o.dtype.is_floating:
                total = o.sum() if total is None else total + o.sum()
        total.backward()
        if placement is not None and placement.type == "cuda":
            assert not any(isinstance(t.grad.to_local()._local, np.ndarray) for t in tensors if t.grad is not None)
        grads = [t.grad.numpy() if t.grad is not None else None for t in tensors]
    return values, grads


def _all_specs(mesh_2d, kind="cpu"):
    k = gt.env.get_world_size()
    placement = gt.placement(kind, [[0, 1], [2, 3]] if mesh_2d else list(range(k)))
    rng = np.random.default_rng(3)
    results = {}
    for name in sorted(SPECS):
        results[name] = run_spec(name, placement, rng)
    return results


@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (4, True)])
def test_every_op_matches_one_process(nprocs, mesh_2d):
    compare_with_one_process(run_ranks(_all_specs, nprocs, mesh_2d, timeout=600)[0])


def compare_with_one_process(results):
    """Each spec's values and gradients in `results` against one process on numpy pieces."""
    for name in sorted(SPECS):
        want_values, want_grads = run_spec(name)
        got_values, got_grads = results[name]
        assert len(got_values) == len(want_values), name
        for g, w in zip(got_values, want_values):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-7, atol=1e-9,
                                       err_msg=f"{name} value")
        for g, w in zip(got_grads, want_grads):
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9, err_msg=f"{name} grad")


def test_every_target_name_has_a_spec():
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "ops-target.txt")
    if not os.path.exists(path):
        pytest.skip("ops-target.txt not beside the repository")
    names = [w for line in open(path) if not line.startswith("#") for w in line.split()]
    missing = [n for n in names if n not in SPECS]
    print(f"\nend-to-end specs: {len(names) - len(missing)} of {len(names)} names of ops-target.txt")
    assert not missing, missing
