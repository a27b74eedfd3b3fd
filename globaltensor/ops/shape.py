"""Shape and layout ops: views and rearrangements. A dim that passes through unchanged keeps
its split (S(d) -> S(d')); all of them are linear, so P -> P. Each declares its output shape
with a meta (from the global shapes and the static arguments; registry.py)."""
import builtins
import itertools
import math

import numpy as np

from . import rules
from . import _front
from ._front import apply, dims_arg, tensors
from .registry import op
from ..creation import zeros_like

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
        raise ValueError(f"cannot reshape a tensor of shape {tuple(s[0])} into shape {shape}")
    return shape


def _leading_merge(in_shape, out_shape, ranks, tail=0):
    """Whether the first dim of one side is the first few dims of the other merged (e.g. [8, 128,
    d] <-> [1024, d]), outside the `tail` dims both sides end with, with the coarser first dim a
    multiple of `ranks`: then every even split of it over any mesh axes cuts the other side at
    the same elements, so S(0) stays S(0)."""
    if not in_shape or not out_shape or in_shape[0] == out_shape[0] or min(in_shape[0], out_shape[0]) == 0:
        return False
    short, long_ = (in_shape, out_shape) if in_shape[0] > out_shape[0] else (out_shape, in_shape)
    merged = 1
    for m, n in enumerate(long_, 1):
        merged *= n
        if merged >= short[0]:
            return (merged == short[0] and m > 1 and long_[0] % ranks == 0 and m <= len(long_) - tail
                    and len(short) > tail)
    return False


def _reshape_rows(s, o, st):
    """B; S(i) -> S(o) for dims whose sizes agree from the start or from the end; S(0) -> S(0)
    where the first dims merge or part evenly over every rank (static lead); P -> P."""
    pairs = sum(_reshape_pairs(s[0], o[0]), [])
    if st.get("lead") and (0, 0) not in pairs:
        pairs.append((0, 0))
    return _rows(pairs)


@op("reshape", _reshape_rows, lambda ctx, g: reshape(g, ctx.inputs[0].shape), meta=_meta(_reshape_shape))
def _reshape(x, shape=(), keep=0, tail=0, lead=False):
    """The first `keep` and the last `tail` dims (the ones that may be split) come from the piece
    itself, and with `lead` the first dim (the leading dims merged or parted); the dims between
    are never split."""
    if lead:
        middle = tuple(shape[1:len(shape) - tail])
        rest = middle + x.shape[x.ndim - tail:]
        return np.reshape(x, (x.size // math.prod(rest) if math.prod(rest) else 0,) + rest)
    return np.reshape(x, x.shape[:keep] + tuple(shape[keep:len(shape) - tail]) + x.shape[x.ndim - tail:])


def _shape_arg(shape, numel):
    shape = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else list(shape)
    if shape.count(-1) > 1:
        raise ValueError("only one dim may be -1")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = numel // known if known else 0
    if math.prod(shape) != numel:
        raise ValueError(f"cannot reshape a tensor of {numel} elements into shape {tuple(shape)}")
    return tuple(int(s) for s in shape)


def reshape(input, *shape):
    """The same values in another shape (C order); a split survives when its dim and the dims
    before it keep their sizes."""
    (input,) = tensors(input)
    shape = _shape_arg(shape, input.numel())
    if shape == tuple(input.shape):
        return input
    prefix, suffix = _reshape_pairs(tuple(input.shape), shape)
    static = {"shape": shape, "keep": len(prefix), "tail": len(suffix)}
    if input.is_global and not prefix and _leading_merge(tuple(input.shape), shape, input.placement.size, len(suffix)):
        static["lead"] = True  # a global fact (shapes, the number of ranks): every rank decides alike
    return apply("reshape", [input], static)


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
    start, end = start_dim % input.ndim, end_dim % input.ndim
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
        raise IndexError(f"unsqueeze: dim {dim} is out of range for a {len(shape)}-D tensor")
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
    dim = dim % (input.ndim + 1)
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
    return apply("permute", [input], {"perm": tuple(int(d) % input.ndim for d in dims)})


def transpose(input, dim0=0, dim1=1):
    """Swap two dims; a split follows its dim."""
    (input,) = tensors(input)
    perm = list(range(input.ndim))
    d0, d1 = dim0 % input.ndim, dim1 % input.ndim
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return apply("permute", [input], {"perm": tuple(perm)})


def _expand_pairs(s, o, st):
    lead = len(o[0]) - len(s[0])
    return _rows([(d, d + lead) for d, n in enumerate(s[0]) if n == o[0][d + lead]])


def _expand_shape(s, st):
    shape, target = tuple(s[0]), tuple(st["shape"])
    lead = len(target) - len(shape)
    if lead < 0 or any(n not in (1, target[d + lead]) for d, n in enumerate(shape)):
        raise ValueError(f"expand: a tensor of shape {shape} cannot be expanded to {target}")
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


def _tile_shape(s, st):
    shape, reps = tuple(s[0]), tuple(st["reps"])
    n = builtins.max(len(shape), len(reps))
    shape, reps = (1,) * (n - len(shape)) + shape, (1,) * (n - len(reps)) + reps
    return tuple(a * r for a, r in zip(shape, reps))


@op("tile", lambda s, o, st: _rows([]), lambda ctx, g: _tile_back(g, ctx), meta=_meta(_tile_shape))
def _tile(x, reps=()):
    return np.tile(x, reps)


def _tile_back(g, ctx):
    x, reps = ctx.inputs[0], ctx.static["reps"]
    shape = list(x.shape)
    lead = len(reps) - len(shape)
    full = [1] * max(lead, 0) + shape
    reps = (1,) * max(0, len(full) - len(reps)) + tuple(reps)
    split_shape = []
    for r, n in zip(reps, full):
        split_shape += [r, n]
    summed = reshape(g, split_shape).sum(tuple(range(0, 2 * len(full), 2)))  # a method: reduction comes later
    return reshape(summed, x.shape)


def tile(input, dims):
    """Repeat x along each dim (numpy's tile)."""
    (input,) = tensors(input)
    reps = (dims,) if isinstance(dims, int) else tuple(dims)
    return apply("tile", [input], {"reps": reps})


@op("flip", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if d not in st["dims"]]),
    lambda ctx, g: flip(g, ctx.static["dims"]), meta=_meta(lambda s, st: s[0]))
def _flip(x, dims=()):
    return np.flip(x, dims)


def flip(input, dims):
    """Reverse the order along dims (an int or a sequence)."""
    (input,) = tensors(input)
    return apply("flip", [input], {"dims": dims_arg(dims, input.ndim)})


@op("roll", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if st["dims"] is not None and d not in st["dims"]]),
    lambda ctx, g: roll(g, tuple(-v for v in ctx.static["shifts"]), ctx.static["dims"]), meta=_meta(lambda s, st: s[0]))
def _roll(x, shifts=(), dims=None):
    return np.roll(x, shifts, dims)


def roll(input, shifts, dims=None):
    """Shift the values along dims, cyclically (dims None: over the flattened values)."""
    (input,) = tensors(input)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = None if dims is None else ((dims,) if isinstance(dims, int) else tuple(dims))
    return apply("roll", [input], {"shifts": shifts, "dims": None if dims is None else tuple(d % input.ndim for d in dims)})


def _concat_rows(s, o, st):
    n, dim = len(s), st["dim"]
    return _rows([(d, d) for d in range(len(o[0])) if d != dim], n_in=n)


def _concat_backward(ctx, g):
    sizes = [t.shape[ctx.static["dim"]] for t in ctx.inputs]
    return split(g, sizes, ctx.static["dim"])


def _concat_shape(s, st):
    first, dim = tuple(s[0]), st["dim"]
    for shape in s[1:]:
        if len(shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(first, shape)) if d != dim):
            raise ValueError(f"concat: shapes {[tuple(x) for x in s]} differ outside dim {dim}")
    return first[:dim] + (builtins.sum(shape[dim] for shape in s),) + first[dim + 1:]


def _joint_dtype(dt):
    return rules.result_dtype(*dt)


@op("concat", _concat_rows, _concat_backward, meta=_meta(_concat_shape, _joint_dtype))
def _concat(*xs, dim=0):
    return np.concatenate(xs, axis=dim)


def concat(tensors, dim=0):
    """Join tensors along an existing dim (splits along the other dims are kept)."""
    tensors = _front.tensors(*tensors)
    dim = dim % tensors[0].ndim
    return apply("concat", tensors, {"dim": dim})


def _stack_rows(s, o, st):
    dim = st["dim"]
    return _rows([(d, d if d < dim else d + 1) for d in range(len(s[0]))], n_in=len(s))


def _stack_shape(s, st):
    first, dim = tuple(s[0]), st["dim"]
    if any(tuple(shape) != first for shape in s):
        raise ValueError(f"stack: every tensor needs one shape, got {[tuple(x) for x in s]}")
    return first[:dim] + (len(s),) + first[dim:]


@op("stack", _stack_rows, lambda ctx, g: unbind(g, ctx.static["dim"]), meta=_meta(_stack_shape, _joint_dtype))
def _stack(*xs, dim=0):
    return np.stack(xs, axis=dim)


def stack(tensors, dim=0):
    """Join tensors along a new dim."""
    tensors = _front.tensors(*tensors)
    dim = dim % (tensors[0].ndim + 1)
    return apply("stack", tensors, {"dim": dim})


def _split_rows(s, o, st):
    dim = st["dim"]
    return _rows([(d, d) for d in range(len(s[0])) if d != dim], n_out=len(o))


def _split_backward(ctx, *grads):
    parts = [g if g is not None else zeros_like(o) for g, o in zip(grads, ctx.outputs)]
    return concat(parts, ctx.static["dim"])


def _split_meta(s, dt, st):
    shape, sizes, dim = tuple(s[0]), tuple(st["sizes"]), st["dim"]
    if not sizes or builtins.sum(sizes) != shape[dim] or builtins.min(sizes) < 0:
        raise ValueError(f"split sizes {list(sizes)} do not add up to {shape[dim]} (dim {dim} of shape {shape})")
    return [shape[:dim] + (n,) + shape[dim + 1:] for n in sizes], [dt[0]] * len(sizes)


@op("split", _split_rows, _split_backward, meta=_split_meta)
def _split(x, sizes=(), dim=0):
    return tuple(np.split(x, list(itertools.accumulate(sizes))[:-1], axis=dim))


def split(tensor, split_size_or_sections=None, dim=0, *, num_or_sections=None):
    """Pieces along dim, as PyTorch: an int is a piece size (the last may be shorter), a list the
    sizes. Paddle's keyword num_or_sections=: an int is a number of equal pieces, a list the sizes
    (one may be -1: the rest)."""
    (tensor,) = tensors(tensor)
    dim = dim % tensor.ndim
    n = tensor.shape[dim]
    if (split_size_or_sections is None) == (num_or_sections is None):
        raise TypeError("split() takes split_size_or_sections (PyTorch) or num_or_sections= (Paddle): one of them")
    if isinstance(num_or_sections, int):
        if num_or_sections <= 0 or n % num_or_sections:
            raise ValueError(f"split: num_or_sections={num_or_sections} does not divide dim {dim} of size {n} "
                             f"into equal pieces")
        split_size_or_sections = [n // num_or_sections] * num_or_sections
    elif num_or_sections is not None:
        split_size_or_sections = num_or_sections
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0 and n:
            raise ValueError(f"split: the piece size must be positive, got {size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if n else [0]  # empty dim: one empty piece
    else:
        sizes = list(split_size_or_sections)
        if -1 in sizes:
            sizes[sizes.index(-1)] = n - sum(s for s in sizes if s != -1)
    if sum(sizes) != n:
        raise ValueError(f"split sizes {sizes} do not add up to {n} (dim {dim} of shape {tuple(tensor.shape)})")
    return list(apply("split", [tensor], {"sizes": tuple(sizes), "dim": dim}, multi=True))


def chunk(input, chunks, dim=0):
    """`chunks` pieces of ceil(n / chunks) along dim (the last ones may be smaller)."""
    (input,) = tensors(input)
    dim = dim % input.ndim
    if input.shape[dim] == 0:  # as PyTorch: `chunks` empty pieces
        return split(input, [0] * chunks, dim)
    size = -(-input.shape[dim] // chunks)
    return split(input, max(size, 1), dim)


def unbind(input, dim=0):
    """The slices along dim, each without that dim."""
    (input,) = tensors(input)
    dim = dim % input.ndim
    if input.shape[dim] == 0:
        return []
    return [squeeze(p, dim) for p in split(input, 1, dim)]


def unstack(x, axis=0, num=None):
    """Paddle's unbind: the slices along axis (num, when given, must be their count)."""
    out = unbind(x, axis)
    if num is not None and num != len(out):
        raise ValueError(f"unstack: num={num}, but axis {axis} has {len(out)} slices")
    return out


def _slice_index(shape, axes, starts, ends, strides):
    index = [builtins.slice(None)] * len(shape)  # `slice` below is Paddle's op
    for a, s, e, st in zip(axes, starts, ends, strides):
        index[a] = builtins.slice(s, e, st)
    return tuple(index)


def _slice_back(ctx, g):
    x = ctx.inputs[0]
    st = ctx.static
    base = zeros_like(x)
    return _scatter_slice(base, g, st)


def _sliced_shape(shape, st):
    shape = list(shape)
    for a, s, e, step in zip(st["axes"], st["starts"], st["ends"], st["strides"]):
        shape[a] = len(range(*builtins.slice(s, e, step).indices(shape[a])))
    return tuple(shape)


@op("strided_slice", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if d not in st["axes"]]),
    lambda ctx, g: _slice_back(ctx, g), meta=_meta(lambda s, st: _sliced_shape(s[0], st)))
def _strided_slice(x, axes=(), starts=(), ends=(), strides=()):
    return x[_slice_index(x.shape, axes, starts, ends, strides)]


@op("slice_scatter", lambda s, o, st: _rows([(d, d) for d in range(len(s[0])) if d not in st["axes"]], n_in=2),
    lambda ctx, g: (None, strided_slice(g, **{k: ctx.static[k] for k in ("axes", "starts", "ends", "strides")})),
    meta=rules.like(0))
def _slice_scatter(base, update, axes=(), starts=(), ends=(), strides=()):
    out = base.copy()
    out[_slice_index(base.shape, axes, starts, ends, strides)] = update
    return out


def _scatter_slice(base, update, st):
    return apply("slice_scatter", [base, update], dict(st))


def strided_slice(x, axes, starts, ends, strides):
    """Paddle's strided_slice: x[starts:ends:strides] along axes."""
    (x,) = tensors(x)
    axes = tuple(a % x.ndim for a in axes)
    return apply("strided_slice", [x], {"axes": axes, "starts": tuple(starts), "ends": tuple(ends),
                                         "strides": tuple(strides)})


def slice(input, axes, starts, ends):  # noqa: A001 - Paddle's name
    """Paddle's slice: x[starts:ends] along axes."""
    return strided_slice(input, axes, starts, ends, [1] * len(axes))


def _batch_dims_rows(s, o, st):
    """Batch dims (all but the last two) may be split; linear."""
    return _rows([(d, d) for d in range(len(s[0]) - 2)])


def _triangle_shape(s, st):
    shape = tuple(s[0])
    return shape if len(shape) != 1 else shape * 2  # numpy: a 1-D input is a row to broadcast


@op("tril", _batch_dims_rows, lambda ctx, g: tril(g, ctx.static["diagonal"]), meta=_meta(_triangle_shape))
def _tril(x, diagonal=0):
    return np.tril(x, diagonal)


@op("triu", _batch_dims_rows, lambda ctx, g: triu(g, ctx.static["diagonal"]), meta=_meta(_triangle_shape))
def _triu(x, diagonal=0):
    return np.triu(x, diagonal)


def tril(input, diagonal=0):
    """The lower triangle (on and below `diagonal`) of the last two dims; the rest zero."""
    return apply("tril", tensors(input), {"diagonal": diagonal})


def triu(input, diagonal=0):
    """The upper triangle (on and above `diagonal`) of the last two dims; the rest zero."""
    return apply("triu", tensors(input), {"diagonal": diagonal})


def _diag_shape(s, st):
    shape, k = tuple(s[0]), st["offset"]
    if len(shape) == 1:
        return (shape[0] + abs(k),) * 2
    if len(shape) != 2:
        raise ValueError(f"diag expects a 1-D or 2-D tensor, got shape {shape}")
    rows, cols = shape
    return (builtins.max(0, builtins.min(rows, cols - k) if k >= 0 else builtins.min(rows + k, cols)),)


@op("diag", lambda s, o, st: _rows([]), lambda ctx, g: _diag_backward(ctx, g), meta=_meta(_diag_shape))
def _diag(x, offset=0):
    return np.diag(x, offset)


def _diag_backward(ctx, g):
    """A vector's diag: the diagonal of g; a matrix's diagonal: g placed on it, in the matrix's
    shape (square or not)."""
    x, offset = ctx.inputs[0], ctx.static["offset"]
    if x.ndim == 1:
        return diag(g, offset)
    return apply("diag_grad", [g], {"offset": offset, "shape": tuple(x.shape)})


@op("diag_grad", lambda s, o, st: _rows([]), lambda ctx, g: diag(g, ctx.static["offset"]),
    meta=_meta(lambda s, st: st["shape"]))
def _diag_grad(g, offset=0, shape=()):
    """A zero matrix of `shape` with g on diagonal `offset`."""
    from ..backends.devices import array_module
    xp = array_module(g)
    out = xp.zeros(shape, g.dtype)
    at = xp.arange(g.shape[0])
    out[at + builtins.max(-offset, 0), at + builtins.max(offset, 0)] = g
    return out


def diag(input, diagonal=0):
    """A 1-D tensor -> the matrix with it on diagonal `diagonal`; a 2-D one -> that diagonal."""
    (input,) = tensors(input)
    if input.ndim not in (1, 2):
        raise ValueError(f"diag expects a 1-D or 2-D tensor, got shape {tuple(input.shape)}")
    return apply("diag", [input], {"offset": diagonal})


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors (indexing "ij" or "xy"), as numpy's meshgrid."""
    tensors = _front.tensors(*(tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors))
    if indexing not in ("ij", "xy"):
        raise ValueError(f"indexing must be 'ij' or 'xy', got {indexing!r}")
    shape = [x.shape[0] for x in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    grids = []
    for i, x in enumerate(tensors):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and len(tensors) >= 2 else i
        view = [1] * len(tensors)
        view[axis] = x.shape[0]
        grids.append(expand(reshape(x, view), shape))
    return grids
