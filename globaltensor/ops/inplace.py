"""In-place ops (add_, mul_, fill_, copy_, uniform_, ...) and x[key] = value, on local and global tensors:
computed out of place, then the tensor takes the result (its dtype, placement and SBP kept)."""
import builtins

import numpy as np

from . import bitwise, elementwise, random_ops
from ._front import apply, tensors
from .elementwise import UNARY, cast, clip
from .data_dependent import masked_select
from .indexing import getitem, ints_first
from .setitem import basic_selection, encoded, check_value_shape, lead_ones_dropped
from .. import autograd, creation
from .. import layout as _layout
from .. import dtype as _dtype
from ..backends.devices import array_module, move, of_array
from ..dtype import get_default_dtype
from ..errors import ShapeError
from ..sbp import broadcast as _B
from ..tensor import Tensor

# --- in-place ops -------------------------------------------------------------------------------
# An in-place op computes its result out of place with the dispatcher, from a shallow copy of
# the tensor that takes the old version's place in the autograd graph, casts it to the tensor's
# dtype and boxes it to the tensor's placement and SBP; the tensor then takes the result (and, when
# recorded, its node): written into its piece when that is a writeable array of the same kind,
# shape and dtype and the op was not recorded, so views, detach() and .data see it and data_ptr()
# stays (PyTorch's storage; caches that share pieces mark them read-only); else the piece is replaced.

_LEAF = "a leaf Tensor that requires grad is being used in an in-place operation"  # OneFlow's words


def _category(dt):
    return _dtype.category(dt)


def inplace(x, compute, name, any_dtype=False):
    """x takes compute(x)'s value (x's shape, dtype, placement and SBP kept) and is returned.
    any_dtype: the value is cast to x's dtype whatever it is (fill_, copy_, x[k] = v); else, as
    PyTorch, a result of a higher category (float into an integer tensor) raises."""
    grad = autograd.is_grad_enabled()
    if grad and x.requires_grad and x._node is None:
        raise RuntimeError(f"{name}: {_LEAF} (do it under gt.no_grad(), or on a copy)")
    old = x._shallow_copy() if grad else x
    try:
        new = _fitted(x, _computed(compute, old, x, name), name, any_dtype)
    except BaseException:
        if x._node is not None:  # x keeps its place in the graph
            x._node.ctx.outputs = tuple(x if o is old else o for o in x._node.ctx.outputs)
        raise
    return x._become(new, old if grad else None, autograd.clock())


def _computed(compute, old, x, name):
    """compute(old); shapes that do not broadcast get OneFlow's words for an in-place op first."""
    try:
        return compute(old)
    except ShapeError as exc:
        if "must match the size" not in str(exc):
            raise
        raise ShapeError(f"Tensor with shape {_shape_text(x.shape)} doesn't match the broadcast shape in an inplace "
                         f"operation ({name}: {exc})") from exc


def _shape_text(shape):
    """A shape as OneFlow writes it: (2,3)."""
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _fitted(x, new, name, any_dtype):
    """An in-place result in x's shape (checked), dtype and layout."""
    if tuple(new.shape) != tuple(x.shape):
        raise ShapeError(f"Can not expand origin shape {_shape_text(new.shape)} to {_shape_text(x.shape)} ({name}: "
                         f"output with shape {tuple(x.shape)} doesn't match the broadcast shape {tuple(new.shape)})")
    if new.dtype != x.dtype:
        if not any_dtype and _category(new.dtype) > _category(x.dtype):
            raise RuntimeError(f"{name}: result type {new.dtype.name} can't be cast to the desired output type "
                               f"{x.dtype.name}")
        new = cast(new, x.dtype)
    if x.is_global and (new.placement != x.placement or new.sbp != x.sbp):
        new = new.to_global(placement=x.placement, sbp=x.sbp)
    return new


_INPLACE = {
    "add_": elementwise.add, "sub_": elementwise.subtract, "mul_": elementwise.multiply, "div_": elementwise.divide,
    "pow_": elementwise.pow, "clamp_": clip, "clip_": clip, "bitwise_and_": bitwise.bitwise_and,
    "bitwise_or_": bitwise.bitwise_or, "bitwise_xor_": bitwise.bitwise_xor, "bitwise_not_": bitwise.bitwise_not,
    **{f"{n}_": getattr(elementwise, n) for n in UNARY if n not in ("isfinite", "isinf", "isnan", "imag", "real",
                                                                      "conj")},
}
_ASSIGNING = {  # in-place ops whose value is cast to the tensor's dtype whatever it is
    "fill_": lambda x, value: assigned(x, Ellipsis, value),
    "zero_": lambda x: assigned(x, Ellipsis, 0),
    "copy_": lambda x, src, non_blocking=False: assigned(x, Ellipsis, src),
    "masked_fill_": elementwise.masked_fill,
    "__setitem__": lambda x, key, value: assigned(x, key, value),
}


def _bind_inplace(name, fn, any_dtype):
    def method(self, *args, **kwargs):
        # the tensor among the arguments (y.mul_(y)) is its old version: no cycle in the graph
        inplace(self, lambda old: fn(old, *[old if a is self else a for a in args], **kwargs), name, any_dtype)
        return None if name == "__setitem__" else self
    method.__name__ = name
    method.__doc__ = f"In place: {name.rstrip('_') or name} (the tensor keeps its dtype, placement and SBP)."
    return method


for _name, _fn in _INPLACE.items():
    setattr(Tensor, _name, _bind_inplace(_name, _fn, False))
for _name, _fn in _ASSIGNING.items():
    setattr(Tensor, _name, _bind_inplace(_name, _fn, True))
for _name, _method_name in {"add": "add_", "sub": "sub_", "mul": "mul_", "truediv": "div_", "and": "bitwise_and_",
                            "or": "bitwise_or_", "xor": "bitwise_xor_"}.items():
    setattr(Tensor, f"__i{_name}__", getattr(Tensor, _method_name))


# --- x[key] = value -----------------------------------------------------------------------------

def assigned(x, key, value):
    """x with x[key] = value, out of place, in x's dtype and layout; differentiable in x and value.
    Basic keys (ints, slices, None, ...): the op setitem (ops/setitem.py), each rank writes the part
    of the selection its piece holds, so no collective but the value's broadcast. Index tensors and
    masks: the whole value on every rank, then its own piece."""
    (x,) = tensors(x)
    key = index_key(key)
    v = value if isinstance(value, Tensor) else None
    if v is not None and x.is_global and v.is_local:
        if v.requires_grad:
            raise RuntimeError("x[key] = value: the value is a local tensor that requires grad and x is global; "
                               "make it global first (to_global)")
        value, v = v.numpy(), None
    if builtins.all(k is None or k is Ellipsis or isinstance(k, (builtins.slice, int, np.integer))
                    and not isinstance(k, (bool, np.bool_)) for k in key):
        return _assigned_basic(x, key, value, v)
    if _mask_fill(x, key, value, v):  # by the dispatcher's ops: no collective, and a graph records it
        mask = key[0].reshape(*key[0].shape, *(1,) * (x.ndim - key[0].ndim))  # a mask over x's leading dims
        return elementwise.masked_fill(x, mask, value if v is None else v)
    if v is not None and x.is_global:
        v = v.to_global(placement=x.placement, sbp=(_B,) * x.placement.ndim)
    data = move(np.asarray(value) if v is None else v._local, of_array(x._local)).astype(x.dtype.np, copy=False)
    with autograd.no_grad():
        piece = _assign_advanced(x, key, data)
    out = Tensor(piece, x.shape, x.dtype, x.placement, x.sbp)
    autograd.record("setitem", _assigned_backward, [x] if v is None else [x, v], [out], {"key": key})
    return out


def _mask_fill(x, key, value, v):
    """Whether x[key] = value is x.masked_fill(mask, value): one bool mask over x's leading dims (as
    global or local as x) and a value of one element."""
    m = key[0]
    if len(key) != 1 or not isinstance(m, Tensor) or m.dtype.name != "bool" or m.is_global != x.is_global:
        return False
    if not 0 < m.ndim <= x.ndim or tuple(m.shape) != tuple(x.shape[:m.ndim]):
        return False
    if v is None:
        return np.ndim(value) == 0 and np.asarray(value).dtype.kind in "biuf"
    return v.numel() == 1 and v.ndim <= 1 and v.is_global == x.is_global


def _assigned_basic(x, key, value, v):
    """x[key] = value by the op setitem: a number is its `fill`, anything else a tensor (broadcast)."""
    static = {"key": encoded(key), "shape": tuple(x.shape), "fill": 0}
    if v is None:
        data = np.asarray(value)
        if data.ndim == 0 and data.dtype.kind != "c":
            basic_selection(tuple(x.shape), key)  # the key's IndexErrors
            static["fill"] = data.astype(x.dtype.np).item()
            return apply("setitem", [x], static)
        layout = {} if x.is_local else {"placement": x.placement, "sbp": (_B,) * x.placement.ndim}
        v = creation.tensor(data, dtype=x.dtype, check_meta=False, **layout)
    check_value_shape(tuple(v.shape), tuple(x.shape), key)
    return apply("setitem", [x, v if v.dtype == x.dtype else cast(v, x.dtype)], static)


def _assigned_backward(ctx, g):
    from .elementwise import sum_to
    x, key = ctx.inputs[0], ctx.static["key"]
    gx = assigned(g, key, 0) if x.requires_grad else None
    gv = None
    if len(ctx.inputs) > 1 and ctx.inputs[1].requires_grad:
        gv = sum_to(getitem(g, key), ctx.inputs[1].shape)
    return gx, gv


def _box(x):
    """(box, holds the value) of this rank's piece; None outside the placement."""
    if x.is_local:
        return [(0, n) for n in x.shape], True
    from ..env import get_rank
    coord = x.placement.mesh_coord(get_rank())
    if coord is None:
        return None
    return _layout.local_box(x.shape, x.placement.hierarchy, x.sbp, coord), _layout.holds_value(x.sbp, coord)


def _assign_advanced(x, key, data):
    """This rank's new piece: the whole value assigned on every rank (numpy's rules), then cut."""
    whole = x if x.is_local else x.to_global(sbp=(_B,) * x.placement.ndim)
    xp = array_module(whole._local)
    full = whole._local.copy()
    split = ints_first(key)  # x[1, :, idx] = v writes into the view x[1] (PyTorch's reading of the key)
    if split is not None:  # a 0-d index tensor there is an int: a view, where an array index would copy
        first = tuple(int(a) if getattr(a, "ndim", None) == 0 else a for a in (_key_array(k, x, xp) for k in split[0]))
    target, key = (full, key) if split is None else (full[first], split[1])
    decoded = tuple(_key_array(k, x, xp) for k in key)
    if _box(x) is not None:
        try:
            target[decoded] = lead_ones_dropped(data, data.shape, target[decoded].ndim)[0]
        except ValueError as exc:
            raise RuntimeError(f"x[key] = value: {exc}") from None
    if x.is_local:
        return full
    return Tensor(full, x.shape, x.dtype, x.placement, whole.sbp).to_global(sbp=x.sbp)._local


def _key_array(k, x, xp):
    """One entry of an index key as the pieces' array module reads it (tensors: whole values)."""
    if isinstance(k, Tensor):
        if k.is_global:  # every rank calls this (a rank outside the placement gets an empty piece)
            k = k.to_global(placement=x.placement, sbp=(_B,) * x.placement.ndim)
        return move(k._local, of_array(x._local))
    if isinstance(k, (list, np.ndarray)):
        return xp.asarray(np.asarray(k))
    return k


def index_key(key):
    """The key as a tuple, reading a list as PyTorch and OneFlow do: a list holding a sequence, a
    tensor, a slice, None or Ellipsis (x[[[0, 1], [1, 0]]]) is a tuple of indices (numpy's old rule);
    a list of numbers stays one index."""
    if isinstance(key, tuple):
        return key
    if isinstance(key, list) and len(key) < 32 and builtins.any(
            k is None or k is Ellipsis or isinstance(k, (builtins.slice, list, tuple, Tensor, np.ndarray)) for k in key):
        return tuple(key)
    return (key,)


def _getitem(self, key):
    key = key[0] if len(key := index_key(key)) == 1 else key
    if isinstance(key, Tensor) and key.dtype.name == "bool" and tuple(key.shape) == tuple(self.shape):
        return masked_select(self, key)  # a mask of fewer dims covers x's leading dims: getitem's numpy rule
    return getitem(self, key)


Tensor.__getitem__ = _getitem


# --- in-place draws (Tensor.uniform_, normal_, bernoulli_: PyTorch's, generator= taken) ------------

def _drawn_like(x, factory):
    """x's shape, dtype and layout (partial taken as broadcast) from factory(dtype=, placement=, sbp=)."""
    dt = x.dtype if x.dtype.is_floating else get_default_dtype()
    return factory(dtype=dt, **random_ops._like_layout(x))


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    """Tensor.uniform_(from=0, to=1, *, generator=None) in place, as PyTorch (`from=`/`to=` taken too)."""
    low, high = kwargs.pop("from", from_), kwargs.pop("to", to)
    _no_more(kwargs, "uniform_")
    draw = lambda **k: creation.uniform(tuple(self.shape), low, high, generator=generator, **k)  # noqa: E731
    return inplace(self, lambda _: _drawn_like(self, draw), "uniform_", any_dtype=True)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Tensor.normal_(mean=0, std=1, *, generator=None) in place, as PyTorch."""
    draw = lambda **k: creation.normal(mean, std, tuple(self.shape), generator=generator, **k)  # noqa: E731
    return inplace(self, lambda _: _drawn_like(self, draw), "normal_", any_dtype=True)


def bernoulli_(self, p=0.5, *, generator=None):
    """Tensor.bernoulli_(p=0.5, *, generator=None) in place: 1 with probability p (a number or a tensor)."""
    draw = lambda **k: creation.rand(*self.shape, generator=generator, **k)  # noqa: E731
    return inplace(self, lambda _: _drawn_like(self, draw) < p, "bernoulli_", any_dtype=True)


def exponential_(self, lambd=1.0, *, generator=None):
    """Tensor.exponential_(lambd=1, *, generator=None) in place: -log(1 - U) / lambd, U uniform in [0, 1)."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    draw = lambda **k: -(1.0 - creation.rand(*self.shape, generator=generator, **k)).log() / lambd  # noqa: E731
    return inplace(self, lambda _: _drawn_like(self, draw), "exponential_", any_dtype=True)


def _no_more(kwargs, name):
    if kwargs:
        raise TypeError(f"{name}() got unexpected keyword arguments {sorted(kwargs)}")


Tensor.uniform_, Tensor.normal_, Tensor.bernoulli_, Tensor.exponential_ = uniform_, normal_, bernoulli_, exponential_
