"""Issue 28's everyday names (ops/everyday.py, ops/everyday_shape.py, gt.linalg,
nn.functional.normalize) against torch: the same call (m: torch or globaltensor) on the same
float64 inputs, values and the gradients of sum(out * W), in one process and on 2 ranks and a 2x2
mesh with random input SBPs; and the crashes the issue lists."""
import math
import zlib

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks

from lazy_torch import torch
R = np.random.default_rng(28)
F = lambda *s, lo=-1.0, hi=1.0: R.uniform(lo, hi, s)  # noqa: E731
POS = lambda *s: R.uniform(0.5, 2.0, s)  # noqa: E731
I = lambda *s, hi=4: R.integers(0, hi, s)  # noqa: E731

# name -> (inputs, call(m, *tensors) -> tensor or list): m is torch or globaltensor
SPECS = {
    "sub/mul/div": ([F(4, 3), POS(3)], lambda m, x, y: [m.sub(x, y), m.sub(x, y, alpha=2), m.mul(x, y), m.div(x, y),
                                                       m.div(x, y, rounding_mode="floor"), m.true_divide(x, y),
                                                       x.sub(y), x.mul(2.0), x.div(y, rounding_mode="trunc")]),
    "comparisons": ([F(4, 3), F(3)], lambda m, x, y: [m.eq(x, x), m.ne(x, y), m.ge(x, y), m.gt(x, y), m.le(x, y),
                                                     m.lt(x, y), m.greater(x, y), m.less(x, y), x.eq(y), x.ne(y)]),
    "negative/absolute": ([F(4, 3)], lambda m, x: [m.negative(x), x.negative(), m.absolute(x), x.absolute()]),
    "unary": ([F(4, 3, lo=-0.9, hi=0.9)], lambda m, x: [m.expm1(x), m.exp2(x), m.asinh(x), m.atanh(x), x.expm1(),
                                                        m.arcsinh(x), m.arctanh(x), m.arccos(x), m.arcsin(x),
                                                        m.arctan(x), m.erfc(x), m.deg2rad(x), m.rad2deg(x)]),
    "acosh": ([POS(4, 3) + 1], lambda m, x: [m.acosh(x), m.arccosh(x), x.acosh(), m.logit(x - 1.2, 1e-3)]),
    "trunc/frac/fmod": ([F(4, 3, lo=-3, hi=3), np.array([0.7, -0.6, 1.3])],
                        lambda m, x, y: [m.trunc(x), m.fix(x), m.frac(x), m.fmod(x, y), x.fmod(1.5),
                                         m.remainder(x, y), m.rsub(x, y), m.rsub(x, 2.0, alpha=3)]),
    "logaddexp": ([F(4, 3, lo=-3, hi=3), F(3)], lambda m, x, y: [m.logaddexp(x, y), m.logaddexp2(x, y),
                                                                 m.hypot(x, y), m.float_power(x * x, y)]),
    "xlogy/lerp/addc": ([np.array([[0.0, 1.5, -2.0], [0.5, 0.0, 3.0]]), POS(3), F(2, 3)],
                        lambda m, x, y, z: [m.xlogy(x, y), m.lerp(x, z, 0.3), m.addcmul(z, x, y, value=0.5),
                                            m.addcdiv(z, x, y, value=2.0), m.fmax(x, z), m.fmin(x, z)]),
    "clamp": ([F(4, 3), F(3)], lambda m, x, y: [m.clamp(x, -0.3, 0.4), m.clamp(x, min=y), m.clamp(x, y, y + 0.5),
                                                m.clamp_min(x, 0.1), m.clamp_max(x, 0.1), x.clamp(max=0.2)]),
    "float checks": ([np.array([[0.0, np.inf, -np.inf], [np.nan, 1.0, 1.0 + 1e-9]])],
                     lambda m, x: [m.isclose(x, x * 1), m.isclose(x, m.ones_like(x)), m.isposinf(x),
                                   m.isneginf(x), m.nan_to_num(x), m.nan_to_num(x, 1.0, 2.0, -2.0)]),
    "reductions": ([F(5, 4)], lambda m, x: [m.count_nonzero(m.clamp(x, min=0)), m.nansum(x, 1), m.nanmean(x, 0),
                                            *m.aminmax(x, dim=1), *m.var_mean(x, 1), *m.std_mean(x, 0),
                                            *m.kthvalue(x, 2, 0), m.msort(x), m.cumprod(x, 1), m.cumprod(x, 0)]),
    "cumprod zeros": ([np.array([[1.5, 0.0, 2.0, 0.5], [0.0, 0.0, 3.0, 1.0]])], lambda m, x: m.cumprod(x, 1)),
    "narrow/select/movedim": ([F(4, 3, 2)], lambda m, x: [m.narrow(x, 1, 1, 2), x.narrow(0, -3, 2), m.select(x, 1, 2),
                                                          m.movedim(x, 0, 2), m.movedim(x, (0, 1), (2, 0)),
                                                          m.moveaxis(x, -1, 0), m.swapaxes(x, 0, 2), x.swapdims(1, 2),
                                                          m.unflatten(x, 1, (3, 1)), m.ravel(x)]),
    "broadcast_tensors": ([F(4, 1), F(3)], lambda m, x, y: [*m.broadcast_tensors(x, y)]),
    "splits": ([F(6, 5, 2)], lambda m, x: [*m.tensor_split(x, 4, 1), *m.tensor_split(x, [1, 4], 0),
                                           *m.hsplit(x, 5), *m.vsplit(x, [2]), *m.dsplit(x, 2), *x.tensor_split(3)]),
    "stacks": ([F(3), F(3), F(2, 3)], lambda m, x, y, z: [m.hstack([x, y]), m.vstack([x, z]), m.dstack([z, z]),
                                                          m.column_stack([x, y]), m.atleast_2d(x), m.atleast_3d(z),
                                                          m.concatenate([z, z], 1)]),
    "flips": ([F(4, 3)], lambda m, x: [m.fliplr(x), m.flipud(x), m.rot90(x), m.rot90(x, 2), m.rot90(x, -1, (1, 0))]),
    "repeat_interleave": ([F(3, 2)], lambda m, x: [m.repeat_interleave(x, 2), m.repeat_interleave(x, 3, 1),
                                                   x.repeat_interleave(m.tensor([1, 0, 2]), dim=0)]),
    "take": ([F(4, 3), I(2, 3, hi=12), I(4, 2, hi=3)],
             lambda m, x, i, j: [m.take(x, i), m.take_along_dim(x, j, 1), m.diagonal(x), m.diagonal(x, -1),
                                 m.diagflat(x[0]), m.diff(x), m.diff(x, 2, 0)]),
    "products": ([F(4), F(3), F(2, 4, 3), F(2, 3, 5), F(4, 5)],
                 lambda m, u, v, a, b, c: [m.outer(u, v), m.ger(u, v), m.inner(a, b.transpose(1, 2)), m.vdot(u, u),
                                           m.addmv(u, c, c[0], beta=0.5, alpha=2), m.addr(a[0], u, v, alpha=3),
                                           m.baddbmm(c, a, b, beta=0.5), m.addbmm(c, a, b, alpha=2),
                                           m.tensordot(a, b, ([0, 2], [0, 1])), m.tensordot(a, b.transpose(0, 1), 1),
                                           m.matrix_power(c[:4, :4], 3), m.chain_matmul(c[:, :3], a[0].T, c),
                                           m.cdist(a, a), m.cdist(c, c, 1.0)]),
    "linalg": ([F(4, 3), F(3, 3) + 3 * np.eye(3)],
               lambda m, x, a: [m.linalg.norm(x), m.linalg.norm(x, dim=1), m.linalg.norm(x, math.inf),
                                m.linalg.norm(x, 1, (0, 1)), m.linalg.vector_norm(x, 3, 1),
                                m.linalg.vector_norm(x, -math.inf), m.linalg.matrix_norm(x),
                                m.linalg.matrix_norm(x, -1), m.linalg.matrix_norm(x, math.inf, keepdim=True),
                                m.linalg.matmul(x, a), m.linalg.inv(a), m.linalg.solve(a, x.T),
                                m.linalg.vecdot(x, x), m.linalg.cross(x, m.flip(x, (0,))),
                                m.linalg.multi_dot([x, a, a])]),
    "normalize": ([F(4, 3)], lambda m, x: [m.nn.functional.normalize(x), m.nn.functional.normalize(x, 1.0, 0)]),
    # the crashes of issue 28
    "zero gradients": ([F(4, 3, lo=-2, hi=2)], lambda m, x: [m.floor(x), m.round(x), m.sign(x), m.ceil(x)]),
    "var of too few": ([F(1, 3)], lambda m, x: [m.var(x, 0), m.std(x, 0), m.var(x[:0], 0)]),
}
NO_GRAD_INPUT_KINDS = "iub"


def _torch_run(name, arrays):
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    return _collect(SPECS[name][1](torch, *ts), ts, lambda o: o.detach().numpy(), lambda t: t.grad,
                    lambda o, w: (o * torch.from_numpy(w)).sum())


def _collect(outs, ts, value, grad_of, weighted):
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    values = [value(o) for o in outs]
    rng = np.random.default_rng(5)
    ws = [rng.uniform(-1, 1, v.shape) for v in values]
    total = None
    for o, v, w in zip(outs, values, ws):
        if v.dtype.kind == "f" and o.requires_grad:
            s = weighted(o, w)
            total = s if total is None else total + s
    if total is not None:
        total.backward()
    grads = [None if not t.requires_grad else np.zeros(t.shape) if grad_of(t) is None else grad_of(t).numpy()
             for t in ts]
    return values, grads


def _gt_run(name, arrays, placement=None):
    if placement is None:
        ts = [gt.tensor(a) for a in arrays]
    else:
        rng = np.random.default_rng([zlib.crc32(name.encode()), placement.ndim])
        ts = []
        for a in arrays:
            options = [gt.sbp.broadcast] + [gt.sbp.split(d) for d in range(a.ndim)] + \
                ([gt.sbp.partial_sum] if a.dtype.kind == "f" else [])
            sbp = tuple(options[rng.integers(len(options))] for _ in range(placement.ndim))
            ts.append(gt.tensor(a, placement=placement, sbp=sbp))
    for a, t in zip(arrays, ts):
        t.requires_grad_(a.dtype.kind == "f")

    def weighted(o, w):
        w = gt.tensor(w) if placement is None else gt.tensor(w, placement=placement,
                                                            sbp=(gt.sbp.broadcast,) * placement.ndim)
        return (o * w).sum()
    return _collect(SPECS[name][1](gt, *ts), ts, lambda o: o.numpy(), lambda t: t.grad, weighted)


def _compare(name, got, want):
    (gv, gg), (wv, wg) = got, want
    assert len(gv) == len(wv), f"{name}: {len(gv)} outputs, torch {len(wv)}"
    for j, (g, w) in enumerate(zip(gv, wv)):
        assert g.shape == w.shape, f"{name} output {j}: shape {g.shape}, torch {w.shape}"
        assert (g.dtype.kind in "iu") == (w.dtype.kind in "iu") and (g.dtype.kind == "b") == (w.dtype.kind == "b"), \
            f"{name} output {j}: dtype {g.dtype}, torch {w.dtype}"
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-7, atol=1e-9,
                                   equal_nan=True, err_msg=f"{name} output {j}")
    for k, (g, w) in enumerate(zip(gg, wg)):
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9, equal_nan=True, err_msg=f"{name} grad {k}")


def _failures(placement=None):
    import warnings
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (inputs, _) in SPECS.items():
            arrays = [np.asarray(a) for a in inputs]
            try:
                _compare(name, _gt_run(name, arrays, placement), _torch_run(name, arrays))
            except Exception as exc:  # noqa: BLE001 - listed below
                failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:600]}")
    return failures


def test_everyday_ops_match_torch_in_one_process():
    failures = _failures()
    assert not failures, "\n".join(failures)


def _on_mesh(mesh_2d):
    k = gt.env.get_world_size()
    return _failures(gt.placement("cpu", [[0, 1], [2, 3]] if mesh_2d else list(range(k))))


@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (4, True)])
def test_everyday_ops_match_torch_on_placements(nprocs, mesh_2d):
    failures = run_ranks(_on_mesh, nprocs, mesh_2d, timeout=600)[0]
    assert not failures, "\n".join(failures)


def test_zero_gradients_are_tensors():
    for fn in (gt.floor, gt.round, gt.sign, gt.ceil, gt.trunc):
        x = gt.tensor([0.3, -1.7], requires_grad=True)
        fn(x).sum().backward()
        assert x.grad is not None and np.array_equal(x.grad.numpy(), [0.0, 0.0]), fn


def _crashes():
    p = gt.placement("cpu", [0, 1])
    c = gt.tensor(np.array([True, False, True]), placement=p, sbp=gt.sbp.partial_sum)
    x = gt.tensor(np.array([1.0, 2, 3]), placement=p, sbp=gt.sbp.broadcast)
    picked = gt.where(c, x, 0.0).numpy()
    out = []
    for sbp in (gt.sbp.broadcast, gt.sbp.partial_sum):
        s = gt.tensor(np.array(0.3), placement=p, sbp=sbp, requires_grad=True)
        y = gt.nn.functional.gelu(s)
        y.backward()
        out.append((float(y.numpy()), float(s.grad.numpy())))
    return picked, out


def test_issue_28_crashes():
    picked, gelus = run_ranks(_crashes, 2)[0]
    np.testing.assert_array_equal(picked, [1.0, 0.0, 3.0])  # each rank's [T, F, T]: summed, nonzero
    s = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.gelu(s)
    y.backward()
    for value, grad in gelus:
        assert value == pytest.approx(float(y.detach()), rel=1e-12) and grad == pytest.approx(float(s.grad), rel=1e-12)
