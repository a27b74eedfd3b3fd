"""Views: reshape, squeeze, permute, expand (the rearrangements that copy, tile, flip and roll, are rearrange.py).

A dim that passes through unchanged keeps its split (S(d) -> S(d')); all of them are linear, so
P -> P. Each declares its output shape with a meta (from the global shapes and the static
arguments; registry.py)."""
import builtins
import math

import numpy as np

from ..errors import ShapeError, dim_out_of_range, wrap_dim
from ..registry import rules
from . import _front
from ._front import apply, dims_arg, tensors
from ..registry import op

B, P, S = rules.B, rules.P, rules.split


def _rows(pairs, n_in=1, n_out=1, linear=True):
    """B row, S(in) -> S(out) for each kept dim pair, and P -> P."""
    rows = [((B,) * n_in, (B,) * n_out)]
    rows += [((S(i),) * n_in, (S(o),) * n_out) for i, o in pairs]
    if linear:
        rows.append(((P,) * n_in, (P,) * n_out))
    return rows


def _meta(shape_fn, dtype_fn=None):
    """A meta from shape_fn(in_shapes, static) -> one output shape; the first input's dtype (or
    dtype_fn(in_dtypes))."""
    def meta(s, dt, st):
        return [tuple(shape_fn(s, st))], [dtype_fn(dt) if dtype_fn else dt[0]]
    return meta


def _same_prefix_pairs(in_shape, out_shape):
    """Dims d whose size and every size before them agree: splitting them is the same cut."""
    pairs = []
    for d in range(min(len(in_shape), len(out_shape))):
        if in_shape[: d + 1] != out_shape[: d + 1]:
            break
        pairs.append((d, d))
    return pairs


def _same_suffix_pairs(in_shape, out_shape, keep):
    """Dims whose size and every size after them agree (past the `keep` prefix dims): splitting
    them is the same cut too (the dims before merge or part alike on every piece)."""
    pairs = []
    for k in range(1, min(len(in_shape), len(out_shape)) - keep + 1):
        if in_shape[-k:] != out_shape[-k:]:
            break
        pairs.append((len(in_shape) - k, len(out_shape) - k))
    return pairs


def _reshape_pairs(in_shape, out_shape):
    prefix = _same_prefix_pairs(in_shape, out_shape)
    return prefix, _same_suffix_pairs(in_shape, out_shape, len(prefix))


def _reshape_shape(s, st):
    shape = tuple(st["shape"])
    if math.prod(shape) != math.prod(s[0]):
        raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {math.prod(s[0])}: cannot reshape a "
                         f"tensor of shape {tuple(s[0])} into shape {shape}")
    return shape


def _group_pairs(in_shape, out_shape, ranks):
    """OneFlow's reshape rule: walking from the last dims (size-1 dims skipped), wherever the
    trailing products agree the next dims start a group on both sides; splitting the two starts
    cuts the same elements when their sizes agree or both divide evenly over `ranks`."""
    if math.prod(in_shape) == 0:
        return []
    ins, outs = [d for d, n in enumerate(in_shape) if n != 1], [d for d, n in enumerate(out_shape) if n != 1]
    i, o, pairs = len(ins) - 1, len(outs) - 1, []
    count_in, count_out = (in_shape[ins[i]] if ins else 1), (out_shape[outs[o]] if outs else 1)
    while i >= 0 and o >= 0:
        step_in, step_out = count_in <= count_out, count_out <= count_in
        if step_in and step_out:
            a, b = in_shape[ins[i]], out_shape[outs[o]]
            if a == b or (a % ranks == 0 and b % ranks == 0):
                pairs.append((ins[i], outs[o]))
        if step_in:
            i -= 1
            count_in *= in_shape[ins[i]] if i >= 0 else 1
        if step_out:
            o -= 1
            count_out *= out_shape[outs[o]] if o >= 0 else 1
    return pairs


def _split_pairs(in_shape, out_shape, ranks):
    """(in dim, out dim) whose splits are the same cut: equal sizes from the start or the end,
    and OneFlow's group starts (a global fact: shapes and the number of ranks)."""
    prefix, suffix = _reshape_pairs(in_shape, out_shape)
    found = set(prefix) | set(suffix) | set(_group_pairs(in_shape, out_shape, ranks))
    taken, pairs = set(), []
    for i, o in sorted(found):
        if i not in taken:  # one out dim for each in dim
            taken.add(i)
            pairs.append((i, o))
    return tuple(pairs)


def _reshape_rows(s, o, st):
    """B; S(i) -> S(o) for the dims whose splits cut the same elements (static pairs); P -> P."""
    return _rows(st.get("pairs", ()))


@op("reshape", _reshape_rows, lambda ctx, g: reshape(g, ctx.inputs[0].shape), meta=_meta(_reshape_shape))
def _reshape(x, shape=(), pairs=(), in_shape=()):
    """Paired dims come from the piece (a split dim holds its share of the out dim); the others
    are never split and keep their global sizes."""
    local = list(shape)
    for i, o in pairs:
        if x.shape[i] != in_shape[i]:
            local[o] = x.shape[i] if in_shape[i] == shape[o] else shape[o] * x.shape[i] // in_shape[i]
    return np.reshape(x, tuple(local))


def _shape_arg(shape, numel):
    shape = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else list(shape)
    asked = tuple(shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"only one dimension can be inferred (shape {asked} has several -1)")
    if any(s < -1 for s in shape):
        raise ShapeError(f"Invalid shape dimension {min(shape)} (shape {asked}): sizes are >= 0, or -1 once")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if not known or numel % known:
            raise ShapeError(f"shape '{list(asked)}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    if math.prod(shape) != numel:
        raise ShapeError(f"shape '{list(asked)}' is invalid for input of size {numel}: cannot reshape a tensor of "
                         f"{numel} elements into shape {asked}")
    return tuple(int(s) for s in shape)


_reshapes = {}  # (input shape, the shape asked, ranks or 0) -> (shape, pairs): global facts only, bounded


def _reshape_static(in_shape, asked, ranks):
    """(the output shape, the split pairs or None when local) for a reshape of in_shape to the
    shape asked, kept when the sizes are plain ints (a model reshapes alike every step)."""
    sizes = asked[0] if len(asked) == 1 and isinstance(asked[0], (list, tuple)) else asked
    key = (in_shape, tuple(sizes), ranks) if all(type(s) is int for s in sizes) else None
    found = None if key is None else _reshapes.get(key)
    if found is None:
        shape = _shape_arg(asked, math.prod(in_shape))
        found = (shape, _split_pairs(in_shape, shape, ranks) if ranks else None)
        if key is not None and len(_reshapes) < 4096:
            _reshapes[key] = found
    return found


def reshape(input, *shape):
    """The same values in another shape (C order); a split survives when its dim and the dims
    before it keep their sizes."""
    (input,) = tensors(input)
    in_shape = tuple(input._global_shape)
    placement = input._placement
    shape, pairs = _reshape_static(in_shape, shape, 0 if placement is None else placement.size)
    if shape == in_shape:
        return input
    if placement is None:
        return apply("reshape", [input], {"shape": shape})
    # a global fact (shapes, the number of ranks): every rank decides alike
    return apply("reshape", [input], {"shape": shape, "pairs": pairs, "in_shape": in_shape})


def reshape_(input, *shape):
    """In-place reshape: x takes the new shape and is returned."""
    return _assign(input, reshape(input._shallow_copy(), *shape))


def _assign(x, new):
    """End of an in-place op that may change the shape (reshape_, squeeze_, ...): x takes new's
    piece, shape and layout, and new's place in the autograd graph (else gradients stop here)."""
    x._local, x._global_shape, x._sbp, x._layout = new._local, new._global_shape, new._sbp, new._layout
    node = new._node
    if node is not None:
        node.ctx.outputs = tuple(x if o is new else o for o in node.ctx.outputs)
    x._node, x.requires_grad = node, new.requires_grad
    return x


def flatten(input, start_dim=0, end_dim=-1):
    (input,) = tensors(input)
    if input.ndim == 0:
        return reshape(input, 1)
    start, end = wrap_dim(start_dim, input.ndim), wrap_dim(end_dim, input.ndim)
    shape = input.shape[:start] + (int(np.prod(input.shape[start:end + 1])),) + input.shape[end + 1:]
    return reshape(input, shape)


def _kept_dims(in_shape, out_shape):
    """Pairs (input dim, output dim) of dims kept by a squeeze/unsqueeze (sizes other than 1)."""
    ins = [d for d, n in enumerate(in_shape) if n != 1]
    outs = [d for d, n in enumerate(out_shape) if n != 1]
    return list(zip(ins, outs))


def _squeeze_shape(s, st):
    shape, dims = tuple(s[0]), st["dims"]
    if dims is None:
        return tuple(n for n in shape if n != 1)
    dims = {d % max(len(shape), 1) for d in dims}
    if any(shape[d] != 1 for d in dims if d < len(shape)):
        raise ValueError(f"squeeze: dims {sorted(dims)} of shape {shape} must have size 1")
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def _unsqueeze_shape(s, st):
    shape = tuple(s[0])
    dim = st["dim"]
    if not -len(shape) - 1 <= dim <= len(shape):
        raise dim_out_of_range(dim, len(shape) + 1, "unsqueeze")
    dim %= len(shape) + 1
    return shape[:dim] + (1,) + shape[dim:]


op("squeeze", lambda s, o, st: _rows(_kept_dims(s[0], o[0])), lambda ctx, g: reshape(g, ctx.inputs[0].shape),
   meta=_meta(_squeeze_shape))(lambda x, dims=None: np.squeeze(x, axis=dims))
op("unsqueeze", lambda s, o, st: _rows(_kept_dims(s[0], o[0])), lambda ctx, g: reshape(g, ctx.inputs[0].shape),
   meta=_meta(_unsqueeze_shape))(lambda x, dim=0: np.expand_dims(x, dim))


def squeeze(input, dim=None):
    """Drop dims of size one (all of them, or those named)."""
    (input,) = tensors(input)
    dims = dims_arg(dim, input.ndim)
    # the dims of global size 1, named: a piece may have other dims of size 1 (a split one)
    dims = tuple(d for d in (range(input.ndim) if dims is None else dims) if input.shape[d] == 1)
    if not dims:
        return input
    return apply("squeeze", [input], {"dims": dims})


def unsqueeze(input, dim):
    """Insert a dim of size one at dim."""
    (input,) = tensors(input)
    dim = wrap_dim(dim, input.ndim + 1, "unsqueeze")
    return apply("unsqueeze", [input], {"dim": dim})


def squeeze_(input, dim=None):
    return _assign(input, squeeze(input._shallow_copy(), dim))


def unsqueeze_(input, dim):
    return _assign(input, unsqueeze(input._shallow_copy(), dim))


def _perm_pairs(s, o, st):
    perm = st["perm"]
    return _rows([(perm[d], d) for d in range(len(perm))])


def _permute_shape(s, st):
    shape, perm = tuple(s[0]), tuple(st["perm"])
    if sorted(perm) != list(range(len(shape))):
        raise ValueError(f"permute: {perm} is not a permutation of the {len(shape)} dims of shape {shape}")
    return tuple(shape[p] for p in perm)


@op("permute", _perm_pairs, lambda ctx, g: permute(g, tuple(np.argsort(ctx.static["perm"]))),
    meta=_meta(_permute_shape))
def _permute(x, perm=()):
    return np.transpose(x, perm)


def permute(input, *dims):
    (input,) = tensors(input)
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
    return apply("permute", [input], {"perm": tuple(wrap_dim(int(d), input.ndim) for d in dims)})


def transpose(input, dim0=0, dim1=1):
    """Swap two dims; a split follows its dim."""
    (input,) = tensors(input)
    perm = list(range(input.ndim))
    d0, d1 = wrap_dim(dim0, input.ndim), wrap_dim(dim1, input.ndim)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return apply("permute", [input], {"perm": tuple(perm)})


def _expand_pairs(s, o, st):
    lead = len(o[0]) - len(s[0])
    return _rows([(d, d + lead) for d, n in enumerate(s[0]) if n == o[0][d + lead]])


def _expand_shape(s, st):
    shape, target = tuple(s[0]), tuple(st["shape"])
    lead = len(target) - len(shape)
    if lead < 0:
        raise ShapeError(f"expand: the number of sizes provided ({len(target)}) must be greater or equal to the "
                         f"number of dimensions in the tensor ({len(shape)}): shape {shape}, target {target}")
    bad = [d for d, n in enumerate(shape) if n not in (1, target[d + lead])]
    if bad:
        d = bad[0]
        raise ShapeError(f"expand: The expanded size of the tensor ({target[d + lead]}) must match the existing size "
                         f"({shape[d]}) at non-singleton dimension {d + lead}: a tensor of shape {shape} cannot be "
                         f"expanded to {target}")
    return target


@op("expand", _expand_pairs, lambda ctx, g: _sum_to(g, ctx.inputs[0].shape), meta=_meta(_expand_shape))
def _expand(x, shape=(), grown=()):
    """Dims in `grown` take their size from `shape`; the others (maybe split) from the piece."""
    lead = len(shape) - x.ndim
    return np.broadcast_to(x, tuple(shape[i] if i in grown else x.shape[i - lead] for i in range(len(shape))))


def _sum_to(g, shape):
    from .elementwise import sum_to
    return sum_to(g, shape)


def expand(input, *shape):
    """Broadcast to shape (-1 keeps a size); the result is a read-only view, as numpy's."""
    (input,) = tensors(input)
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape
    lead = len(shape) - input.ndim
    shape = tuple(input.shape[i - lead] if n == -1 else n for i, n in enumerate(shape))
    grown = tuple(i for i in range(len(shape)) if i < lead or input.shape[i - lead] != shape[i])
    return apply("expand", [input], {"shape": shape, "grown": grown})


def broadcast_to(input, shape):
    return expand(input, shape)


def expand_as(input, other):
    return expand(input, other.shape)
