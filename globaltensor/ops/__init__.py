"""Operations on tensors, one family per module; this module also binds Tensor methods."""
from . import elementwise, indexing, linalg, nn_functional, random_ops, reduction, shape  # noqa: F401
from .elementwise import *  # noqa: F401,F403
from .elementwise import BINARY, UNARY, add_n, allclose, cast, clip, equal_all, gelu, increment, scale, stanh, where
from .linalg import addmm, bmm, cholesky, cross, dot, inverse, kron, matmul, mm, mv, t
from .reduction import (all, any, argmax, argmin, cumsum, dist, logsumexp, max, mean, median, min, norm,  # noqa: A004
                        numel, prod, std, sum, trace, var)
from .shape import (broadcast_to, chunk, concat, diag, expand, expand_as, flatten, flip, meshgrid, permute, reshape,
                    reshape_, roll, slice, split, squeeze, squeeze_, stack, strided_slice, tile, transpose, tril, triu,
                    unbind, unsqueeze, unsqueeze_, unstack)
from .indexing import (argsort, gather, gather_nd, getitem, histogram, index_sample, index_select, masked_select,
                       multiplex, nonzero, scatter, scatter_, scatter_nd, scatter_nd_add, shard_index, sort, topk,
                       unique)
from .nn_functional import cross_entropy, dropout, embedding, layer_norm, linear, log_softmax, mse_loss, softmax
from .random_ops import bernoulli, multinomial, randperm
from ..tensor import Tensor

_g = globals()
PUBLIC = sorted(set(UNARY) | set(BINARY) | {
    "add_n", "allclose", "cast", "clip", "equal_all", "gelu", "increment", "scale", "stanh", "where",
    "addmm", "bmm", "cholesky", "cross", "dot", "inverse", "kron", "matmul", "mm", "mv", "t",
    "all", "any", "argmax", "argmin", "cumsum", "dist", "logsumexp", "max", "mean", "median", "min", "norm",
    "numel", "prod", "std", "sum", "trace", "var",
    "broadcast_to", "chunk", "concat", "expand", "expand_as", "flatten", "flip", "permute", "reshape", "reshape_",
    "roll", "slice", "split", "squeeze", "squeeze_", "stack", "strided_slice", "tile", "transpose", "unbind",
    "unsqueeze", "unsqueeze_", "unstack",
    "argsort", "gather", "gather_nd", "histogram", "index_sample", "index_select", "masked_select", "multiplex",
    "nonzero", "scatter", "scatter_", "scatter_nd", "scatter_nd_add", "shard_index", "sort", "topk", "unique",
    "cross_entropy", "dropout", "embedding", "layer_norm", "linear", "log_softmax", "mse_loss", "softmax",
    "bernoulli", "multinomial", "randperm", "diag", "meshgrid", "tril", "triu",
})


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


for _name in PUBLIC:
    if _name not in ("numel", "slice", "where", "add_n", "stack", "concat", "randperm", "multiplex", "scatter_nd",
                     "meshgrid"):
        setattr(Tensor, _name, _method(_g[_name]))


def _reflected(fn):
    return lambda self, other: fn(other, self)


_OPERATORS = {
    "__add__": add, "__radd__": _reflected(add), "__sub__": subtract, "__rsub__": _reflected(subtract),  # noqa: F405
    "__mul__": multiply, "__rmul__": _reflected(multiply),  # noqa: F405
    "__truediv__": divide, "__rtruediv__": _reflected(divide),  # noqa: F405
    "__floordiv__": floor_divide, "__rfloordiv__": _reflected(floor_divide),  # noqa: F405
    "__mod__": mod, "__rmod__": _reflected(mod), "__pow__": pow, "__rpow__": _reflected(pow),  # noqa: F405
    "__matmul__": matmul, "__rmatmul__": _reflected(matmul),
    "__eq__": equal, "__ne__": not_equal, "__ge__": greater_equal, "__gt__": greater_than,  # noqa: F405
    "__le__": less_equal, "__lt__": less_than,  # noqa: F405
    "__and__": logical_and, "__or__": logical_or, "__xor__": logical_xor,  # noqa: F405
    "__neg__": neg, "__abs__": abs, "__invert__": logical_not,  # noqa: F405
}
for _name, _fn in _OPERATORS.items():
    setattr(Tensor, _name, _fn)
Tensor.__hash__ = object.__hash__
Tensor.T = property(lambda self: permute(self, tuple(reversed(range(self.ndim)))))
Tensor.float = lambda self: cast(self, "float32")
Tensor.double = lambda self: cast(self, "float64")
Tensor.long = lambda self: cast(self, "int64")
Tensor.int = lambda self: cast(self, "int32")
Tensor.bool = lambda self: cast(self, "bool")
Tensor.to = lambda self, dtype: cast(self, dtype)
Tensor.astype = lambda self, dtype: cast(self, dtype)
Tensor.view = reshape


def _getitem(self, key):
    from ..tensor import Tensor as _T
    if isinstance(key, _T) and key.dtype.name == "bool":
        return masked_select(self, key)
    return getitem(self, key)


Tensor.__getitem__ = _getitem
