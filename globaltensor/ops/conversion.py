"""Conversions, differentiable: to_global (boxing's convert forward, the reverse conversion
backward), to() between devices and dtypes, contiguous(); and the Tensor methods that convert
(to_global, numpy, to, cpu, cuda, contiguous), bound here: tensor.py imports nothing above it."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .. import autograd, layout
from ..hooks import host_step, readback
from ..backends import devices
from ..backends.devices import of_array
from ..boxing import convert, full_value
from ..dtype import DType, to_dtype
from ..errors import PlacementError
from ..placement import placement as Placement
from ..sbp import broadcast, normalize, partial_sum
from ..sbp import sbp as _SBP
from ..scope import recorder as _recorder
from ..tensor import Tensor, device
from .elementwise import cast, clone


SbpArg = Union[None, _SBP, Sequence[_SBP]]


def to_global(x: Tensor, placement: Optional[Placement] = None, sbp: SbpArg = None, grad_sbp: SbpArg = None) -> Tensor:
    """x.to_global(...): from a local tensor, or between layouts of a global one. The gradient
    goes back by the reverse conversion (through grad_sbp first, when given).

    Examples:
        >>> p = gt.placement("cpu", [0, 1])
        >>> w = gt.randn(4, 4).to_global(p, gt.sbp.broadcast)   # rank 0's values on both ranks
        >>> w.to_global(sbp=gt.sbp.split(0)).to_local().shape   # each rank's two rows
        (2, 4)
    """
    where = placement if placement is not None else x.placement
    if grad_sbp is not None and isinstance(where, Placement):  # checked before any collective
        grad_sbp = normalize(grad_sbp, where.ndim, x.ndim)
    if grad_sbp is None and not (x.requires_grad and autograd.is_grad_enabled() and not _unchanged(x, placement, sbp)):
        return _own_piece(x, convert(x, placement, sbp))  # nothing to record (x itself when nothing changes)
    return _own_piece(x, _ToGlobal.apply(x, placement, sbp, grad_sbp))


def _own_piece(x, out):
    """out, its piece copied when it is a view into global x's (a B -> S slice): in-place ops write
    into pieces (PyTorch's storage), and a converted tensor is a new one, as OneFlow's."""
    if out is x or x.is_local or _recorder() is not None:  # a capture follows pieces (and replaces them)
        return out
    piece, source = out._local, x._local
    base = getattr(piece, "base", None)
    if base is not None and (base is source or base is getattr(source, "base", None)):
        out._local = piece.copy()
    return out


def _unchanged(x, placement, sbp):
    """Whether converting global x to (placement, sbp) would give x itself."""
    if x.is_local:
        return False
    where = placement or x.placement
    return where == x.placement and (sbp is None or normalize(sbp, where.ndim, x.ndim) == x.sbp)


class _ToGlobal(autograd.Function):
    """A differentiable conversion (the layout kept with a grad_sbp: a tensor of its own whose
    backward converts, as Megatron's f: an all_reduce in backward)."""

    @staticmethod
    def forward(ctx, x, placement, sbp, grad_sbp):
        out = convert(x, placement, sbp)
        ctx.x, ctx.grad_sbp = x, grad_sbp
        ctx.source, ctx.placement = out._source, out.placement  # not `out`: out -> node -> ctx -> out, a cycle
        return out

    @staticmethod
    def backward(ctx, g):
        """d out / d x: the gradient converted back to x's layout; for a local x, the part of
        the whole gradient where x's piece lay (zero where the conversion ignored it)."""
        x = ctx.x
        if ctx.grad_sbp is not None:
            g = g.to_global(sbp=ctx.grad_sbp)
        if x.is_local:
            box, counts = ctx.source
            whole = g.to_global(placement=ctx.placement, sbp=(broadcast,) * ctx.placement.ndim)._local
            if box is None or not counts:
                return Tensor(of_array(whole).xp.zeros(x.shape, x.dtype.np))
            return Tensor(whole[layout.box_slices(box)].copy())
        if g.placement == x.placement:  # a whole (B) gradient is the gradient of every summand of a
            # partial x: it stays whole there (converting it to P would only be undone by the next reduction)
            return g.to_global(sbp=tuple(gs if xs is partial_sum and gs is broadcast else xs
                                         for xs, gs in zip(x.sbp, g.sbp)))
        return g.to_global(placement=x.placement, sbp=x.sbp)


# --- Tensor methods ------------------------------------------------------------------------

def _to_global_method(self: Tensor, placement: Optional[Placement] = None, sbp: SbpArg = None,
                      grad_sbp: SbpArg = None) -> Tensor:
    """Local -> global (this rank's piece), or a conversion of a global tensor's layout."""
    return to_global(self, placement, sbp, grad_sbp)


def _numpy(self: Tensor) -> Any:
    """The whole value as a numpy array; on a global tensor every rank must call it."""
    readback("numpy()", self)
    if self.is_local:
        return of_array(self._local).to_host(self._local)
    return full_value(self)


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """x.to(dtype), x.to(device) ("cpu", "cuda", "cuda:0"), x.to(placement), x.to(other) (its
    dtype and device; a global one's placement), x.to(device, dtype); dtype=, device=, copy=;
    x.to(gt.Tensor) (OneFlow's: a parameter as a plain tensor, detached).
    A local tensor moves between numpy and cupy; a global one changes its placement's type (or
    its placement) by to_global, keeping its sbp. A local tensor .to(placement) becomes global
    with the placement's first rank's values broadcast (as Module.to_global). Differentiable;
    the tensor itself when nothing changes (unless copy=True)."""
    dtype, where, copy = kwargs.pop("dtype", None), kwargs.pop("device", None), kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    as_plain = False
    for a in args:
        if isinstance(a, type) and issubclass(a, Tensor):  # OneFlow's param.to(flow.Tensor): a plain tensor
            as_plain = type(self) is not a
        elif isinstance(a, Tensor):
            if a.is_global != self.is_global:
                raise PlacementError("tensor.to(other) can only be called when tensor and other are local tensors "
                                     "(or, here, both global: other's placement)")
            dtype, where = a.dtype, (a.placement if a.is_global else a.device)
        elif isinstance(a, (Placement, device)) or (isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda")):
            where = a
        elif isinstance(a, str) and not _names_dtype(a):  # OneFlow's words for a string neither device nor dtype
            raise PlacementError(f'Only string device without device id (eg. "cpu" or "cuda") is expected for '
                                 f'global tensor, but got {a}' if self.is_global else
                                 f"Expected one of cpu, cuda device type at start of device string: {a}")
        elif a is not None:
            dtype = a if isinstance(a, DType) else to_dtype(a)
    out = self if where is None else _moved(self, where)
    if dtype is not None and to_dtype(dtype) != out.dtype:
        out = cast(out, dtype)
    if copy and out is self:
        out = clone(self)
    return out.detach() if as_plain and out is self else out


def _names_dtype(text: str) -> bool:
    try:
        to_dtype(text)
    except (TypeError, ValueError):
        return False
    return True


def _cpu(self: Tensor) -> Tensor:
    """The tensor on the host (global: a "cpu" placement on the same ranks)."""
    return self.to("cpu")


def _cuda(self: Tensor, device: Union[None, int, str] = None) -> Tensor:
    """The tensor on this rank's GPU (global: a "cuda" placement on the same ranks)."""
    return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))


def _contiguous(self: Tensor) -> Tensor:
    """The tensor itself when its piece is C-contiguous, else a differentiable copy whose
    piece is (the same layout; no collective)."""
    if self._local.flags.c_contiguous:
        return self
    return _Contiguous.apply(self)


class _Contiguous(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return Tensor(host_step("contiguous", _copy, x), x._global_shape, x._dtype, x._placement, x._sbp)

    @staticmethod
    def backward(ctx, g):
        return g


def _copy(piece):
    return piece.copy()


def _moved(x, where):
    """x on device `where`: a gt.device, a device string ("cpu", "cuda", "cuda:<i>") or a placement."""
    if isinstance(where, Placement):
        if x.is_global:
            return x.to_global(placement=where)
        return x.to_global(placement=where, sbp=(broadcast,) * where.ndim)
    if isinstance(where, device):
        where = where.type if where.type == "cpu" or where.index is None else str(where)
    kind, _, index = str(where).partition(":")
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"to(): unknown device {where!r}; use \"cpu\", \"cuda\", \"cuda:<index>\" or a placement")
    if x.is_global:
        return x if x.placement.type == kind else x.to_global(placement=Placement(kind, x.placement.ranks))
    if kind == "cuda":
        devices.require_cuda(f"x.to({str(where)!r})")
        mine = 0 if devices.simulated() else _local_gpu()
        if index and int(index) != mine:
            raise ValueError(f"to({str(where)!r}): this rank's pieces live on its own GPU, cuda:{mine} "
                             f"(LOCAL_RANK picks it)")
    dev = devices.device(kind)
    if devices.of_array(x._local) is dev:
        return x
    return _ToDevice.apply(x, dev)


class _ToDevice(autograd.Function):
    """A local tensor moved between host and device; its gradient moves back."""

    @staticmethod
    def forward(ctx, x, dev):
        ctx.source = devices.of_array(x._local)
        return Tensor(devices.move(x._local, dev))

    @staticmethod
    def backward(ctx, g):
        return Tensor(devices.move(g._local, ctx.source)), None


def _local_gpu():
    from ..backends import cuda
    return cuda.local_device()


Tensor.to_global, Tensor.numpy, Tensor.to = _to_global_method, _numpy, _to
Tensor.cpu, Tensor.cuda, Tensor.contiguous = _cpu, _cuda, _contiguous


def _removed(old, new):
    def method(self, *args, **kwargs):
        raise RuntimeError(f".{old} has been removed, please use .{new} instead")  # OneFlow's words
    method.__name__ = old
    method.__doc__ = f"Removed in OneFlow (\"consistent\" is \"global\" now): raises, naming .{new}."
    return method


Tensor.to_consistent, Tensor.is_consistent = _removed("to_consistent", "to_global"), _removed("is_consistent", "is_global")
