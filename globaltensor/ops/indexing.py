"""x[key]: getitem for ints, slices, None, Ellipsis and index tensors, and setitem_add (its backward).

Dims taken whole keep their splits; index tensors make the op run on broadcast inputs; a bool
index on a global tensor becomes the integer positions of its nonzero elements first."""
import numpy as np

from ..backends.devices import add_at, array_module
from ..registry import rules
from ._front import apply, tensors
from .data_dependent import nonzero
from .elementwise import sum_to
from ..registry import op
from .shape import _rows
from ..creation import zeros_like
from ..errors import ArgumentError, IndexRuntimeError, IndexTypeError

B, P, S = rules.B, rules.P, rules.split


def _getitem_rows(s, o, st):
    """Basic keys keep the splits of dims taken whole. With index tensors:
    x B, index B -> B                     every rank takes what it needs from the whole value
    x B, one index S(k) -> S(start + k)   each rank takes its own index rows (a batch split)
    (no P row: the planner would turn a split x partial for free and leave the output partial)"""
    if not st["n_index"]:
        return _rows(st["kept"])
    rows = [((B,) * len(s), (B,))]
    if st["n_index"] == 1:
        start = _index_layout(s[0], st["key"], s[1:])[1]
        rows += [((B, S(k)), (S(start + k),)) for k in range(len(s[1]))]
    return rows


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
    return _index_layout(shape, key, index_shapes)[0]


def _index_layout(shape, key, index_shapes=()):
    """(x[key]'s shape, the output dim where the advanced indices' joint dims start, or None)."""
    shape = tuple(shape)
    key = list(key)
    consumed = sum(1 for k in key if k is not None and k != "ellipsis")
    if key.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > len(shape):
        if not shape:
            raise IndexRuntimeError("select() cannot be applied to a 0-dim tensor. (an index into a 0-dim tensor)")
        raise IndexError(f"Too many indices for tensor of dimension {len(shape)} ({consumed} were indexed)")
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
                raise IndexError(f"Index out of range (expected to be in range of [{-n}, {n - 1}], but got {k}) "
                                 f"(index {k} is out of bounds for dim {d} with size {n})")
            if not advanced:
                out.append("advanced")
            advanced.append(tuple(next(index_shapes)) if k == "tensor" else ())
            positions.append(pos)
        else:
            out.append(len(range(*slice(*k[1:]).indices(n))))
        d += 1
    if not advanced:
        return tuple(out), None
    try:
        joint = rules.broadcast_shape(advanced)
    except ValueError:
        raise IndexError(f"shape mismatch: index tensors of shapes {advanced} cannot be broadcast together") from None
    at = out.index("advanced")
    rest = out[:at] + out[at + 1:]
    if positions != list(range(positions[0], positions[0] + len(positions))):
        return joint + tuple(rest), 0
    return tuple(rest[:at]) + joint + tuple(rest[at:]), at


@op("getitem", _getitem_rows, _getitem_backward, meta=_getitem_meta)
def _getitem(x, *index, key=(), kept=(), n_index=0):
    return array_module(x).asarray(x[_decode(key, index)])


def _setitem_add_backward(ctx, g):
    """out = x + update placed at x[key]: d/dx is g, d/dupdate is g[key] (summed back to update's
    shape where it was broadcast); both are registered ops, so derivatives of any order follow."""
    x, update, *index = ctx.inputs
    key = ctx.static["key"]
    dupdate = None
    if update.requires_grad:
        kept = _kept_pairs(g.shape, key) if not index else ()
        dupdate = sum_to(apply("getitem", [g, *index], {"key": key, "kept": kept, "n_index": len(index)}),
                         update.shape)
    return (g if x.requires_grad else None, dupdate) + (None,) * len(index)


def _setitem_add_rows(s, o, st):
    """x B, update B (, index B) -> B; x P, update P -> P (adding is linear); with one index tensor
    split on k and update the selection's shape split alike: x P, update S(start + k), index S(k)
    -> P (each rank adds its own rows into its summand: getitem's backward on a batch split)."""
    rows = [((B,) * len(s), (B,)), ((P, P) + (B,) * (len(s) - 2), (P,))]
    if len(s) == 3:
        shape, start = _index_layout(s[0], st["key"], s[2:])
        if start is not None and tuple(s[1]) == shape:
            rows += [((P, S(start + k), S(k)), (P,)) for k in range(len(s[2]))]
    return rows


@op("setitem_add", _setitem_add_rows, _setitem_add_backward, meta=rules.like(0))
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


def _slice_bounds(k):
    """A slice's (start, stop, step), checked as OneFlow does (RuntimeError; PyTorch: ValueError for
    a zero step, TypeError for a bound that is not an int: the classes raised subclass both)."""
    for b in (k.start, k.stop, k.step):
        if isinstance(b, (float, np.floating)):
            raise IndexTypeError(f"slice indices must be integers or None or have an __index__ method, got {k}")
    if k.step is not None and int(k.step) == 0:
        raise ArgumentError(f"slice step cannot be zero ({k})")
    return k.start, k.stop, k.step


def getitem(x, key):
    """x[key] for ints, slices, None, Ellipsis and index tensors (numpy semantics). Dims kept
    whole keep their splits; index tensors make the op run on broadcast inputs. On a global
    tensor a bool index tensor (a mask, whose selection size depends on its values) becomes the
    integer index tensors of its nonzero positions (a data-dependent op), so getitem's output
    shape follows from shapes alone."""
    from ..tensor import Tensor
    key = key if isinstance(key, tuple) else (key,)
    if (split := ints_first(key)) is not None:
        return getitem(getitem(x, split[0]), split[1])
    encoded, index_tensors = [], []
    for k in key:
        if isinstance(k, (Tensor, list, np.ndarray, bool, np.bool_)):
            encoded.append("tensor")
            if isinstance(k, (bool, np.bool_, list)):
                k = np.asarray(k)
                k = k.astype(np.int64) if k.size == 0 and k.dtype.kind == "f" else k  # x[[]]: no positions
            index_tensors.append(k)
        elif isinstance(k, slice):
            encoded.append(("slice", *_slice_bounds(k)))
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
    if not any(t.dtype.name == "bool" for t in index_tensors):  # local kernels skip the meta: its checks here
        index_shape(x.shape, encoded, [t.shape for t in index_tensors])
    kept = _kept_pairs(x.shape, encoded) if not index_tensors else ()
    return apply("getitem", [x, *index_tensors],
                 {"key": tuple(encoded), "kept": kept, "n_index": len(index_tensors)})


def _is_int(k):
    """An int index: a Python or numpy int, or a 0-d integer tensor or array (PyTorch reads those as ints)."""
    if isinstance(k, (int, np.integer)):
        return not isinstance(k, (bool, np.bool_))
    dtype = getattr(k, "dtype", None)
    return getattr(k, "ndim", None) == 0 and dtype is not None and dtype.name.startswith(("int", "uint"))


def ints_first(key):
    """(ints, rest) for a key that mixes ints with index tensors, lists or arrays, else None.
    PyTorch, OneFlow and Paddle take the ints as basic indices first (x[1, :, idx] is x[1][:, idx],
    of shape (3, *idx.shape) for x of shape (2, 3, 7)), where numpy counts them among the advanced
    indices ((*idx.shape, 3)). `ints` keeps the ints and Ellipsis and takes every other dim whole."""
    arrays = [k for k in key if not (k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k))]
    if not arrays or not any(_is_int(k) for k in key):
        return None
    ints = []
    for k in key:
        if _is_int(k) or k is Ellipsis:
            ints.append(k)
        elif k is not None and not isinstance(k, (bool, np.bool_)):
            ints += [slice(None)] * _dims_taken(k)
    return tuple(ints), tuple(k for k in key if not _is_int(k))


def _dims_taken(k):
    """The dims of x an index array takes: a bool mask as many as it has, an integer index one."""
    dtype = getattr(k, "dtype", None)
    name = dtype.name if dtype is not None else np.asarray(k).dtype.name
    return (k.ndim if hasattr(k, "ndim") else np.ndim(k)) if name == "bool" else 1


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
