"""Gathers and scatters addressed by index vectors: gather_nd, scatter_nd_add, scatter_nd, multiplex.

The last dim of an index tensor addresses the leading dims of x (multiplex: row i of the stacked
inputs at (index[i], i)). Each op declares its output shapes with a meta (registry.py)."""
import numpy as np

from ..backends.devices import add_at, array_module
from ..registry import rules
from ._front import apply, tensors
from ..registry import op
from ..creation import zeros, zeros_like

B, P, S = rules.B, rules.P, rules.split


def _gather_nd_meta(s, dt, st):
    x, index = s
    rules.check_index_dtype("gather_nd", dt[1])
    if not index or index[-1] > len(x):
        raise IndexError(f"gather_nd: the last dim of index ({index}) addresses at most {len(x)} dims of x {x}")
    return [tuple(index[:-1]) + tuple(x[index[-1]:])], [dt[0]]


def _gather_nd_backward(ctx, g):
    """g is added into zeros like x at the positions index addresses (repeats add up)."""
    from .reduction import sum as sum_
    x, index = ctx.inputs
    if not x.requires_grad:
        return None, None
    if index.shape[-1] == 0:  # every index addresses all of x: the sum over index's dims
        lead = tuple(range(index.ndim - 1))
        return (sum_(g, lead) if lead else g), None
    return scatter_nd_add(zeros_like(x), index, g), None


@op("gather_nd", lambda s, o, st: [((B, B), (B,)), ((P, B), (P,))]
    + [((B, S(d)), (S(d),)) for d in range(len(s[1]) - 1)], _gather_nd_backward, meta=_gather_nd_meta)
def _gather_nd(x, index):
    return x[tuple(np.moveaxis(index, -1, 0))] if index.shape[-1] else np.broadcast_to(x, index.shape[:-1] + x.shape)


def gather_nd(input, index):
    """Paddle's gather_nd: out[i..] = x[index[i..]] (the last dim of index addresses x)."""
    return apply("gather_nd", tensors(input, index))


def _scatter_nd_add_meta(s, dt, st):
    x, index, updates = s
    rules.check_index_dtype("scatter_nd_add", dt[1])
    if not index or index[-1] > len(x):
        raise IndexError(f"scatter_nd_add: the last dim of index ({index}) addresses at most {len(x)} dims of x {x}")
    want = tuple(index[:-1]) + tuple(x[index[-1]:])
    if tuple(updates) != want:
        raise ValueError(f"scatter_nd_add: updates must have shape {want} (index {index}, x {x}), got {updates}")
    return [tuple(x)], [dt[0]]


def _scatter_nd_add_backward(ctx, g):
    """x gets g; updates get g at the positions index addresses (gather_nd)."""
    x, index, updates = ctx.inputs
    return (g if x.requires_grad else None, None,
            gather_nd(g, index) if updates.requires_grad else None)


@op("scatter_nd_add", lambda s, o, st: [((B, B, B), (B,)), ((P, B, P), (P,))], _scatter_nd_add_backward,
    meta=_scatter_nd_add_meta)
def _scatter_nd_add(x, index, updates):
    out = x.copy()
    add_at(out, tuple(np.moveaxis(index, -1, 0)), updates)
    return out


def scatter_nd_add(input, index, updates):
    """A copy of x with updates added at the positions index addresses."""
    return apply("scatter_nd_add", tensors(input, index, updates))


def scatter_nd(index, updates, shape):
    """Zeros of `shape` with updates added at the positions index addresses."""
    index, updates = tensors(index, updates)
    if updates.is_global:
        base = zeros(shape, dtype=updates.dtype, placement=updates.placement,
                     sbp=(B,) * updates.placement.ndim)
    else:
        base = zeros(shape, dtype=updates.dtype)
    return scatter_nd_add(base, index, updates)


def _multiplex_meta(s, dt, st):
    *inputs, index = s
    rules.check_index_dtype("multiplex", dt[-1])
    if any(tuple(x) != tuple(inputs[0]) for x in inputs) or not inputs[0]:
        raise ValueError(f"multiplex: the inputs must have one shape of at least 1 dim, got {inputs}")
    if len(index) != 2 or index[1] != 1 or index[0] > inputs[0][0]:
        raise ValueError(f"multiplex: index must have shape (n, 1) with n <= {inputs[0][0]}, got {index}")
    return [(index[0],) + tuple(inputs[0][1:])], [rules.result_dtype(*dt[:-1])]


def _multiplex_backward(ctx, g):
    """Input k gets g on the rows that selected it (index == k), zeros on the others (and on
    the rows past index's, when index has fewer rows than the inputs)."""
    from .concat_split import concat
    from .elementwise import equal, where
    from .shape import reshape
    *inputs, index = ctx.inputs
    n = index.shape[0]
    pick = index if g.ndim == 2 else reshape(index, (n,) + (1,) * (g.ndim - 1))
    grads = []
    for k, x in enumerate(inputs):
        if not x.requires_grad:
            grads.append(None)
            continue
        gk = where(equal(pick, k), g, 0.0)
        if n < x.shape[0]:
            gk = concat([gk, zeros_like(x)[n:]], 0)  # a Tensor method: getitem comes later
        grads.append(gk)
    return (*grads, None)


@op("multiplex", lambda s, o, st: [((B,) * len(s), (B,))]  # rows split alike only when index has every row
    + ([((S(0),) * len(s), (S(0),))] if s[-1][0] == s[0][0] else []), _multiplex_backward, meta=_multiplex_meta)
def _multiplex(*arrays):
    *inputs, index = arrays
    return np.stack(inputs)[index.reshape(-1), array_module(index).arange(index.shape[0])]


def multiplex(inputs, index):
    """Paddle's multiplex: row i of the output is row i of inputs[index[i]]."""
    return apply("multiplex", tensors(*inputs, index))
