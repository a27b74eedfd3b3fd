"""Operations on tensors, one family per module; this module also binds Tensor methods and
operators, the in-place ops (add_, x[k] = v, ...) among them."""
import builtins

import numpy as np

from . import (activations, attention_heads, bitwise, concat_split, data_dependent, elementwise,  # noqa: F401
               embedding_lookup, gather_scatter, gather_scatter_nd, indexing, linalg, linear_layer, losses, norms,
               random_ops, reduction, reduction_composites, shape, slicing, sorting, triangles)
from . import complex_ops  # noqa: F401 - x.real / x.imag (attributes), x.is_complex()
from . import conversion  # noqa: F401 - binds Tensor.to_global, numpy, to, cpu, cuda, contiguous
from . import conv  # noqa: F401 - registers unfold2d / fold2d (nn.functional has the convolutions)
from . import attention  # noqa: F401 - registers attention / attention_backward (nn.attention calls them)
from .elementwise import *  # noqa: F401,F403
from .elementwise import BINARY, RAW_BINARY, UNARY, cast, clip, clone, masked_fill, where
from .elementwise_extras import add_n, allclose, equal_all, increment, scale, shard_index
from .bitwise import bitwise_and, bitwise_not, bitwise_or, bitwise_xor
from .complex_ops import angle, complex, is_complex, polar, view_as_complex, view_as_real  # noqa: A004
from .linalg import addmm, bmm, cholesky, cross, dot, inverse, kron, matmul, mm, mv, t
from .reduction import (all, amax, amin, any, argmax, argmin, cumsum, histogram, max, mean, median,  # noqa: A004
                        min, numel, prod, return_types, sum, trace)
from .reduction_composites import dist, logsumexp, norm, std, var
from .shape import (broadcast_to, expand, expand_as, flatten, permute, reshape, reshape_, squeeze, squeeze_, transpose,
                    unsqueeze, unsqueeze_)
from .rearrange import flip, roll, tile
from .concat_split import chunk, concat, split, stack, unbind, unstack
from .meshgrid import meshgrid
from .slicing import slice, strided_slice
from .triangles import diag, tril, triu
from .gather_scatter import gather, index_sample, index_select, scatter, scatter_
from .gather_scatter_nd import gather_nd, multiplex, scatter_nd, scatter_nd_add
from .data_dependent import masked_select, nonzero, unique
from .sorting import argsort, sort, topk
from .indexing import getitem
from .activations import gelu, log_softmax, softmax, stanh
from .batch_norm_train import batch_norm
from .norms import layer_norm
from .linear_layer import linear, linear_in_out
from .embedding_lookup import embedding
from .losses import cross_entropy, mse_loss
from .attention_heads import merge_heads, split_heads
from .random_ops import bernoulli, dropout, multinomial, randperm
from ..creation import (arange, empty, empty_like, eye, full, full_like, linspace, normal, ones, ones_like, rand,
                       randint, randn, uniform, zeros, zeros_like)
from ..registry.keywords import accept_paddle_keywords
from ..tensor import Tensor

cat = concat  # PyTorch's name


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
    "amax", "amin", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "cat", "clone", "masked_fill",
    "split_heads", "merge_heads", "angle", "complex", "is_complex", "polar", "view_as_complex", "view_as_real",
})
FACTORIES = ("arange", "empty", "empty_like", "eye", "full", "full_like", "linspace", "normal", "ones", "ones_like",
             "rand", "randint", "randn", "uniform", "zeros", "zeros_like")
for _name in PUBLIC + list(FACTORIES):  # OneFlow/PyTorch's signatures, Paddle's keyword names too
    _g[_name] = accept_paddle_keywords(_name, _g[_name])
_g["empty_like"].__name__ = "empty_like_op"  # OneFlow's (its tests pick a path by it), as new_empty's


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


for _name in PUBLIC:
    if _name not in ("numel", "slice", "where", "add_n", "stack", "concat", "cat", "randperm", "multiplex",
                     "scatter_nd", "meshgrid", "real", "imag", "complex", "polar", "view_as_complex",
                     "view_as_real"):  # x.real, x.imag: attributes (ops/complex_ops.py)
        setattr(Tensor, _name, _method(_g[_name]))


def _operand(value):
    """Whether a binary operator takes `value` (else it answers NotImplemented, as PyTorch, so
    Python asks the other operand: pytest.approx, for one). A tuple holding tensors (a (values,
    indices) result) is not data."""
    if isinstance(value, (list, tuple)):
        return not builtins.any(isinstance(v, Tensor) for v in value)
    return isinstance(value, (Tensor, bool, int, float, builtins.complex, np.ndarray, np.generic))


def _operator(fn, reflected=False):
    if reflected:
        return lambda self, other: fn(other, self) if _operand(other) else NotImplemented
    return lambda self, other: fn(self, other) if _operand(other) else NotImplemented


_BINARY_OPERATORS = {  # the fronts themselves: an operator has no keywords to translate
    "add": RAW_BINARY["add"], "sub": RAW_BINARY["subtract"], "mul": RAW_BINARY["multiply"],
    "truediv": RAW_BINARY["divide"], "floordiv": RAW_BINARY["floor_divide"], "mod": RAW_BINARY["mod"],
    "pow": RAW_BINARY["pow"], "matmul": linalg.matmul, "and": bitwise.bitwise_and, "or": bitwise.bitwise_or,
    "xor": bitwise.bitwise_xor,
}
for _name, _fn in _BINARY_OPERATORS.items():
    setattr(Tensor, f"__{_name}__", _operator(_fn))
    setattr(Tensor, f"__r{_name}__", _operator(_fn, reflected=True))
for _name, _op in {"eq": "equal", "ne": "not_equal", "ge": "greater_equal", "gt": "greater_than",
                   "le": "less_equal", "lt": "less_than"}.items():
    setattr(Tensor, f"__{_name}__", _operator(RAW_BINARY[_op]))
Tensor.__neg__, Tensor.__abs__, Tensor.__invert__ = neg, abs, bitwise_not  # noqa: F405
Tensor.__hash__ = object.__hash__
Tensor.T = property(lambda self: permute(self, tuple(reversed(range(self.ndim)))))
Tensor.float = lambda self: cast(self, "float32")
Tensor.double = lambda self: cast(self, "float64")
Tensor.long = lambda self: cast(self, "int64")
Tensor.int = lambda self: cast(self, "int32")
Tensor.bool = lambda self: cast(self, "bool")
Tensor.half = lambda self: cast(self, "float16")
Tensor.bfloat16 = lambda self: cast(self, "bfloat16")
Tensor.char = lambda self: cast(self, "int8")
Tensor.byte = lambda self: cast(self, "uint8")


def _short(self):
    """PyTorch's x.short() (int16): a dtype globaltensor has no kernels for, so a clear TypeError."""
    raise TypeError("short(): int16 is not a globaltensor dtype (supported integer dtypes: int8, uint8, int32, "
                    "int64); use .int() or .char()")


def _data_ptr(self):
    """The address of this rank's local piece's first element, as an int (PyTorch's data_ptr):
    numpy's __array_interface__ data pointer on CPU, cupy's .data.ptr on CUDA."""
    a = self._local
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    return int(a.data.ptr)


Tensor.short, Tensor.data_ptr = _short, _data_ptr
Tensor.astype = lambda self, dtype: cast(self, dtype)


def _view(self, *shape):
    """The same piece seen in another shape, never a copy (as PyTorch's view): RuntimeError when
    the piece's strides do not allow it. On a global tensor, OneFlow's view: the reshape op, whose
    SBP follows the dims that split alike (S(0) of (8, 4) as (2, 4, 4) stays S(0) when 2 divides
    evenly over the ranks) and whose input is boxed, as OneFlow does, where no split survives."""
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape
    out = reshape(self, *shape)
    if out is self or self.is_global:
        return out
    if not _same_memory(self._local, out._local):
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride (at least one "
                           f"dimension spans across two contiguous subspaces). Use .reshape(...) instead. (shape "
                           f"{tuple(self.shape)} to {tuple(out.shape)}: the piece is not contiguous enough)")
    return out


def _same_memory(a, b):
    if a.size == 0 or b.size == 0:
        return True
    if isinstance(a, np.ndarray):
        return np.shares_memory(a, b)
    return getattr(getattr(b, "data", None), "ptr", 0) == getattr(getattr(a, "data", None), "ptr", 1) \
        or b.base is a or b.base is a.base is not None


def _repeat(self, *sizes):
    """PyTorch's repeat: the tensor tiled `sizes` times along each dim (leading new dims allowed)."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else sizes
    if len(sizes) < self.ndim:
        raise RuntimeError(f"Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           f"tensor (repeat: {len(sizes)} repeat sizes for a tensor of {self.ndim} dims)")
    return tile(self, tuple(int(n) for n in sizes))


Tensor.view, Tensor.repeat, Tensor.clone, Tensor.masked_fill = _view, _repeat, clone, masked_fill


from . import everyday, everyday_shape  # noqa: E402 - PyTorch's everyday names the families lack
from .everyday import EVERYDAY as _E1, METHODS as _M1, normalize  # noqa: E402
from .everyday_shape import EVERYDAY as _E2, METHODS as _M2  # noqa: E402

from .einsum import einsum  # noqa: E402,F401
from . import tensor_methods  # noqa: E402 - binds x.type(), type_as, new, unfold, grad_fn ...
from .tensor_methods import EVERYDAY as _E3, ONEFLOW_ONLY as _O3  # noqa: E402
from .tensor_methods import conj_physical, new_empty, new_ones, new_zeros  # noqa: E402,F401
from .oneflow_only import broadcast_like, in_top_k, view  # noqa: E402,F401
from . import conv3d, extras, pooling, resize, sampling  # noqa: E402,F401 - less common ops, pools, pad/interpolate, sampling
from .extras import EVERYDAY as _E4, METHODS as _M4  # noqa: E402

# on gt beside PUBLIC; Tensor methods where PyTorch has them
EVERYDAY = sorted(set(_E1) | set(_E2) | set(_E3) | set(_E4) | {"einsum"})
_NEW_ONEFLOW_ONLY = tuple(extras.ONEFLOW_ONLY) + ("roi_align",)  # docs/nn_extras.md
# on gt, outside its __all__: OneFlow's names torch lacks
ONEFLOW_ONLY = ("broadcast_like", "in_top_k", "view") + _NEW_ONEFLOW_ONLY + _O3
_HOMES = {**{n: everyday for n in _E1}, **{n: everyday_shape for n in _E2}, **{n: extras for n in _E4},
          **{n: extras for n in extras.ONEFLOW_ONLY}, "roi_align": sampling}
for _name in EVERYDAY + list(_NEW_ONEFLOW_ONLY):
    if _name != "einsum" and _name not in _E3:
        _g[_name] = accept_paddle_keywords(_name, getattr(_HOMES[_name], _name))
for _name in sorted(set(_M1) | set(_M2) | set(_M4)):
    setattr(Tensor, _name, _method(_g[_name]))
Tensor.where = lambda self, condition, other: where(condition, self, other)  # torch's Tensor.where(cond, y)

from . import inplace  # noqa: E402,F401 - binds add_/mul_/.../x[k] = v (it uses the ops above)
