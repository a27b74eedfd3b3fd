"""Indexing, sorting and selection. Ops independent along some dims keep those dims' splits;
ops whose output size depends on the data (nonzero, masked_select, unique) run on B inputs.

Every op here reads values to find positions, so each declares its output shapes with a meta
(registry.py): shape inference never runs a kernel on made-up indices."""
import builtins

import numpy as np

from ..backends.devices import add_at, array_module
from . import rules
from ._front import apply, tensors
from .reduction import return_type
from .registry import op
from .shape import _rows
from ..creation import zeros, zeros_like

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
    a split dim every rank raises alike, before any collective), as PyTorch."""
    if index.size and (int(index.min()) < 0 or int(index.max()) >= size):
        raise IndexError(f"{name}: index out of range: values in [{int(index.min())}, {int(index.max())}] for a dim "
                         f"of size {size}")


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
    dim = dim % input.ndim
    return apply("gather", [input, index], {"dim": dim, "size": input.shape[dim]})


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
    dim = dim % input.ndim
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
    return apply("scatter", [input, index, src], {"dim": dim % input.ndim})


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
    return apply("index_add", [zeros_like(x), ctx.inputs[1], g], {"dim": dim, "size": x.shape[dim]})


def _index_add_meta(s, dt, st):
    rules.check_index_dtype("index_add", dt[1])
    return [tuple(s[0])], [dt[0]]


@op("index_add", lambda s, o, st: [((B, B, B), (B,)), ((P, B, P), (P,)), ((S(st["dim"]), B, B), (S(st["dim"]),))],
    meta=_index_add_meta, takes_offsets=True)
def _index_add_kernel(x, index, src, dim=0, size=None, offsets=None):
    """x with src's slices added at the indices along dim; a piece of x split along dim (from
    offsets[0][dim]) adds only the indices inside it."""
    out = x.copy()
    start = offsets[0][dim] if offsets else 0
    local, inside = _in_slice("index_add", index, x.shape[dim] if size is None else size, start, x.shape[dim])
    src = np.moveaxis(src, dim, 0)
    if inside is None:
        add_at(np.moveaxis(out, dim, 0), local, src)
    else:
        add_at(np.moveaxis(out, dim, 0), local[inside], src[inside])
    return out


def index_select(input, dim, index):
    """The slices of input at `index` (1-D, int) along dim (OneFlow/PyTorch's order; Paddle's
    index_select(x, index, axis) by keyword)."""
    input, index = tensors(input, index)
    dim = dim % input.ndim
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


def index_sample(x, index):
    """Paddle's index_sample: out[i][j] = x[i][index[i][j]]; rows split alike stay split."""
    return apply("index_sample", tensors(x, index))


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


def gather_nd(x, index):
    """Paddle's gather_nd: out[i..] = x[index[i..]] (the last dim of index addresses x)."""
    return apply("gather_nd", tensors(x, index))


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


def scatter_nd_add(x, index, updates):
    """A copy of x with updates added at the positions index addresses."""
    return apply("scatter_nd_add", tensors(x, index, updates))


def scatter_nd(index, updates, shape):
    """Zeros of `shape` with updates added at the positions index addresses."""
    index, updates = tensors(index, updates)
    if updates.is_global:
        base = zeros(shape, dtype=updates.dtype, placement=updates.placement,
                     sbp=(B,) * updates.placement.ndim)
    else:
        base = zeros(shape, dtype=updates.dtype)
    return scatter_nd_add(base, index, updates)


def _data_dependent(backward=None):
    """An op whose output size depends on the values: the dispatcher boxes its inputs to B and
    reads its output shape from each call's result, on every rank (never from its cache)."""
    def register(kernel):
        return op(kernel.__name__.lstrip("_"), rules.broadcast_only, backward, data_dependent=True)(kernel)
    return register


def _masked_select_backward(ctx, g):
    """The gradient goes back to the selected positions: scatter_nd_add into zeros like x."""
    from .shape import expand
    x, mask = ctx.inputs
    where = nonzero(expand(mask, x.shape))
    return scatter_nd_add(zeros_like(x), where, g), None


@_data_dependent(_masked_select_backward)
def _masked_select(x, mask):
    return x[np.broadcast_to(mask, x.shape)]


@_data_dependent()
def _nonzero(x):
    return np.stack(np.nonzero(x), axis=1).astype(np.int64)


@_data_dependent()
def _unique(x, return_inverse=False, return_counts=False, dim=None):
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
    out = (values,)
    if return_inverse:
        out += (inverse.reshape(x.shape if dim is None else (x.shape[dim],)).astype(np.int64),)
    if return_counts:
        out += (counts.astype(np.int64),)
    return out


def masked_select(input, mask):
    """The elements of x where mask holds, as a 1-D tensor. Data-dependent size: the inputs
    are gathered to broadcast first."""
    return apply("masked_select", tensors(input, mask))


def nonzero(input, *, as_tuple=False):
    """Indices (n, ndim) of the non-zero elements; as_tuple=True: one 1-D tensor a dim (as
    numpy's nonzero). Data-dependent size: gathered to broadcast."""
    (input,) = tensors(input)
    found = apply("nonzero", [input])
    if not as_tuple:
        return found
    from .shape import reshape
    return tuple(reshape(found[:, d], -1) for d in range(builtins.max(input.ndim, 1)))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values, sorted (always, as PyTorch on CPU), with the index of each element's
    value (return_inverse) and each value's count (return_counts); dim: distinct slices along it.
    Data-dependent size: gathered to broadcast."""
    (input,) = tensors(input)
    static = {"return_inverse": bool(return_inverse), "return_counts": bool(return_counts),
              "dim": None if dim is None else dim % input.ndim}
    out = apply("unique", [input], static, multi=True)
    return out[0] if len(out) == 1 else tuple(out)


def _sort_backward(ctx, g, g_idx=None):
    if g is None:
        return (None,)
    return scatter_add_(zeros_like(ctx.inputs[0]), ctx.static["dim"], ctx.outputs[1], g)


def _sort_meta(s, dt, st):
    if not s[0]:
        raise ValueError("sort: the input must have at least 1 dim")
    return [tuple(s[0]), tuple(s[0])], [dt[0], np.int64]


@op("sort", _other_dims(), _sort_backward, meta=_sort_meta)
def _sort(x, dim=-1, descending=False):
    idx = np.argsort(-x if descending else x, axis=dim, kind="stable")
    return np.take_along_axis(x, idx, axis=dim), idx.astype(np.int64)


def sort(input, dim=-1, descending=False, *, stable=False):
    """The named tuple (values, indices) sorted along dim; independent along the other dims.
    Always stable (stable= is PyTorch's keyword; equal values keep their order)."""
    (input,) = tensors(input)
    dim = dim % input.ndim
    return return_type("sort")(*apply("sort", [input], {"dim": dim, "descending": descending}, multi=True))


def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort input along dim (stable)."""
    return sort(input, dim, descending)[1]


def _topk_meta(s, dt, st):
    x, k = tuple(s[0]), st["k"]
    if not x:
        raise ValueError("topk: the input must have at least 1 dim")
    dim = st["dim"] % len(x)
    if not 0 <= k <= x[dim]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {x[dim]}")
    shape = x[:dim] + (k,) + x[dim + 1:]
    return [shape, shape], [dt[0], np.int64]


@op("topk", _other_dims(), lambda ctx, g, gi=None: _sort_backward(ctx, g), meta=_topk_meta)
def _topk(x, k=1, dim=-1, largest=True):
    idx = np.argsort(-x if largest else x, axis=dim, kind="stable")
    idx = idx[(slice(None),) * (dim % x.ndim) + (slice(0, k),)]
    return np.take_along_axis(x, idx, axis=dim), idx.astype(np.int64)


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The named tuple (values, indices) of the k largest (or smallest) along dim, in order."""
    (input,) = tensors(input)
    dim = dim % input.ndim
    if not 0 <= k <= input.shape[dim]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {input.shape[dim]}")
    return return_type("topk")(*apply("topk", [input], {"k": k, "dim": dim, "largest": largest}, multi=True))


@op("histogram", lambda s, o, st: [((B,), (B,))] + ([((S(d),), (P,)) for d in range(len(s[0]))]
                                                    if st["min"] < st["max"] else []),
    meta=lambda s, dt, st: ([(int(st["bins"]),)], [np.int64]))
def _histogram(x, bins=100, min=0.0, max=0.0):
    lo, hi = (min, max) if min < max else ((float(x.min()), float(x.max())) if x.size else (0.0, 0.0))
    return np.histogram(x, bins=bins, range=(lo, hi))[0].astype(np.int64)


def histogram(input, bins=100, min=0, max=0):  # noqa: A002
    """Counts in `bins` equal bins over [min, max] (the data's range when min == max == 0);
    with an explicit range the counts of split pieces add up (S -> P)."""
    return apply("histogram", tensors(input), {"bins": bins, "min": float(min), "max": float(max)})


@op("shard_index", rules.elementwise(), meta=rules.like(0))
def _shard_index(x, index_num=1, nshards=1, shard_id=0, ignore_value=-1):
    size = (index_num + nshards - 1) // nshards
    return np.where(x // size == shard_id, x % size, ignore_value).astype(x.dtype)


def shard_index(input, index_num, nshards, shard_id, ignore_value=-1):
    """Paddle's shard_index: labels of shard `shard_id` become local indices, others ignore_value."""
    return apply("shard_index", tensors(input), {"index_num": index_num, "nshards": nshards, "shard_id": shard_id,
                                             "ignore_value": ignore_value})


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
    from .elementwise import equal, where
    from .shape import concat, reshape
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
            gk = concat([gk, getitem(zeros_like(x), slice(n, None))], 0)
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


def _getitem_rows(s, o, st):
    if st["n_index"]:  # index tensors: every rank takes what it needs from the whole value
        return [((B,) * len(s), (B,))]
    return _rows(st["kept"])


def _getitem_backward(ctx, g):
    """g added into zeros like x at the positions the key selected (setitem_add; with index
    tensors, repeated positions add up)."""
    x, *index = ctx.inputs
    if not x.requires_grad:
        return (None,) * len(ctx.inputs)
    return (apply("setitem_add", [zeros_like(x), g, *index], {"key": ctx.static["key"]}),) + (None,) * len(index)


def _decode(key, arrays):
    out, it = [], iter(arrays)
    for k in key:
        if k == "tensor":
            out.append(next(it))
        elif isinstance(k, tuple) and k and k[0] == "slice":
            out.append(slice(*k[1:]))
        elif k == "ellipsis":
            out.append(Ellipsis)
        else:
            out.append(k)
    return tuple(out)


def _getitem_meta(s, dt, st):
    for d in dt[1:]:
        rules.check_index_dtype("getitem", d, "index tensor")
    return [index_shape(s[0], st["key"], s[1:])], [dt[0]]


def index_shape(shape, key, index_shapes=()):
    """The shape of x[key] by numpy's rules, for an encoded key (ints, ("slice", a, b, c), None,
    "ellipsis", "tensor": an integer index tensor whose shape is next in index_shapes). Ints
    and index tensors are advanced indices: broadcast together, they go where the first of
    them stood when they are adjacent, else first."""
    shape = tuple(shape)
    key = list(key)
    consumed = sum(1 for k in key if k is not None and k != "ellipsis")
    if key.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > len(shape):
        raise IndexError(f"too many indices for a tensor of {len(shape)} dims: {consumed} were indexed")
    fill = [("slice", None, None, None)] * (len(shape) - consumed)
    if "ellipsis" in key:
        at = key.index("ellipsis")
        key[at:at + 1] = fill
    else:
        key += fill
    index_shapes = iter(index_shapes)
    out, advanced, positions, d = [], [], [], 0
    for pos, k in enumerate(key):
        if k is None:
            out.append(1)
            continue
        n = shape[d]
        if k == "tensor" or isinstance(k, int):
            if isinstance(k, int) and not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dim {d} with size {n}")
            if not advanced:
                out.append("advanced")
            advanced.append(tuple(next(index_shapes)) if k == "tensor" else ())
            positions.append(pos)
        else:
            out.append(len(range(*slice(*k[1:]).indices(n))))
        d += 1
    if not advanced:
        return tuple(out)
    try:
        joint = rules.broadcast_shape(advanced)
    except ValueError:
        raise IndexError(f"shape mismatch: index tensors of shapes {advanced} cannot be broadcast together") from None
    at = out.index("advanced")
    rest = out[:at] + out[at + 1:]
    if positions != list(range(positions[0], positions[0] + len(positions))):
        return joint + tuple(rest)
    return tuple(rest[:at]) + joint + tuple(rest[at:])


@op("getitem", _getitem_rows, _getitem_backward, meta=_getitem_meta)
def _getitem(x, *index, key=(), kept=(), n_index=0):
    return array_module(x).asarray(x[_decode(key, index)])


@op("setitem_add", lambda s, o, st: [((B,) * len(s), (B,)), ((P, P) + (B,) * (len(s) - 2), (P,))],
    meta=rules.like(0))
def _setitem_add(x, update, *index, key=()):
    """A copy of x with update added at x[key] (key encoded as getitem's; its index tensors
    follow update). With index tensors, the positions are read from an array of x's flat
    positions indexed alike, so repeated positions add up and bool masks work as in numpy."""
    out = x.copy()
    if not index:
        add_at(out, _decode(key, ()), update)
        return out
    xp = array_module(x)
    where = xp.arange(out.size).reshape(out.shape)[_decode(key, index)]
    flat = out.reshape(-1)
    add_at(flat, where.reshape(-1), xp.broadcast_to(update, where.shape).reshape(-1))
    return flat.reshape(out.shape)


def getitem(x, key):
    """x[key] for ints, slices, None, Ellipsis and index tensors (numpy semantics). Dims kept
    whole keep their splits; index tensors make the op run on broadcast inputs. On a global
    tensor a bool index tensor (a mask, whose selection size depends on its values) becomes the
    integer index tensors of its nonzero positions (a data-dependent op), so getitem's output
    shape follows from shapes alone."""
    from ..tensor import Tensor
    key = key if isinstance(key, tuple) else (key,)
    encoded, index_tensors = [], []
    for k in key:
        if isinstance(k, (Tensor, list, np.ndarray, bool, np.bool_)):
            encoded.append("tensor")
            if isinstance(k, (bool, np.bool_, list)):
                k = np.asarray(k)
                k = k.astype(np.int64) if k.size == 0 and k.dtype.kind == "f" else k  # x[[]]: no positions
            index_tensors.append(k)
        elif isinstance(k, slice):
            encoded.append(("slice", k.start, k.stop, k.step))
        elif k is Ellipsis:
            encoded.append("ellipsis")
        elif k is None or isinstance(k, (int, np.integer)):
            encoded.append(None if k is None else int(k))
        else:
            raise TypeError(f"unsupported index {k!r}")
    (x,) = tensors(x)
    index_tensors = tensors(x, *index_tensors)[1:] if index_tensors else []
    if x.is_global and any(t.dtype.name == "bool" for t in index_tensors):
        encoded, index_tensors = _masks_as_positions(x, encoded, index_tensors)
    kept = _kept_pairs(x.shape, encoded) if not index_tensors else ()
    return apply("getitem", [x, *index_tensors],
                 {"key": tuple(encoded), "kept": kept, "n_index": len(index_tensors)})


def _masks_as_positions(x, encoded, index_tensors):
    """The key with each bool index tensor (k dims) replaced by k integer index tensors: the
    columns of its nonzero positions, as numpy reads a mask (after checking it fits x there)."""
    consumed = [t.ndim if t.dtype.name == "bool" else 1 for t in index_tensors]
    widths, it = [], iter(consumed)
    for k in encoded:
        widths.append(next(it) if k == "tensor" else (0 if k is None or k == "ellipsis" else 1))
    after_ellipsis = x.ndim - sum(widths)
    new_key, new_tensors, d, it = [], [], 0, iter(index_tensors)
    for k, width in zip(encoded, widths):
        if k == "ellipsis":
            d += after_ellipsis
        if k != "tensor":
            new_key.append(k)
            d += width
            continue
        t = next(it)
        if t.dtype.name != "bool":
            new_key.append(k)
            new_tensors.append(t)
            d += 1
            continue
        if t.ndim == 0:
            raise IndexError("a 0-d bool index (x[True]) is not supported on a global tensor; use unsqueeze and "
                             "masked_select")
        if tuple(x.shape[d:d + t.ndim]) != tuple(t.shape):
            raise IndexError(f"the bool index of shape {tuple(t.shape)} does not match the indexed dims "
                             f"{tuple(x.shape[d:d + t.ndim])} of the tensor of shape {tuple(x.shape)} (from dim {d})")
        where = nonzero(t)
        for j in range(t.ndim):
            new_key.append("tensor")
            new_tensors.append(getitem(where, (slice(None), j)))
        d += t.ndim
    return new_key, new_tensors


def _kept_pairs(shape, key):
    """(input dim, output dim) of dims taken whole (slice(None)) by a basic index."""
    if "ellipsis" in key:
        at = key.index("ellipsis")
        fill = len(shape) - sum(1 for k in key if k not in (None, "ellipsis"))
        key = key[:at] + [("slice", None, None, None)] * fill + key[at + 1:]
    key = list(key) + [("slice", None, None, None)] * (len(shape) - sum(1 for k in key if k is not None))
    pairs, d_in, d_out = [], 0, 0
    for k in key:
        if k is None:
            d_out += 1
        elif isinstance(k, int):
            d_in += 1
        else:
            if k == ("slice", None, None, None):
                pairs.append((d_in, d_out))
            d_in += 1
            d_out += 1
    return tuple(pairs)
