"""Gather and scatter along one dim: gather, scatter, scatter_add, index_select, index_add, index_sample.

Dims an op is independent along keep their splits; a split on the gathered (or scattered) dim
gives each rank the indices that fall in its slice. Every op here reads values to find
positions, so each declares its output shapes with a meta (registry.py): shape inference never
runs a kernel on made-up indices."""
import builtins

import numpy as np

from ..backends.devices import add_at, array_module
from ..registry import rules
from .. import _native
from ._front import apply, c_floats, tensors
from ..registry import op
from ..creation import zeros_like
from ..errors import ShapeError, wrap_dim

B, P, S = rules.B, rules.P, rules.split


def _other_dims(dim_key="dim"):
    """Rows splitting a dim other than the op's own, on the inputs that span it with the same
    size (the others, like a scalar src, stay B): op(x)[i] = op(x[i]) along independent dims."""
    def make(s, o, st):
        d0 = st[dim_key] % max(len(s[0]), 1)
        rows = [((B,) * len(s), (B,) * len(o))]
        for d in range(len(s[0])):
            sizes = {shape[d] for shape in s if len(shape) == len(s[0])}
            if d != d0 and len(sizes) == 1:
                rows.append((tuple(S(d) if len(shape) == len(s[0]) else B for shape in s), (S(d),) * len(o)))
        return rows
    return make


def _along_axis_meta(name, dim_key="dim"):
    """np.take_along_axis(x, index, dim): same ndim; the other dims broadcast; dim from index."""
    def meta(s, dt, st):
        x, index = s[0], s[1]
        rules.check_index_dtype(name, dt[1])
        if len(index) != len(x):
            raise ValueError(f"{name}: index must have the input's number of dims ({len(x)}), got shape {index}")
        dim = st[dim_key] % max(len(x), 1) if dim_key else 1
        shape = [index[d] if d == dim else rules.broadcast_shape([(x[d],), (index[d],)])[0] for d in range(len(x))]
        return [tuple(shape)], [dt[0]]
    return meta


def _scatter_meta(name):
    """A copy of x with values put along dim: x's shape and dtype; index (and src) checked."""
    def meta(s, dt, st):
        rules.check_index_dtype(name, dt[1])
        if len(s[1]) != len(s[0]):
            raise ValueError(f"{name}: index must have the input's number of dims ({len(s[0])}), got shape {s[1]}")
        return [tuple(s[0])], [dt[0]]
    return meta


def _gather_backward(ctx, g):
    x, index = ctx.inputs
    return scatter_add_(zeros_like(x), ctx.static["dim"], index, g), None


def _gather_rows(s, o, st):
    """_other_dims, and x split on the gathered dim with the index whole -> partial sum: each
    rank takes the indices inside its slice and leaves zeros for the rest (the Megatron pattern:
    a loss over a vocabulary split by ranks picks its target logits without gathering them)."""
    return _other_dims()(s, o, st) + [((S(st["dim"]), B), (P,))]


def _check_range(name, index, size):
    """IndexError unless every index is in [0, size) (the whole dim's size: a global fact, so on
    a split dim every rank raises alike, before any collective), as PyTorch. Device indices are
    read back once (both bounds in one download: each waits for the GPU's stream)."""
    if not index.size:
        return
    xp = array_module(index)
    bounds = (index.min(), index.max()) if xp is np else xp.stack((index.min(), index.max())).get()
    lo, hi = (int(b) for b in bounds)
    if lo < 0 or hi >= size:
        raise IndexError(f"{name}: index out of range: values in [{lo}, {hi}] for a dim of size {size}")


def _in_slice(name, index, size, start, length):
    """The indices, checked against the whole dim (size), placed in this piece's slice [start,
    start + length): (index - start clipped into it, mask of the indices inside it), or (index,
    None) when the piece is the whole dim or every index falls in it."""
    _check_range(name, index, size)
    if start == 0 and length == size:
        return index, None
    local = index - start if start else index
    inside = (local >= 0) & (local < length)
    if inside.all():
        return local, None
    return local.clip(0, builtins.max(length - 1, 0)), inside


@op("gather", _gather_rows, _gather_backward, meta=_along_axis_meta("gather"), takes_offsets=True)
def _gather(x, index, dim=0, size=None, offsets=None):
    start = offsets[0][dim] if offsets else 0
    local, inside = _in_slice("gather", index, x.shape[dim] if size is None else size, start, x.shape[dim])
    if inside is None:
        return np.take_along_axis(x, local, axis=dim)
    if x.shape[dim] == 0:
        return np.zeros(np.broadcast_shapes(index.shape, x.shape[:dim] + (1,) + x.shape[dim + 1:]), x.dtype)
    return np.where(inside, np.take_along_axis(x, local, axis=dim), 0).astype(x.dtype, copy=False)


def gather(input, dim, index):
    """out[i][j] = x[i][index[i][j]] along dim (PyTorch's gather)."""
    input, index = tensors(input, index)
    rules.check_index_dtype("gather", index.dtype)
    dim = wrap_dim(dim, input.ndim)
    x, i = tuple(input.shape), tuple(index.shape)
    if len(x) != len(i) and (len(x) > 1 or len(i) > 1):
        raise ShapeError(f"Index tensor must have the same number of dimensions as input tensor (gather: input "
                         f"{x}, index {i})")
    for d in range(min(len(x), len(i))):
        if d != dim and i[d] > x[d]:
            raise ShapeError(f"Size does not match at dimension {d} expected index {i} to be smaller than self "
                             f"{x} apart from dimension {dim}")
    if len(x) == len(i) and any(i[d] < x[d] for d in range(len(x)) if d != dim):  # the index's extent only
        input = input[tuple(slice(None) if d == dim else slice(0, i[d]) for d in range(len(x)))]  # (no broadcast)
    return apply("gather", [input, index], {"dim": dim, "size": x[dim]})


def _scatter_add_rows(s, o, st):
    """_other_dims, and x split on the scattered dim with index and src whole -> split alike:
    each rank adds the entries whose index falls in its slice."""
    return _other_dims()(s, o, st) + [((S(st["dim"]), B, B), (S(st["dim"]),))]


@op("scatter_add", _scatter_add_rows, lambda ctx, g: (g, None, gather(g, ctx.static["dim"], ctx.inputs[1])),
    meta=_scatter_meta("scatter_add"), takes_offsets=True)
def _scatter_add(x, index, src, dim=0, size=None, offsets=None):
    out = x.copy()
    start = offsets[0][dim] if offsets else 0
    local, inside = _in_slice("scatter_add", index, x.shape[dim] if size is None else size, start, x.shape[dim])
    idx = _open_grid(array_module(index), index.shape)
    idx[dim] = local
    src = src[tuple(slice(0, n) for n in index.shape)]
    if inside is None:
        add_at(out, tuple(idx), src)
    else:
        add_at(out, tuple(np.broadcast_to(i, index.shape)[inside] for i in idx), src[inside])
    return out


def _open_grid(xp, shape):
    """np.indices(shape, sparse=True) on the array's device: one arange per dim, broadcastable."""
    return [xp.arange(n).reshape([n if a == d else 1 for a in range(len(shape))]) for d, n in enumerate(shape)]


def scatter_add_(input, dim, index, src):
    input, index, src = tensors(input, index, src)
    dim = wrap_dim(dim, input.ndim)
    return apply("scatter_add", [input, index, src], {"dim": dim, "size": input.shape[dim]})


@op("scatter", _other_dims(), lambda ctx, g: (scatter(g, ctx.static["dim"], ctx.inputs[1], 0.0), None,
                                               gather(g, ctx.static["dim"], ctx.inputs[1])),
    meta=_scatter_meta("scatter"))
def _scatter(x, index, src, dim=0):
    out = x.copy()
    np.put_along_axis(out, index, src[tuple(slice(0, n) for n in index.shape)] if np.ndim(src) else src, axis=dim)
    return out


def scatter(input, dim, index, src):
    """A copy of x with out[i][index[i][j]] = src[i][j] along dim (PyTorch's scatter)."""
    input, index, src = tensors(input, index, src)
    return apply("scatter", [input, index, src], {"dim": wrap_dim(dim, input.ndim)})


def scatter_(input, dim, index, src):
    """In-place scatter: x takes the result and is returned."""
    from .shape import _assign
    return _assign(input, scatter(input._shallow_copy(), dim, index, src))


def _index_select_rows(s, o, st):
    dim = st["dim"]
    rows = [((B, B), (B,)), ((P, B), (P,)), ((B, S(0)), (S(dim),))]
    rows += [((S(d), B), (S(d),)) for d in range(len(s[0])) if d != dim]
    return rows


def _index_select_meta(s, dt, st):
    x, index, dim = s[0], s[1], st["dim"]
    rules.check_index_dtype("index_select", dt[1])
    if not x:
        raise IndexError("index_select: the input must have at least 1 dim")
    return [tuple(x[:dim]) + tuple(index) + tuple(x[dim + 1:])], [dt[0]]


@op("index_select", _index_select_rows, lambda ctx, g: (_index_add(ctx, g), None), meta=_index_select_meta)
def _index_select(x, index, dim=0):
    _check_range("index_select", index, x.shape[dim])  # x is never split along dim in its rows
    return np.take(x, index, axis=dim)


def _index_add(ctx, g):
    x, dim = ctx.inputs[0], ctx.static["dim"]
    return apply("index_add", [zeros_under(x, g), ctx.inputs[1], g], {"dim": dim, "size": x.shape[dim]})


def zeros_under(like, g):
    """Zeros placed as `like` (a tensor whose gradient index_add builds from g), partial on the mesh
    axes where `like` is broadcast and g partial: g's partial rows added into them stay partial
    with nothing converted, to be reduced with the other gradients (a bucket's all_reduce), where
    broadcast zeros would have the planner reduce g first, out of the bucket."""
    if like._placement is None or g._placement is None or like.placement != g.placement:
        return zeros_like(like)
    return zeros_like(like, sbp=tuple(P if w is B and s is P else w for w, s in zip(like.sbp, g.sbp)))


def _index_add_meta(s, dt, st):
    rules.check_index_dtype("index_add", dt[1])
    return [tuple(s[0])], [dt[0]]


def _index_add_rows(s, o, st):
    dim = st["dim"]
    rows = [((B, B, B), (B,)), ((P, B, P), (P,)), ((S(dim), B, B), (S(dim),))]
    # x and src split alike on another dim: each piece adds its own rows (index_select's backward on a batch split)
    rows += [((S(d), B, S(d)), (S(d),)) for d in range(len(s[0])) if d != dim]
    # the indices and src's slices split alike: each rank adds its own slices, the sum of the pieces
    # is every add (an embedding's gradient on a batch split: no gather of the indices)
    rows.append(((P, S(0), S(dim)), (P,)))
    return rows


@op("index_add", _index_add_rows,
    lambda ctx, g: (g, None, index_select(g, ctx.static["dim"], ctx.inputs[1])),  # linear: x gets g, src its slices
    meta=_index_add_meta, takes_offsets=True)
def _index_add_kernel(x, index, src, dim=0, size=None, offsets=None):
    """x with src's slices added at the indices along dim; a piece of x split along dim (from
    offsets[0][dim]) adds only the indices inside it."""
    out = x.copy()
    start = offsets[0][dim] if offsets else 0
    local, inside = _in_slice("index_add", index, x.shape[dim] if size is None else size, start, x.shape[dim])
    src = np.moveaxis(src, dim, 0)
    if dim == 0 and c_floats(out, src) and inside is None:  # one C++ pass, rows in order (np.add.at's bits)
        _native.index_add_rows(out, np.ascontiguousarray(local, np.int64), np.ascontiguousarray(src))
    elif inside is None:
        add_at(np.moveaxis(out, dim, 0), local, src)
    else:
        add_at(np.moveaxis(out, dim, 0), local[inside], src[inside])
    return out


def index_select(input, dim, index):
    """The slices of input at `index` (1-D, int) along dim (OneFlow/PyTorch's order; Paddle's
    index_select(x, index, axis) by keyword)."""
    input, index = tensors(input, index)
    if index.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector (got shape {tuple(index.shape)})")
    index = index.reshape(1) if index.ndim == 0 else index  # a 0-d index selects one slice, kept (PyTorch)
    rules.check_index_dtype("index_select", index.dtype)
    dim = wrap_dim(dim, input.ndim)
    return apply("index_select", [input, index], {"dim": dim})


def _index_sample_backward(ctx, g):
    """As gather along dim 1: g is added into zeros like x at the sampled columns (repeats add
    up); dims that the kernel broadcast (a size-1 index or x) are expanded, then summed back."""
    from .reduction import sum as sum_
    from .shape import expand
    x, index = ctx.inputs
    if not x.requires_grad:
        return None, None
    wide = tuple(x.shape[1] if d == 1 else n for d, n in enumerate(g.shape))
    base = zeros_like(x) if wide == tuple(x.shape) else expand(zeros_like(x), wide)
    if tuple(index.shape) != tuple(g.shape):
        index = expand(index, tuple(g.shape))
    gx = scatter_add_(base, 1, index, g)
    summed = tuple(d for d in range(x.ndim) if x.shape[d] != wide[d])
    return (sum_(gx, summed, keepdim=True) if summed else gx), None


@op("index_sample", lambda s, o, st: [((B, B), (B,))] + ([((S(0), S(0)), (S(0),))] if s[0][0] == s[1][0] else []),
    _index_sample_backward,
    meta=_along_axis_meta("index_sample", dim_key=None))
def _index_sample(x, index):
    return np.take_along_axis(x, index, axis=1)


def index_sample(input, index):
    """Paddle's index_sample: out[i][j] = x[i][index[i][j]]; rows split alike stay split."""
    return apply("index_sample", tensors(input, index))
