"""Finite-difference gradient check over every differentiable op.

One process, local float64 tensors, no placements: for each case of CASES the autograd
gradient of loss = sum_k sum(out_k * W_k) (a fixed random W_k per floating output, so every
output element carries its own weight) is compared with central differences of the library's
own forward, input element by input element.

The table is data: name -> Case(inputs, call, ...). A name is an op of ops-target.txt (or an
extra globaltensor exports), optionally with a "[variant]" suffix. Inputs are chosen away from
the points where an op is not differentiable (kinks of abs/relu/clip, ties of max/sort, jumps
of floor/round/mod); ops whose derivative is zero almost everywhere (floor, sign, ...) are
checked to give a zero gradient there. Names that have no gradient at all are in
NOT_DIFFERENTIABLE with the reason; test_every_target_name_is_classified keeps the two in step
with ops-target.txt.
"""
import os
import zlib
from typing import Callable, NamedTuple

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn.functional as F_
from globaltensor.ops.elementwise import UNARY
from targets import OPS_TARGET

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-7

R = np.random.default_rng(20240513)


# --- inputs ---------------------------------------------------------------------------------

def F(*s, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, s)


def POS(*s, lo=0.5, hi=2.0):
    return R.uniform(lo, hi, s)


def I(*s, hi=4):  # noqa: E743 - short on purpose, as in test_every_op.py
    return R.integers(0, hi, s)


def BOOL(*s):
    return R.integers(0, 2, s).astype(bool)


def AWAY(*s, lo=0.2, hi=1.0):
    """Non-zero values of both signs, |x| in [lo, hi]: away from the kink at 0."""
    return R.uniform(lo, hi, s) * R.choice([-1.0, 1.0], s)


def FRAC(*s, lo=-2.5, hi=2.5, step=0.5, margin=0.1):
    """Values at least `margin` away from every multiple of `step` (jumps of floor, ceil, round)."""
    k = R.integers(int(lo / step), int(hi / step), s)
    return (k + R.uniform(margin / step, 1 - margin / step, s)) * step


def spd(n=3):
    a = F(n, n)
    return a @ a.T + n * np.eye(n)


def perm_index(rows, n, k):
    """(rows, k) indices, distinct within a row (a scatter with no collisions)."""
    return np.argsort(R.uniform(size=(rows, n)), 1)[:, :k]


def _mod_pair():
    b = POS(3)
    a = b * FRAC(4, 3, lo=-3, hi=3, step=1.0)  # a / b stays off the integers
    return a, b


def _clip_input():
    x = F(4, 3)
    while np.min(np.abs(x[..., None] - np.array([-0.3, 0.4]))) < 0.02:
        x = F(4, 3)
    return x


class Case(NamedTuple):
    inputs: list                   # numpy arrays (floating ones become float64 tensors)
    call: Callable                 # call(*tensors) -> tensor, or a (nested) tuple/list of them
    wrt: tuple = None              # indices of the inputs to differentiate (default: every float one)
    xfail: str = None              # a known gradient bug or gap: xfail(strict=True, reason=xfail)
    rtol: float = RTOL
    atol: float = ATOL
    eps: float = EPS


C = Case

# --- the table: name -> Case ---------------------------------------------------------------

NO_BACKWARD = "registers no backward: backward raises RuntimeError 'the derivative for ... is not implemented'"
# Gradient bugs found by this file (the library is left as it is; each case is a strict xfail): none open.


def _with_zero(a):
    a = a.copy()
    a.flat[1] = 0.0
    return a


CASES = {
    # elementwise unary (the rest of UNARY is added below with inputs in (-1, 1))
    "abs": C([AWAY(4, 3)], lambda x: gt.abs(x)),
    "acos": C([F(4, 3, lo=-0.9, hi=0.9)], lambda x: gt.acos(x)),
    "asin": C([F(4, 3, lo=-0.9, hi=0.9)], lambda x: gt.asin(x)),
    "ceil": C([FRAC(4, 3, step=1.0)], lambda x: gt.ceil(x)),  # zero almost everywhere
    "floor": C([FRAC(4, 3, step=1.0)], lambda x: gt.floor(x)),
    "round": C([FRAC(4, 3)], lambda x: gt.round(x)),
    "sign": C([AWAY(4, 3)], lambda x: gt.sign(x)),
    "log": C([POS(4, 3)], lambda x: gt.log(x)),
    "log10": C([POS(4, 3)], lambda x: gt.log10(x)),
    "log1p": C([POS(4, 3)], lambda x: gt.log1p(x)),
    "log2": C([POS(4, 3)], lambda x: gt.log2(x)),
    "reciprocal": C([AWAY(4, 3, lo=0.5, hi=2.0)], lambda x: gt.reciprocal(x)),
    "rsqrt": C([POS(4, 3)], lambda x: gt.rsqrt(x)),
    "sqrt": C([POS(4, 3)], lambda x: gt.sqrt(x)),
    "relu": C([AWAY(4, 3)], lambda x: gt.relu(x)),
    "stanh": C([F(4, 3)], lambda x: gt.stanh(x)),
    "stanh[scales]": C([F(4, 3)], lambda x: gt.stanh(x, 0.5, 2.0)),
    "scale": C([F(4, 3)], lambda x: gt.scale(x, 2.0, 0.5)),
    "scale[bias_first]": C([F(4, 3)], lambda x: gt.scale(x, -3.0, 0.5, bias_after_scale=False)),
    "increment": C([F(4, 3)], lambda x: gt.increment(x, 2.0)),
    "clip": C([_clip_input()], lambda x: gt.clip(x, -0.3, 0.4)),
    "clip[min_only]": C([_clip_input()], lambda x: gt.clip(x, -0.3)),
    "cast": C([F(4, 3)], lambda x: gt.cast(x, "float64")),
    # complex numbers, through real inputs and outputs: each checks PyTorch's convention end to end
    "complex": C([F(4, 3), F(4, 3)], lambda x, y: gt.view_as_real(gt.complex(x, y) * gt.complex(y, x))),
    "view_as_real": C([F(4, 3), F(4, 3)], lambda x, y: gt.view_as_real(gt.exp(gt.complex(x, y)) / gt.complex(y, x))),
    "view_as_complex": C([AWAY(4, 3, 2)], lambda x: gt.abs(gt.view_as_complex(x) @ gt.view_as_complex(x).T)),
    "angle": C([AWAY(4, 3), F(4, 3)], lambda x, y: gt.angle(gt.complex(x, y))),
    "polar": C([POS(4, 3), F(4, 3)], lambda x, t: gt.view_as_real(gt.sqrt(gt.polar(x, t)))),
    # float32 forward: the differences see its rounding, hence the larger step and tolerance
    "cast[float32]": C([F(4, 3)], lambda x: gt.cast(x, "float32") * 3.0, eps=1e-2, rtol=1e-4, atol=1e-5),
    # elementwise binary (the second operand broadcast: gradients summed back to its shape)
    "add": C([F(4, 3), F(3)], lambda x, y: gt.add(x, y)),
    "add[scalar]": C([F(4, 3)], lambda x: gt.add(x, 2.5)),
    "subtract": C([F(4, 3), F(3)], lambda x, y: gt.subtract(x, y)),
    "multiply": C([F(4, 3), F(3)], lambda x, y: gt.multiply(x, y)),
    "multiply[outer]": C([F(4, 1), F(1, 3)], lambda x, y: gt.multiply(x, y)),
    "multiply[same]": C([F(4, 3)], lambda x: gt.multiply(x, x)),
    "divide": C([F(4, 3), AWAY(3, lo=0.5, hi=2.0)], lambda x, y: gt.divide(x, y)),
    "floor_divide": C([*_mod_pair()], lambda x, y: gt.floor_divide(x, y)),  # zero almost everywhere
    "mod": C([*_mod_pair()], lambda x, y: gt.mod(x, y)),
    "mod[negative_divisor]": C([*(lambda a, b: (a, -b))(*_mod_pair())], lambda x, y: gt.mod(x, y)),
    "pow": C([POS(4, 3), F(4, 3)], lambda x, y: gt.pow(x, y)),
    "pow[broadcast]": C([POS(4, 3), F(3)], lambda x, y: gt.pow(x, y)),
    "pow[scalar_exponent]": C([F(4, 3)], lambda x: gt.pow(x, 3)),
    "pow[scalar_base]": C([F(4, 3)], lambda x: gt.pow(2.0, x)),
    # d/dy 0 ** y = 0 for y > 0 (PyTorch masks the log(0)); only y is perturbed
    "pow[zero_base]": C([_with_zero(POS(4, 3)), POS(4, 3)], lambda x, y: gt.pow(x, y), wrt=(1,)),
    "maximum": C([*(lambda y: (y + AWAY(4, 3, lo=0.05), y))(F(3))], lambda x, y: gt.maximum(x, y)),
    "minimum": C([*(lambda y: (y + AWAY(4, 3, lo=0.05), y))(F(3))], lambda x, y: gt.minimum(x, y)),
    "where": C([BOOL(4, 3), F(4, 3), F(3)], lambda c, x, y: gt.where(c, x, y)),
    "where[scalar]": C([BOOL(4, 3), F(4, 3)], lambda c, x: gt.where(c, x, 0.5)),
    "add_n": C([F(4, 3), F(4, 3), F(3)], lambda x, y, z: gt.add_n([x, y, z])),
    # Python operators
    "__rsub__": C([F(4, 3)], lambda x: 2.0 - x),
    "__rtruediv__": C([AWAY(4, 3, lo=0.5, hi=2.0)], lambda x: 1.5 / x),
    "__pow__": C([POS(4, 3)], lambda x: x ** 2.5),
    "__rpow__": C([F(4, 3)], lambda x: 3.0 ** x),
    "__neg__": C([F(4, 3)], lambda x: -x),
    "__abs__": C([AWAY(4, 3)], lambda x: abs(x)),
    "__matmul__": C([F(3, 4), F(4, 2)], lambda x, y: x @ y),
    # reductions and scans
    "sum": C([F(5, 4)], lambda x: gt.sum(x, 1)),
    "sum[all]": C([F(5, 4)], lambda x: gt.sum(x)),
    "sum[dims_keepdim]": C([F(2, 3, 4)], lambda x: gt.sum(x, (0, 2), keepdim=True)),
    "mean": C([F(5, 4)], lambda x: gt.mean(x, 0)),
    "mean[all]": C([F(5, 4)], lambda x: gt.mean(x)),
    "max": C([F(5, 4)], lambda x: gt.max(x)),
    "max[dim]": C([F(5, 4)], lambda x: gt.max(x, 1)),  # (values, indices): values checked
    "max[dim_keepdim]": C([F(5, 4)], lambda x: gt.max(x, 0, keepdim=True).values),
    "max[dims]": C([F(2, 3, 4)], lambda x: gt.max(x, (0, 2))),
    "max[other]": C([*(lambda y: (y + AWAY(5, 4, lo=0.05), y))(F(4))], lambda x, y: gt.max(x, y)),
    "min": C([F(5, 4)], lambda x: gt.min(x)),
    "min[dim]": C([F(5, 4)], lambda x: gt.min(x, 0)),
    "min[other]": C([*(lambda y: (y + AWAY(5, 4, lo=0.05), y))(F(4))], lambda x, y: gt.min(x, y)),
    "amax": C([F(5, 4)], lambda x: gt.amax(x, 1)),
    "amax[dims]": C([F(2, 3, 4)], lambda x: gt.amax(x, (1, 2), keepdim=True)),
    "amin": C([F(5, 4)], lambda x: gt.amin(x, 0)),
    "amin[all]": C([F(5, 4)], lambda x: gt.amin(x)),
    "prod": C([AWAY(5, 4, lo=0.5, hi=1.5)], lambda x: gt.prod(x, 1)),
    "prod[all]": C([AWAY(3, 4, lo=0.5, hi=1.5)], lambda x: gt.prod(x)),
    "prod[with_zero]": C([_with_zero(AWAY(3, 4, lo=0.5, hi=1.5))], lambda x: gt.prod(x, 1)),
    "std": C([F(5, 4)], lambda x: gt.std(x, 0)),
    "std[biased_all]": C([F(5, 4)], lambda x: gt.std(x, unbiased=False)),
    "var": C([F(5, 4)], lambda x: gt.var(x, 1)),
    "var[keepdim]": C([F(5, 4)], lambda x: gt.var(x, 0, keepdim=True)),
    "median": C([F(5, 4)], lambda x: gt.median(x, 1)),
    "median[all]": C([F(5, 3)], lambda x: gt.median(x)),
    "logsumexp": C([F(5, 4)], lambda x: gt.logsumexp(x, 1)),
    "logsumexp[all]": C([F(5, 4)], lambda x: gt.logsumexp(x)),
    "norm": C([F(5, 4)], lambda x: gt.norm(x, 2, 1)),
    "norm[fro]": C([F(5, 4)], lambda x: gt.norm(x, "fro")),
    "norm[p1]": C([AWAY(5, 4)], lambda x: gt.norm(x, 1, 0)),
    "norm[inf]": C([AWAY(5, 4)], lambda x: gt.norm(x, float("inf"), 1)),
    "norm[p3]": C([AWAY(5, 4)], lambda x: gt.norm(x, 3, 1)),
    "norm[keepdim]": C([F(5, 4)], lambda x: gt.norm(x, 2, 0, keepdim=True)),
    "cumsum": C([F(5, 4)], lambda x: gt.cumsum(x, 1)),
    "cumsum[flat]": C([F(3, 4)], lambda x: gt.cumsum(x)),
    "trace": C([F(4, 4)], lambda x: gt.trace(x)),
    "trace[rect]": C([F(3, 5)], lambda x: gt.trace(x)),
    "dist": C([F(5, 4), F(5, 4)], lambda x, y: gt.dist(x, y)),
    "dist[p1]": C([*(lambda x: (x, x + AWAY(5, 4)))(F(5, 4))], lambda x, y: gt.dist(x, y, 1)),
    # linear algebra
    "matmul": C([F(5, 4), F(4, 3)], lambda x, y: gt.matmul(x, y)),
    "matmul[batch_broadcast]": C([F(2, 5, 4), F(4, 3)], lambda x, y: gt.matmul(x, y)),
    "matmul[batch_broadcast1]": C([F(2, 1, 3, 4), F(3, 4, 2)], lambda x, y: gt.matmul(x, y)),
    "matmul[vec_mat]": C([F(4), F(4, 3)], lambda x, y: gt.matmul(x, y)),
    "matmul[mat_vec]": C([F(5, 4), F(4)], lambda x, y: gt.matmul(x, y)),
    "matmul[vec_vec]": C([F(4), F(4)], lambda x, y: gt.matmul(x, y)),
    "mm": C([F(5, 4), F(4, 3)], lambda x, y: gt.mm(x, y)),
    "bmm": C([F(2, 5, 4), F(2, 4, 3)], lambda x, y: gt.bmm(x, y)),
    "mv": C([F(5, 4), F(4)], lambda x, y: gt.mv(x, y)),
    "dot": C([F(4), F(4)], lambda x, y: gt.dot(x, y)),
    "addmm": C([F(5, 3), F(5, 4), F(4, 3)], lambda a, x, y: gt.addmm(a, x, y, beta=0.5, alpha=2.0)),
    "addmm[broadcast]": C([F(3), F(5, 4), F(4, 3)], lambda a, x, y: gt.addmm(a, x, y)),
    "kron": C([F(2, 3), F(3, 2)], lambda x, y: gt.kron(x, y)),
    "cross": C([F(4, 3), F(4, 3)], lambda x, y: gt.cross(x, y, 1)),
    "cross[dim0]": C([F(3, 2), F(3, 2)], lambda x, y: gt.cross(x, y, 0)),
    # of the symmetric part: the factor reads one triangle, the gradient is PyTorch's symmetric one
    "cholesky": C([spd()], lambda x: gt.cholesky((x + x.T) / 2)),
    "inverse": C([spd()], lambda x: gt.inverse(x)),
    "inverse[batch]": C([np.stack([spd(), spd()])], lambda x: gt.inverse(x)),
    "t": C([F(5, 4)], lambda x: gt.t(x)),
    "t[vector]": C([F(4)], lambda x: gt.t(x)),
    # creation ops with a tensor input
    "diag": C([F(4, 4)], lambda x: gt.diag(x)),
    "diag[offset]": C([F(4, 4)], lambda x: gt.diag(x, -1)),
    "diag[rect]": C([F(4, 5)], lambda x: gt.diag(x, 1)),
    "diag[vector]": C([F(3)], lambda x: gt.diag(x, 1)),
    "meshgrid": C([F(4), F(3)], lambda x, y: gt.meshgrid(x, y)),
    "meshgrid[xy]": C([F(4), F(3), F(2)], lambda x, y, z: gt.meshgrid(x, y, z, indexing="xy")),
    "tril": C([F(4, 4)], lambda x: gt.tril(x)),
    "tril[batch_offset]": C([F(2, 3, 4)], lambda x: gt.tril(x, -1)),
    "triu": C([F(4, 4)], lambda x: gt.triu(x, 1)),
    # shape and layout
    "reshape": C([F(4, 6)], lambda x: gt.reshape(x, (4, 2, 3))),
    "reshape[infer]": C([F(4, 6)], lambda x: gt.reshape(x, (-1, 8))),
    "reshape_": C([F(4, 6)], lambda x: gt.reshape_(x * 1, (24,))),
    "flatten": C([F(4, 2, 3)], lambda x: gt.flatten(x, 1)),
    "flatten[all]": C([F(4, 2, 3)], lambda x: gt.flatten(x)),
    "squeeze": C([F(4, 1, 3)], lambda x: gt.squeeze(x, 1)),
    "squeeze[all]": C([F(1, 4, 1, 3)], lambda x: gt.squeeze(x)),
    "squeeze_": C([F(4, 1, 3)], lambda x: gt.squeeze_(x * 1, 1)),
    "unsqueeze": C([F(4, 3)], lambda x: gt.unsqueeze(x, 1)),
    "unsqueeze_": C([F(4, 3)], lambda x: gt.unsqueeze_(x * 1, 0)),
    "transpose": C([F(4, 3, 2)], lambda x: gt.transpose(x, 0, 2)),
    "permute": C([F(4, 3, 2)], lambda x: gt.permute(x, (2, 0, 1))),
    "permute[varargs]": C([F(4, 3, 2)], lambda x: x.permute(1, 2, 0)),
    "expand": C([F(4, 1)], lambda x: gt.expand(x, 2, 4, 3)),
    "expand_as": C([F(4, 1), F(4, 3)], lambda x, y: gt.expand_as(x, y), wrt=(0,)),
    "broadcast_to": C([F(3)], lambda x: gt.broadcast_to(x, (4, 3))),
    "tile": C([F(2, 3)], lambda x: gt.tile(x, (2, 2))),
    "tile[more_dims]": C([F(2, 3)], lambda x: gt.tile(x, (2, 1, 3))),
    "flip": C([F(4, 3)], lambda x: gt.flip(x, 1)),
    "flip[dims]": C([F(4, 3, 2)], lambda x: gt.flip(x, (0, 2))),
    "roll": C([F(4, 3)], lambda x: gt.roll(x, 1, 0)),
    "roll[dims]": C([F(4, 3)], lambda x: gt.roll(x, (1, -1), (0, 1))),
    "roll[flat]": C([F(4, 3)], lambda x: gt.roll(x, 5)),
    "concat": C([F(4, 3), F(2, 3)], lambda x, y: gt.concat([x, y], 0)),
    "concat[dim1]": C([F(4, 3), F(4, 1), F(4, 2)], lambda x, y, z: gt.concat([x, y, z], 1)),
    "cat": C([F(2, 3), F(2, 3)], lambda x, y: gt.cat([x, y], -1)),
    "stack": C([F(4, 3), F(4, 3)], lambda x, y: gt.stack([x, y], 1)),
    "split": C([F(4, 6)], lambda x: gt.split(x, [2, 4], dim=1)),
    "split[three]": C([F(6, 2)], lambda x: gt.split(x, [1, 2, 3], dim=0)),
    "split[one_piece]": C([F(4, 6)], lambda x: gt.split(x, [2, 4], dim=1)[1]),
    "chunk": C([F(5, 6)], lambda x: gt.chunk(x, 3, 0)),
    "unbind": C([F(3, 4)], lambda x: gt.unbind(x, 0)),
    "unstack": C([F(3, 4)], lambda x: gt.unstack(x, 1)),
    "slice": C([F(5, 6)], lambda x: gt.slice(x, [1], [1], [5])),
    "slice[two_axes]": C([F(5, 6)], lambda x: gt.slice(x, [0, 1], [1, 2], [4, 6])),
    "strided_slice": C([F(5, 6)], lambda x: gt.strided_slice(x, [1], [0], [6], [2])),
    "strided_slice[two_axes]": C([F(5, 6)], lambda x: gt.strided_slice(x, [0, 1], [1, 0], [5, 6], [2, 3])),
    "clone": C([F(4, 3)], lambda x: gt.clone(x)),
    "clone[method]": C([F(4, 3)], lambda x: x.clone() * x),
    "view": C([F(4, 6)], lambda x: x.view(2, 12)),
    "repeat": C([F(2, 3)], lambda x: x.repeat(2, 1, 2)),
    "T": C([F(4, 3, 2)], lambda x: x.T),
    # indexing, sorting, selection
    "gather": C([F(5, 4), I(5, 6, hi=4)], lambda x, i: gt.gather(x, 1, i)),  # repeated indices add up
    "gather[dim0]": C([F(5, 4), I(3, 4, hi=5)], lambda x, i: gt.gather(x, 0, i)),
    "gather_nd": C([F(5, 4), np.stack([I(6, hi=5), I(6, hi=4)], 1)], lambda x, i: gt.gather_nd(x, i)),
    "index_select": C([F(5, 4), np.array([0, 2, 2, 4])], lambda x, i: gt.index_select(x, dim=0, index=i)),
    "index_select[dim1]": C([F(3, 5), np.array([4, 1, 1])], lambda x, i: gt.index_select(x, dim=1, index=i)),
    "index_sample": C([F(5, 4), I(5, 3, hi=4)], lambda x, i: gt.index_sample(x, i)),
    "masked_select": C([F(5, 4), BOOL(5, 4)], lambda x, m: gt.masked_select(x, m)),
    "masked_select[broadcast_mask]": C([F(5, 4), np.array([True, False, True, True])],
                                       lambda x, m: gt.masked_select(x, m)),
    "masked_fill": C([F(4, 3), BOOL(4, 3)], lambda x, m: gt.masked_fill(x, m, 0.25)),
    "masked_fill[tensor_value]": C([F(4, 3), BOOL(4, 3), np.array(0.7)], lambda x, m, v: gt.masked_fill(x, m, v)),
    "masked_fill[broadcast_mask]": C([F(4, 3), np.array([True, False, True])], lambda x, m: x.masked_fill(m, -1.0)),
    "scatter": C([F(5, 4), perm_index(5, 4, 3), F(5, 3)], lambda x, i, s: gt.scatter(x, 1, i, s)),
    "scatter[dim0]": C([F(4, 3), perm_index(3, 4, 2).T, F(2, 3)], lambda x, i, s: gt.scatter(x, 0, i, s)),
    "scatter_": C([F(5, 4), perm_index(5, 4, 3), F(5, 3)], lambda x, i, s: gt.scatter_(x * 1, 1, i, s)),
    "scatter_nd": C([np.stack([I(6, hi=5), I(6, hi=4)], 1), F(6)], lambda i, u: gt.scatter_nd(i, u, (5, 4))),
    "scatter_nd_add": C([F(5, 4), np.stack([I(6, hi=5), I(6, hi=4)], 1), F(6)],
                        lambda x, i, u: gt.scatter_nd_add(x, i, u)),
    "sort": C([F(5, 4)], lambda x: gt.sort(x, 1, True)),  # (values, indices): values checked
    "sort[dim0]": C([F(5, 4)], lambda x: gt.sort(x, 0)[0]),
    "topk": C([F(5, 4)], lambda x: gt.topk(x, 2, 1)),
    "topk[smallest_dim0]": C([F(5, 4)], lambda x: gt.topk(x, 3, 0, largest=False)[0]),
    "multiplex": C([F(5, 3), F(5, 3), I(5, 1, hi=2)], lambda x, y, i: gt.multiplex([x, y], i)),
    # nn.functional
    "gelu": C([F(4, 3, lo=-3, hi=3)], lambda x: F_.gelu(x)),
    "gelu[tanh]": C([F(4, 3, lo=-3, hi=3)], lambda x: F_.gelu(x, approximate="tanh")),
    "sigmoid": C([F(4, 3, lo=-3, hi=3)], lambda x: F_.sigmoid(x)),
    "softmax": C([F(4, 3, lo=-2, hi=2)], lambda x: F_.softmax(x, 1)),
    "softmax[dim0]": C([F(4, 3, lo=-2, hi=2)], lambda x: F_.softmax(x, 0)),
    "softmax[3d_middle]": C([F(2, 3, 4, lo=-2, hi=2)], lambda x: F_.softmax(x, 1)),
    "log_softmax": C([F(4, 3, lo=-2, hi=2)], lambda x: F_.log_softmax(x, 0)),
    "log_softmax[last]": C([F(2, 3, 4, lo=-2, hi=2)], lambda x: F_.log_softmax(x, -1)),
    "dropout": C([F(4, 5)], lambda x: _seeded(lambda: F_.dropout(x, 0.3))),  # one mask: the seed is fixed
    "layer_norm": C([F(4, 3), POS(3), F(3)], lambda x, w, b: F_.layer_norm(x, 3, w, b)),
    "layer_norm[2d_plain]": C([F(3, 2, 3)], lambda x: F_.layer_norm(x, (2, 3))),
    "layer_norm[2d_affine]": C([F(3, 2, 3), POS(2, 3), F(2, 3)], lambda x, w, b: F_.layer_norm(x, (2, 3), w, b)),
    "embedding": C([np.array([[0, 2], [4, 2], [1, 0]]), F(5, 3)], lambda i, w: F_.embedding(i, w)),
    # PyTorch's padding_idx looks its row up but holds its gradient back: a value that does not depend on it
    "embedding[padding_idx]": C([np.array([[0, 2], [4, 2], [1, 0]]), F(5, 3)],
                                lambda i, w: F_.embedding(i, w, padding_idx=2) * (i != 2).unsqueeze(-1)),
    "group_norm": C([F(2, 4, 3), POS(4), F(4)], lambda x, w, b: F_.group_norm(x, 2, w, b)),
    "rms_norm": C([F(3, 4), POS(4)], lambda x, w: F_.rms_norm(x, (4,), w, 1e-3)),
    "linear": C([F(4, 3), F(2, 3), F(2)], lambda x, w, b: F_.linear(x, w, b)),
    "linear[no_bias_3d]": C([F(2, 4, 3), F(2, 3)], lambda x, w: F_.linear(x, w)),
    "cross_entropy": C([F(4, 5, lo=-2, hi=2), I(4, hi=5)], lambda x, t: F_.cross_entropy(x, t)),
    "cross_entropy[spatial]": C([F(2, 4, 3, lo=-2, hi=2), I(2, 3, hi=4)], lambda x, t: F_.cross_entropy(x, t)),
    "cross_entropy[sum]": C([F(4, 5, lo=-2, hi=2), I(4, hi=5)], lambda x, t: F_.cross_entropy(x, t, reduction="sum")),
    "cross_entropy[none_ignore]": C([F(4, 5, lo=-2, hi=2), np.array([1, -100, 4, 0])],
                                    lambda x, t: F_.cross_entropy(x, t, reduction="none")),
    "cross_entropy[mean_ignore]": C([F(4, 5, lo=-2, hi=2), np.array([1, -100, 4, 0])],
                                    lambda x, t: F_.cross_entropy(x, t)),
    "silu": C([F(4, 3)], lambda x: F_.silu(x)),
    "leaky_relu": C([F(4, 3, lo=-1, hi=1)], lambda x: F_.leaky_relu(x, 0.2)),
    "l1_loss": C([F(4, 3), F(4, 3) + 2], lambda x, y: F_.l1_loss(x, y)),
    "smooth_l1_loss": C([F(4, 3), F(4, 3) + 0.9], lambda x, y: F_.smooth_l1_loss(x, y, beta=0.5)),
    "nll_loss": C([F(4, 5), np.array([1, 0, 4, 2])], lambda x, t: F_.nll_loss(x, t)),
    "sparse_softmax_cross_entropy": C([F(2, 3, 5, lo=-2, hi=2), I(2, 3, hi=5)],  # OneFlow's: labels first
                                      lambda x, t: F_.sparse_softmax_cross_entropy(t, x)),
    "binary_cross_entropy_with_logits": C([F(4, 3, lo=-2, hi=2), FRAC(4, 3, lo=0, hi=1, step=1.0)],
                                          lambda x, y: F_.binary_cross_entropy_with_logits(x, y), wrt=(0,)),
    "kl_div": C([F(4, 3), POS(4, 3)], lambda x, p: F_.kl_div(x, p, reduction="batchmean")),
    # PyTorch's other activations and losses (composites; kinks kept away from the inputs by FRAC)
    "threshold": C([FRAC(4, 3)], lambda x: F_.threshold(x, 0.5, -2.0)),
    "hardtanh": C([FRAC(4, 3)], lambda x: F_.hardtanh(x, -1.0, 1.5)),
    "relu6": C([FRAC(4, 3, lo=-2, hi=8, step=1.0)], lambda x: F_.relu6(x)),
    "elu": C([FRAC(4, 3)], lambda x: F_.elu(x, 0.7)),
    "celu": C([FRAC(4, 3)], lambda x: F_.celu(x, 1.5)),
    "selu": C([FRAC(4, 3)], lambda x: F_.selu(x)),
    "hardsigmoid": C([FRAC(4, 3, lo=-4.5, hi=4.5, step=1.5)], lambda x: F_.hardsigmoid(x)),
    "hardswish": C([FRAC(4, 3, lo=-4.5, hi=4.5, step=1.5)], lambda x: F_.hardswish(x)),
    "softplus": C([FRAC(4, 3)], lambda x: F_.softplus(x, beta=2.0, threshold=3.0)),
    "mish": C([F(4, 3, lo=-3, hi=3)], lambda x: F_.mish(x)),
    "softsign": C([F(4, 3, lo=-3, hi=3)], lambda x: F_.softsign(x)),
    "tanhshrink": C([F(4, 3, lo=-3, hi=3)], lambda x: F_.tanhshrink(x)),
    "logsigmoid": C([F(4, 3, lo=-5, hi=5)], lambda x: F_.logsigmoid(x)),
    "softmin": C([F(4, 3, lo=-2, hi=2)], lambda x: F_.softmin(x, 1)),
    "glu": C([F(4, 6)], lambda x: F_.glu(x)),
    "hardshrink": C([FRAC(4, 3)], lambda x: F_.hardshrink(x)),
    "softshrink": C([FRAC(4, 3)], lambda x: F_.softshrink(x)),
    "prelu": C([FRAC(4, 3, 2), POS(3)], lambda x, w: F_.prelu(x, w)),
    "rrelu": C([FRAC(4, 3)], lambda x: F_.rrelu(x)),
    "binary_cross_entropy": C([POS(4, 3, lo=0.1, hi=0.9), F(4, 3, lo=0, hi=1)],
                              lambda x, y: F_.binary_cross_entropy(x, y), wrt=(0,)),
    "huber_loss": C([FRAC(4, 3), np.zeros((4, 3))], lambda x, y: F_.huber_loss(x, y, delta=1.0)),
    "soft_margin_loss": C([F(4, 3), np.sign(F(4, 3))], lambda x, y: F_.soft_margin_loss(x, y), wrt=(0,)),
    "multilabel_soft_margin_loss": C([F(4, 3), BOOL(4, 3).astype(float), POS(3)],
                                     lambda x, y, w: F_.multilabel_soft_margin_loss(x, y, w), wrt=(0,)),
    "hinge_embedding_loss": C([FRAC(4, 3), np.sign(F(4, 3))], lambda x, y: F_.hinge_embedding_loss(x, y), wrt=(0,)),
    "margin_ranking_loss": C([F(4), F(4), np.sign(F(4))], lambda a, b, y: F_.margin_ranking_loss(a, b, y, 0.1),
                             wrt=(0, 1)),
    "cosine_embedding_loss": C([F(4, 3), F(4, 3), np.sign(F(4))],
                               lambda a, b, y: F_.cosine_embedding_loss(a, b, y), wrt=(0, 1)),
    "triplet_margin_loss": C([F(4, 3), F(4, 3), F(4, 3)], lambda a, p, n: F_.triplet_margin_loss(a, p, n, 2.0)),
    "triplet_margin_with_distance_loss": C([F(4, 3), F(4, 3), F(4, 3)],
                                           lambda a, p, n: F_.triplet_margin_with_distance_loss(a, p, n, margin=2.0)),
    "poisson_nll_loss": C([F(4, 3), POS(4, 3)], lambda x, y: F_.poisson_nll_loss(x, y), wrt=(0,)),
    "poisson_nll_loss[full]": C([POS(4, 3), POS(4, 3) * 2], lambda x, y: F_.poisson_nll_loss(x, y, False, True),
                                wrt=(0,)),
    "gaussian_nll_loss": C([F(4, 3), F(4, 3), POS(4, 3)], lambda x, y, v: F_.gaussian_nll_loss(x, y, v)),
    "multi_margin_loss": C([F(4, 5), I(4, hi=5)], lambda x, t: F_.multi_margin_loss(x, t)),
    "multilabel_margin_loss": C([F(4, 5), np.array([[1, 3, -1, 0, 0], [0, -1, 2, 2, 2], [4, 0, 1, 2, 3],
                                                    [-1, 0, 0, 0, 0]])],
                                lambda x, t: F_.multilabel_margin_loss(x, t)),
    "cosine_similarity": C([F(4, 3), F(4, 3)], lambda a, b: F_.cosine_similarity(a, b)),
    "pairwise_distance": C([F(4, 3), F(4, 3)], lambda a, b: F_.pairwise_distance(a, b)),
    "ctc_loss": C([F(6, 2, 4), np.array([[1, 1], [2, 3]])],
                  lambda x, t: F_.ctc_loss(F_.log_softmax(x, 2), t, [6, 5], [2, 1])),
    "scaled_dot_product_attention": C([F(2, 2, 3, 4), F(2, 2, 3, 4), F(2, 2, 3, 4)],
                                      lambda q, k, v: F_.scaled_dot_product_attention(q, k, v, is_causal=True)),
    # the fused primitive ("attention" / "attention_backward") with Lq != Lk, masks, a scale; the composite
    # (the way for dropout and masks that need a gradient) with a float mask that requires grad
    "scaled_dot_product_attention[causal_lq_lt_lk]": C(
        [F(2, 2, 3, 4), F(2, 2, 5, 4), F(2, 2, 5, 3)],
        lambda q, k, v: F_.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.8)),
    "scaled_dot_product_attention[bool_mask]": C(
        [F(2, 2, 3, 4), F(2, 2, 4, 4), F(2, 2, 4, 2), np.array([True, False, True, True]).reshape(1, 1, 1, 4)],
        lambda q, k, v, m: F_.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    "scaled_dot_product_attention[float_mask]": C(
        [F(2, 2, 3, 4), F(2, 2, 4, 4), F(2, 2, 4, 2), F(3, 4)],
        lambda q, k, v, m: F_.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True),
        wrt=(0, 1, 2)),
    "scaled_dot_product_attention[mask_grad]": C(
        [F(2, 2, 3, 4), F(2, 2, 4, 4), F(2, 2, 4, 2), F(2, 1, 3, 4)],
        lambda q, k, v, m: F_.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True)),
    "split_heads": C([F(2, 3, 6)], lambda x: gt.split_heads(x, 3)),
    "merge_heads": C([F(2, 3, 4, 2)], lambda x: gt.merge_heads(x)),
    "unfold2d": C([F(2, 2, 4, 5)], lambda x: F_.unfold2d(x, (2, 3), 1, 1)),
    "fold2d": C([F(2, 2, 6, 25)], lambda x: F_.fold2d(x, (4, 5), (2, 3), 1, 1)),
    "conv2d": C([F(2, 4, 5, 5), F(6, 2, 3, 3), F(6)], lambda x, w, b: F_.conv2d(x, w, b, 2, 1, 1, 2)),
    "batch_norm[train]": C([F(4, 3, 2, 2), POS(3), F(3)],
                           lambda x, w, b: F_.batch_norm(x, None, None, w, b, training=True)),
    "batch_norm[eval]": C([F(4, 3, 2), POS(3), F(3)],
                          lambda x, w, b: F_.batch_norm(x, gt.zeros(3, dtype="float64") + 0.5,
                                                        gt.ones(3, dtype="float64") * 2.0, w, b)),
    "conv1d": C([F(2, 3, 7), F(4, 3, 3)], lambda x, w: F_.conv1d(x, w, None, 1, 1)),
    "max_pool2d": C([F(2, 2, 5, 5)], lambda x: F_.max_pool2d(x, 3, 2, 1)),
    "avg_pool2d": C([F(2, 2, 4, 4)], lambda x: F_.avg_pool2d(x, 2)),
    "adaptive_avg_pool2d": C([F(2, 2, 5, 7)], lambda x: F_.adaptive_avg_pool2d(x, (2, 3))),
    # ops/pooling.py, resize.py, sampling.py, conv3d.py (docs/nn_extras.md)
    "avg_pool1d": C([F(2, 2, 7)], lambda x: F_.avg_pool1d(x, 3, 2, 1, True, False)),
    "avg_pool3d": C([F(1, 2, 4, 4, 5)], lambda x: F_.avg_pool3d(x, 2, 1, (0, 1, 1))),
    "max_pool1d": C([F(2, 2, 7)], lambda x: F_.max_pool1d(x, 3, 2, 1)),
    "max_pool3d": C([F(1, 2, 4, 4, 5)], lambda x: F_.max_pool3d(x, 2, 2, 1, ceil_mode=True)),
    "adaptive_avg_pool1d": C([F(2, 2, 7)], lambda x: F_.adaptive_avg_pool1d(x, 3)),
    "adaptive_avg_pool3d": C([F(1, 2, 4, 5, 3)], lambda x: F_.adaptive_avg_pool3d(x, (3, 2, None))),
    "adaptive_max_pool1d": C([F(2, 2, 7)], lambda x: F_.adaptive_max_pool1d(x, 3)),
    "adaptive_max_pool2d": C([F(2, 2, 5, 7)], lambda x: F_.adaptive_max_pool2d(x, (2, 3))),
    "adaptive_max_pool3d": C([F(1, 2, 4, 5, 3)], lambda x: F_.adaptive_max_pool3d(x, 2)),
    # windows that do not overlap: an element that is two windows' max would get both gradients (as in torch)
    "max_unpool1d": C([F(2, 2, 7)], lambda x: F_.max_unpool1d(*F_.max_pool1d(x, 2, return_indices=True), 2,
                                                              output_size=(7,))),
    "max_unpool2d": C([F(1, 2, 4, 5)], lambda x: F_.max_unpool2d(*F_.max_pool2d(x, 2, return_indices=True), 2,
                                                                 output_size=(4, 5))),
    "max_unpool3d": C([F(1, 1, 4, 4, 4)], lambda x: F_.max_unpool3d(*F_.max_pool3d(x, 2, return_indices=True), 2)),
    "conv3d": C([F(2, 2, 4, 4, 3), F(3, 2, 2, 3, 2), F(3)], lambda x, w, b: F_.conv3d(x, w, b, 1, (1, 0, 1))),
    "pad": C([F(2, 3, 4)], lambda x: F_.pad(x, (2, 1, 1, 0), "reflect")),
    "pad[constant]": C([F(2, 3, 4)], lambda x: F_.pad(x, (-1, 2, 1, 1), value=0.5)),
    "interpolate": C([F(1, 2, 3, 4)], lambda x: F_.interpolate(x, scale_factor=2, mode="bicubic")),
    "upsample": C([F(1, 2, 5)], lambda x: F_.upsample(x, size=8, mode="linear", align_corners=True)),
    "fold": C([F(2, 8, 4)], lambda x: F_.fold(x, (4, 5), 2, 1, 0, (2, 2))),
    "unfold": C([F(2, 2, 4, 5)], lambda x: F_.unfold(x, 2, 1, 1, 2)),
    "affine_grid": C([F(2, 2, 3)], lambda t: F_.affine_grid(t, (2, 1, 3, 4))),
    "grid_sample": C([F(2, 2, 4, 5), F(2, 3, 3, 2)], lambda x, g: F_.grid_sample(x, g, padding_mode="border")),
    "deform_conv2d": C([F(1, 2, 4, 5), F(1, 8, 3, 4), F(3, 2, 2, 2), POS(1, 4, 3, 4)],
                       lambda x, o, w, m: F_.deform_conv2d(x, o, w, None, 1, 0, 1, m)),
    "mse_loss": C([F(4, 3), F(4, 3)], lambda x, y: F_.mse_loss(x, y)),
    "mse_loss[sum]": C([F(4, 3), F(4, 3)], lambda x, y: F_.mse_loss(x, y, reduction="sum")),
    "mse_loss[none]": C([F(4, 3), F(4, 3)], lambda x, y: F_.mse_loss(x, y, reduction="none")),
    "mse_loss[broadcast]": C([F(4, 3), F(3)], lambda x, y: F_.mse_loss(x, y)),
    # x[key]
    "getitem[slices_none]": C([F(5, 4)], lambda x: x[1:3, None, ::2]),
    "getitem[int_ellipsis]": C([F(3, 4, 5)], lambda x: x[..., -1]),
    "getitem[int]": C([F(3, 4)], lambda x: x[1]),
    "getitem[negative_step]": C([F(5, 4)], lambda x: x[::-2, 1:]),
    "getitem[mask]": C([F(4, 3), BOOL(4, 3)], lambda x, m: x[m]),
    "getitem[index_tensor]": C([F(5, 4), np.array([0, 3, 3])], lambda x, i: x[i]),
    "getitem[index_list]": C([F(5, 4)], lambda x: x[[4, 1, 1]]),
    "getitem[index_and_slice]": C([F(5, 4), np.array([2, 0])], lambda x, i: x[i, 1:]),
}


def _seeded(fn):
    gt.manual_seed(11)
    return fn()


# Every differentiable unary op not given inputs of its own above: inputs in (-1, 1).
for _n in UNARY:
    if _n not in ("isfinite", "isinf", "isnan", "logical_not"):
        CASES.setdefault(_n, C([F(4, 3)], lambda x, _n=_n: getattr(gt, _n)(x)))


# --- in-place ops on a non-leaf: y = x * 1; y.op_(...); the result is y ----------------------

def _on_copy(method, *args, **kwargs):
    """x -> (y = x * 1; y.<method>(*args, *tensors); y), the tensors taken after x."""
    def call(x, *tensors):
        y = x * 1
        out = getattr(y, method)(*args, *tensors, **kwargs)
        assert out is None or out is y, f"{method} returned another tensor"
        return y
    return call


def _setitem(key):
    def call(x, v):
        y = x * 1
        y[key] = v
        return y
    return call


def _setitem_tensor_key(x, i, v):
    y = x * 1
    y[i] = v
    return y


def _iadd(x, z):
    y = x * 1
    y += z
    y *= z
    y -= x
    y /= 2.0
    return y


def _same_tensor_twice(x):
    y = x * 1
    y.mul_(y)  # the new value is the old one squared
    return y


def _old_value_kept(x):
    y = x.exp()
    z = y * y  # the backward of z needs y's old value ...
    y.add_(1.0)  # ... which the in-place op must leave alone
    return z, y


def _constant_changed_later(x):
    c = gt.tensor(np.full(x.shape, 2.0))  # needs no grad; the product's backward reads it ...
    z = x * c
    c.add_(x)  # ... as it was: 2, not 2 + x (and the graph as it was: no path through c to x)
    return z, c


def _chain(x):
    y = x * 1
    y.exp_().mul_(2.0).add_(x)
    return y


INPLACE = {
    "add_": C([F(4, 3), F(3)], _on_copy("add_")),
    "add_[alpha]": C([F(4, 3), F(4, 3)], _on_copy("add_", alpha=-2.0)),
    "sub_": C([F(4, 3), F(4, 3)], _on_copy("sub_")),
    "mul_": C([F(4, 3), F(3)], _on_copy("mul_")),
    "mul_[scalar]": C([F(4, 3)], _on_copy("mul_", 3.0)),
    "div_": C([F(4, 3), AWAY(4, 3, lo=0.5, hi=2.0)], _on_copy("div_")),
    "pow_": C([POS(4, 3)], _on_copy("pow_", 2.5)),
    "clamp_": C([_clip_input()], _on_copy("clamp_", -0.3, 0.4)),
    "clip_": C([_clip_input()], _on_copy("clip_", None, 0.4)),
    "fill_": C([F(4, 3)], lambda x: (x * 1).fill_(0.5) + x),
    "zero_": C([F(4, 3)], lambda x: (x * 1).zero_() + x * x),
    "copy_": C([F(4, 3), F(3)], _on_copy("copy_")),  # the gradient goes to the source alone
    "masked_fill_": C([F(4, 3), BOOL(4, 3)], _on_copy("masked_fill_", value=0.5), wrt=(0,)),
    "__setitem__[slices]": C([F(5, 4), F(2, 2)], _setitem((slice(1, 3), slice(None, None, 2)))),
    "__setitem__[broadcast_value]": C([F(5, 4), F(4)], _setitem(slice(1, 4))),
    "__setitem__[int_none]": C([F(5, 4), F(1, 4)], _setitem((2, None))),
    "__setitem__[index_tensor]": C([F(5, 4), np.array([3, 0]), F(2, 4)], _setitem_tensor_key),
    "__setitem__[mask]": C([F(4, 3), BOOL(4, 3)], lambda x, m: _setitem_tensor_key(x, m, 0.5)),
    "__iadd__[and_co]": C([F(4, 3), AWAY(3, lo=0.5, hi=2.0)], _iadd),
    "mul_[self]": C([F(4, 3)], _same_tensor_twice),
    "add_[old_value_kept]": C([F(4, 3)], _old_value_kept),
    "add_[constant_read_before]": C([F(4, 3)], _constant_changed_later),
    "exp_[chain]": C([F(4, 3)], _chain),
}
for _n in UNARY:  # each unary op in place, on the inputs of its out-of-place case
    if hasattr(gt.Tensor, _n + "_") and _n in CASES and _n + "_" not in INPLACE:
        INPLACE[_n + "_"] = CASES[_n]._replace(call=_on_copy(_n + "_"))
CASES.update(INPLACE)


# Names with no gradient at all (integer or bool results, random samples, creation from scalars).
NOT_DIFFERENTIABLE = {
    **dict.fromkeys(["isfinite", "isinf", "isnan", "logical_not", "logical_and", "logical_or", "logical_xor",
                     "equal", "not_equal", "greater_equal", "greater_than", "less_equal", "less_than",
                     "allclose", "equal_all", "all", "any"], "bool result"),
    **dict.fromkeys(["argmax", "argmin", "argsort", "nonzero", "histogram", "shard_index", "one_hot"],
                    "integer result"),
    **dict.fromkeys(["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"], "integer/bool operands only"),
    "numel": "a Python int", "is_complex": "a Python bool",
    **dict.fromkeys(["arange", "linspace", "eye", "full", "empty", "ones", "zeros"],
                    "made from Python scalars: no tensor input"),
    **dict.fromkeys(["full_like", "empty_like", "ones_like", "zeros_like"],
                    "the values do not depend on the input's values (no gradient in PyTorch either)"),
    **dict.fromkeys(["rand", "randn", "randint", "randperm", "normal", "uniform"], "random sample, no tensor input"),
    **dict.fromkeys(["bernoulli", "multinomial"], "discrete random samples: no gradient (as PyTorch)"),
    "unique": "set-valued (sorted distinct values); torch.unique has no gradient either",
}


# --- the check --------------------------------------------------------------------------------

def _flat(result):
    if isinstance(result, gt.Tensor):
        return [result]
    assert isinstance(result, (tuple, list)), f"unexpected result {type(result)}"
    return [t for r in result for t in _flat(r)]


def _float_outputs(result):
    return [o for o in _flat(result) if o.dtype.is_floating]


def _weights(name, outs):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [np.asarray(rng.standard_normal(tuple(o.shape))) for o in outs]


def _as_input(a):
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def analytic(case, name):
    """(loss value, the autograd gradient of each input in case.wrt)."""
    arrays = [_as_input(a) for a in case.inputs]
    wrt = _wrt(case, arrays)
    tensors = [gt.tensor(a) for a in arrays]
    for i in wrt:
        tensors[i].requires_grad_(True)
    outs = _float_outputs(case.call(*tensors))
    assert outs, f"{name}: no floating output"
    weights = _weights(name, outs)
    loss = None
    for o, w in zip(outs, weights):
        term = (o * gt.tensor(w)).sum()
        loss = term if loss is None else loss + term
    if loss.requires_grad:
        _assert_acyclic(loss)
        loss.backward()
    grads = []
    for i in wrt:
        g = tensors[i].grad
        if g is None:  # no gradient reached it: zero (floor, sign, fill_, ...)
            grads.append(np.zeros_like(arrays[i]))
            continue
        assert tuple(g.shape) == arrays[i].shape, f"{name}: gradient of input {i} has shape {tuple(g.shape)}"
        assert g.dtype == gt.float64, f"{name}: gradient of input {i} has dtype {g.dtype}"
        grads.append(np.asarray(g.numpy(), np.float64))
    return float(loss.numpy()), grads, weights


def _assert_acyclic(root):
    """Fail (rather than hang: backward would walk a cyclic tape forever) when the autograd graph
    under root has a cycle. Reads the tape's private fields; a tape without them is not checked."""
    state = {}

    def visit(t):
        node = getattr(t, "_node", None)
        ctx = getattr(node, "ctx", None)
        if ctx is None:
            return
        key = id(ctx)
        if state.get(key) == 1:
            raise AssertionError(f"the autograd graph has a cycle through {getattr(node, 'name', '?')}")
        if state.get(key) == 2:
            return
        state[key] = 1
        for i in getattr(ctx, "inputs", ()):
            visit(i)
        state[key] = 2

    visit(root)


def _wrt(case, arrays):
    if case.wrt is not None:
        return case.wrt
    return tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f")


def forward_loss(case, arrays, weights):
    with gt.no_grad():
        outs = _float_outputs(case.call(*[gt.tensor(a) for a in arrays]))
    return sum(float(np.sum(np.asarray(o.numpy(), np.float64) * w)) for o, w in zip(outs, weights))


def numeric(case, weights):
    """Central differences of the forward, one input element at a time."""
    arrays = [_as_input(a) for a in case.inputs]
    grads = []
    for i in _wrt(case, arrays):
        a = arrays[i]
        g = np.zeros_like(a)
        for j in range(a.size):
            hold = a.flat[j]
            a.flat[j] = hold + case.eps
            up = forward_loss(case, arrays, weights)
            a.flat[j] = hold - case.eps
            down = forward_loss(case, arrays, weights)
            a.flat[j] = hold
            g.flat[j] = (up - down) / (2 * case.eps)
        grads.append(g)
    return grads


def _params():
    for name, case in CASES.items():
        raises = (RuntimeError if NO_BACKWARD in (case.xfail or "") else AssertionError)
        marks = [pytest.mark.xfail(strict=True, reason=case.xfail, raises=raises),  # a known bug's nan warns
                 pytest.mark.filterwarnings("ignore::RuntimeWarning")] if case.xfail else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_gradient_matches_finite_differences(name):
    case = CASES[name]
    loss, got, weights = analytic(case, name)
    want = numeric(case, weights)
    assert np.isclose(loss, forward_loss(case, [_as_input(a) for a in case.inputs], weights), rtol=1e-12,
                      atol=1e-12), f"{name}: the forward differs with and without grad"
    for i, (g, w) in zip(_wrt(case, case.inputs), zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{name}: gradient of input {i}")


# --- coverage -----------------------------------------------------------------------------------

def _base(name):
    return name.split("[")[0]


def _target_names():
    path = OPS_TARGET
    if not os.path.exists(path):
        pytest.skip("ops-target.txt not beside the repository")
    return [w for line in open(path) if not line.startswith("#") for w in line.split()]


def test_every_target_name_is_classified():
    """Each name of ops-target.txt has a gradient case or a reason it has no gradient."""
    names = _target_names()
    covered = {_base(n) for n in CASES}
    missing = [n for n in names if n not in covered and n not in NOT_DIFFERENTIABLE]
    both = sorted(n for n in covered & set(NOT_DIFFERENTIABLE))
    differentiable = [n for n in names if n not in NOT_DIFFERENTIABLE]
    failing = sorted({_base(n) for n, c in CASES.items() if c.xfail and _base(n) in names})
    no_pass = [n for n in failing if all(c.xfail for k, c in CASES.items() if _base(k) == n)]
    variants = ", ".join(sorted(set(failing) - set(no_pass)))
    print(f"\ngradcheck: {len(differentiable) - len(missing)} of {len(differentiable)} differentiable names of "
          f"ops-target.txt have a case; {len(differentiable) - len(missing) - len(no_pass)} pass, "
          f"{len(no_pass)} only xfail ({', '.join(no_pass)}), xfail variants of {variants}; "
          f"{len(names) - len(differentiable)} names are not differentiable; {len(CASES)} cases in all, "
          f"{sum(1 for c in CASES.values() if c.xfail)} of them xfail")
    assert not missing, f"no gradient case and no reason: {missing}"
    assert not both, f"both in the table and NOT_DIFFERENTIABLE: {both}"


def test_every_exported_op_is_classified():
    """globaltensor's own ops (gt.ops.PUBLIC) and nn.functional: a case or a reason, too."""
    from globaltensor import ops
    covered = {_base(n) for n in CASES}
    names = set(ops.PUBLIC) | set(F_.__all__) | {"amax", "amin", "masked_fill", "clone", "permute"}
    missing = sorted(n for n in names if n not in covered and n not in NOT_DIFFERENTIABLE)
    assert not missing, f"no gradient case and no reason: {missing}"


# name -> (call on a float tensor in (0.1, 0.9) that requires grad, xfail reason or None)
NO_GRADIENT_CALLS = {
    "isfinite": (lambda x: gt.isfinite(x), None), "isinf": (lambda x: gt.isinf(x), None),
    "isnan": (lambda x: gt.isnan(x), None), "logical_not": (lambda x: gt.logical_not(x), None),
    "logical_and": (lambda x: gt.logical_and(x, x), None), "logical_or": (lambda x: gt.logical_or(x, x), None),
    "logical_xor": (lambda x: gt.logical_xor(x, x), None), "equal": (lambda x: gt.equal(x, 0.5), None),
    "not_equal": (lambda x: gt.not_equal(x, 0.5), None), "greater_equal": (lambda x: gt.greater_equal(x, 0.5), None),
    "greater_than": (lambda x: gt.greater_than(x, 0.5), None), "less_equal": (lambda x: gt.less_equal(x, 0.5), None),
    "less_than": (lambda x: gt.less_than(x, 0.5), None), "argsort": (lambda x: gt.argsort(x, 1), None),
    "numel": (lambda x: gt.numel(x), None), "full_like": (lambda x: gt.full_like(x, 2.0), None),
    "empty_like": (lambda x: gt.empty_like(x), None), "ones_like": (lambda x: gt.ones_like(x), None),
    "zeros_like": (lambda x: gt.zeros_like(x), None), "bernoulli": (lambda x: gt.bernoulli(x), None),
    "multinomial": (lambda x: gt.multinomial(x, 2), None),
    "allclose": (lambda x: gt.allclose(x, x), None),
    "equal_all": (lambda x: gt.equal_all(x, x), None),
    "all": (lambda x: gt.all(x), None),
    "any": (lambda x: gt.any(x, 0), None),
    "argmax": (lambda x: gt.argmax(x, 1), None),
    "argmin": (lambda x: gt.argmin(x), None),
    "nonzero": (lambda x: gt.nonzero(x), None),
    "histogram": (lambda x: gt.histogram(x, 4, 0, 1), None),
    "unique": (lambda x: gt.unique(x), None),
}


def _no_gradient_params():
    for n, (_, why) in NO_GRADIENT_CALLS.items():
        marks = [pytest.mark.xfail(strict=True, reason=why, raises=RuntimeError)] if why else []
        yield pytest.param(n, id=n, marks=marks)


@pytest.mark.parametrize("name", list(_no_gradient_params()))
def test_no_gradient_op_takes_an_input_that_requires_grad(name):
    """The reason of NOT_DIFFERENTIABLE holds (a bool/integer result, or values that need no
    gradient), and the op still runs on a tensor that requires grad, as in PyTorch."""
    assert name in NOT_DIFFERENTIABLE
    x = gt.tensor(np.random.default_rng(5).uniform(0.1, 0.9, (3, 4))).requires_grad_(True)
    out = NO_GRADIENT_CALLS[name][0](x)
    if isinstance(out, gt.Tensor) and out.dtype.is_floating and name not in ("bernoulli", "unique"):
        assert not out.requires_grad, f"{name}: a constant-valued result requires grad"


# --- accumulation: a second backward adds exactly the first's gradient ----------------------------

def _accumulated(case, name, calls, weighted):
    """The gradient of each input in case.wrt after `calls` forward+backward passes into the same
    leaves (a .grad accumulates, as over micro-batches); the loss sums the outputs, weighted or
    not (unweighted, sum's backward hands the seed itself on, broadcast)."""
    arrays = [_as_input(a) for a in case.inputs]
    wrt = _wrt(case, arrays)
    tensors = [gt.tensor(a) for a in arrays]
    for i in wrt:
        tensors[i].requires_grad_(True)
    for _ in range(calls):
        outs = _float_outputs(case.call(*tensors))
        loss = None
        for o, w in zip(outs, _weights(name, outs)):
            term = (o * gt.tensor(w)).sum() if weighted else o.sum()
            loss = term if loss is None else loss + term
        if not loss.requires_grad:
            return None
        loss.backward()
    return [None if tensors[i].grad is None else tensors[i].grad.numpy().copy() for i in wrt]


def _accumulation_params():
    for name, case in CASES.items():
        if not case.xfail:
            yield pytest.param(name, id=name)


@pytest.mark.parametrize("name", list(_accumulation_params()))
def test_two_backwards_give_exactly_twice_one(name):
    """No .grad shares memory with the backward seed, the caller's gradient or another leaf's
    .grad: two backward calls give exactly twice one call's gradient (g + g == 2 g in floating
    point), whatever path the gradient took (add hands one array to both inputs, sum's backward
    broadcasts the seed, ...)."""
    case = CASES[name]
    for weighted in (True, False):
        once, twice = _accumulated(case, name, 1, weighted), _accumulated(case, name, 2, weighted)
        if once is None:
            continue  # no input reaches the loss
        for i, (g1, g2) in enumerate(zip(once, twice)):
            if g1 is None:
                assert g2 is None, f"{name}: input {i}"
                continue
            np.testing.assert_array_equal(g2, 2 * g1, err_msg=f"{name}: gradient of input {i} after two backwards"
                                          f"{'' if weighted else ' of the unweighted sum'}")


def test_backward_leaves_its_gradient_argument_and_the_seed_alone():
    """Accumulation is exact: w * 3 + b thrice gives 9 and 3; a gradient argument is never
    changed, also when it reaches a leaf unchanged."""
    w, b = gt.tensor(2.0, requires_grad=True), gt.tensor(0.0, requires_grad=True)
    for _ in range(3):
        (w * 3.0 + b).backward()
    assert (float(w.grad.numpy()), float(b.grad.numpy())) == (9.0, 3.0)
    v, u, g = gt.tensor(np.ones(4, np.float32), requires_grad=True), gt.zeros(4, requires_grad=True), gt.ones(4)
    for _ in range(4):
        (v + u).sum().backward()
        (u * 1.0).backward(g)
        u.backward(g)
    np.testing.assert_array_equal(v.grad.numpy(), 4)
    np.testing.assert_array_equal(u.grad.numpy(), 12)
    np.testing.assert_array_equal(g.numpy(), 1)
    u.grad.numpy()[...] = 0  # zeroing a .grad in place (Paddle's clear_grad) changes no seed
    (v + u).sum().backward()
    np.testing.assert_array_equal(u.grad.numpy(), 1)
