"""Indexing, sorting and selection. Ops independent along some dims keep those dims' splits;
ops whose output size depends on the data (nonzero, masked_select, unique) run on B inputs."""
import numpy as np

from ..backends.devices import array_module
from . import rules
from ._front import apply, tensors
from .registry import op
from .shape import _rows

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


def _gather_backward(ctx, g):
    from .creation import zeros_like
    x, index = ctx.inputs
    return scatter_add_(zeros_like(x), ctx.static["dim"], index, g), None


@op("gather", _other_dims(), _gather_backward)
def _gather(x, index, dim=0):
    return np.take_along_axis(x, index, axis=dim)


def gather(x, dim, index):
    """out[i][j] = x[i][index[i][j]] along dim (PyTorch's gather)."""
    x, index = tensors(x, index)
    return apply("gather", [x, index], {"dim": dim % x.ndim})


@op("scatter_add", _other_dims(), lambda ctx, g: (g, None, gather(g, ctx.static["dim"], ctx.inputs[1])))
def _scatter_add(x, index, src, dim=0):
    out = x.copy()
    idx = _open_grid(array_module(index), index.shape)
    idx[dim] = index
    np.add.at(out, tuple(idx), src[tuple(slice(0, n) for n in index.shape)])
    return out


def _open_grid(xp, shape):
    """np.indices(shape, sparse=True) on the array's device: one arange per dim, broadcastable."""
    return [xp.arange(n).reshape([n if a == d else 1 for a in range(len(shape))]) for d, n in enumerate(shape)]


def scatter_add_(x, dim, index, src):
    return apply("scatter_add", tensors(x, index, src), {"dim": dim % x.ndim})


@op("scatter", _other_dims(), lambda ctx, g: (scatter(g, ctx.static["dim"], ctx.inputs[1], 0.0), None,
                                               gather(g, ctx.static["dim"], ctx.inputs[1])))
def _scatter(x, index, src, dim=0):
    out = x.copy()
    np.put_along_axis(out, index, src[tuple(slice(0, n) for n in index.shape)] if np.ndim(src) else src, axis=dim)
    return out


def scatter(x, dim, index, src):
    """A copy of x with out[i][index[i][j]] = src[i][j] along dim (PyTorch's scatter)."""
    x, index, src = tensors(x, index, src)
    return apply("scatter", [x, index, src], {"dim": dim % x.ndim})


def scatter_(x, dim, index, src):
    """In-place scatter: x takes the result and is returned."""
    from .shape import _assign
    return _assign(x, scatter(x._shallow_copy(), dim, index, src))


def _index_select_rows(s, o, st):
    dim = st["dim"]
    rows = [((B, B), (B,)), ((P, B), (P,)), ((B, S(0)), (S(dim),))]
    rows += [((S(d), B), (S(d),)) for d in range(len(s[0])) if d != dim]
    return rows


@op("index_select", _index_select_rows, lambda ctx, g: (_index_add(ctx, g), None))
def _index_select(x, index, dim=0):
    return np.take(x, index, axis=dim)


def _index_add(ctx, g):
    from .creation import zeros_like
    return apply("index_add", [zeros_like(ctx.inputs[0]), ctx.inputs[1], g], {"dim": ctx.static["dim"]})


@op("index_add", lambda s, o, st: [((B, B, B), (B,)), ((P, B, P), (P,))])
def _index_add_kernel(x, index, src, dim=0):
    out = x.copy()
    np.add.at(np.moveaxis(out, dim, 0), index, np.moveaxis(src, dim, 0))
    return out


def index_select(x, index, dim=0, axis=None):
    """The slices of x at `index` (1-D, int) along dim."""
    x, index = tensors(x, index)
    dim = (axis if axis is not None else dim) % x.ndim
    return apply("index_select", [x, index], {"dim": dim})


@op("index_sample", lambda s, o, st: [((B, B), (B,)), ((S(0), S(0)), (S(0),))])
def _index_sample(x, index):
    return np.take_along_axis(x, index, axis=1)


def index_sample(x, index):
    """Paddle's index_sample: out[i][j] = x[i][index[i][j]]; rows split alike stay split."""
    return apply("index_sample", tensors(x, index))


@op("gather_nd", lambda s, o, st: [((B, B), (B,))] + [((B, S(d)), (S(d),)) for d in range(len(s[1]) - 1)])
def _gather_nd(x, index):
    return x[tuple(np.moveaxis(index, -1, 0))] if index.shape[-1] else np.broadcast_to(x, index.shape[:-1] + x.shape)


def gather_nd(x, index):
    """Paddle's gather_nd: out[i..] = x[index[i..]] (the last dim of index addresses x)."""
    return apply("gather_nd", tensors(x, index))


@op("scatter_nd_add", lambda s, o, st: [((B, B, B), (B,)), ((P, B, P), (P,))])
def _scatter_nd_add(x, index, updates):
    out = x.copy()
    np.add.at(out, tuple(np.moveaxis(index, -1, 0)), updates)
    return out


def scatter_nd_add(x, index, updates):
    """A copy of x with updates added at the positions index addresses."""
    return apply("scatter_nd_add", tensors(x, index, updates))


def scatter_nd(index, updates, shape):
    """Zeros of `shape` with updates added at the positions index addresses."""
    from .creation import zeros
    index, updates = tensors(index, updates)
    if updates.is_global:
        base = zeros(shape, dtype=updates.dtype, placement=updates.placement,
                     sbp=(B,) * updates.placement.ndim)
    else:
        base = zeros(shape, dtype=updates.dtype)
    return scatter_nd_add(base, index, updates)


def _data_dependent(kernel):
    return op(kernel.__name__.lstrip("_"), rules.broadcast_only, data_dependent=True)(kernel)


@_data_dependent
def _masked_select(x, mask):
    return x[np.broadcast_to(mask, x.shape)]


@_data_dependent
def _nonzero(x):
    return np.stack(np.nonzero(x), axis=1).astype(np.int64)


@_data_dependent
def _unique(x):
    return np.unique(x)


def _global_result(name, inputs):
    """Run a data-dependent op: inputs are gathered to B, the output size is read afterwards."""
    from ..tensor import Tensor
    inputs = tensors(*inputs)
    if inputs[0].is_local:
        return apply(name, inputs)
    from ..sbp import broadcast
    full = [t.to_global(sbp=(broadcast,) * t.placement.ndim) for t in inputs]
    from . import registry
    local = array_module(full[0]._local).asarray(registry.REGISTRY[name].kernel(*[t._local for t in full]))
    from ..dtype import of_array
    return Tensor(local, local.shape, of_array(local), full[0].placement, full[0].sbp)


def masked_select(x, mask):
    """The elements of x where mask holds, as a 1-D tensor. Data-dependent size: the inputs
    are gathered to broadcast first."""
    return _global_result("masked_select", [x, mask])


def nonzero(x):
    """Indices (n, ndim) of the non-zero elements. Data-dependent size: gathered to broadcast."""
    return _global_result("nonzero", [x])


def unique(x):
    """The sorted distinct values. Data-dependent size: gathered to broadcast."""
    return _global_result("unique", [x])


def _sort_backward(ctx, g, g_idx=None):
    from .creation import zeros_like
    if g is None:
        return (None,)
    return scatter_add_(zeros_like(ctx.inputs[0]), ctx.static["dim"], ctx.outputs[1], g)


@op("sort", _other_dims(), _sort_backward)
def _sort(x, dim=-1, descending=False):
    idx = np.argsort(-x if descending else x, axis=dim, kind="stable")
    return np.take_along_axis(x, idx, axis=dim), idx.astype(np.int64)


def sort(x, dim=-1, descending=False, axis=None):
    """(values, indices) sorted along dim (stable); independent along the other dims."""
    (x,) = tensors(x)
    dim = (axis if axis is not None else dim) % x.ndim
    return tuple(apply("sort", [x], {"dim": dim, "descending": descending}, multi=True))


def argsort(x, dim=-1, descending=False, axis=None):
    return sort(x, dim, descending, axis)[1]


@op("topk", _other_dims(), lambda ctx, g, gi=None: _sort_backward(ctx, g))
def _topk(x, k=1, dim=-1, largest=True):
    idx = np.argsort(-x if largest else x, axis=dim, kind="stable")
    idx = idx[(slice(None),) * (dim % x.ndim) + (slice(0, k),)]
    return np.take_along_axis(x, idx, axis=dim), idx.astype(np.int64)


def topk(x, k, dim=-1, largest=True, sorted=True, axis=None):  # noqa: A002
    """(values, indices) of the k largest (or smallest) along dim, in order."""
    (x,) = tensors(x)
    dim = (axis if axis is not None else dim) % x.ndim
    if not 0 <= k <= x.shape[dim]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {x.shape[dim]}")
    return tuple(apply("topk", [x], {"k": k, "dim": dim, "largest": largest}, multi=True))


@op("histogram", lambda s, o, st: [((B,), (B,))] + ([((S(d),), (P,)) for d in range(len(s[0]))]
                                                    if st["min"] < st["max"] else []))
def _histogram(x, bins=100, min=0.0, max=0.0):
    lo, hi = (min, max) if min < max else ((float(x.min()), float(x.max())) if x.size else (0.0, 0.0))
    return np.histogram(x, bins=bins, range=(lo, hi))[0].astype(np.int64)


def histogram(x, bins=100, min=0, max=0):  # noqa: A002
    """Counts in `bins` equal bins over [min, max] (the data's range when min == max == 0);
    with an explicit range the counts of split pieces add up (S -> P)."""
    return apply("histogram", tensors(x), {"bins": bins, "min": float(min), "max": float(max)})


@op("shard_index", rules.elementwise())
def _shard_index(x, index_num=1, nshards=1, shard_id=0, ignore_value=-1):
    size = (index_num + nshards - 1) // nshards
    return np.where(x // size == shard_id, x % size, ignore_value).astype(x.dtype)


def shard_index(x, index_num, nshards, shard_id, ignore_value=-1):
    """Paddle's shard_index: labels of shard `shard_id` become local indices, others ignore_value."""
    return apply("shard_index", tensors(x), {"index_num": index_num, "nshards": nshards, "shard_id": shard_id,
                                             "ignore_value": ignore_value})


@op("multiplex", lambda s, o, st: [((B,) * len(s), (B,)), ((S(0),) * len(s), (S(0),))])
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
    from .creation import zeros_like
    x = ctx.inputs[0]
    if ctx.static["n_index"]:
        return (None,) * len(ctx.inputs)
    return (apply("setitem_add", [zeros_like(x), g], {"key": ctx.static["key"]}),)


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


@op("getitem", _getitem_rows, _getitem_backward)
def _getitem(x, *index, key=(), kept=(), n_index=0):
    return array_module(x).asarray(x[_decode(key, index)])


@op("setitem_add", lambda s, o, st: [((B, B), (B,)), ((P, P), (P,))])
def _setitem_add(x, update, key=()):
    out = x.copy()
    np.add.at(out, _decode(key, ()), update)
    return out


def getitem(x, key):
    """x[key] for ints, slices, None, Ellipsis and index tensors (numpy semantics). Dims kept
    whole keep their splits; index tensors make the op run on broadcast inputs."""
    from ..tensor import Tensor
    key = key if isinstance(key, tuple) else (key,)
    encoded, index_tensors = [], []
    for k in key:
        if isinstance(k, Tensor) or isinstance(k, (list, np.ndarray)):
            encoded.append("tensor")
            index_tensors.append(k)
        elif isinstance(k, slice):
            encoded.append(("slice", k.start, k.stop, k.step))
        elif k is Ellipsis:
            encoded.append("ellipsis")
        elif k is None or isinstance(k, (int, np.integer)):
            encoded.append(None if k is None else int(k))
        else:
            raise TypeError(f"unsupported index {k!r}")
    kept = _kept_pairs(x.shape, encoded) if not index_tensors else ()
    return apply("getitem", tensors(x, *index_tensors),
                 {"key": tuple(encoded), "kept": kept, "n_index": len(index_tensors)})


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
