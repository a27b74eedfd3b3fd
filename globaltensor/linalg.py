"""gt.linalg: torch.linalg's (and oneflow.linalg's) names, written with the ops (their SBP rows
and gradients come with them): norm, vector_norm, matrix_norm, matmul, inv, cholesky, cross,
vecdot, multi_dot, solve, matrix_power, diagonal, det."""
import math

from .ops import amax, amin, cholesky, inverse, matmul, sum  # noqa: A004, F401
from .ops import abs as _abs
from .ops import cross as _cross
from .ops import norm as _norm
from .ops.everyday_shape import chain_matmul, diagonal, matrix_power  # noqa: F401
from .errors import wrap_dim
from .ops.linalg import det  # noqa: F401

inv = inverse


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - torch's name
    """The vector ord-norm over dim (all dims when None): 0, inf, -inf or any positive number."""
    if dtype is not None:
        x = x.to(dtype)
    return _norm(x, ord, dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """The matrix norm over the two dims: "fro", 1, -1 (columns' abs sums), inf, -inf (rows')."""
    if dtype is not None:
        A = A.to(dtype)
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":
        return _norm(A, 2, (d0, d1), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = sum(_abs(A), inner, keepdim=True)
        out = (amax if ord > 0 else amin)(sums, outer, keepdim=True)
        return out if keepdim else out.squeeze((d0, d1))
    raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values, not available yet")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """vector_norm for a vector ord or dim of one dim, matrix_norm for a matrix ord or 2 dims; the
    2-norm of the flattened input when both are None."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype) if dim is None or len(dim) == 1 else \
            matrix_norm(A, "fro", dim, keepdim, dtype=dtype)
    if (dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2):
        return matrix_norm(A, ord, dim or (-2, -1), keepdim, dtype=dtype)
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim (default the last)."""
    return _cross(input, other, wrap_dim(dim, input.ndim))


def vecdot(x, y, *, dim=-1):
    """sum(x * y) over dim."""
    return sum(x * y, dim)


def multi_dot(tensors):
    """tensors[0] @ tensors[1] @ ..."""
    return chain_matmul(*tensors)


def solve(A, B, *, left=True):
    """X with A @ X = B (left) or X @ A = B, through the inverse of A."""
    if left:
        return matmul(inverse(A), B)
    return matmul(B, inverse(A))
