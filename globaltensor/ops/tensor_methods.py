"""Tensor methods PyTorch and OneFlow users reach for that are not ops: type(), type_as, new, unfold, view_as, mT, grad_fn ..."""
from __future__ import annotations

from typing import Any, Optional, Union

from .. import creation
from .. import dtype as _dtype
from ..tensor import Size, Tensor
from .concat_split import stack
from .elementwise import cast, conj
from .everyday_shape import movedim, narrow

# The element type of each tensor type name (torch's and OneFlow's: "FloatTensor" is float32).
TYPE_NAMES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16", "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64", "IntTensor": "int32", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool",
    "ComplexFloatTensor": "complex64", "ComplexDoubleTensor": "complex128",
}
_NAME_OF = {dt: name for name, dt in TYPE_NAMES.items()}
# A type string names its framework first; each of these reads as ours.
PREFIXES = ("globaltensor.", "gt.", "torch.", "oneflow.", "flow.")


class TensorTypeName(str):
    """What x.type() returns: "globaltensor.FloatTensor" ("globaltensor.cuda.FloatTensor" on a GPU).
    It compares equal to the same name under PyTorch's and OneFlow's prefixes too ("torch.FloatTensor",
    "oneflow.FloatTensor"), so code written for either keeps its comparisons; str() gives our text."""

    __slots__ = ()

    def _bare(self) -> str:
        return _strip(str(self))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and _strip(other) == self._bare()

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


def _strip(name: str) -> str:
    for p in PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


def _type_name(x: Tensor) -> TensorTypeName:
    where = x.placement.type if x.is_global else x.device.type
    kind = _NAME_OF.get(x.dtype.name, x.dtype.name)
    return TensorTypeName(f"globaltensor.{'cuda.' if where == 'cuda' else ''}{kind}")


def _dtype_of_type(value: Any) -> tuple[_dtype.DType, Optional[str]]:
    """(dtype, device type or None) named by a dtype, a tensor class (gt.FloatTensor) or a type string."""
    typed = getattr(value, "_typed_as", None) if isinstance(value, type) else None
    if typed is not None:
        return typed, None
    if isinstance(value, str) and not isinstance(value, TensorTypeName) and value in _dtype._BY_NAME:
        return _dtype.to_dtype(value), None
    if isinstance(value, str):
        bare = _strip(value)
        device = "cuda" if bare.startswith("cuda.") else None
        kind = bare[len("cuda."):] if device else bare
        if kind in TYPE_NAMES:
            return _dtype.to_dtype(TYPE_NAMES[kind]), device
        raise ValueError(f"type({value!r}): not a tensor type; expected a dtype or one of "
                         f"{', '.join('globaltensor.' + n for n in TYPE_NAMES)}")
    return _dtype.to_dtype(value), None


def type_(self: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Union[str, Tensor]:
    """x.type(): the type name ("globaltensor.FloatTensor", equal to "torch.FloatTensor" and
    "oneflow.FloatTensor"); x.type(dtype) with a dtype, a tensor class or a type string: x cast to it
    (x itself when it already has that type; "...cuda.XTensor" moves a local tensor to the GPU too)."""
    if dtype is None:
        return _type_name(self)
    dt, device = _dtype_of_type(dtype)
    out = self if self.dtype == dt else cast(self, dt)
    if device is not None and self.is_local and self.device.type != device:
        out = out.to(device)
    return out


def type_as(self: Tensor, other: Tensor) -> Tensor:
    """x cast to other's dtype, and placed as other is (OneFlow's type_as): a local x becomes global
    on other's placement and sbp when other is global; a global x becomes local on other's device
    when other is local."""
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as: expected a tensor, got {type(other).__name__}")
    out = self if self.dtype == other.dtype else cast(self, other.dtype)
    if other.is_global and (out.is_local or out.placement != other.placement or out.sbp != other.sbp):
        return out.to_global(placement=other.placement, sbp=other.sbp)
    if other.is_local and out.is_global:
        out = out.to_local()
    if other.is_local and out.device != other.device:
        out = out.to(other.device)
    return out


def is_floating_point(self: Tensor) -> bool:
    """Whether the dtype is a floating one (float16/bfloat16/float32/float64), as PyTorch."""
    return bool(self.dtype.is_floating)


def is_contiguous(self: Tensor) -> bool:
    """Whether this rank's local piece is laid out row-major without gaps (PyTorch's is_contiguous)."""
    flags = getattr(self._local, "flags", None)
    return True if flags is None else bool(flags.c_contiguous)


def is_view(self: Tensor) -> bool:
    """Whether this tensor's piece is a view of another tensor's memory (OneFlow's is_view)."""
    return getattr(self._local, "base", None) is not None


def new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """OneFlow's/PyTorch's x.new: x.new() an empty tensor of shape (0,), x.new(2, 3) (or a Size) an
    uninitialised one of that shape, x.new(data) a copy of data (a list, array or tensor); each with
    x's dtype and device, or x's placement and sbp when x is global."""
    if args and not all(isinstance(a, int) and not isinstance(a, bool) for a in args) \
            and not (len(args) == 1 and isinstance(args[0], Size)):
        if len(args) != 1:
            raise TypeError(f"new(...) takes sizes (ints) or one data argument, got {len(args)} arguments")
        data = args[0]
        data = data.numpy() if isinstance(data, Tensor) else data
        if self.is_global:
            return creation.tensor(data, dtype=self.dtype, placement=self.placement, sbp=self.sbp, **kwargs)
        return creation.tensor(data, dtype=self.dtype, device=self.device, **kwargs)
    size = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else (tuple(args) or (0,))
    return new_empty(self, size, **kwargs)


def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """PyTorch's Tensor.unfold: every slice of `size` elements along `dimension`, `step` apart, as a
    new last dim (dim `dimension` becomes the number of slices). Built from narrow and stack, so it
    is differentiable and works on global tensors."""
    ndim = max(self.ndim, 1)
    if not -ndim <= dimension < ndim:
        raise IndexError(f"unfold: dimension {dimension} out of range for a tensor of {self.ndim} dims")
    dimension %= ndim
    length = self.shape[dimension] if self.ndim else 1
    if size < 0 or size > length:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {dimension} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    x = self.reshape(1) if self.ndim == 0 else self
    windows = [narrow(x, dimension, i * step, size) for i in range((length - size) // step + 1)]
    out = movedim(stack(windows, dim=dimension), dimension + 1, -1)
    return out.reshape(size) if self.ndim == 0 else out


def conj_physical(input: Tensor) -> Tensor:
    """The complex conjugate, computed (our conj always computes it); real tensors: themselves."""
    return conj(input) if input.dtype.is_complex else input


def _meta(x: Tensor, size: Any, dtype: Any, device: Any, placement: Any, sbp: Any) -> tuple[tuple, dict]:
    """OneFlow's new_* defaults: size, dtype and device (or placement and sbp) from x unless given."""
    size = tuple(x.shape) if size is None else size
    size = (size,) if isinstance(size, int) else tuple(size[0]) if len(size) == 1 and \
        isinstance(size[0], (tuple, list, Size)) else tuple(size)
    dt = _dtype.to_dtype(dtype, x.dtype)
    if device is not None:
        return size, dict(dtype=dt, device=device)
    if placement is None and x.is_global:
        placement, sbp = x.placement, sbp if sbp is not None else x.sbp
    if placement is not None:
        return size, dict(dtype=dt, placement=placement, sbp=sbp if sbp is not None else x.sbp)
    return size, dict(dtype=dt, device=x.device)


def new_empty(x: Tensor, size: Any = None, dtype: Any = None, device: Any = None, placement: Any = None,
              sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """OneFlow's flow.new_empty(x, size): uninitialised, like x (dtype, device or placement/sbp) unless given."""
    size, kw = _meta(x, size, dtype, device, placement, sbp)
    return creation.empty(size, requires_grad=requires_grad, **kw)


def new_zeros(x: Tensor, size: Any = None, dtype: Any = None, device: Any = None, placement: Any = None,
              sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """OneFlow's flow.new_zeros(x, size=None): zeros of size (x's shape if None), like x unless given."""
    size, kw = _meta(x, size, dtype, device, placement, sbp)
    return creation.zeros(size, requires_grad=requires_grad, **kw)


def new_ones(x: Tensor, size: Any = None, dtype: Any = None, device: Any = None, placement: Any = None,
             sbp: Any = None, requires_grad: bool = False) -> Tensor:
    """OneFlow's flow.new_ones(x, size=None): ones of size (x's shape if None), like x unless given."""
    size, kw = _meta(x, size, dtype, device, placement, sbp)
    return creation.ones(size, requires_grad=requires_grad, **kw)


new_empty.__name__, new_zeros.__name__, new_ones.__name__ = "new_empty_op", "new_zeros_op", "new_ones_op"  # OneFlow's
EVERYDAY = ("conj_physical",)  # on gt (beside the ops), PyTorch's name
ONEFLOW_ONLY = ("new_empty", "new_zeros", "new_ones")  # on gt, outside __all__: OneFlow's top-level names

Tensor.type, Tensor.type_as, Tensor.is_floating_point, Tensor.is_contiguous = type_, type_as, is_floating_point, \
    is_contiguous
Tensor.is_view, Tensor.new, Tensor.unfold, Tensor.conj_physical = is_view, new, unfold, conj_physical
Tensor.grad_fn = property(lambda self: self._node, doc="the autograd node that made this tensor (None for a leaf)")
Tensor.view_as = lambda self, other: self.view(*other.shape)
Tensor.reshape_as = lambda self, other: self.reshape(*other.shape)
Tensor.nelement = Tensor.numel  # PyTorch's older names
Tensor.ndimension = Tensor.dim
Tensor.element_size = lambda self: self.dtype.itemsize
Tensor.mT = property(lambda self: self.transpose(-2, -1), doc="the last two dims swapped (batched matrices)")
