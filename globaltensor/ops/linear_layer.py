"""linear (x @ weight.T + bias, one primitive) and linear_weight_grad, its weight and bias gradients in one op."""
import numpy as np

from ..backends import cuda_kernels
from ..registry import rules
from ._front import apply, tensors
from ..registry import op

B, P, S = rules.B, rules.P, rules.split


def _linear_rows(in_shapes, out_shapes, static):
    """x (..., k), w (n, k), b (n): y = x @ w.T + b.
    batch S(d) on x -> S(d)                     rows of y come from rows of x
    w S(0), b S(0) -> S(last)                   column parallel: y[..., n1] = x @ w[n1].T + b[n1]
    x S(last), w S(1), b P -> P                 row parallel: sum over k pieces; b added once
    x P, b P / w P, b P -> P                    bilinear, the bias split into summands too
    """
    nd = len(in_shapes[0])
    has_b = len(in_shapes) == 3
    rows = [((B,) * len(in_shapes), (B,))]
    rows += [((S(d), B) + ((B,) if has_b else ()), (S(d),)) for d in range(nd - 1)]
    rows.append(((B, S(0)) + ((S(0),) if has_b else ()), (S(nd - 1),)))
    rows.append(((S(nd - 1), S(1)) + ((P,) if has_b else ()), (P,)))
    rows.append(((P, B) + ((P,) if has_b else ()), (P,)))
    rows.append(((B, P) + ((P,) if has_b else ()), (P,)))
    return rows


def _linear_backward(ctx, g):
    from .reduction import sum as _sum
    from .shape import reshape
    x, w = ctx.inputs[0], ctx.inputs[1]
    dx = None  # the first layer's input needs none
    if x.requires_grad:  # dx in x's memory order (a hint: element-wise ops on mixed orders run ~10x
        # slower); the order of a piece is a fact of this rank, so it may steer only the kernel
        dx = apply("matmul", [g, w], order="F" if x.ndim == 2 and _fortran_order(x._local) else None)
    g2, x2 = reshape(g, (-1, g.shape[-1])), reshape(x, (-1, x.shape[-1]))
    if len(ctx.inputs) == 3 and w.requires_grad and ctx.inputs[2].requires_grad and \
            not isinstance(g._local, np.ndarray):  # on GPUs: dw and db in one cuBLASLt call
        return (dx,) + tuple(apply("linear_weight_grad", [g2, x2], multi=True))
    dw = apply("matmul", [g2.T, x2], out=ctx.dest(1)) if w.requires_grad else None
    if len(ctx.inputs) == 2:
        return dx, dw
    return dx, dw, (_sum(g2, 0) if ctx.inputs[2].requires_grad else None)


def _linear_weight_grad_meta(s, dt, st):
    (m, n), (m2, k) = s
    if m != m2:
        raise ValueError(f"linear_weight_grad: g {tuple(s[0])} and x {tuple(s[1])} need the same rows")
    return [(n, k), (n,)], [rules.result_dtype(*dt), np.sum(np.zeros(0, dt[0].np), axis=0).dtype]


@op("linear_weight_grad", lambda s, o, st: [
    ((B, B), (B, B)),
    ((S(0), S(0)), (P, P)),  # rows split: g[m1].T @ x[m1] + g[m2].T @ x[m2] = g.T @ x; the row sums add up
    ((S(1), B), (S(0), S(0))),  # g's columns n1: dw[n1] = g[:, n1].T @ x, db[n1] = sum of g[:, n1]
    ((B, S(1)), (S(1), B)),  # x's columns k1: dw[:, k1] = g.T @ x[:, k1]; db needs g alone
    ((P, B), (P, P)),  # linear in g
    ((B, P), (P, B))], meta=_linear_weight_grad_meta)  # linear in x; db from g alone
def _linear_weight_grad(g, x):
    """(g.T @ x, g summed over rows) for g (m x n), x (m x k): linear's weight and bias gradients,
    in one cuBLASLt call (bias gradient epilogue) on GPUs."""
    if cuda_kernels.usable(g, x, op="linear_weight_grad"):
        return cuda_kernels.linear_weight_grad(g, x, bias_grad=True)
    return np.matmul(g.T, x), g.sum(0)


def _fortran_order(a):
    return a.flags.f_contiguous and not a.flags.c_contiguous


def _linear_meta(s, dt, st):
    x, w = tuple(s[0]), tuple(s[1])
    if len(w) != 2 or not x or x[-1] != w[1]:
        raise ValueError(f"linear: x {x} and weight {w} (out_features, in_features) do not fit")
    shape = x[:-1] + (w[0],)
    if len(s) == 3:
        shape = rules.broadcast_shape([shape, s[2]])
    return [shape], [rules.result_dtype(*dt)]


@op("linear", _linear_rows, _linear_backward, meta=_linear_meta)
def _linear(x, w, b=None):
    if cuda_kernels.usable(x, w, b, op="linear"):  # cupy pieces on a GPU: one cuBLASLt call, bias fused
        return cuda_kernels.linear(x, w, b)
    if x.ndim == 2 and 8 <= x.shape[0] <= w.shape[0] and x.shape[0] * w.shape[0] >= 1 << 16:
        y = np.matmul(w, x.T).T  # fewer rows than outputs: OpenBLAS runs this 1.1-1.7x faster than x @ w.T
    else:
        y = np.matmul(x, w.T)
    if b is not None:
        if y.dtype == np.result_type(y, b) and y.shape == np.broadcast_shapes(y.shape, b.shape):
            y += b  # y is fresh: add in place, no second output
        else:
            y = y + b
    return y


def linear(input, weight, bias=None):
    """x @ weight.T + bias (weight has shape (out_features, in_features), as in OneFlow); one
    primitive, so a layer is one dispatch forward and three in backward."""
    return apply("linear", tensors(input, weight) if bias is None else tensors(input, weight, bias))
