"""Factories: build each rank's piece of a new tensor directly (no full-size temporary)."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import dtype as _dtype
from . import random as _random
from .backends import devices as _devices
from .env import get_rank
from .layout import holds_value, local_box
from .placement import placement as Placement
from .sbp import normalize
from .sbp import sbp as SBP
from .scope import recorder as _recorder
from .tensor import Tensor, device as Device

Number = Union[int, float, bool]
DTypeLike = Union[None, _dtype.DType, str, type, np.dtype]  # gt.float32, "float32", np.float32
SbpLike = Union[None, SBP, Sequence[SBP]]
DeviceLike = Union[None, str, Device]  # "cpu", "cuda:0", gt.device("cuda", 0)


def _shape(size):
    """(2, 3), [2, 3] or 2, 3 -> (2, 3), checked."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"sizes must be non-negative, got {shape}")
    return shape


def allocate(shape, dt):
    """A host piece's storage: shared memory when several ranks may read it, else the heap."""
    return _devices.device("cpu").empty(shape, dt.np)


def build(global_shape, dt, placement, sbp, fill, device=None):
    """A tensor whose piece is `fill(box)` for the box this rank holds (zeros where a
    partial_sum axis gives the value to another rank; empty outside the placement); a local
    one on `device` (the host unless it names cuda)."""
    if placement is None:
        if sbp is not None:
            raise ValueError("sbp needs a placement")
        box = [(0, n) for n in global_shape]
        on_gpu = device is not None and _on_gpu(device)
        local = _on_device(_devices.device("cuda"), fill, box) if on_gpu else fill(box)
        return _made(Tensor(local, global_shape, dt))
    if device is not None:
        raise ValueError(f"device={str(device)!r} and placement= together: a global tensor lives on its placement "
                         f"(its type says cpu or cuda); pass one of them")
    if not isinstance(placement, Placement):
        raise TypeError(f"placement must be a gt.placement, got {placement!r}")
    placement.check_in_job("a new tensor")
    if sbp is None:
        raise ValueError("a global tensor needs sbp as well as placement")
    sbp = normalize(sbp, placement.ndim, len(global_shape))
    coord = placement.mesh_coord(get_rank())
    dev = _devices.device(placement.type)
    if coord is None:
        local = dev.empty((0,) * max(1, len(global_shape)), dt.np)
    else:  # filled on the host (the counter-based generator runs there), then moved
        box = local_box(global_shape, placement.hierarchy, sbp, coord)
        if not holds_value(sbp, coord):
            local = dev.zeros(tuple(b - a for a, b in box), dt.np)
        else:
            local = fill(box) if dev.is_host else _on_device(dev, fill, box)
    return _made(Tensor(local, global_shape, dt, placement, sbp))


def _on_gpu(device):
    """Whether device= names this rank's GPU ("cpu" -> False; a cuda index other than its own raises)."""
    where = Device(device)
    if where.type == "cpu":
        return False
    _devices.require_cuda(f"device={str(device)!r}")
    if where.index is not None and not _devices.simulated():
        from .backends import cuda
        if where.index != cuda.local_device():
            raise ValueError(f"device={str(device)!r}: this rank's pieces live on its own GPU, "
                             f"cuda:{cuda.local_device()} (LOCAL_RANK picks it)")
    return True


def _made(t):
    """A new tensor of constant values; a graph that captures records it as a constant."""
    if (rec := _recorder()) is not None:
        rec.constant(t)
    return t


def _constant(value, dt):
    """fill(box): a host piece of one value. fill.on(dev, box) fills a device piece on the device
    when the value is a Python number of numpy's own dtype: an upload from pageable host memory
    would wait for the GPU's stream (as loss.backward()'s seed of ones did, every step)."""
    def fill(box):
        out = allocate(tuple(b - a for a, b in box), dt)
        out[...] = value
        return out
    if type(value) in (bool, int, float) and dt.np.kind in "biuf" and dt.np.isbuiltin:
        fill.on = lambda dev, box: dev.full(tuple(b - a for a, b in box), dt.np.type(value), dt.np)
    return fill


def _on_device(dev, fill, box):
    """fill(box) as a piece of the device `dev`."""
    on = getattr(fill, "on", None)
    return on(dev, box) if on is not None else dev.from_host(fill(box))


def _first_leaf(data):
    while isinstance(data, (list, tuple)) and len(data):
        data = data[0]
    return data


def host_array(data):
    """`data` as a numpy array with the dtype gt.tensor gives it without dtype=, as torch.tensor
    does: Python floats (lists of them) become the default float dtype; numpy arrays and numpy
    scalars keep theirs (float64 stays float64); Python ints int64, bools bool; Python complex
    numbers the default dtype's complex one (complex64)."""
    array = np.asarray(data)
    if array.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)) \
            and type(_first_leaf(data)) is not np.float64:
        array = array.astype(_dtype.get_default_dtype().np)
    elif array.dtype == np.complex128 and not isinstance(data, (np.ndarray, np.generic)) \
            and type(_first_leaf(data)) is not np.complex128:
        array = array.astype(_dtype.scalar_dtype(1j).np)
    return array


def tensor(data: Any, dtype: DTypeLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
           requires_grad: bool = False, check_meta: bool = True, device: DeviceLike = None,
           pin_memory: bool = False) -> Tensor:
    """A tensor from `data`, the whole (global) value, the same on every rank: with check_meta (on a
    placement) a checksum compared over the placement's ranks says so, or raises. Without dtype=: Python
    floats give the default float dtype, ints int64, bools bool; numpy data keeps its dtype. pin_memory=
    (PyTorch's, OneFlow's) is taken and changes nothing: host pieces are numpy arrays.
    Examples:
        >>> gt.tensor([[1.0, 2.0], [3.0, 4.0]])                       # local, float32
        >>> p = gt.placement("cpu", [0, 1])
        >>> x = gt.tensor([[1.0, 2.0], [3.0, 4.0]], placement=p, sbp=gt.sbp.split(0))
        >>> x.to_local()                                              # rank r holds row r
    """
    if isinstance(data, Tensor):
        data = data.numpy()
    array = host_array(data) if dtype is None else np.asarray(data)
    dt = _dtype.to_dtype(dtype) if dtype is not None else _dtype.of_array(array)
    array = array.astype(dt.np, copy=False)
    if placement is not None and check_meta and isinstance(placement, Placement):
        from .boxing.metadata import check_same_data
        check_same_data(array, placement)

    def fill(box):
        out = allocate(array[tuple(slice(a, b) for a, b in box)].shape, dt)
        out[...] = array[tuple(slice(a, b) for a, b in box)]
        return out

    t = build(array.shape, dt, placement, sbp, fill, device)
    t.requires_grad = bool(requires_grad)
    return t


def _default(dtype):
    """dtype as a DType; the default float dtype (gt.get_default_dtype()) when None."""
    return _dtype.to_dtype(dtype) if dtype is not None else _dtype.get_default_dtype()


def zeros(*size: Union[int, Sequence[int]], dtype: DTypeLike = None, placement: Optional[Placement] = None,
          sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    """Zeros of the default float dtype unless dtype= says."""
    dt = _default(dtype)
    return _flagged(build(_shape(size), dt, placement, sbp, _constant(0, dt), device), requires_grad)


def ones(*size: Union[int, Sequence[int]], dtype: DTypeLike = None, placement: Optional[Placement] = None,
         sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    """Ones of the default float dtype unless dtype= says."""
    return full(_shape(size), 1, dtype=_default(dtype), placement=placement, sbp=sbp, requires_grad=requires_grad,
                device=device)


def full(size: Union[int, Sequence[int]], fill_value: Number, dtype: DTypeLike = None,
         placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False,
         device: DeviceLike = None) -> Tensor:
    """fill_value everywhere; without dtype=, the fill value's kind says: bool, int64 for an
    integer, the default float dtype for a float (as torch.full)."""
    if dtype is None:
        dtype = _dtype.scalar_dtype(fill_value)
        if dtype is None:
            dtype = _dtype.of_array(host_array(fill_value))
    dt = _dtype.to_dtype(dtype)
    return _flagged(build(_shape((size,)), dt, placement, sbp, _constant(fill_value, dt), device), requires_grad)


def empty(*size: Union[int, Sequence[int]], dtype: DTypeLike = None, placement: Optional[Placement] = None,
          sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    dt = _default(dtype)
    return _flagged(build(_shape(size), dt, placement, sbp,
                          lambda box: allocate(tuple(b - a for a, b in box), dt), device), requires_grad)


def arange(start: Number = 0, end: Optional[Number] = None, step: Number = 1, dtype: DTypeLike = None,
           placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False,
           device: DeviceLike = None) -> Tensor:
    """[start, end) by step (0-d tensors taken as their numbers); int64 when all three are integers,
    else the default float dtype."""
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange step must not be zero")
    n = max(0, math.ceil((end - start) / step))
    integral = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    dt = _dtype.to_dtype(dtype) if dtype is not None else (_dtype.int64 if integral else _dtype.get_default_dtype())

    def fill(box, xp=np):
        (lo, hi), = box
        values = start + step * xp.arange(lo, hi, dtype=np.int64 if integral else np.float64)
        out = allocate((hi - lo,), dt) if xp is np else xp.empty((hi - lo,), dt.np)
        out[...] = values
        return out
    if dt.np.kind in "iu" or dt.np in (np.float32, np.float64):  # the device's arithmetic and casts: numpy's bits
        fill.on = lambda dev, box: fill(box, dev.xp)
    return _flagged(build((n,), dt, placement, sbp, fill, device), requires_grad)


def linspace(start: Number, end: Number, steps: int, dtype: DTypeLike = None,
             placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False,
             device: DeviceLike = None) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive (numpy's formula, piece by piece);
    the default float dtype unless dtype= says (integer ends too, as torch.linspace)."""
    steps = int(steps)
    if steps < 0:
        raise ValueError(f"linspace steps must be non-negative, got {steps}")
    dt = _default(dtype)
    delta = (end - start) / (steps - 1) if steps > 1 else 0.0

    def fill(box):
        (lo, hi), = box
        values = np.arange(lo, hi, dtype=np.float64) * delta + start
        if hi == steps and steps > 1 and hi > lo:
            values[-1] = end
        out = allocate((hi - lo,), dt)
        out[...] = values
        return out

    return _flagged(build((steps,), dt, placement, sbp, fill, device), requires_grad)


def eye(n: int, m: Optional[int] = None, dtype: DTypeLike = None, placement: Optional[Placement] = None,
        sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    m = n if m is None else m
    dt = _default(dtype)

    def fill(box):
        (r0, r1), (c0, c1) = box
        out = allocate((r1 - r0, c1 - c0), dt)
        out[...] = np.arange(r0, r1)[:, None] == np.arange(c0, c1)[None, :]
        return out

    return _flagged(build((int(n), int(m)), dt, placement, sbp, fill, device), requires_grad)


def _like(x, dtype, placement, sbp, device):
    """shape, dtype, placement, sbp, device of a *_like result: x's unless given (a local x's device)."""
    if device is not None and placement is not None:
        raise ValueError("device= and placement= together: pass one of them")
    pl = placement if placement is not None else (None if device is not None else x.placement)
    return (x.shape, _dtype.to_dtype(dtype, x.dtype), pl, sbp if sbp is not None or pl is None else x.sbp,
            device if device is not None or pl is not None else x.device)


def zeros_like(input: Tensor, dtype: DTypeLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
               requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    shape, dt, pl, s, dev = _like(input, dtype, placement, sbp, device)
    return zeros(shape, dtype=dt, placement=pl, sbp=s, requires_grad=requires_grad, device=dev)


def ones_like(input: Tensor, dtype: DTypeLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
              requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    shape, dt, pl, s, dev = _like(input, dtype, placement, sbp, device)
    return ones(shape, dtype=dt, placement=pl, sbp=s, requires_grad=requires_grad, device=dev)


def full_like(input: Tensor, fill_value: Number, dtype: DTypeLike = None, placement: Optional[Placement] = None,
              sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    shape, dt, pl, s, dev = _like(input, dtype, placement, sbp, device)
    return full(shape, fill_value, dtype=dt, placement=pl, sbp=s, requires_grad=requires_grad, device=dev)


def empty_like(input: Tensor, dtype: DTypeLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
               requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    shape, dt, pl, s, dev = _like(input, dtype, placement, sbp, device)
    return empty(shape, dtype=dt, placement=pl, sbp=s, requires_grad=requires_grad, device=dev)


def _random_tensor(shape, dt, placement, sbp, kind, a, b, device=None, generator=None):
    """Values of Philox at each element's global index; the generator's counter advances on every rank."""
    if not dt.code.arithmetic:
        raise TypeError(f"random values of dtype {dt.name} are not supported")

    def draw(shape=shape):
        seed, counter = _random.next_key(generator)
        def fill(box):
            out = allocate(tuple(hi - lo for lo, hi in box), dt)
            _random.fill(out, kind, shape, [lo for lo, _ in box], counter, a, b, seed)
            return out
        return build(shape, dt, placement, sbp, fill, device)
    t = draw()
    if (rec := _recorder()) is not None:  # a graph replays the draw (the counter advances as in eager mode)
        rec.random(t, lambda at=shape: draw(tuple(at))._local,  # at: a static program's fed size
                   _random.draw_spec(shape, dt, placement, sbp, kind, a, b, device, generator))
    return t


def _float(dtype):
    dt = _default(dtype)
    if not dt.is_floating:
        raise TypeError(f"this random factory makes floating-point tensors, not {dt.name}")
    return dt


def rand(*size: Union[int, Sequence[int]], dtype: DTypeLike = None, placement: Optional[Placement] = None,
         sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None,
         generator: Any = None) -> Tensor:
    """Uniform in [0, 1)."""
    return _flagged(_random_tensor(_shape(size), _float(dtype), placement, sbp, _random.UNIFORM, 0.0, 1.0,
                                   device, generator), requires_grad)


def randn(*size: Union[int, Sequence[int]], dtype: DTypeLike = None, placement: Optional[Placement] = None,
          sbp: SbpLike = None, requires_grad: bool = False, device: DeviceLike = None,
          generator: Any = None) -> Tensor:
    """Standard normal; on a placement each rank draws only its own box, and the whole value is
    the same for every layout and rank count (counter-based Philox).

    Examples:
        >>> gt.manual_seed(0)
        >>> w = gt.randn(1024, 1024, placement=gt.placement("cpu", [0, 1]), sbp=gt.sbp.split(1))
    """
    return _flagged(_random_tensor(_shape(size), _float(dtype), placement, sbp, _random.NORMAL, 0.0, 1.0,
                                   device, generator), requires_grad)


def randint(low: Number, high: Optional[Number] = None, size: Union[None, int, Sequence[int]] = None,
            dtype: DTypeLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
            requires_grad: bool = False, device: DeviceLike = None,
            generator: Any = None) -> Tensor:
    """Integers uniform in [low, high); randint(high, size) starts at 0. Any dtype, as PyTorch:
    the draw is int64's (the same values whatever the dtype and layout), then cast."""
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), positionally
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise ValueError("randint needs size")
    if high <= low:
        raise ValueError(f"randint needs low < high, got [{low}, {high})")
    dt = _dtype.to_dtype(dtype, _dtype.int64)
    if dt.np.kind in "iub":
        least, most = (0, 1) if dt.np.kind == "b" else (np.iinfo(dt.np).min, np.iinfo(dt.np).max)
        if low < least or high - 1 > most:
            raise ValueError(f"randint: [{low}, {high}) does not fit dtype {dt.name}")
    drawn = dt if dt in (_dtype.int32, _dtype.int64) else _dtype.int64
    t = _random_tensor(_shape((size,)), drawn, placement, sbp, _random.RANDINT, low, high, device, generator)
    return _flagged(t if drawn is dt else t.to(dt), requires_grad)


def normal(mean: float = 0.0, std: float = 1.0, size: Union[None, int, Sequence[int]] = None,
           dtype: DTypeLike = None, placement: Optional[Placement] = None, sbp: SbpLike = None,
           requires_grad: bool = False, device: DeviceLike = None,
           generator: Any = None) -> Tensor:
    if size is None:
        raise ValueError("normal needs size")
    if std < 0:
        raise ValueError(f"normal needs std >= 0, got {std}")
    return _flagged(_random_tensor(_shape((size,)), _float(dtype), placement, sbp, _random.NORMAL, mean, std,
                                   device, generator), requires_grad)


def uniform(size: Union[int, Sequence[int]], low: Number = 0.0, high: Number = 1.0, dtype: DTypeLike = None,
            placement: Optional[Placement] = None, sbp: SbpLike = None, requires_grad: bool = False,
            device: DeviceLike = None, generator: Any = None) -> Tensor:
    """Uniform in [low, high)."""
    if not high > low:
        raise ValueError(f"uniform needs low < high, got [{low}, {high})")
    return _flagged(_random_tensor(_shape((size,)), _float(dtype), placement, sbp, _random.UNIFORM, low, high,
                                   device, generator), requires_grad)


def _flagged(t, requires_grad):
    t.requires_grad = bool(requires_grad)
    return t
