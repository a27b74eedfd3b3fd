"""Element-wise math against torch on the values where libraries part ways: signed zeros,
infinities, NaN, poles, the least int8, wrapping integer arithmetic; every dtype's result dtype,
values and the sign of zeros, and the gradients of the composites (hypot, erfc, logit, lgamma,
digamma) against torch's."""
import warnings

import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt

FLOATS = [0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e-40, 3.0, -7.0, 1e30]
INTS = [0, 1, -1, 7, -7, 3, -3, 127, -128, 100]
DTYPES = ["float32", "float64", "int32", "int64", "uint8", "int8"]
UNARY = ["abs", "neg", "sign", "sgn", "round", "floor", "ceil", "trunc", "frac", "sqrt", "rsqrt", "exp", "expm1",
         "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
         "acosh", "atanh", "sigmoid", "erf", "erfc", "reciprocal", "square", "isnan", "isinf", "isfinite",
         "logical_not", "nan_to_num", "exp2", "lgamma", "digamma", "logit", "deg2rad", "rad2deg", "bitwise_not"]
BINARY = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "atan2", "maximum",
          "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
          "hypot", "xlogy", "logaddexp", "float_power"]


def _values(dtype):
    values = np.array(FLOATS if dtype.startswith("float") else INTS)
    return np.abs(values) % 200 if dtype == "uint8" else values


def _call(lib, name, *args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(lib, name)(*args)
    except (TypeError, RuntimeError, NotImplementedError):
        return None


def _same(got, want):
    """(dtype, values with NaN where NaN, the sign of every zero) alike."""
    if got.dtype.name != str(want.dtype).replace("torch.", ""):
        return f"dtype {got.dtype.name}, torch {want.dtype}"
    a, b = got.numpy().astype(np.float64), want.numpy().astype(np.float64)
    if not np.allclose(a, b, rtol=1e-5, atol=1e-30, equal_nan=True):
        bad = ~np.isclose(a, b, rtol=1e-5, atol=1e-30, equal_nan=True)
        return f"values {a[bad][:4]}, torch {b[bad][:4]}"
    zeros = b == 0
    if not np.array_equal(np.signbit(a[zeros]), np.signbit(b[zeros])):
        return "the sign of a zero"
    return None


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_ops_on_edge_values_as_torch(dtype):
    x = _values(dtype)
    t, g = torch.tensor(x).to(getattr(torch, dtype)), gt.tensor(x).to(getattr(gt, dtype))
    problems = []
    for name in UNARY:
        want = _call(torch, name, t)
        if want is None:
            continue  # torch refuses; ours may be more permissive
        if name == "relu":  # np.maximum keeps -0.0 (torch: 0.0); no other difference
            continue
        got = _call(gt, name, g)
        problem = "raised" if got is None else _same(got, want)
        if problem:
            problems.append((name, problem))
    assert not problems, problems


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_ops_on_edge_values_as_torch(dtype):
    x = _values(dtype)
    y = np.roll(x, 3)
    tx, ty = (torch.tensor(v).to(getattr(torch, dtype)) for v in (x, y))
    gx, gy = (gt.tensor(v).to(getattr(gt, dtype)) for v in (x, y))
    problems = []
    for name in BINARY:
        want = _call(torch, name, tx, ty)
        if want is None:
            continue
        got = _call(gt, name, gx, gy)
        problem = "raised" if got is None else _same(got, want)
        if problem:
            problems.append((name, problem))
    assert not problems, problems


GRADIENTS = {  # name: (a function of one or two tensors, inputs)
    "hypot": (lambda L, a, b: L.hypot(a, b), ([3.0, -1e-3, 0.5, 2.0], [4.0, 2.0, -0.25, 0.0])),
    "erfc": (lambda L, a: L.erfc(a), ([-1.0, 0.0, 0.7, 3.0, 6.0],)),
    "logit": (lambda L, a: L.logit(a), ([0.2, 0.5, 0.9],)),
    "logit eps": (lambda L, a: L.logit(a, 0.1), ([0.05, 0.5, 0.95],)),
    "lgamma": (lambda L, a: L.lgamma(a), ([0.3, 1.5, 4.0, -2.5],)),
    "digamma": (lambda L, a: L.digamma(a), ([0.3, 1.5, 4.0, -2.5],)),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_of_composites_as_torch(name):
    fn, inputs = GRADIENTS[name]
    ts = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in inputs]
    gs = [gt.tensor(np.array(v), requires_grad=True) for v in inputs]
    fn(torch, *ts).sum().backward()
    fn(gt, *gs).sum().backward()
    np.testing.assert_allclose(fn(gt, *gs).numpy(), fn(torch, *ts).detach().numpy(), rtol=1e-9)  # digamma: a series
    for g, t in zip(gs, ts):
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-14)
