"""linear (x @ weight.T + bias, one primitive), linear_in_out (Paddle's weight layout) and their gradient ops."""
import numpy as np

from ..backends import cuda_kernels
from ..registry import rules
from ._front import apply, tensors, products_in_float32
from ..registry import op

B, P, S = rules.B, rules.P, rules.split
FLIP_W = {S(0): S(1), S(1): S(0)}  # a weight's split dim, [out, in] <-> [in, out] (Paddle's layout)


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


def _weight_grad_rows(s, o, st):
    return [
        ((B, B), (B, B)),
        ((S(0), S(0)), (P, P)),  # rows split: g[m1].T @ x[m1] + g[m2].T @ x[m2] = g.T @ x; the row sums add up
        ((S(1), B), (S(0), S(0))),  # g's columns n1: dw[n1] = g[:, n1].T @ x, db[n1] = sum of g[:, n1]
        ((B, S(1)), (S(1), B)),  # x's columns k1: dw[:, k1] = g.T @ x[:, k1]; db needs g alone
        ((P, B), (P, P)),  # linear in g
        ((B, P), (P, B))]  # linear in x; db from g alone


@op("linear_weight_grad", _weight_grad_rows, meta=_linear_weight_grad_meta)
@products_in_float32
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
@products_in_float32
def _linear(x, w, b=None):
    if cuda_kernels.usable(x, w, b, op="linear"):  # cupy pieces on a GPU: one cuBLASLt call, bias fused
        return cuda_kernels.linear(x, w, b)
    if x.ndim == 2 and 8 <= x.shape[0] <= w.shape[0] and x.shape[0] * w.shape[0] >= 1 << 16:
        y = np.matmul(w, x.T).T  # fewer rows than outputs: OpenBLAS runs this 1.1-1.7x faster than x @ w.T
    elif x.ndim > 2 and type(x) is np.ndarray and x.flags.c_contiguous and x.size:  # one GEMM of all the rows, not one per batch
        y = np.matmul(x.reshape(-1, x.shape[-1]), w.T).reshape(*x.shape[:-1], w.shape[0])
    else:
        y = np.matmul(x, w.T)
    return _plus_bias(y, b)


def _plus_bias(y, b):
    """y + b, in y's memory when the sum fits it (y is a kernel's fresh output: no second array)."""
    if b is None:
        return y
    fits = b.shape == y.shape[y.ndim - b.ndim:] if b.ndim <= y.ndim else False  # y's shape: no numpy frames
    if y.dtype == np.result_type(y, b) and (fits or y.shape == np.broadcast_shapes(y.shape, b.shape)):
        y += b
        return y
    return y + b


def linear(input, weight, bias=None):
    """x @ weight.T + bias (weight has shape (out_features, in_features), as in OneFlow); one
    primitive, so a layer is one dispatch forward and three in backward."""
    return apply("linear", tensors(input, weight) if bias is None else tensors(input, weight, bias))


# --- Paddle's layout: weight (in_features, out_features) -------------------------------------------
def _in_out_rows(in_shapes, out_shapes, static):
    """x (..., k), w (k, n), b (n): y = x @ w + b; linear's rows with w's split dim flipped:
    w S(1), b S(0) -> S(last) is column parallel; x S(last), w S(0), b P -> P row parallel."""
    swapped = [tuple(in_shapes[1][::-1]) if i == 1 else s for i, s in enumerate(in_shapes)]
    return [((a, FLIP_W.get(w, w), *rest), out) for (a, w, *rest), out in _linear_rows(swapped, out_shapes, static)]


def _in_out_backward(ctx, g):
    """dx = g @ w.T (the `linear` op on w as it is); dw = x.T @ g and db = g summed over rows in one op,
    dw written into its gradient bucket when it has one."""
    x, w = ctx.inputs[0], ctx.inputs[1]
    has_b = len(ctx.inputs) == 3
    dx = apply("linear", [g, w]) if x.requires_grad else None
    if not (w.requires_grad or (has_b and ctx.inputs[2].requires_grad)):
        return (dx, None, None)[:len(ctx.inputs)]
    if g.ndim == 2:
        g2, x2 = g, x
    else:
        from .shape import reshape
        g2, x2 = reshape(g, (-1, g.shape[-1])), reshape(x, (-1, x.shape[-1]))
    dw, db = apply("linear_in_out_grads", [x2, g2], multi=True, out=ctx.dest(1))
    return (dx, dw if w.requires_grad else None) + ((db if ctx.inputs[2].requires_grad else None,) if has_b else ())


def _in_out_grads_rows(s, o, st):
    """linear_weight_grad's rows with its inputs swapped and dw's split dim flipped: dw = (g.T @ x).T."""
    return [((x, g), (FLIP_W.get(dw, dw), db)) for (g, x), (dw, db) in _weight_grad_rows(s[::-1], o, st)]


def _in_out_grads_meta(s, dt, st):
    [(n, k), db], dtypes = _linear_weight_grad_meta(s[::-1], dt[::-1], st)
    return [(k, n), db], dtypes


@op("linear_in_out_grads", _in_out_grads_rows, takes_hints=True, meta=_in_out_grads_meta)
@products_in_float32
def _linear_in_out_grads(x, g, out=None, order=None):
    """(x.T @ g, g summed over rows) for x (m x k), g (m x n): the weight (k x n) and bias gradients
    of linear_in_out; the weight's into `out` (its gradient bucket) when it fits."""
    if out is not None and out.shape == (x.shape[1], g.shape[1]) and out.dtype == np.result_type(x, g):
        return np.matmul(x.T, g, out=out), g.sum(0)
    return np.matmul(x.T, g), g.sum(0)


def _in_out_meta(s, dt, st):
    x, w = tuple(s[0]), tuple(s[1])
    if len(w) != 2 or not x or x[-1] != w[0]:
        raise ValueError(f"linear: x {x} and weight {w} (in_features, out_features) do not fit")
    return _linear_meta([s[0], w[::-1]] + list(s[2:]), dt, st)


@op("linear_in_out", _in_out_rows, _in_out_backward, meta=_in_out_meta)
@products_in_float32
def _linear_in_out(x, w, b=None):
    y = np.matmul(x, w)
    return _plus_bias(y, b)


def linear_in_out(x, weight, bias=None):
    """x @ weight + bias with weight (in_features, out_features), Paddle's layout: one primitive
    forward, two in backward (dx; dw and db together). Complex operands take matmul + add (their
    gradients conjugate)."""
    ins = tensors(x, weight) if bias is None else tensors(x, weight, bias)
    dt = ins[0]._dtype
    if dt.is_complex or any(t._dtype is not dt for t in ins):
        from .linalg import matmul
        y = matmul(ins[0], ins[1])
        return y if bias is None else y + ins[2]
    return apply("linear_in_out", ins)
