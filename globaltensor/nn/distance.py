"""Distances between rows: pairwise_distance and cosine_similarity (PyTorch's formulas) and their modules."""
from .. import ops
from ..errors import DTypeError
from .. import dtype as _dtype
from .module import Module

__all__ = ["pairwise_distance", "cosine_similarity", "PairwiseDistance", "CosineSimilarity"]


def _vector_norm(x, p, dim, keepdim=False):
    """The p-norm along dim (p: a number, inf or -inf)."""
    if p == 2:
        return ops.sqrt(ops.sum(x * x, dim, keepdim))
    a = ops.abs(x)
    if p == float("inf"):
        return ops.amax(a, dim, keepdim)
    if p == float("-inf"):
        return ops.amin(a, dim, keepdim)
    if p == 1:
        return ops.sum(a, dim, keepdim)
    if p == 0:
        return ops.sum(ops.cast(a != 0, x.dtype), dim, keepdim)
    return ops.pow(ops.sum(ops.pow(a, p), dim, keepdim), 1.0 / p)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dim."""
    ndim = max(x1.ndim, x2.ndim)
    return _vector_norm(x1 - x2 + eps, p, ndim - 1 if ndim else None, keepdim)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along dim (the clamp is not differentiated, as
    PyTorch's)."""
    common = _dtype.result_type(x1, x2)
    if not common.is_floating and not common.is_complex:
        raise DTypeError(f"expected common dtype to be floating point, yet common dtype is {common} "
                         f"(cosine_similarity)")
    n1, n2 = _vector_norm(x1, 2, dim, True), _vector_norm(x2, 2, dim, True)
    n1 = n1 + ops.where(n1 < eps, eps - n1, 0.0).detach()
    n2 = n2 + ops.where(n2 < eps, eps - n2, 0.0).detach()
    return ops.sum((x1 / n1) * (x2 / n2), dim)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)
