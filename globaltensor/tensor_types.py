"""The public tensor classes (gt.Tensor, gt.FloatTensor, gt.LongTensor, ...) and the new_* methods: user-facing forms over creation."""
from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np

from . import creation
from . import dtype as _dtype
from .creation import DeviceLike, DTypeLike, Number, SbpLike
from .placement import placement as Placement
from .tensor import Size
from .tensor import Tensor as _Core


class _TensorType(type):
    """The metaclass of the public classes. They make tensors (instances of the core class, whose
    constructor wraps a local piece and stays the fast internal path) and answer isinstance and
    issubclass by the core class (the typed ones by dtype too); attributes set on them go to the
    core class, so `gt.Tensor.my_method = f` reaches every tensor."""

    def __instancecheck__(cls, obj: Any) -> bool:
        typed = cls.__dict__.get("_typed_as")
        return isinstance(obj, _Core) and (typed is None or obj._dtype == typed)

    def __subclasscheck__(cls, sub: type) -> bool:
        if type.__subclasscheck__(cls, sub):
            return True
        return cls.__dict__.get("_typed_as") is None and isinstance(sub, type) and issubclass(sub, _Core)

    def __setattr__(cls, name: str, value: Any) -> None:
        setattr(_Core, name, value)


def _make(cls, args, dtype, device, placement, sbp, requires_grad):
    dt = _dtype.to_dtype(dtype) if dtype is not None else (cls.__dict__.get("_typed_as")
                                                            or _dtype.get_default_dtype())
    if len(args) == 1 and isinstance(args[0], _Core):
        t = args[0]
        return t if t._dtype == dt else t.to(dt)
    if not args or all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) \
            or (len(args) == 1 and isinstance(args[0], Size)):
        shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else tuple(args) or (0,)
        return creation.empty(shape, dtype=dt, device=device, placement=placement, sbp=sbp,
                              requires_grad=requires_grad)
    if len(args) != 1:
        raise TypeError(f"{cls.__name__}(...) takes sizes (ints) or one data argument (a list, tuple, numpy "
                        f"array or tensor), got {len(args)} arguments")
    data = args[0]
    if isinstance(data, (float, complex, bool, np.generic)):
        raise TypeError(f"{cls.__name__}({data!r}): a single number is a size only when it is an int; "
                        f"use gt.tensor({data!r}) for a 0-d tensor")
    return creation.tensor(data, dtype=dt, device=device, placement=placement, sbp=sbp, requires_grad=requires_grad)


class Tensor(_Core, metaclass=_TensorType):
    """gt.Tensor as users call it (torch.Tensor, oneflow.Tensor): Tensor(2, 4) or Tensor(Size)
    is an uninitialised tensor of that shape, Tensor([1, 2]) / Tensor(np_array) a copy of the data,
    of the default float dtype (dtype=, device=, placement= and sbp= as the factories). The result
    is a core tensor; isinstance(x, gt.Tensor) holds for every tensor."""

    __slots__ = ()
    _typed_as: Optional[_dtype.DType] = None  # the element type of a typed class (LongTensor: int64)

    def __new__(cls, *args: Any, dtype: DTypeLike = None, device: DeviceLike = None,
                placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False) -> _Core:
        return _make(cls, args, dtype, device, placement, sbp, requires_grad)


def _typed(name: str, dt: _dtype.DType) -> type:
    doc = f"gt.{name}: gt.Tensor's forms with dtype {dt.name}; isinstance(x, gt.{name}) when x.dtype is {dt.name}."
    return _TensorType(name, (Tensor,), {"__slots__": (), "_typed_as": dt, "__doc__": doc, "__module__": __name__})


FloatTensor = _typed("FloatTensor", _dtype.float32)
DoubleTensor = _typed("DoubleTensor", _dtype.float64)
HalfTensor = _typed("HalfTensor", _dtype.float16)
BFloat16Tensor = _typed("BFloat16Tensor", _dtype.bfloat16)
LongTensor = _typed("LongTensor", _dtype.int64)
IntTensor = _typed("IntTensor", _dtype.int32)
CharTensor = _typed("CharTensor", _dtype.int8)
ByteTensor = _typed("ByteTensor", _dtype.uint8)
BoolTensor = _typed("BoolTensor", _dtype.bool)
TYPED = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "CharTensor",
         "ByteTensor", "BoolTensor")


# --- x.new_*: a new tensor like x (its dtype, device or placement and sbp) unless told ---------------

def _like_x(x, size, dtype, device, placement, sbp):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if device is not None and placement is not None:
        raise ValueError("device= and placement= together: pass one of them")
    dt = _dtype.to_dtype(dtype, x._dtype)
    if device is not None:
        return dict(dtype=dt, device=device), size
    if placement is None and x.is_global:
        placement = x.placement
        sbp = sbp if sbp is not None else x.sbp
    if placement is not None:
        return dict(dtype=dt, placement=placement, sbp=sbp if sbp is not None else x.sbp), size
    return dict(dtype=dt, device=x.device), size


def _new_zeros(self: _Core, *size: Union[int, tuple], dtype: DTypeLike = None, device: DeviceLike = None,
               placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False) -> _Core:
    """Zeros of `size`, with this tensor's dtype and device (a global one: its placement and sbp) unless given."""
    kw, size = _like_x(self, size, dtype, device, placement, sbp)
    return creation.zeros(*size, requires_grad=requires_grad, **kw)


def _new_ones(self: _Core, *size: Union[int, tuple], dtype: DTypeLike = None, device: DeviceLike = None,
              placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False) -> _Core:
    """Ones of `size`, with this tensor's dtype and device (a global one: its placement and sbp) unless given."""
    kw, size = _like_x(self, size, dtype, device, placement, sbp)
    return creation.ones(*size, requires_grad=requires_grad, **kw)


def _new_empty(self: _Core, *size: Union[int, tuple], dtype: DTypeLike = None, device: DeviceLike = None,
               placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False) -> _Core:
    """An uninitialised tensor of `size`, like this one (dtype, device, or placement and sbp) unless given."""
    kw, size = _like_x(self, size, dtype, device, placement, sbp)
    return creation.empty(*size, requires_grad=requires_grad, **kw)


def _new_full(self: _Core, size: Union[int, tuple], fill_value: Number, dtype: DTypeLike = None,
              device: DeviceLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
              requires_grad: bool = False) -> _Core:
    """fill_value everywhere, with this tensor's dtype and device (global: placement and sbp) unless given."""
    kw, size = _like_x(self, (size,), dtype, device, placement, sbp)
    return creation.full(size, fill_value, requires_grad=requires_grad, **kw)


def _new_tensor(self: _Core, data: Any, dtype: DTypeLike = None, device: DeviceLike = None,
                requires_grad: bool = False, placement: Optional[Placement] = None, sbp: SbpLike = None) -> _Core:
    """A tensor of `data` with this tensor's dtype unless given, on a local one's device, or (as
    OneFlow) on a global one's placement and sbp; device= makes it local, placement=/sbp= global."""
    dt = _dtype.to_dtype(dtype, self._dtype)
    if device is None and (placement is not None or sbp is not None or self.is_global):
        return creation.tensor(data, dtype=dt, placement=placement or self.placement, sbp=sbp or self.sbp,
                               requires_grad=requires_grad)
    where = device if device is not None else (None if self.is_global else self.device)
    return creation.tensor(data, dtype=dt, device=where, requires_grad=requires_grad)


_Core.new_zeros, _Core.new_ones, _Core.new_empty, _Core.new_full = _new_zeros, _new_ones, _new_empty, _new_full
_Core.new_tensor = _new_tensor


def from_numpy(ndarray: np.ndarray) -> _Core:
    """A local tensor over `ndarray`'s memory, as torch.from_numpy / flow.from_numpy: a write through
    either shows in the other; the array's dtype is kept (float64 stays float64)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}")
    dt = _dtype.of_array(ndarray)  # raises, naming the dtype, for one we have no kernels for
    return _Core(ndarray, dtype=dt)
