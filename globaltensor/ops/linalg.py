"""Linear algebra: matmul and its spellings (einsum rows), kron, cross, cholesky, inverse, det, t."""
import numpy as np

from ..backends import cuda_kernels
from ..registry import rules
from ._front import apply, tensors, products_in_float32
from ..registry import op
from ..errors import DTypeError, ShapeError, wrap_dim

_LETTERS = "abcdefghij"


def _matmul_spec(a_shape, b_shape):
    """The einsum of np.matmul for these ndims; batch letters only where the batch sizes agree."""
    if len(a_shape) == 1 and len(b_shape) == 1:
        return "k,k->"
    a = ("m" if len(a_shape) >= 2 else "") + "k"
    b = "k" + ("n" if len(b_shape) >= 2 else "")
    batch = max(len(a_shape), len(b_shape)) - 2
    a_batch = _LETTERS[batch - max(0, len(a_shape) - 2):batch] if len(a_shape) > 2 else ""
    b_batch = _LETTERS[batch - max(0, len(b_shape) - 2):batch] if len(b_shape) > 2 else ""
    out_batch = _LETTERS[:batch]
    # a batch dim broadcast (size 1 against n) gets its own letter: it may not be split
    a_batch = "".join(c if a_shape[i] == _size(c, a_shape, b_shape, a_batch, b_batch) else c.upper()
                      for i, c in enumerate(a_batch))
    b_batch = "".join(c if b_shape[i] == _size(c, a_shape, b_shape, a_batch, b_batch) else c.upper()
                      for i, c in enumerate(b_batch))
    out = out_batch + ("m" if len(a_shape) >= 2 else "") + ("n" if len(b_shape) >= 2 else "")
    return f"{a_batch + a},{b_batch + b}->{out}"


def _size(letter, a_shape, b_shape, a_batch, b_batch):
    sizes = []
    if letter in a_batch:
        sizes.append(a_shape[a_batch.index(letter)])
    if letter in b_batch:
        sizes.append(b_shape[b_batch.index(letter)])
    return max(sizes)


def _matmul_rules(in_shapes, out_shapes, static):
    spec = _matmul_spec(*in_shapes)
    rows = rules.einsum(spec)(in_shapes, out_shapes, static)
    return [r for r in rows if all(_ok(s, shape) for s, shape in zip(r[0], in_shapes))]


def _ok(sbp, shape):
    return not hasattr(sbp, "dim") or sbp.dim < len(shape)


def _matmul_backward(ctx, g):
    """Vectors are promoted to matrices (a: 1 x k, b: k x 1), then dA = g B^T, dB = A^T g."""
    from .elementwise import sum_to
    from .shape import squeeze, unsqueeze
    a, b = ctx.inputs
    need_a, need_b = a.requires_grad, b.requires_grad
    if a._dtype.is_complex or b._dtype.is_complex:  # PyTorch's rule: dA = g B^H, dB = A^H g
        from .elementwise import conj
        a, b = conj(a), conj(b)
    if a.ndim == 1 and b.ndim == 1:
        return (g * b if need_a else None), (g * a if need_b else None)
    a2 = unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = unsqueeze(b, -1) if b.ndim == 1 else b
    g2 = unsqueeze(g, -2) if a.ndim == 1 else g
    g2 = unsqueeze(g2, -1) if b.ndim == 1 else g2
    da = db = None  # only for the inputs that need one: a matmul each, into its destination if any
    if need_a:
        da = apply("matmul", [g2, transpose(b2, -1, -2)], out=ctx.dest(0))
        da = sum_to(squeeze(da, -2) if a.ndim == 1 else da, a.shape)
    if need_b:
        db = apply("matmul", [transpose(a2, -1, -2), g2], out=ctx.dest(1))
        db = sum_to(squeeze(db, -1) if b.ndim == 1 else db, b.shape)
    return da, db


def transpose(x, d0, d1):
    from .shape import transpose as _t
    return _t(x, d0, d1)


def matmul_shape(a, b):
    """np.matmul's output shape: vectors promoted (and their dim dropped), batch dims broadcast."""
    a, b = tuple(a), tuple(b)
    if not a or not b:
        raise ShapeError(f"Tensor {'a' if not a else 'b'}'s dim should >= 1 (matmul: both operands need at least 1 "
                         f"dim, got shapes {a} and {b})")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({a2[-2]}x{a2[-1]} and {b2[-2]}x{b2[-1]}) "
                         f"(matmul: the contracted dims differ: shapes {a} and {b})")
    batch = rules.broadcast_shape([a2[:-2], b2[:-2]])
    return batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)


def _matmul_meta(s, dt, st):
    return [matmul_shape(*s)], [rules.result_dtype(*dt)]


@op("matmul", _matmul_rules, _matmul_backward, takes_hints=True, meta=_matmul_meta)
@products_in_float32
def _matmul(a, b, out=None, order=None):
    if a.ndim == 2 and b.ndim == 2 and cuda_kernels.usable(a, b):  # cupy pieces on a GPU: cuBLASLt
        return cuda_kernels.matmul(a, b)
    if out is not None and a.ndim == b.ndim == 2 and out.shape == (a.shape[0], b.shape[1]) \
            and out.dtype == np.result_type(a, b):
        return np.matmul(a, b, out=out)  # a gradient written straight into its bucket
    if order == "F" and a.ndim == b.ndim == 2:
        return np.matmul(b.T, a.T).T  # a column-major piece (the caller's other arrays are)
    if a.ndim > 2 and b.ndim == 2 and type(a) is np.ndarray and a.flags.c_contiguous and a.size:
        # [..., m, k] . [k, n] as one GEMM of all the rows: numpy would run one per leading index
        return np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[1])
    return np.matmul(a, b)


def matmul(input, other):
    """np.matmul semantics. Rows (for 2-D): S(0) x B -> S(0); B x S(1) -> S(1); S(1) x S(0) -> P;
    P x B -> P; B x P -> P; batch dims split alike stay split. A complex operand with a real one:
    both in the promoted dtype first (so the real one's gradient is real)."""
    a, b = tensors(input, other)
    if a._dtype is not b._dtype and (a._dtype.is_complex or b._dtype.is_complex):
        from ._front import cast_to
        from ..dtype import promote_types
        dt = promote_types(a._dtype, b._dtype)
        a, b = cast_to(a, dt), cast_to(b, dt)
    return apply("matmul", [a, b])


# OneFlow's (PyTorch's) words for operands of the wrong rank, then for sizes that do not meet: one row an op,
# (ndim of the first operand, of the second, rank message, size check, size message); a, b are the shapes.
_PRODUCT_CHECKS = {
    "mm": (2, 2, lambda a, b: ("self must be a matrix" if len(a) != 2 else "mat2 must be a matrix"),
           lambda a, b: a[1] == b[0],
           lambda a, b: f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and {b[0]}x{b[1]})"),
    "bmm": (3, 3, lambda a, b: (f"Expected 3-dimensional tensor, but got {len(a)}-dimensional tensor for argument #1 "
                                f"'batch1'" if len(a) != 3 else f"Expected 3-dimensional tensor, but got {len(b)}"
                                f"-dimensional tensor for argument #2 'batch2'"),
            lambda a, b: a[0] == b[0] and a[2] == b[1],
            lambda a, b: f"Expected size for first two dimensions of batch2 tensor to be: [{a[0]}, {a[2]}] "
                         f"but got: [{b[0]}, {b[1]}]."),
    "mv": (2, 1, lambda a, b: f"vector + matrix @ vector expected, got 1, {len(a)}, {len(b)}",
           lambda a, b: a[1] == b[0],
           lambda a, b: f"size mismatch, got input ({a[0]}), mat ({a[0]}x{a[1]}), vec ({b[0]})"),
    "dot": (1, 1, lambda a, b: f"1D tensors expected, but got {len(a)}D and {len(b)}D tensors",
            lambda a, b: a[0] == b[0],
            lambda a, b: f"inconsistent tensor size, expected tensor [{a[0]}] and src [{b[0]}] to have the same "
                         f"number of elements, but got {a[0]} and {b[0]} elements respectively"),
}


def _check_product(name, x, y):
    """ShapeError with OneFlow's words (and the op and both shapes after them) unless x, y fit `name`."""
    a, b = tuple(x.shape), tuple(y.shape)
    ndim_a, ndim_b, rank_message, sizes_fit, size_message = _PRODUCT_CHECKS[name]
    if len(a) != ndim_a or len(b) != ndim_b:
        raise ShapeError(f"{rank_message(a, b)} ({name} of shapes {a} and {b})")
    if not sizes_fit(a, b):
        raise ShapeError(f"{size_message(a, b)} ({name} of shapes {a} and {b})")
    if name == "dot" and x.dtype != y.dtype:
        raise DTypeError(f"dot : expected both vectors to have same dtype, but found {x.dtype} and {y.dtype}")


def mm(input, mat2):
    """2-D matrix product."""
    _check_product("mm", input, mat2)
    return matmul(input, mat2)


def bmm(input, mat2):
    """Batched (3-D) matrix product."""
    _check_product("bmm", input, mat2)
    return matmul(input, mat2)


def mv(input, vec):
    """Matrix-vector product."""
    _check_product("mv", input, vec)
    return matmul(input, vec)


def dot(input, tensor):
    """Inner product of two vectors."""
    input, tensor = tensors(input, tensor)
    _check_product("dot", input, tensor)
    return matmul(input, tensor)


def addmm(input, mat1, mat2, beta=1.0, alpha=1.0):  # noqa: A002
    """beta * input + alpha * (x @ y)."""
    return input * beta + mm(mat1, mat2) * alpha


def t(input):
    """Transpose of a tensor of at most 2 dims."""
    if input.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but input tensor is {input.ndim}D "
                         f"(shape {tuple(input.shape)})")
    return input if input.ndim < 2 else transpose(input, 0, 1)


def _kron_meta(s, dt, st):
    a, b = tuple(s[0]), tuple(s[1])
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    return [tuple(x * y for x, y in zip(a, b))], [rules.result_dtype(*dt)]


def _kron_backward(ctx, g):
    """out[i*m + k, ...] = a[i, ...] * b[k, ...]: g seen with each dim split in (a's, b's) pairs;
    d a = sum over b's dims of g * b, d b = sum over a's dims of g * a."""
    from .reduction import sum as _sum
    from .shape import reshape
    a, b = ctx.inputs
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + tuple(a.shape), (1,) * (n - b.ndim) + tuple(b.shape)
    pairs = reshape(g, [m for pair in zip(sa, sb) for m in pair])
    da = db = None
    if a.requires_grad:
        wb = reshape(b, [m for s in sb for m in (1, s)])
        da = reshape(_sum(pairs * wb, tuple(range(1, 2 * n, 2))), a.shape)
    if b.requires_grad:
        wa = reshape(a, [m for s in sa for m in (s, 1)])
        db = reshape(_sum(pairs * wa, tuple(range(0, 2 * n, 2))), b.shape)
    return da, db


@op("kron", lambda s, o, st: [((rules.B, rules.B), (rules.B,)), ((rules.P, rules.B), (rules.P,)),
                              ((rules.B, rules.P), (rules.P,))], _kron_backward, meta=_kron_meta)
def _kron(a, b):
    return np.kron(a, b)


def kron(input, other):
    """Kronecker product (bilinear: a partial factor gives a partial result)."""
    return apply("kron", tensors(input, other))


def _cross_backward(ctx, g):
    a, b = ctx.inputs
    d = ctx.static["dim"]
    return cross(b, g, d), cross(g, a, d)


def _cross_meta(s, dt, st):
    a, b, dim = tuple(s[0]), tuple(s[1]), st["dim"]
    if len(a) != len(b) or not a:
        raise ShapeError(f"input and other can't be broadcasted to a single shape. [input's shape: {a}, other's "
                         f"shape: {b}] (cross)")
    if a[dim] != 3 or b[dim] != 3:
        raise ShapeError(f"the size of the specified dimension(which is {dim}) is not 3. (cross of shapes {a} and {b})")
    return [rules.broadcast_shape([a, b])], [rules.result_dtype(*dt)]


@op("cross", lambda s, o, st: [r for r in rules.elementwise("each")(s, o, st)
                               if not any(getattr(x, "dim", None) == st["dim"] for x in r[1])], _cross_backward,
    meta=_cross_meta)
def _cross(a, b, dim=-1):
    return np.cross(a, b, axis=dim)


def cross(input, other, dim=None):
    """Cross product of 3-vectors along dim (default: the first dim of size 3)."""
    input, other = tensors(input, other)
    if dim is None:
        dim = next((i for i, n in enumerate(input.shape) if n == 3), None)
        if dim is None:
            raise ShapeError(f"no dimension of size 3 in input (cross of shape {tuple(input.shape)})")
    dim = wrap_dim(dim, input.ndim)
    _cross_meta([input.shape, other.shape], [input.dtype, other.dtype], {"dim": dim})  # local kernels skip meta
    return apply("cross", [input, other], {"dim": dim})


def _batch_rows(in_shapes, out_shapes, static):
    return [((rules.B,), (rules.B,))] + [((rules.split(d),), (rules.split(d),)) for d in range(len(in_shapes[0]) - 2)]


_TORCH_NAMES = {"inverse": "linalg.inv", "cholesky": "linalg.cholesky"}  # the names in OneFlow's messages


def _square_meta(name, keep_dtype):
    """Matrices in the last two dims, square: the same shape; a float dtype (numpy's linalg
    gives float64 for other inputs) unless the kernel casts back (keep_dtype)."""
    def meta(shapes, dtypes, static):
        shape, head = tuple(shapes[0]), _TORCH_NAMES.get(name, name)
        if len(shape) < 2:
            raise ShapeError(f"{head}: The input tensor must be at least 2 dimensions. (got shape {shape})")
        if shape[-1] != shape[-2]:
            raise ShapeError(f"{head}: A must be batches of square matrices, but they are {shape[-2]} by "
                             f"{shape[-1]} matrices (shape {shape})")
        dt = dtypes[0] if keep_dtype or dtypes[0].is_floating else np.float64
        return [shape], [dt]
    return meta


def _cholesky_backward(ctx, g):
    """A = L L^T: with P = the lower triangle of L^T dL (its diagonal halved) and
    S = L^-T P L^-1, d A = (S + S^T) / 2 (the symmetric gradient, as PyTorch)."""
    from .triangles import tril
    L = ctx.outputs[0]
    if ctx.static["upper"]:
        L, g = transpose(L, -1, -2), transpose(g, -1, -2)
    lt_g = matmul(transpose(L, -1, -2), g)
    phi = (tril(lt_g) + tril(lt_g, -1)) * 0.5
    inv = inverse(L)
    s = matmul(transpose(inv, -1, -2), matmul(phi, inv))
    return ((s + transpose(s, -1, -2)) * 0.5,)


@op("cholesky", _batch_rows, _cholesky_backward, meta=_square_meta("cholesky", keep_dtype=False))
def _cholesky(x, upper=False):
    c = np.linalg.cholesky(x)
    return np.swapaxes(c, -1, -2).conj() if upper else c


def cholesky(input, upper=False):
    """Cholesky factor of symmetric positive-definite matrices (batch dims may be split)."""
    return apply("cholesky", tensors(input), {"upper": upper})


@op("inverse", _batch_rows, meta=_square_meta("inverse", keep_dtype=True),
    backward=lambda ctx, g: -matmul(transpose(ctx.outputs[0], -1, -2), matmul(g, transpose(ctx.outputs[0], -1, -2))))
def _inverse(x):
    return np.linalg.inv(x).astype(x.dtype)


def inverse(input):
    """Matrix inverse (batch dims may be split)."""
    return apply("inverse", tensors(input))


def _det_meta(shapes, dtypes, static):
    shape = tuple(_square_meta("linalg.det", keep_dtype=True)(shapes, dtypes, static)[0][0])
    return [shape[:-2]], [dtypes[0]]


def _det_backward(ctx, g):
    """d det(A) / dA = det(A) A^-T (Jacobi's formula; A invertible)."""
    from .shape import unsqueeze
    scale = unsqueeze(unsqueeze(g * ctx.outputs[0], -1), -1)
    return (scale * transpose(inverse(ctx.inputs[0]), -1, -2),)


@op("det", lambda s, o, st: [((rules.B,), (rules.B,))] + [((rules.split(d),), (rules.split(d),))
                                                          for d in range(len(s[0]) - 2)],
    _det_backward, meta=_det_meta)
def _det(x):
    return np.asarray(np.linalg.det(x)).astype(x.dtype)


def det(input):
    """Determinants of the matrices in the last two dims (batch dims may be split)."""
    return apply("det", tensors(input))
