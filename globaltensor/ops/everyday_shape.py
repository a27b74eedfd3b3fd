"""PyTorch's and OneFlow's everyday shape and linear-algebra names that the families lack, all
composites of existing ops (getitem, permute, reshape, matmul, ...), which give them their SBP
rows and gradients: narrow, select, movedim, broadcast_tensors, tensor_split, hstack, outer,
baddbmm, tensordot, cdist, ..."""
import builtins
import functools

import numpy as np

from ._front import tensors
from .elementwise import multiply, subtract, where
from .rearrange import flip
from .shape import broadcast_to, flatten, permute, reshape, transpose, unsqueeze
from .concat_split import concat
from .reduction import sum  # noqa: A004
from .reduction_composites import norm
from .linalg import bmm, inverse, matmul, mm, mv
from .triangles import diag
from .gather_scatter import gather, index_select
from ..errors import DimError, DTypeError, ShapeError, not_broadcast, wrap_dim


def _dim(dim, ndim):
    return wrap_dim(dim, ndim)


def narrow(input, dim, start, length):
    """input[..., start:start + length, ...] along dim (start may be negative)."""
    if input.ndim == 0:
        raise ShapeError("narrow() cannot be applied to a 0-dim tensor.")
    dim, start, length = _dim(dim, input.ndim), int(start), int(length)
    size = input.shape[dim]
    if not -size <= start <= size:
        raise DimError(f"Dimension out of range (expected to be in range of [{-size}, {size}], but got {start}) "
                       f"(narrow's start, dim {dim} of shape {tuple(input.shape)})")
    start += size if start < 0 else 0
    if start + length > size or length < 0:
        raise ShapeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}) "
                         f"(narrow of shape {tuple(input.shape)} at dim {dim})")
    return input[(builtins.slice(None),) * dim + (builtins.slice(start, start + length),)]


def select(input, dim, index):
    """input[..., index, ...] along dim: that dim removed."""
    return input[(builtins.slice(None),) * _dim(dim, input.ndim) + (int(index),)]


def movedim(input, source, destination):
    """input with dims `source` moved to positions `destination` (ints or sequences), the others in order."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src, dst = [_dim(d, input.ndim) for d in src], [_dim(d, input.ndim) for d in dst]
    rest = iter(d for d in range(input.ndim) if d not in src)
    at = dict(zip(dst, src))
    return permute(input, tuple(at[i] if i in at else next(rest) for i in range(input.ndim)))


moveaxis = movedim
concatenate = concat


def argwhere(input):
    """The indices of the non-zero values, one row each (nonzero)."""
    from .data_dependent import nonzero
    return nonzero(input)
def swapaxes(input, axis0, axis1):
    """torch.swapaxes: transpose under numpy's names (no defaults, as torch)."""
    return transpose(input, axis0, axis1)


def swapdims(input, dim0, dim1):
    """torch.swapdims: transpose (no defaults, as torch)."""
    return transpose(input, dim0, dim1)


def broadcast_shapes(*shapes):
    """numpy's broadcast of the shapes (OneFlow's words when they do not broadcast)."""
    if not shapes:
        raise ShapeError("shapes should not be empty.")
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"input and other can't be broadcasted to a single shape. "
                         f"({not_broadcast('', shapes)})") from None


def broadcast_tensors(*tensors):
    """The tensors broadcast to their common shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise ShapeError("tensors should not be empty.")
    shape = broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t if tuple(t.shape) == shape else broadcast_to(t, shape) for t in tensors)


def unflatten(input, dim, sizes):
    """dim of input split into the dims `sizes` (one may be -1)."""
    dim = _dim(dim, input.ndim)
    return reshape(input, tuple(input.shape[:dim]) + tuple(sizes) + tuple(input.shape[dim + 1:]))


def ravel(input):
    """input flattened to 1-D."""
    return flatten(input)


def fliplr(input):
    """input flipped along dim 1."""
    return flip(input, (1,))


def flipud(input):
    """input flipped along dim 0."""
    return flip(input, (0,))


def rot90(input, k=1, dims=(0, 1)):
    """input rotated by 90 degrees k times in the plane of dims (from the first towards the second)."""
    d0, d1 = (_dim(d, input.ndim) for d in dims)
    k %= 4
    if k == 0:
        return input.clone()
    if k == 2:
        return flip(input, (d0, d1))
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    return flip(transpose(input, d0, d1), (d1,))


def tensor_split(input, indices_or_sections, dim=0):
    """input split along dim into `sections` nearly equal parts (the first size % sections one
    longer) or at the given indices."""
    dim = _dim(dim, input.ndim)
    n = input.shape[dim]
    if isinstance(indices_or_sections, int):
        s = indices_or_sections
        sizes = [n // s + (1 if i < n % s else 0) for i in range(s)]
        bounds = list(np.cumsum([0] + sizes))
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i) + (n if int(i) < 0 else 0), 0), n)
                        for i in indices_or_sections] + [n]
    return tuple(narrow(input, dim, a, builtins.max(b - a, 0)) for a, b in zip(bounds[:-1], bounds[1:]))


def _split_by(name, dim):
    def fn(input, indices_or_sections):
        d = 0 if (name == "hsplit" and input.ndim == 1) else dim
        if isinstance(indices_or_sections, int) and input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the size of the "
                               f"dimension {input.shape[d]} is not divisible by the split_size "
                               f"{indices_or_sections}!")
        return tensor_split(input, indices_or_sections, d)
    fn.__name__, fn.__doc__ = name, f"tensor_split along dim {dim} (sections must divide it)."
    return fn


hsplit, vsplit, dsplit = _split_by("hsplit", 1), _split_by("vsplit", 0), _split_by("dsplit", 2)


def atleast_1d(*tensors):
    """Each tensor with at least 1 dim."""
    out = tuple(reshape(t, (1,)) if t.ndim == 0 else t for t in _flat(tensors))
    return out[0] if len(out) == 1 else out


def atleast_2d(*tensors):
    """Each tensor with at least 2 dims (a vector becomes a row)."""
    out = tuple(reshape(t, (1,) * (2 - t.ndim) + tuple(t.shape)) if t.ndim < 2 else t for t in _flat(tensors))
    return out[0] if len(out) == 1 else out


def atleast_3d(*tensors):
    """Each tensor with at least 3 dims (as numpy: (n,) -> (1, n, 1), (m, n) -> (m, n, 1))."""
    def up(t):
        if t.ndim == 0:
            return reshape(t, (1, 1, 1))
        if t.ndim == 1:
            return reshape(t, (1, t.shape[0], 1))
        return unsqueeze(t, 2) if t.ndim == 2 else t
    out = tuple(up(t) for t in _flat(tensors))
    return out[0] if len(out) == 1 else out


def _flat(tensors):
    return tuple(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors


def hstack(tensors):
    """Concatenated along dim 1 (dim 0 for vectors)."""
    ts = atleast_1d(*tensors)
    ts = ts if isinstance(ts, tuple) else (ts,)
    return concat(list(ts), 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    """Rows stacked: concatenated along dim 0 after atleast_2d."""
    ts = atleast_2d(*tensors)
    return concat(list(ts if isinstance(ts, tuple) else (ts,)), 0)


def dstack(tensors):
    """Concatenated along dim 2 after atleast_3d."""
    ts = atleast_3d(*tensors)
    return concat(list(ts if isinstance(ts, tuple) else (ts,)), 2)


def column_stack(tensors):
    """Vectors as columns, matrices as they are, concatenated along dim 1."""
    return concat([reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors], 1)


def _check_repeats(counts, size, dim):
    """OneFlow's (PyTorch's) checks of repeat_interleave's counts; one count (PyTorch) serves every element."""
    if counts.ndim > 1:
        raise ShapeError(f"repeat_interleave only accept 1D vector as repeat (got shape {counts.shape})")
    if counts.dtype.kind not in "iu":
        raise DTypeError(f"repeats has to be Long tensor (got {counts.dtype})")
    if (counts < 0).any():
        raise ShapeError(f"repeats can not be negative (got {counts.tolist()})")
    if counts.size not in (1, size):
        raise ShapeError(f"repeats must have the same size as input along dim ({counts.size} counts for size "
                         f"{size} at dim {dim})")


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """Each element repeated `repeats` times (an int, or a tensor of one count per element) along
    dim (the flattened input when None)."""
    (input,) = tensors(input)
    if dim is None:
        input, dim = flatten(input), 0
    dim = _dim(dim, input.ndim)
    counts = repeats.numpy() if hasattr(repeats, "numpy") else np.asarray(repeats)
    _check_repeats(counts, input.shape[dim], dim)
    if counts.ndim == 0 or counts.size == 1:
        r = int(counts.reshape(()))
        shape = tuple(input.shape)
        grown = shape[:dim + 1] + (r,) + shape[dim + 1:]
        out = broadcast_to(unsqueeze(input, dim + 1), grown)
        return reshape(out, shape[:dim] + (shape[dim] * r,) + shape[dim + 1:])
    index = np.repeat(np.arange(input.shape[dim]), counts)
    return index_select(input, dim, tensors(input, index)[1])


def take(input, index):
    """input flattened, at index (the result has index's shape; negative indices count from the end)."""
    (input,) = tensors(input)
    index = tensors(input, index)[1]
    index = where(index < 0, index + input.numel(), index)
    return reshape(index_select(flatten(input), 0, flatten(index)), tuple(index.shape))


def take_along_dim(input, indices, dim=None):
    """gather along dim after broadcasting input and indices (except along dim); the flattened input when None."""
    if dim is None:
        return take(input, flatten(indices))
    dim = _dim(dim, input.ndim)
    shape = [builtins.max(a, b) for a, b in zip(input.shape, indices.shape)]
    x = broadcast_to(input, tuple(shape[:dim]) + (input.shape[dim],) + tuple(shape[dim + 1:]))
    i = broadcast_to(indices, tuple(shape[:dim]) + (indices.shape[dim],) + tuple(shape[dim + 1:]))
    return gather(x, dim, i)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the matrices over dims (dim1, dim2), offset above/below the main one, as
    the last dim (PyTorch's order): a 2-D input's is diag's; others pick from the flattened pair."""
    d1, d2 = _dim(dim1, input.ndim), _dim(dim2, input.ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 2:
        return diag(input if d1 == 0 else transpose(input, 0, 1), offset)
    x = movedim(input, (d1, d2), (-2, -1))
    n, m = x.shape[-2], x.shape[-1]
    rows = range(builtins.max(0, -offset), builtins.max(0, builtins.min(n, m - offset)))
    flat = reshape(x, tuple(x.shape[:-2]) + (n * m,))
    return index_select(flat, -1, tensors(input, np.array([r * m + r + offset for r in rows], np.int64))[1])


def diagflat(input, offset=0):
    """The flattened input on the diagonal `offset` of a square matrix."""
    return diag(flatten(input), offset)


def diff(input, n=1, dim=-1):
    """The n-th forward difference along dim."""
    dim = _dim(dim, input.ndim)
    for _ in range(n):  # bool: PyTorch's difference is the exclusive or
        k = input.shape[dim]
        later, earlier = narrow(input, dim, 1, k - 1), narrow(input, dim, 0, k - 1)
        input = later ^ earlier if input.dtype.name == "bool" else subtract(later, earlier)
    return input


# --- linear algebra
def outer(input, vec2):
    """The outer product of two vectors: input[i] * vec2[j]."""
    return multiply(unsqueeze(input, 1), unsqueeze(vec2, 0))


ger = outer


def inner(input, other):
    """The sum of products over the last dims of input and other (a number times a tensor for 0-dim)."""
    if input.ndim == 0 or other.ndim == 0:
        return multiply(input, other)
    k = input.shape[-1]
    out = mm(reshape(input, (-1, k)), transpose(reshape(other, (-1, k)), 0, 1))
    return reshape(out, tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def vdot(input, other):
    """The dot product of two vectors (real tensors: no conjugation)."""
    return sum(multiply(input, other))


def _scaled(input, product, beta, alpha):
    product = product if alpha == 1 else multiply(product, alpha)
    return product if beta == 0 else (input if beta == 1 else multiply(input, beta)) + product


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    return _scaled(input, mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled(input, outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batched."""
    return _scaled(input, bmm(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[b] @ batch2[b]."""
    return _scaled(input, sum(bmm(batch1, batch2), 0), beta, alpha)


def tensordot(a, b, dims=2):
    """The sum of products over the last `dims` dims of a and the first of b (or the dim lists dims = (da, db))."""
    if isinstance(dims, int):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot expects dims >= 0, but got dims={dims}" if dims < 0 else
                             f"tensordot expects dims <= a.ndim which is {a.ndim}, but got {dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise ShapeError(f"both dimension lists should have same length (tensordot dims {da} and {db})")
    da, db = [_dim(d, a.ndim) for d in da], [_dim(d, b.ndim) for d in db]
    for d in da + db:
        if da.count(d) > 1 or db.count(d) > 1:
            raise ShapeError(f"dim {d} appears multiple times in the list of dims (tensordot dims {da} and {db})")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                             f"and second has size {b.shape[j]} in dim {j}")
    fa, fb = [d for d in range(a.ndim) if d not in da], [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da]))
    left = reshape(permute(a, tuple(fa + da)), (-1, k))
    right = reshape(permute(b, tuple(db + fb)), (k, -1))
    return reshape(mm(left, right), tuple(a.shape[d] for d in fa) + tuple(b.shape[d] for d in fb))


def matrix_power(input, n):
    """input @ input @ ... (n times); the identity for n = 0, powers of the inverse for n < 0."""
    if n == 0:
        from ..creation import eye
        out = eye(input.shape[-1], dtype=input.dtype)
        return broadcast_to(tensors(input, out.numpy())[1], tuple(input.shape))
    base = inverse(input) if n < 0 else input
    return functools.reduce(matmul, [base] * abs(n))


def chain_matmul(*matrices):
    """matrices[0] @ matrices[1] @ ..."""
    return functools.reduce(matmul, _flat(matrices))


def cdist(x1, x2, p=2.0):
    """The p-norm distance between each row of x1 and each row of x2 (batched over leading dims)."""
    return norm(subtract(unsqueeze(x1, -2), unsqueeze(x2, -3)), p, -1)


EVERYDAY = ["addbmm", "addmv", "addr", "atleast_1d", "atleast_2d", "atleast_3d", "baddbmm", "broadcast_shapes",
            "broadcast_tensors", "cdist", "argwhere", "chain_matmul", "column_stack", "concatenate", "diagflat", "diagonal",
            "diff", "dsplit", "dstack", "fliplr", "flipud", "ger", "hsplit", "hstack", "inner", "matrix_power", "moveaxis",
            "movedim", "narrow", "outer", "ravel", "repeat_interleave", "rot90", "select", "swapaxes", "swapdims", "take",
            "take_along_dim", "tensor_split", "tensordot", "unflatten", "vdot", "vsplit", "vstack"]
METHODS = ["addbmm", "addmv", "addr", "argwhere", "baddbmm", "diagflat", "diagonal", "diff", "dsplit", "fliplr", "flipud",
           "ger", "hsplit", "inner", "matrix_power", "moveaxis", "movedim", "narrow", "outer", "ravel",
           "repeat_interleave", "rot90", "select", "swapaxes", "swapdims", "take", "take_along_dim", "tensor_split",
           "unflatten", "vdot", "vsplit"]  # those torch.Tensor has
