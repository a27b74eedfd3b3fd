"""Every name of ops-target.txt against an independent numpy float64 reference on the full global
values (tests/numpy_refs.py), for values and gradients: in one process (local tensors), on 2
ranks and on a 2x2 mesh of 4 ranks with random input SBPs. Gradients are those of sum(out * W)
over the float outputs, for a fixed random W per output; the reference is central finite
differences of the numpy reference. Random ops have no reference of their draws: their values
are checked for what holds for any draw (shape, dtype, range, a permutation ...) and equal the
one-process values of the same seed under any layout (SPEC §3). Where torch is importable, the
one-process values and gradients are compared with torch's as well."""
import math
import warnings
import zlib

import numpy as np
import pytest

import globaltensor as gt
import numpy_refs as ref
from conftest import run_ranks
from globaltensor.ops.elementwise import BINARY, UNARY
from numpy_refs import Layout, Random
from targets import OPS_TARGET

R = np.random.default_rng(7)
F = lambda *s, lo=-1.0, hi=1.0: R.uniform(lo, hi, s)  # noqa: E731
I = lambda *s, hi=4: R.integers(0, hi, s)  # noqa: E731
POS = lambda *s: R.uniform(0.5, 2.0, s)  # noqa: E731
BOOL = lambda *s: R.integers(0, 2, s).astype(bool)  # noqa: E731
STEPS = lambda *s: R.integers(-2, 3, s) / 2.0  # noqa: E731 - floats with repeats, for comparisons


def spd():
    a = F(3, 3)
    return a @ a.T + 3 * np.eye(3)


def halves():
    """Floats with exact halves (round: half to even, as numpy and PyTorch)."""
    x = F(4, 3, lo=-3, hi=3)
    x[0], x[1] = [0.5, 1.5, 2.5], [-0.5, -2.5, 3.5]
    return x


def special():
    """Floats with inf, -inf and nan among them."""
    x = F(4, 3)
    x[0, 1], x[1, 2], x[2, 0], x[3, 1] = np.inf, -np.inf, np.nan, np.nan
    return x


ZERO_GRAD = lambda *a: 0.0 * a[0]  # noqa: E731 - a piecewise constant op: gradient 0 (as PyTorch)
GRAD = True

# name -> (inputs, call(g, *tensors) -> tensor(s), reference(*arrays) -> array(s), grad)
#   reference: numpy_refs' plain numpy; Random(check) for a random op; Layout(reference) where
#   only shape and dtype are defined (empty).
#   grad: False, GRAD (finite differences of the reference), or a function to take the finite
#   differences of instead of the reference (cast: float32 values; round: its steps at halves).
SPECS = {
    # --- elementwise unary
    "acos": ([F(4, 3, lo=-0.9, hi=0.9)], lambda g, x: gt.acos(x), np.arccos, GRAD),
    "asin": ([F(4, 3, lo=-0.9, hi=0.9)], lambda g, x: gt.asin(x), np.arcsin, GRAD),
    "log": ([POS(4, 3)], lambda g, x: gt.log(x), np.log, GRAD),
    "log10": ([POS(4, 3)], lambda g, x: gt.log10(x), np.log10, GRAD),
    "log2": ([POS(4, 3)], lambda g, x: gt.log2(x), np.log2, GRAD),
    "log1p": ([POS(4, 3)], lambda g, x: gt.log1p(x), np.log1p, GRAD),
    "sqrt": ([POS(4, 3)], lambda g, x: gt.sqrt(x), np.sqrt, GRAD),
    "rsqrt": ([POS(4, 3)], lambda g, x: gt.rsqrt(x), lambda x: 1 / np.sqrt(x), GRAD),
    "reciprocal": ([POS(4, 3)], lambda g, x: gt.reciprocal(x), lambda x: 1 / x, GRAD),
    "round": ([halves()], lambda g, x: gt.round(x), np.round, ZERO_GRAD),
    "isfinite": ([special()], lambda g, x: gt.isfinite(x), np.isfinite, False),
    "isinf": ([special()], lambda g, x: gt.isinf(x), np.isinf, False),
    "isnan": ([special()], lambda g, x: gt.isnan(x), np.isnan, False),
    "logical_not": ([BOOL(4, 3)], lambda g, x: gt.logical_not(x), np.logical_not, False),
    "stanh": ([F(4, 3)], lambda g, x: gt.stanh(x), ref.stanh, GRAD),
    "scale": ([F(4, 3)], lambda g, x: gt.scale(x, 2.0, 0.5), lambda x: 2.0 * x + 0.5, GRAD),
    "increment": ([F(4, 3)], lambda g, x: gt.increment(x, 2.0), lambda x: x + 2.0, GRAD),
    "clip": ([F(4, 3)], lambda g, x: [gt.clip(x, -0.3, 0.4), gt.clip(x, -0.2), gt.clip(x, None, 0.2)],
             lambda x: [np.clip(x, -0.3, 0.4), np.maximum(x, -0.2), np.minimum(x, 0.2)], GRAD),
    "cast": ([F(4, 3)], lambda g, x: gt.cast(x, "float32"), lambda x: x.astype(np.float32), lambda x: x),
    # --- elementwise binary (numpy broadcasting)
    "pow": ([POS(4, 3), F(4, 3)], lambda g, x, y: [gt.pow(x, y), gt.pow(y, 3), gt.pow(2.0, y)],
            lambda x, y: [x ** y, y ** 3, 2.0 ** y], GRAD),
    "floor_divide": ([F(4, 3, lo=-2, hi=2), np.array([0.7, -0.6, 1.3])],
                     lambda g, x, y: gt.floor_divide(x, y), np.floor_divide, False),
    "mod": ([F(4, 3, lo=-2, hi=2), np.array([0.7, -0.6, 1.3])], lambda g, x, y: gt.mod(x, y), np.mod, GRAD),
    "divide": ([F(4, 3), POS(3)], lambda g, x, y: gt.divide(x, y), np.true_divide, GRAD),
    "logical_and": ([BOOL(4, 3), BOOL(4, 3)], lambda g, x, y: gt.logical_and(x, y), np.logical_and, False),
    "logical_or": ([BOOL(4, 3), BOOL(4, 3)], lambda g, x, y: gt.logical_or(x, y), np.logical_or, False),
    "logical_xor": ([BOOL(4, 3), BOOL(4, 3)], lambda g, x, y: gt.logical_xor(x, y), np.logical_xor, False),
    "where": ([BOOL(4, 3), F(4, 3), F(3)], lambda g, c, x, y: [gt.where(c, x, y), gt.where(c, x, 0.5)],
              lambda c, x, y: [np.where(c, x, y), np.where(c, x, 0.5)], GRAD),
    "allclose": ([F(4, 3), F(4, 3)], lambda g, x, y: [gt.allclose(x, x + y * 1e-9), gt.allclose(x, y)],
                 lambda x, y: [np.array(np.allclose(x, x + y * 1e-9)), np.array(np.allclose(x, y))], False),
    "equal_all": ([F(4, 3), F(4, 3)], lambda g, x, y: [gt.equal_all(x, x * 1), gt.equal_all(x, y)],
                  lambda x, y: [np.array(True), np.array(bool((x == y).all()))], False),
    "add_n": ([F(4, 3), F(4, 3), F(4, 3)], lambda g, x, y, z: gt.add_n([x, y, z]), lambda x, y, z: x + y + z, GRAD),
    # --- reductions and scans
    "sum": ([F(5, 4)], lambda g, x: [gt.sum(x, 1), gt.sum(x, 0, keepdim=True), gt.sum(x)],
            lambda x: [x.sum(1), x.sum(0, keepdims=True), x.sum()], GRAD),
    "mean": ([F(5, 4)], lambda g, x: [gt.mean(x, 0), gt.mean(x, -1, keepdim=True), gt.mean(x)],
             lambda x: [x.mean(0), x.mean(-1, keepdims=True), x.mean()], GRAD),
    "max": ([F(5, 4)], lambda g, x: [*gt.max(x, 1), *gt.max(x, 0, keepdim=True), gt.max(x)],
            lambda x: [*ref.max_dim(x, 1), *(v[None] for v in ref.max_dim(x, 0)), x.max()], GRAD),
    "min": ([F(5, 4)], lambda g, x: [gt.min(x), *gt.min(x, 0)], lambda x: [x.min(), *ref.min_dim(x, 0)], GRAD),
    "prod": ([POS(5, 4)], lambda g, x: [gt.prod(x, 1), gt.prod(x)], lambda x: [x.prod(1), x.prod()], GRAD),
    "std": ([F(5, 4)], lambda g, x: [gt.std(x, 0), gt.std(x), gt.std(x, 1, unbiased=False)],
            lambda x: [x.std(0, ddof=1), x.std(ddof=1), x.std(1)], GRAD),
    "var": ([F(5, 4)], lambda g, x: [gt.var(x, 1), gt.var(x), gt.var(x, 0, unbiased=False, keepdim=True)],
            lambda x: [x.var(1, ddof=1), x.var(ddof=1), x.var(0, keepdims=True)], GRAD),
    "median": ([F(5, 4)], lambda g, x: [*gt.median(x, 1), *gt.median(x, 0), gt.median(x)],
               lambda x: [*ref.median(x, 1), *ref.median(x, 0), ref.median(x.reshape(-1), 0)[0]], GRAD),
    "logsumexp": ([F(5, 4)], lambda g, x: [gt.logsumexp(x, 1), gt.logsumexp(x, (0, 1))],
                  lambda x: [ref.logsumexp(x, 1), ref.logsumexp(x.reshape(-1), 0)], GRAD),
    "norm": ([F(5, 4)], lambda g, x: [gt.norm(x, 2, 1), gt.norm(x), gt.norm(x, 1, 0), gt.norm(x, math.inf, 1)],
             lambda x: [ref.norm(x, 2, 1), np.sqrt((x * x).sum()), np.abs(x).sum(0), np.abs(x).max(1)], GRAD),
    "all": ([BOOL(5, 4)], lambda g, x: gt.all(x, 0), lambda x: x.all(0), False),
    "any": ([BOOL(5, 4)], lambda g, x: gt.any(x), lambda x: x.any(), False),
    "argmax": ([STEPS(5, 4)], lambda g, x: [gt.argmax(x, 1), gt.argmax(x), gt.argmax(x, 0, keepdim=True)],
               lambda x: [x.argmax(1), x.argmax(), x.argmax(0)[None]], False),  # ties: the first, as numpy
    "argmin": ([STEPS(5, 4)], lambda g, x: [gt.argmin(x), gt.argmin(x, 0)], lambda x: [x.argmin(), x.argmin(0)],
               False),
    "cumsum": ([F(5, 4)], lambda g, x: [gt.cumsum(x, 1), gt.cumsum(x, 0)], lambda x: [x.cumsum(1), x.cumsum(0)],
               GRAD),
    "trace": ([F(4, 4)], lambda g, x: gt.trace(x), np.trace, GRAD),
    "dist": ([F(5, 4), F(5, 4)], lambda g, x, y: [gt.dist(x, y), gt.dist(x, y, 1), gt.dist(x, y, math.inf)],
             lambda x, y: [np.sqrt(((x - y) ** 2).sum()), np.abs(x - y).sum(), np.abs(x - y).max()], GRAD),
    "numel": ([F(5, 4)], lambda g, x: g.tensor(float(gt.numel(x))), lambda x: np.array(float(x.size)), False),
    # --- linear algebra
    "matmul": ([F(5, 4), F(4, 3), F(4), F(2, 3, 5)],
               lambda g, x, y, v, b: [gt.matmul(x, y), gt.matmul(x, v), gt.matmul(v, y), gt.matmul(b, x)],
               lambda x, y, v, b: [x @ y, x @ v, v @ y, b @ x], GRAD),
    "mm": ([F(5, 4), F(4, 3)], lambda g, x, y: gt.mm(x, y), np.matmul, GRAD),
    "bmm": ([F(2, 5, 4), F(2, 4, 3)], lambda g, x, y: gt.bmm(x, y), np.matmul, GRAD),
    "mv": ([F(5, 4), F(4)], lambda g, x, y: gt.mv(x, y), np.matmul, GRAD),
    "dot": ([F(4), F(4)], lambda g, x, y: gt.dot(x, y), np.dot, GRAD),
    "addmm": ([F(5, 3), F(5, 4), F(4, 3)], lambda g, a, x, y: gt.addmm(a, x, y, beta=0.5, alpha=2.0),
              lambda a, x, y: 0.5 * a + 2.0 * (x @ y), GRAD),
    "kron": ([F(2, 3), F(3, 2)], lambda g, x, y: gt.kron(x, y), np.kron, GRAD),
    "cross": ([F(4, 3), F(4, 3)], lambda g, x, y: gt.cross(x, y, 1), lambda x, y: np.cross(x, y, axis=1), GRAD),
    "cholesky": ([spd()], lambda g, x: gt.cholesky(x), ref.cholesky, GRAD),
    "inverse": ([spd()], lambda g, x: gt.inverse(x), np.linalg.inv, GRAD),
    "t": ([F(5, 4)], lambda g, x: gt.t(x), np.transpose, GRAD),
    # --- creation
    "arange": ([], lambda g: g.arange(1, 11, 2), lambda: np.arange(1, 11, 2), False),
    "linspace": ([], lambda g: g.linspace(0, 1, 7), lambda: np.linspace(0, 1, 7), False),
    "eye": ([], lambda g: g.eye(4, 5), lambda: np.eye(4, 5), False),
    "full": ([], lambda g: g.full((3, 4), 2.5), lambda: np.full((3, 4), 2.5), False),
    "full_like": ([F(3, 4)], lambda g, x: gt.full_like(x, 7.0), lambda x: np.full_like(x, 7.0), False),
    "empty": ([], lambda g: g.empty(3, 4), Layout(lambda: np.empty((3, 4))), False),
    "empty_like": ([F(3, 4)], lambda g, x: gt.empty_like(x), Layout(np.empty_like), False),
    "ones": ([], lambda g: g.ones(3, 4), lambda: np.ones((3, 4)), False),
    "ones_like": ([F(3, 4)], lambda g, x: gt.ones_like(x), np.ones_like, False),
    "zeros": ([], lambda g: g.zeros(3, 4), lambda: np.zeros((3, 4)), False),
    "zeros_like": ([F(3, 4)], lambda g, x: gt.zeros_like(x), np.zeros_like, False),
    "diag": ([F(4, 4), F(3)], lambda g, x, v: [gt.diag(x), gt.diag(x, 1), gt.diag(x, -2), gt.diag(v), gt.diag(v, -1)],
             lambda x, v: [np.diag(x), np.diag(x, 1), np.diag(x, -2), np.diag(v), np.diag(v, -1)], GRAD),
    "meshgrid": ([F(4), F(3)], lambda g, x, y: gt.meshgrid(x, y), lambda x, y: np.meshgrid(x, y, indexing="ij"),
                 GRAD),
    "tril": ([F(4, 4), F(2, 3, 4)], lambda g, x, y: [gt.tril(x), gt.tril(y, -1)],
             lambda x, y: [np.tril(x), np.tril(y, -1)], GRAD),
    "triu": ([F(4, 4), F(2, 3, 4)], lambda g, x, y: [gt.triu(x, 1), gt.triu(y, -1)],
             lambda x, y: [np.triu(x, 1), np.triu(y, -1)], GRAD),
    # --- random: checks of any draw, and the same values under any layout
    "rand": ([], lambda g: g.rand(4, 3), Random(ref.within(0.0, 1.0, shape=(4, 3))), False),
    "randn": ([], lambda g: g.randn(4, 3), Random(ref.shaped((4, 3))), False),
    "randint": ([], lambda g: g.randint(0, 9, (4, 3)), Random(ref.within(0, 9, "i", (4, 3))), False),
    "randperm": ([], lambda g: g.randperm(7), Random(ref.permutation(7)), False),
    "normal": ([], lambda g: g.normal(1.0, 2.0, (4, 3)), Random(ref.shaped((4, 3))), False),
    "uniform": ([], lambda g: g.uniform((4, 3), -1.0, 1.0), Random(ref.within(-1.0, 1.0, shape=(4, 3))), False),
    "bernoulli": ([R.uniform(0, 1, (4, 3))], lambda g, x: gt.bernoulli(x), Random(ref.bernoulli_check), False),
    "multinomial": ([R.uniform(0.1, 1, (4, 5))], lambda g, x: gt.multinomial(x, 3),
                    Random(ref.multinomial_check(3)), False),
    "dropout": ([F(4, 3)], lambda g, x: gt.dropout(x, 0.3), Random(ref.dropout_check(0.3), ref.dropout_grads(0.3)),
                GRAD),
    # --- shape and layout
    "reshape": ([F(4, 6)], lambda g, x: gt.reshape(x, (4, 2, 3)), lambda x: x.reshape(4, 2, 3), GRAD),
    "reshape_": ([F(4, 6)], lambda g, x: gt.reshape_(x * 1, (24,)), lambda x: x.reshape(24), GRAD),
    "flatten": ([F(4, 2, 3)], lambda g, x: gt.flatten(x, 1), lambda x: x.reshape(4, 6), GRAD),
    "squeeze": ([F(4, 1, 3, 1)], lambda g, x: [gt.squeeze(x, 1), gt.squeeze(x), gt.squeeze(x, -1), gt.squeeze(x, 0)],
                lambda x: [x.squeeze(1), x.squeeze(), x.squeeze(-1), x], GRAD),  # a dim not 1 stays
    "squeeze_": ([F(4, 1, 3)], lambda g, x: gt.squeeze_(x * 1, 1), lambda x: x.squeeze(1), GRAD),
    "unsqueeze": ([F(4, 3)], lambda g, x: gt.unsqueeze(x, 1), lambda x: x[:, None], GRAD),
    "unsqueeze_": ([F(4, 3)], lambda g, x: gt.unsqueeze_(x * 1, 0), lambda x: x[None], GRAD),
    "transpose": ([F(4, 3, 2)], lambda g, x: [gt.transpose(x, 0, 2), gt.transpose(x, -1, 1)],
                  lambda x: [np.swapaxes(x, 0, 2), np.swapaxes(x, -1, 1)], GRAD),
    "expand": ([F(4, 1)], lambda g, x: gt.expand(x, 2, 4, 3), lambda x: np.broadcast_to(x, (2, 4, 3)), GRAD),
    "expand_as": ([F(4, 1), F(4, 3)], lambda g, x, y: gt.expand_as(x, y), lambda x, y: np.broadcast_to(x, y.shape),
                  GRAD),
    "broadcast_to": ([F(3)], lambda g, x: gt.broadcast_to(x, (4, 3)), lambda x: np.broadcast_to(x, (4, 3)), GRAD),
    "tile": ([F(2, 3)], lambda g, x: gt.tile(x, (2, 2)), lambda x: np.tile(x, (2, 2)), GRAD),
    "flip": ([F(4, 3)], lambda g, x: [gt.flip(x, 1), gt.flip(x, (0, 1))], lambda x: [np.flip(x, 1), np.flip(x)], GRAD),
    "roll": ([F(4, 3)], lambda g, x: [gt.roll(x, 1, 0), gt.roll(x, 5), gt.roll(x, (-1, 7), (1, 0))],
             lambda x: [np.roll(x, 1, 0), np.roll(x, 5), np.roll(x, (-1, 7), (1, 0))], GRAD),
    "concat": ([F(4, 3), F(2, 3)], lambda g, x, y: gt.concat([x, y], 0), lambda x, y: np.concatenate([x, y], 0),
               GRAD),
    "stack": ([F(4, 3), F(4, 3)], lambda g, x, y: gt.stack([x, y], 1), lambda x, y: np.stack([x, y], 1), GRAD),
    "split": ([F(4, 6)], lambda g, x: gt.split(x, [2, 4], dim=1), lambda x: np.split(x, [2], 1), GRAD),
    "chunk": ([F(5, 6)], lambda g, x: [*gt.chunk(x, 3, 0), *gt.chunk(x, 4, 1)],  # 4 chunks of 6: 3 of 2
              lambda x: [*ref.chunk(x, 3, 0), *ref.chunk(x, 4, 1)], GRAD),
    "unbind": ([F(3, 4)], lambda g, x: gt.unbind(x, 0), lambda x: list(x), GRAD),
    "unstack": ([F(3, 4)], lambda g, x: gt.unstack(x, 1), lambda x: list(x.T), GRAD),
    "slice": ([F(5, 6)], lambda g, x: gt.slice(x, [1], [1], [5]), lambda x: x[:, 1:5], GRAD),
    "strided_slice": ([F(5, 6)], lambda g, x: gt.strided_slice(x, [1], [0], [6], [2]), lambda x: x[:, 0:6:2], GRAD),
    # --- indexing, sorting, selection
    "gather": ([F(5, 4), I(5, 3, hi=4), I(2, 4, hi=5)], lambda g, x, i, j: [gt.gather(x, 1, i), gt.gather(x, 0, j)],
               lambda x, i, j: [np.take_along_axis(x, i, 1), np.take_along_axis(x, j, 0)], GRAD),
    "gather_nd": ([F(5, 4), np.stack([I(6, hi=5), I(6, hi=4)], 1)], lambda g, x, i: gt.gather_nd(x, i),
                  ref.gather_nd, GRAD),
    "index_select": ([F(5, 4), I(3, hi=5)], lambda g, x, i: gt.index_select(x, dim=0, index=i),
                     lambda x, i: x[i], GRAD),
    "index_sample": ([F(5, 4), I(5, 3, hi=4)], lambda g, x, i: gt.index_sample(x, i),
                     lambda x, i: np.take_along_axis(x, i, 1), GRAD),
    "masked_select": ([F(5, 4), BOOL(5, 4)], lambda g, x, m: gt.masked_select(x, m), lambda x, m: x[m], GRAD),
    "nonzero": ([I(5, 4, hi=2)], lambda g, x: gt.nonzero(x), np.argwhere, False),
    "scatter": ([F(5, 4), np.argsort(F(5, 4), 1)[:, :3], F(5, 3)], lambda g, x, i, s: gt.scatter(x, 1, i, s),
                lambda x, i, s: ref.scatter(x, 1, i, s), GRAD),
    "scatter_": ([F(5, 4), np.argsort(F(5, 4), 1)[:, :3], F(5, 3)], lambda g, x, i, s: gt.scatter_(x * 1, 1, i, s),
                 lambda x, i, s: ref.scatter(x, 1, i, s), GRAD),
    "scatter_nd": ([np.stack([I(6, hi=5), I(6, hi=4)], 1), F(6)], lambda g, i, u: gt.scatter_nd(i, u, (5, 4)),
                   lambda i, u: ref.scatter_nd(i, u, (5, 4)), GRAD),
    "scatter_nd_add": ([F(5, 4), np.stack([I(6, hi=5), I(6, hi=4)], 1), F(6)],
                       lambda g, x, i, u: gt.scatter_nd_add(x, i, u), ref.scatter_nd_add, GRAD),
    "shard_index": ([I(6, 1, hi=20)], lambda g, x: gt.shard_index(x, 20, 2, 1), lambda x: ref.shard_index(x, 20, 2, 1),
                    False),
    "sort": ([F(5, 4)], lambda g, x: [*gt.sort(x, 1, True), *gt.sort(x, 0)],
             lambda x: [*ref.sort(x, 1, True), *ref.sort(x, 0)], GRAD),
    "argsort": ([F(5, 4)], lambda g, x: [gt.argsort(x, 0), gt.argsort(x), gt.argsort(x, 1, True)],
                lambda x: [np.argsort(x, 0), np.argsort(x, -1), np.argsort(-x, 1)], False),
    "topk": ([F(5, 4)], lambda g, x: [*gt.topk(x, 2, 1), *gt.topk(x, 3, 0, False)],
             lambda x: [*ref.topk(x, 2, 1), *(-v if j == 0 else v for j, v in enumerate(ref.topk(-x, 3, 0)))], GRAD),
    "unique": ([I(9, hi=4)], lambda g, x: gt.unique(x), np.unique, False),
    "histogram": ([F(5, 4)],
                  lambda g, x: [gt.histogram(x, 4, -1, 1), gt.histogram(x, 3, -0.5, 0.5), gt.histogram(x, 5)],
                  lambda x: [ref.histogram(x, 4, -1, 1), ref.histogram(x, 3, -0.5, 0.5),  # min = max = 0: the data's
                             ref.histogram(x, 5, x.min(), x.max())], False),
    "multiplex": ([F(5, 3), F(5, 3), I(5, 1, hi=2)], lambda g, x, y, i: gt.multiplex([x, y], i),
                  lambda x, y, i: ref.multiplex([x, y], i), GRAD),
    # --- nn.functional
    "relu": ([F(4, 3)], lambda g, x: gt.relu(x), lambda x: np.maximum(x, 0), GRAD),
    "gelu": ([F(4, 3)], lambda g, x: [gt.gelu(x), gt.gelu(x, approximate="tanh")],
             lambda x: [ref.gelu(x), ref.gelu_tanh(x)], GRAD),
    "sigmoid": ([F(4, 3)], lambda g, x: gt.sigmoid(x), ref.sigmoid, GRAD),
    "softmax": ([F(4, 3)], lambda g, x: [gt.softmax(x, 1), gt.softmax(x, -2)],
                lambda x: [ref.softmax(x, 1), ref.softmax(x, -2)], GRAD),
    "log_softmax": ([F(4, 3)], lambda g, x: gt.log_softmax(x, 0), lambda x: ref.log_softmax(x, 0), GRAD),
    "layer_norm": ([F(4, 3), F(3), F(3), F(2, 3, 4)],
                   lambda g, x, w, b, y: [gt.layer_norm(x, 3, w, b), gt.layer_norm(y, (3, 4))],
                   lambda x, w, b, y: [ref.layer_norm(x, w, b),
                                       ref.layer_norm(y.reshape(2, 12), 1, 0).reshape(y.shape)],
                   GRAD),
    "embedding": ([I(4, 2, hi=5), F(5, 3)], lambda g, i, w: gt.embedding(i, w), lambda i, w: w[i], GRAD),
    "linear": ([F(4, 3), F(2, 3), F(2)], lambda g, x, w, b: [gt.linear(x, w, b), gt.linear(x, w)],
               lambda x, w, b: [x @ w.T + b, x @ w.T], GRAD),
    "cross_entropy": ([F(4, 5), I(4, hi=5), np.array([1, -100, 4, 0])],
                      lambda g, x, t, u: [gt.cross_entropy(x, t), gt.cross_entropy(x, t, reduction="sum"),
                                          gt.cross_entropy(x, t, reduction="none"), gt.cross_entropy(x, u)],
                      lambda x, t, u: [ref.cross_entropy(x, t), ref.cross_entropy(x, t, "sum"),
                                       ref.cross_entropy(x, t, "none"), ref.cross_entropy(x, u)], GRAD),
    "mse_loss": ([F(4, 3), F(4, 3)], lambda g, x, y: [gt.mse_loss(x, y), gt.mse_loss(x, y, reduction="sum"),
                                                      gt.mse_loss(x, y, reduction="none")],
                 lambda x, y: [np.mean((x - y) ** 2), np.sum((x - y) ** 2), (x - y) ** 2], GRAD),
}
# Cases at the edges of an op's definition (the ones the library got wrong, see KNOWN_DIFFERENCES).
SPECS.update({
    "logsumexp[all -inf]": ([np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])],
                            lambda g, x: gt.logsumexp(x, 1), lambda x: np.log(np.exp(x).sum(1)), False),
    "norm[p=0]": ([STEPS(4, 3)], lambda g, x: gt.norm(x, 0, 1), lambda x: (x != 0).sum(1).astype(np.float64), False),
    "dist[p=0]": ([STEPS(4, 3), STEPS(4, 3)], lambda g, x, y: gt.dist(x, y, 0),
                  lambda x, y: np.array(float((x != y).sum())), False),
    "norm[zero row]": ([np.concatenate([F(1, 4), np.zeros((1, 4)), F(1, 4)])], lambda g, x: gt.norm(x, 2, 1),
                       lambda x: ref.norm(x, 2, 1), GRAD),  # gradient 0 at 0 (PyTorch; the central difference)
    "maximum[ties]": ([STEPS(4, 3), STEPS(3)], lambda g, x, y: gt.maximum(x, y), np.maximum, GRAD),  # ties: 1/2 each
    "minimum[ties]": ([STEPS(4, 3), STEPS(3)], lambda g, x, y: gt.minimum(x, y), np.minimum, GRAD),
    "embedding[weight split twice]": ([I(4, 2, hi=5), F(5, 3)], lambda g, i, w: gt.embedding(i, w),
                                      lambda i, w: w[i], GRAD),  # PINNED_SBPS
})
_UNARY_REFS = {
    "abs": (np.abs, GRAD), "atan": (np.arctan, GRAD), "ceil": (np.ceil, ZERO_GRAD), "cos": (np.cos, GRAD),
    "cosh": (np.cosh, GRAD), "erf": (ref.erf, GRAD), "exp": (np.exp, GRAD), "floor": (np.floor, ZERO_GRAD),
    "sign": (np.sign, ZERO_GRAD), "sin": (np.sin, GRAD), "sinh": (np.sinh, GRAD), "square": (np.square, GRAD),
    "tan": (np.tan, GRAD), "tanh": (np.tanh, GRAD), "conj": (np.conj, GRAD), "real": (np.real, GRAD),
    "imag": (np.zeros_like, GRAD), "neg": (np.negative, GRAD),
}
_BINARY_REFS = {
    "add": (np.add, GRAD), "subtract": (np.subtract, GRAD), "multiply": (np.multiply, GRAD),
    "maximum": (np.maximum, GRAD), "minimum": (np.minimum, GRAD),
    "equal": (np.equal, False), "not_equal": (np.not_equal, False), "greater_equal": (np.greater_equal, False),
    "greater_than": (np.greater, False), "less_equal": (np.less_equal, False), "less_than": (np.less, False),
}
for _n in UNARY:
    if _n not in SPECS:
        _fn, _grad = _UNARY_REFS[_n]
        SPECS[_n] = ([F(4, 3)], lambda g, x, _n=_n: getattr(gt, _n)(x), _fn, _grad)
for _n in BINARY:
    if _n not in SPECS:
        _fn, _grad = _BINARY_REFS[_n]
        _inputs = [F(4, 3), F(3)] if _grad else [STEPS(4, 3), STEPS(3)]  # comparisons: with ties
        SPECS[_n] = (_inputs, lambda g, x, y, _n=_n: getattr(gt, _n)(x, y), _fn, _grad)

# The same calls in torch (t: the torch module), where torch has the op under the same name or an
# obvious equivalent; compared in one process, values and gradients (test_every_op_matches_torch).
_TORCH_NAMES = {"mod": "remainder", "equal": "eq", "greater_than": "greater", "less_than": "less"}
TORCH = {
    **{n: (lambda t, x, _n=n: getattr(t, _n)(x)) for n in UNARY if n != "imag"},  # imag: complex only
    **{n: (lambda t, x, y, _n=n: getattr(t, _TORCH_NAMES.get(_n, _n))(x, y)) for n in BINARY},
    "clip": lambda t, x: [t.clip(x, -0.3, 0.4), t.clip(x, -0.2), t.clip(x, None, 0.2)],
    "cast": lambda t, x: x.to(t.float32), "pow": lambda t, x, y: [t.pow(x, y), t.pow(y, 3), t.pow(2.0, y)],
    "where": lambda t, c, x, y: [t.where(c, x, y), t.where(c, x, 0.5)],
    "allclose": lambda t, x, y: [t.tensor(t.allclose(x, x + y * 1e-9)), t.tensor(t.allclose(x, y))],
    "equal_all": lambda t, x, y: [t.tensor(t.equal(x, x * 1)), t.tensor(t.equal(x, y))],
    "sum": lambda t, x: [t.sum(x, 1), t.sum(x, 0, keepdim=True), t.sum(x)],
    "mean": lambda t, x: [t.mean(x, 0), t.mean(x, -1, keepdim=True), t.mean(x)],
    "max": lambda t, x: [*t.max(x, 1), *t.max(x, 0, keepdim=True), t.max(x)],
    "min": lambda t, x: [t.min(x), *t.min(x, 0)], "prod": lambda t, x: [t.prod(x, 1), t.prod(x)],
    "std": lambda t, x: [t.std(x, 0), t.std(x), t.std(x, 1, unbiased=False)],
    "var": lambda t, x: [t.var(x, 1), t.var(x), t.var(x, 0, unbiased=False, keepdim=True)],
    "median": lambda t, x: [*t.median(x, 1), *t.median(x, 0), t.median(x)],
    "logsumexp": lambda t, x: [t.logsumexp(x, 1), t.logsumexp(x, (0, 1))],
    "norm": lambda t, x: [t.norm(x, 2, 1), t.norm(x), t.norm(x, 1, 0), t.norm(x, math.inf, 1)],
    "all": lambda t, x: t.all(x, 0), "any": lambda t, x: t.any(x),
    "argmax": lambda t, x: [t.argmax(x, 1), t.argmax(x), t.argmax(x, 0, keepdim=True)],
    "argmin": lambda t, x: [t.argmin(x), t.argmin(x, 0)],
    "cumsum": lambda t, x: [t.cumsum(x, 1), t.cumsum(x, 0)], "trace": lambda t, x: t.trace(x),
    "dist": lambda t, x, y: [t.dist(x, y), t.dist(x, y, 1), t.dist(x, y, math.inf)],
    "numel": lambda t, x: t.tensor(float(t.numel(x)), dtype=t.float64),
    "matmul": lambda t, x, y, v, b: [t.matmul(x, y), t.matmul(x, v), t.matmul(v, y), t.matmul(b, x)],
    "mm": lambda t, x, y: t.mm(x, y), "bmm": lambda t, x, y: t.bmm(x, y),
    "mv": lambda t, x, y: t.mv(x, y), "dot": lambda t, x, y: t.dot(x, y),
    "addmm": lambda t, a, x, y: t.addmm(a, x, y, beta=0.5, alpha=2.0), "kron": lambda t, x, y: t.kron(x, y),
    "cross": lambda t, x, y: t.cross(x, y, dim=1), "cholesky": lambda t, x: t.linalg.cholesky(x),
    "inverse": lambda t, x: t.inverse(x), "t": lambda t, x: t.t(x),
    "arange": lambda t: t.arange(1, 11, 2), "linspace": lambda t: t.linspace(0, 1, 7), "eye": lambda t: t.eye(4, 5),
    "full": lambda t: t.full((3, 4), 2.5), "full_like": lambda t, x: t.full_like(x, 7.0),
    "ones": lambda t: t.ones(3, 4), "ones_like": lambda t, x: t.ones_like(x), "zeros": lambda t: t.zeros(3, 4),
    "zeros_like": lambda t, x: t.zeros_like(x),
    "diag": lambda t, x, v: [t.diag(x), t.diag(x, 1), t.diag(x, -2), t.diag(v), t.diag(v, -1)],
    "meshgrid": lambda t, x, y: t.meshgrid(x, y, indexing="ij"),
    "tril": lambda t, x, y: [t.tril(x), t.tril(y, -1)], "triu": lambda t, x, y: [t.triu(x, 1), t.triu(y, -1)],
    "reshape": lambda t, x: t.reshape(x, (4, 2, 3)), "flatten": lambda t, x: t.flatten(x, 1),
    "squeeze": lambda t, x: [t.squeeze(x, 1), t.squeeze(x), t.squeeze(x, -1), t.squeeze(x, 0)],
    "squeeze_": lambda t, x: (x * 1).squeeze_(1),
    "unsqueeze": lambda t, x: t.unsqueeze(x, 1), "unsqueeze_": lambda t, x: (x * 1).unsqueeze_(0),
    "transpose": lambda t, x: [t.transpose(x, 0, 2), t.transpose(x, -1, 1)], "expand": lambda t, x: x.expand(2, 4, 3),
    "expand_as": lambda t, x, y: x.expand_as(y), "broadcast_to": lambda t, x: t.broadcast_to(x, (4, 3)),
    "tile": lambda t, x: t.tile(x, (2, 2)),
    "flip": lambda t, x: [t.flip(x, [1]), t.flip(x, (0, 1))],
    "roll": lambda t, x: [t.roll(x, 1, 0), t.roll(x, 5), t.roll(x, (-1, 7), (1, 0))],
    "concat": lambda t, x, y: t.cat([x, y], 0), "stack": lambda t, x, y: t.stack([x, y], 1),
    "split": lambda t, x: t.split(x, [2, 4], dim=1), "chunk": lambda t, x: [*t.chunk(x, 3, 0), *t.chunk(x, 4, 1)],
    "unbind": lambda t, x: t.unbind(x, 0), "unstack": lambda t, x: t.unbind(x, 1),
    "slice": lambda t, x: t.narrow(x, 1, 1, 4),
    "gather": lambda t, x, i, j: [t.gather(x, 1, i), t.gather(x, 0, j)],
    "index_select": lambda t, x, i: t.index_select(x, 0, i),
    "index_sample": lambda t, x, i: t.gather(x, 1, i), "masked_select": lambda t, x, m: t.masked_select(x, m),
    "nonzero": lambda t, x: t.nonzero(x), "scatter": lambda t, x, i, s: t.scatter(x, 1, i, s),
    "scatter_": lambda t, x, i, s: (x * 1).scatter_(1, i, s),
    "scatter_nd": lambda t, i, u: t.zeros(5, 4, dtype=u.dtype).index_put(tuple(i.T), u, accumulate=True),
    "scatter_nd_add": lambda t, x, i, u: t.index_put(x, tuple(i.T), u, accumulate=True),
    "sort": lambda t, x: [*t.sort(x, 1, True), *t.sort(x, 0)],
    "argsort": lambda t, x: [t.argsort(x, 0), t.argsort(x), t.argsort(x, 1, True)],
    "topk": lambda t, x: [*t.topk(x, 2, 1), *t.topk(x, 3, 0, False)], "unique": lambda t, x: t.unique(x),
    "histogram": lambda t, x: [t.histc(x, 4, -1, 1).long(), t.histc(x, 3, -0.5, 0.5).long(), t.histc(x, 5).long()],
    "relu": lambda t, x: t.relu(x),
    "gelu": lambda t, x: [t.nn.functional.gelu(x), t.nn.functional.gelu(x, approximate="tanh")],
    "sigmoid": lambda t, x: t.sigmoid(x), "softmax": lambda t, x: [t.softmax(x, 1), t.softmax(x, -2)],
    "log_softmax": lambda t, x: t.log_softmax(x, 0),
    "layer_norm": lambda t, x, w, b, y: [t.nn.functional.layer_norm(x, (3,), w, b),
                                         t.nn.functional.layer_norm(y, (3, 4))],
    "embedding": lambda t, i, w: t.nn.functional.embedding(i, w),
    "linear": lambda t, x, w, b: [t.nn.functional.linear(x, w, b), t.nn.functional.linear(x, w)],
    "cross_entropy": lambda t, x, y, u: [t.nn.functional.cross_entropy(x, y),
                                         t.nn.functional.cross_entropy(x, y, reduction="sum"),
                                         t.nn.functional.cross_entropy(x, y, reduction="none"),
                                         t.nn.functional.cross_entropy(x, u)],
    "mse_loss": lambda t, x, y: [t.nn.functional.mse_loss(x, y), t.nn.functional.mse_loss(x, y, reduction="sum"),
                                 t.nn.functional.mse_loss(x, y, reduction="none")],
}
TORCH.update({
    "logsumexp[all -inf]": lambda t, x: t.logsumexp(x, 1), "norm[p=0]": lambda t, x: t.norm(x, 0, 1),
    "dist[p=0]": lambda t, x, y: t.dist(x, y, 0), "norm[zero row]": lambda t, x: t.norm(x, 2, 1),
    "maximum[ties]": lambda t, x, y: t.maximum(x, y), "minimum[ties]": lambda t, x, y: t.minimum(x, y),
    "embedding[weight split twice]": lambda t, i, w: t.nn.functional.embedding(i, w),
})
NOT_IN_TORCH = {  # no torch op of that name or an obvious equivalent (or: no reference of the draws)
    "imag", "stanh", "scale", "increment", "add_n", "reshape_", "strided_slice", "gather_nd", "shard_index",
    "multiplex", "empty", "empty_like", "rand", "randn", "randint", "randperm", "normal", "uniform", "bernoulli",
    "multinomial", "dropout",
}

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum

# Differentiable in PyTorch, but without a backward in globaltensor (yet): their gradients are
# not compared; test_no_backward_yet says when one is added (then give the spec GRAD).
NO_BACKWARD = set()  # none left

# Input SBPs that a spec always gets (mesh ndim -> one SBP tuple per input) instead of random ones.
PINNED_SBPS = {"embedding[weight split twice]": {1: ((B,), (S0,)), 2: ((B, B), (S0, S1))}}

# Where the library differs from numpy/PyTorch (bugs to fix in globaltensor, not here): name ->
# (the layouts where it differs, what differs). The comparisons skip these names there, and
# assert that they still differ (so that a fix is noticed and the entry removed).
LOCAL, ONE_D, TWO_D = "one process", "2 ranks", "2x2 mesh"
KNOWN_DIFFERENCES = {}  # none left: the edge cases above now match numpy and PyTorch


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


def _arrays(name):
    return [np.asarray(a, np.float64 if np.asarray(a).dtype.kind == "f" else np.asarray(a).dtype)
            for a in SPECS[name][0]]


def _input_sbps(name, arrays, placement):
    """Random input SBPs for SPECS[name] on placement (drawn from a generator seeded by the name
    and the mesh's ndim, so a spec keeps its SBPs when others are added), or its PINNED_SBPS."""
    if placement.ndim in PINNED_SBPS.get(name, {}):
        return PINNED_SBPS[name][placement.ndim]
    rng = np.random.default_rng([zlib.crc32(name.encode()), placement.ndim])
    sbps = []
    for a in arrays:
        options = [B] + [gt.sbp.split(d) for d in range(a.ndim)] + ([P] if a.dtype.kind == "f" else [])
        sbps.append(tuple(options[rng.integers(len(options))] for _ in range(placement.ndim)))
    return sbps


def run_spec(name, placement=None):
    """Run SPECS[name] in one process (placement None: local tensors) or on `placement` with
    random input SBPs; returns (values, grads): the full value of each output, and
    d sum(out * W) / d input for each input (None where not asked or not a float input)."""
    _, call, _, grad = SPECS[name]
    arrays = _arrays(name)
    if placement is None:
        tensors = [gt.tensor(a) for a in arrays]
    else:
        sbps = _input_sbps(name, arrays, placement)
        tensors = [gt.tensor(a, placement=placement, sbp=s) for a, s in zip(arrays, sbps)]
    for a, t in zip(arrays, tensors):
        t.requires_grad_(bool(grad) and a.dtype.kind == "f")
    factory = Local() if placement is None else Global(placement, (B,) * placement.ndim)
    gt.manual_seed(11)
    outs = _outputs(call(factory, *tensors))
    if placement is not None and placement.type == "cuda":  # pieces stay on the device
        assert not any(isinstance(o.to_local()._local, np.ndarray) for o in outs), name
    values = [o.numpy() for o in outs]
    grads = [None] * len(tensors)
    if grad:
        def weighted_sum(outs):
            total = None
            for o, w in zip(outs, ref.weights(name, [v.shape for v in values])):
                if o.dtype.is_floating:
                    w = gt.tensor(w) if placement is None else gt.tensor(  # the same W on every rank
                        w, placement=placement, sbp=(B,) * placement.ndim, check_meta=False)
                    total = (o * w).sum() if total is None else total + (o * w).sum()
            return total

        def read():
            return [None if not t.requires_grad else np.zeros(t.shape) if t.grad is None else t.grad.numpy().copy()
                    for t in tensors]  # no .grad: the output does not depend on it (0, as PyTorch)

        weighted_sum(outs).backward()
        if placement is not None and placement.type == "cuda":
            assert not any(isinstance(t.grad.to_local()._local, np.ndarray) for t in tensors if t.grad is not None)
        grads = read()
        gt.manual_seed(11)  # a second pass accumulates exactly as much again (g + g == 2 g)
        weighted_sum(_outputs(call(factory, *tensors))).backward()
        for i, (once, twice) in enumerate(zip(grads, read())):
            if once is not None and not np.array_equal(twice, 2 * once, equal_nan=True):
                raise AssertionError(f"input {i}: a second backward did not add exactly the first's gradient")
    return values, grads


class Failed(str):
    """A run_spec that raised: its error, in place of (values, grads)."""


def try_spec(name, placement=None):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return run_spec(name, placement)
    except Exception as exc:  # noqa: BLE001 - reported by check_spec; every rank raises alike
        return Failed(f"{type(exc).__name__}: {exc}")


_expected = {}


def expected(name):
    """(values, grads) of the numpy reference of SPECS[name]: grads by central finite
    differences of the weighted sum (None where not compared); computed once."""
    if name not in _expected:
        _, _, reference, grad = SPECS[name]
        arrays = _arrays(name)
        if isinstance(reference, (Random, Layout)):
            _expected[name] = (None, None)
            return _expected[name]
        with np.errstate(all="ignore"):
            values = [np.asarray(v) for v in ref.as_list(reference(*arrays))]
            grads = [None] * len(arrays)
            if grad:
                fn = reference if grad is GRAD else grad
                grads = ref.finite_difference_grads(fn, arrays, ref.weights(name, [v.shape for v in values]))
        _expected[name] = (values, grads)
    return _expected[name]


def _same_kind(a, b):
    kind = lambda d: "i" if d.kind in "iu" else d.kind  # noqa: E731
    return kind(np.asarray(a).dtype) == kind(np.asarray(b).dtype)


def compare_values(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the reference has {len(want)}"
    for j, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what} output {j}: shape {g.shape}, the reference's {w.shape}"
        assert _same_kind(g, w), f"{what} output {j}: dtype {g.dtype}, the reference's {w.dtype}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-7, atol=1e-9, equal_nan=True,
                                       err_msg=f"{what} output {j}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {j}")


def compare_grads(got, want, what, rtol=1e-5, atol=1e-7):
    for k, (g, w) in enumerate(zip(got, want)):
        if w is None:
            continue
        assert g is not None, f"{what}: no gradient for input {k}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what} gradient of input {k}")


def check_spec(name, result, one_process=None):
    """One spec's (values, grads) against its numpy reference; a random op's against its check
    and the values of `one_process` (a run_spec(name) result, made here when not given)."""
    assert not isinstance(result, Failed), f"{name} raised {result}"
    values, grads = result
    reference = SPECS[name][2]
    if isinstance(reference, Random):
        reference.check(values, _arrays(name))
        if one_process is None:
            one_process = run_spec(name)
        for j, (g, w) in enumerate(zip(values, one_process[0])):  # the same draws under any layout
            np.testing.assert_array_equal(g, w, err_msg=f"{name} output {j}: other values than in one process")
        if reference.expected_grads is not None:
            ws = ref.weights(name, [v.shape for v in values])
            compare_grads(grads, reference.expected_grads(values, _arrays(name), ws), name)
    elif isinstance(reference, Layout):
        want = ref.as_list(reference.reference(*_arrays(name)))
        assert [np.shape(v) for v in values] == [w.shape for w in want], name
        assert all(_same_kind(v, w) for v, w in zip(values, want)), name
    else:
        want_values, want_grads = expected(name)
        compare_values(values, want_values, name)
        compare_grads(grads, want_grads, name)


LAYOUT = "<layout>"  # the key of results that says where they were run: (placement type, LOCAL/ONE_D/TWO_D)


def check_results(results):
    """Every spec's result in `results` (name -> try_spec's result, and LAYOUT) against numpy, in
    one assertion listing every difference; on cpu, the KNOWN_DIFFERENCES of that layout must
    still differ."""
    kind, layout = results[LAYOUT]
    failures, fixed = [], []
    for name in sorted(SPECS):
        known = layout in KNOWN_DIFFERENCES.get(name, ((),))[0]
        try:
            check_spec(name, results[name])
        except AssertionError as exc:
            if not known:
                failures.append(f"{name}: {exc}")
        else:
            if known and kind == "cpu":
                fixed.append(name)
    assert not failures, f"{len(failures)} ops differ from numpy ({layout}, {kind}):\n" + "\n".join(failures)
    assert not fixed, f"now equal to numpy ({layout}): remove them from KNOWN_DIFFERENCES: {fixed}"


compare_with_one_process = check_results  # the name test_cuda_placement calls (now: against numpy)


def _all_specs(mesh_2d, kind="cpu"):
    k = gt.env.get_world_size()
    placement = gt.placement(kind, [[0, 1], [2, 3]] if mesh_2d else list(range(k)))
    results = {name: try_spec(name, placement) for name in sorted(SPECS)}
    results[LAYOUT] = (kind, TWO_D if mesh_2d else ONE_D)
    return results


def test_every_op_in_one_process_matches_numpy():
    results = {name: try_spec(name) for name in SPECS}
    results[LAYOUT] = ("cpu", LOCAL)
    check_results(results)


@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (4, True)])
def test_every_op_on_placements_matches_numpy(nprocs, mesh_2d):
    check_results(run_ranks(_all_specs, nprocs, mesh_2d, timeout=600)[0])


def _torch_run(torch, name):
    """TORCH[name] on the spec's inputs as float64 torch tensors: (values, grads) as run_spec."""
    grad = SPECS[name][3]
    tensors = [torch.tensor(a, requires_grad=bool(grad) and a.dtype.kind == "f") for a in _arrays(name)]
    outs = _outputs(TORCH[name](torch, *tensors))
    values = [o.detach().numpy() for o in outs]
    grads = [None] * len(tensors)
    if grad:
        ws = ref.weights(name, [v.shape for v in values])
        sum(((o * torch.from_numpy(w)).sum() for o, w in zip(outs, ws) if o.is_floating_point())).backward()
        grads = [None if not t.requires_grad else np.zeros(t.shape) if t.grad is None else t.grad.numpy()
                 for t in tensors]
    return values, grads


def test_every_op_matches_torch():
    torch = pytest.importorskip("torch")
    assert set(TORCH) | NOT_IN_TORCH == set(SPECS), set(SPECS) ^ (set(TORCH) | NOT_IN_TORCH)
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name in sorted(n for n in TORCH if LOCAL not in KNOWN_DIFFERENCES.get(n, ((),))[0]):
            try:
                want_values, want_grads = _torch_run(torch, name)
                got_values, got_grads = run_spec(name)
                compare_values(got_values, want_values, f"{name} (torch)")
                compare_grads(got_grads, want_grads, f"{name} (torch)", rtol=1e-7, atol=1e-9)
            except AssertionError as exc:
                failures.append(f"{name}: {exc}")
    assert not failures, f"{len(failures)} ops differ from torch:\n" + "\n".join(failures)


def test_no_backward_yet():
    for name in sorted(NO_BACKWARD):
        inputs, call, reference, _ = SPECS[name]
        SPECS[name] = (inputs, call, reference, GRAD)
        try:
            with pytest.raises(RuntimeError, match="derivative for .* is not implemented"):
                run_spec(name)
        finally:
            SPECS[name] = (inputs, call, reference, False)


def test_every_target_name_has_a_spec():
    import os
    path = OPS_TARGET
    if not os.path.exists(path):
        pytest.skip("ops-target.txt not beside the repository")
    names = [w for line in open(path) if not line.startswith("#") for w in line.split()]
    missing = [n for n in names if n not in SPECS]
    print(f"\nend-to-end specs: {len(names) - len(missing)} of {len(names)} names of ops-target.txt")
    assert not missing, missing
