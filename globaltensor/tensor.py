"""Tensor: a local piece (numpy array; cupy on cuda) plus, for a global tensor, its global shape, placement and SBP."""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Optional, Union

import numpy as np

from . import dtype as _dtype
from .hooks import readback
from .errors import PlacementError
from .placement import placement as Placement
from .sbp import sbp as SBP
from .scope import recorder as _recorder


def _fits(piece, value) -> bool:
    """Whether `value` can be written into `piece` in place: same array kind, shape and dtype, and
    the piece writeable (numpy's flag; cupy has none)."""
    return type(piece) is type(value) and hasattr(piece, "shape") and piece.shape == value.shape \
        and piece.dtype == value.dtype and getattr(piece.flags, "writeable", True)


def _keep_origin(alias, piece, now) -> None:
    """Before `piece` of a detach() alias is written: each tensor it was detached from (x in
    x.detach().detach()), when a recorded op read it since its last change, keeps that version (a
    copy) for backward. Not one that requires grad (its old version could not carry its
    gradient): as PyTorch's .data, a backward after `p.data.mul_(2)` sees the new values."""
    ref, copied = getattr(alias, "_origin", None), None
    while ref is not None and (origin := ref()) is not None and origin._local is piece:
        if not origin.requires_grad and origin._read_at > (origin._past[-1][0] if origin._past else 0):
            before = Tensor.__new__(Tensor)
            for name in Tensor.__slots__[:-4]:  # its place in the graph stays the origin's
                setattr(before, name, getattr(origin, name))
            copied = piece.copy() if copied is None else copied
            before._local, before._past = copied, None
            origin._past = (origin._past or []) + [(now, before)]
        ref = getattr(origin, "_origin", None)


class Layout:
    """Global shape, dtype, placement and sbp; interned, so identity means equality. The table
    holds layouts weakly: one nothing refers to goes, and identity still means equality among
    the live ones."""

    __slots__ = ("shape", "dtype", "placement", "sbp", "__weakref__")
    _interned = weakref.WeakValueDictionary()

    @classmethod
    def of(cls, shape, dtype, placement, sbp):
        key = (shape, dtype.np, placement, sbp)
        found = cls._interned.get(key)
        if found is None:
            found = cls._interned[key] = cls.__new__(cls)
            found.shape, found.dtype, found.placement, found.sbp = Size(shape), dtype, placement, sbp
        return found


class device:  # noqa: N801 - torch.device's name
    """Where a local tensor's piece lives: device("cpu"), device("cuda:0"), device("cuda", 1), with
    .type and .index. repr as OneFlow and PyTorch (device(type='cpu', index=0)); str as OneFlow
    prints it ("cpu:0", "cuda:1"). The host has one device, so a cpu index is always 0 and "cpu"
    equals "cpu:0"; a cuda device named without an index keeps index None (PyTorch's "the current
    one") and equals only "cuda" (not "cuda:0"). A device equals the strings that name it."""

    __slots__ = ("type", "index")

    def __init__(self, type: Union[str, device], index: Optional[int] = None) -> None:  # noqa: A002 - torch's name
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, str) and ":" in type:
            if index is not None:
                raise ValueError(f"device({type!r}, {index}): the string already names an index")
            type, _, text = type.partition(":")
            if not text.isdigit():
                raise ValueError(f"device: bad index {text!r} (expected \"cpu\", \"cuda\" or \"cuda:<index>\")")
            index = int(text)
        if type not in ("cpu", "cuda"):
            raise PlacementError(f"Expected one of cpu, cuda device type at start of device string: {type}")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise ValueError(f"device: the index must be a non-negative int, got {index!r}")
        if type == "cpu" and index not in (None, 0):
            raise ValueError(f"device: the host has one device, cpu:0, not cpu:{index}")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", 0 if type == "cpu" else index)

    def __setattr__(self, name, value):
        raise AttributeError("device values are immutable")

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))


_CPU = device("cpu")
_global_ids = itertools.count(1)


class Size(tuple):
    """A tensor's shape (torch.Size, oneflow.Size): a tuple of ints (equal to the plain tuple), with
    numel(). Indexing is tuple's own (no Python-level __getitem__: shapes are read on every op's
    path), so a slice of a Size is a plain tuple, where torch gives a Size."""

    __slots__ = ()

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"gt.Size({list(self)})"


class Tensor:
    """A local tensor (numpy semantics) or a global one: this rank's piece of a value laid out
    over `placement` as `sbp` says. Conversions live in boxing/; no op logic here."""

    __slots__ = ("_local", "_global_shape", "_dtype", "_placement", "_sbp", "requires_grad", "grad", "_node",
                 "_source", "_grad_sbp", "_layout", "_read_at", "_past", "_global_id", "_retains_grad", "_origin",
                 "__weakref__")
    # _global_id, _retains_grad and _origin are set only by global_id(), retain_grad() and detach()
    # (never by the constructors: _wrap stays as fast); read with getattr and a default

    def __init__(self, local: Any, global_shape: Optional[tuple[int, ...]] = None, dtype: Optional[_dtype.DType] = None,
                 placement: Optional[Placement] = None, sbp: Optional[tuple[SBP, ...]] = None) -> None:
        self._local = local
        self._dtype = dtype or _dtype.of_array(local)
        self._placement = placement
        self._sbp = sbp
        self._global_shape = tuple(global_shape) if global_shape is not None else local.shape
        self.requires_grad = False
        self.grad = None
        self._node = None
        self._read_at, self._past = 0, None  # autograd: see _become
        self._source = None  # made by to_global from a local piece: where that piece lay
        self._grad_sbp = None
        self._layout = None  # the interned Layout, made on first dispatch

    @classmethod
    def _wrap(cls, local, layout):
        """A global tensor on an interned layout (the dispatcher's fast path)."""
        t = cls.__new__(cls)
        t._local, t._layout = local, layout
        t._global_shape, t._dtype, t._placement, t._sbp = layout.shape, layout.dtype, layout.placement, layout.sbp
        t.requires_grad, t.grad, t._node, t._source, t._grad_sbp = False, None, None, None, None
        t._read_at, t._past = 0, None
        return t

    def _shallow_copy(self):
        """The old version of a tensor an in-place op is about to change: another object over the
        same piece that takes this one's place in the autograd graph (so the graph has no cycle)."""
        t = Tensor.__new__(Tensor)
        for name in Tensor.__slots__[:-4]:  # not _global_id, _retains_grad, _origin: the old version has none
            setattr(t, name, getattr(self, name))
        t._past = None
        if self._node is not None:
            ctx = self._node.ctx
            ctx.outputs = tuple(t if o is self else o for o in ctx.outputs)
        return t

    def _become(self, new, old=None, now=0):
        """End of an in-place op: this tensor takes `new`'s piece and, when the op was recorded,
        its place in the autograd graph (the op's context names this tensor as its output). `new`
        has this tensor's shape, dtype and layout. An unrecorded result is written into the piece
        when it is a writeable array of the same kind, shape and dtype (PyTorch's storage: views,
        detach() and .data see it, data_ptr() stays); a recorded one, or one in a graph's capture,
        replaces the piece (its op read the old version, which keeps it; a capture follows
        pieces). `old` (the shallow copy holding the value before) is kept, stamped with the
        autograd clock `now`, when a recorded op read this tensor since its last change: that
        op's backward sees `old`, the value it was given (autograd.seen_inputs)."""
        piece, kept = self._local, old is not None and self._read_at > (self._past[-1][0] if self._past else 0)
        rec = _recorder()  # a graph's capture follows pieces by identity: it gets the new one
        if new._node is None and rec is None and _fits(piece, new._local):  # written into: aliases see it
            if piece is not new._local:
                if kept:
                    old._local = piece.copy()  # the version a recorded op read keeps its values
                _keep_origin(self, piece, now)
                piece[...] = new._local
        else:
            self._local = new._local
        if kept:
            self._past = (self._past or []) + [(now, old)]
        if rec is not None:
            rec.became(self)
        node = new._node
        if node is not None:
            node.ctx.outputs = tuple(self if o is new else o for o in node.ctx.outputs)
            self._node, self.requires_grad = node, True
        return self

    def layout(self) -> Layout:
        """The interned (shape, dtype, placement, sbp) of a global tensor: equal layouts are the
        same object, so the dispatcher's cache keys hash by identity."""
        found = self._layout
        if found is None:
            found = self._layout = Layout.of(self._global_shape, self._dtype, self._placement, self._sbp)
        return found

    # --- what kind of tensor ---------------------------------------------------------------
    is_global = property(lambda self: self._placement is not None)
    is_local = property(lambda self: self._placement is None)
    placement = property(lambda self: self._placement)
    sbp = property(lambda self: self._sbp, doc="one SBP per mesh axis (a tuple), or None when local")
    dtype = property(lambda self: self._dtype)

    @property
    def shape(self) -> Size:
        """The global shape (the local shape when local), a Size: the dispatcher's outputs hold one
        already; another tensor's tuple becomes one on the first read and is kept."""
        found = self._global_shape
        if type(found) is not Size:
            found = self._global_shape = Size(found)
        return found

    ndim = property(lambda self: len(self._global_shape))

    def dim(self) -> int:
        """The number of dims (PyTorch's name for ndim)."""
        return len(self._global_shape)

    @property
    def device(self) -> device:
        """A local tensor's device (a `device`: device(type='cpu', index=0), equal to "cpu").
        A global tensor has none, as in OneFlow: RuntimeError, its placement says where it lives
        (under OneFlow's global_mode: the placement's type, as OneFlow)."""
        if self._placement is not None:
            from .scope import global_mode
            if global_mode.get() is not None:
                return device(self._placement.type)
            raise RuntimeError("Only local tensors have 'device'. Please use '.placement' for global tensors.")
        piece = self._local
        if isinstance(piece, (np.ndarray, np.generic)):
            return _CPU
        index = getattr(getattr(piece, "device", None), "id", 0)
        return device("cuda", index if isinstance(index, int) else 0)

    @property
    def is_cuda(self) -> bool:
        return (self._placement.type if self._placement is not None else self.device.type) == "cuda"

    def size(self, dim: Optional[int] = None) -> Union[Size, int]:
        """The shape (a Size), or its length along `dim`."""
        return Size(self._global_shape) if dim is None else self._global_shape[dim]

    def numel(self) -> int:
        n = 1
        for s in self._global_shape:
            n *= s
        return n

    def __len__(self) -> int:
        if not self._global_shape:
            raise TypeError("len() of a 0-d tensor")
        return self._global_shape[0]

    # --- conversions -----------------------------------------------------------------------
    def to_local(self) -> Tensor:
        """This rank's piece, without a copy (an empty tensor on a rank outside the placement)."""
        return Tensor(self._local) if self.is_global else self

    def tolist(self) -> Any:
        readback("tolist()", self)
        return self.numpy().tolist()

    def item(self) -> Union[int, float, bool]:
        readback("item()", self)
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor of one element, this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def detach(self) -> Tensor:
        """This tensor without autograd history, over the same piece (PyTorch's storage sharing):
        an in-place op on either changes both. Changing the alias after a recorded op read this
        tensor keeps the value that op saw for its backward (PyTorch raises there)."""
        t = Tensor(self._local, self._global_shape, self._dtype, self._placement, self._sbp)
        t._origin = weakref.ref(self)
        return t

    @property
    def data(self) -> Tensor:
        """The tensor without its autograd history: a new tensor over the same piece (PyTorch's .data)."""
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        """x.data = y: x takes y's piece, shape, dtype and layout; x keeps its autograd flags (PyTorch's)."""
        if not isinstance(value, Tensor):
            raise TypeError(f"x.data must be set to a tensor, not {type(value).__name__}")
        self._local, self._global_shape, self._dtype = value._local, value._global_shape, value._dtype
        self._placement, self._sbp, self._layout = value._placement, value._sbp, None

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in .grad after backward (a leaf keeps it anyway)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        if self._node is not None:
            self._retains_grad = True

    retains_grad = property(lambda self: self._node is not None and getattr(self, "_retains_grad", False),
                            doc="whether backward stores this non-leaf's gradient in .grad (retain_grad())")

    def global_id(self) -> int:
        """A global tensor's id, as OneFlow's: an int, the same on every rank when the ranks ask for
        their tensors' ids in one order (ids are handed out on first call, counting up per process)."""
        if self._placement is None:
            raise RuntimeError("Only global tensors have 'global_id', global id is used to synchronize rank")
        found = getattr(self, "_global_id", None)
        if found is None:
            found = self._global_id = next(_global_ids)
        return found

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self._node is not None and not requires_grad:
            raise RuntimeError("requires_grad_(False) only applies to leaf tensors")
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    def __repr__(self) -> str:
        readback("repr() (print)", self)
        value = np.array2string(np.asarray(self.numpy()), separator=", ", prefix="tensor(")
        if self.is_local:
            return f"tensor({value}, dtype={self._dtype!r})"
        sbp = "(" + ", ".join(repr(s) for s in self._sbp) + ("," if len(self._sbp) == 1 else "") + ")"
        return f"tensor({value}, placement={self._placement!r}, sbp={sbp}, dtype={self._dtype!r})"

    __str__ = __repr__

    def __bool__(self) -> bool:
        readback("bool(x)", self)
        return bool(self.item())

    def __float__(self) -> float:
        readback("float(x)", self)
        return float(self.item())

    def __int__(self) -> int:
        readback("int(x)", self)
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        readback("np.asarray(x)", self)
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)
