"""Paddle's top-level names: paddle/__init__.py takes them (at import; in a launcher, on first use)."""
import numpy as _np

from .. import ops as _ops
from .. import autograd as _autograd
from ..autograd import enable_grad, no_grad
from ..creation import tensor as _tensor
from ..random import manual_seed as _manual_seed
from ..serialization import load as _load, save as _save
from ..tensor import Tensor
from ..dtype import bfloat16, bool, complex64, complex128, float16, float32, float64, int8, int32, int64, uint8  # noqa: A004
from ..dtype import get_default_dtype, set_default_dtype

for _name in _ops.PUBLIC + ["arange", "linspace", "eye", "full_like", "empty_like", "ones_like", "zeros_like"]:
    globals()[_name] = getattr(_ops, _name)

from . import static  # noqa: E402
from . import amp, autograd, base, framework, io, nn, optimizer  # noqa: E402 - after the ops they use
from .autograd import grad  # noqa: E402
from .nn.parameter import create_parameter  # noqa: E402
from .framework import (CPUPlace, CUDAPlace, DataParallel, get_device, is_grad_enabled, set_device,  # noqa: E402
                        stop_gradient_property)
from .toplevel import (CUDAPinnedPlace, ParamAttr, as_complex, as_real, assign, device_guard,  # noqa: E402
                       get_cuda_rng_state, get_cudnn_version, get_flags, is_compiled_with_cuda, is_compiled_with_xpu,
                       is_empty, rank, set_cuda_rng_state, shape, summary, tanh_)
from .static import data  # noqa: E402 - paddle.data, static mode's placeholder

framework.core = base.core  # `from paddle.framework import core`, as Paddle's scripts write it beside paddle.base.core

Tensor.stop_gradient = stop_gradient_property  # Paddle's name for `not requires_grad`, on every tensor


def seed(value):
    """paddle.seed: seeds the sharding-invariant generator (the same values on any layout)."""
    _manual_seed(value)


def to_tensor(data, dtype=None, place=None, stop_gradient=True):
    """A local tensor from data (a list, an array, a scalar or a tensor); stop_gradient=False
    makes it require grad."""
    if isinstance(data, Tensor):
        data = data.numpy()
    t = _tensor(_np.asarray(data) if not isinstance(data, (list, tuple)) else data, dtype=dtype)
    t.requires_grad = not stop_gradient
    if not stop_gradient:
        _autograd.seeds_ones(t)  # Paddle's rule: a non-scalar backward that reaches it seeds ones
    return t


def _shape(shape):
    return tuple(int(s) for s in ([shape] if isinstance(shape, int) else shape))


def zeros(shape, dtype=None, name=None):
    return _ops.zeros(*_shape(shape), dtype=dtype)


def ones(shape, dtype=None, name=None):
    return _ops.ones(*_shape(shape), dtype=dtype)


def empty(shape, dtype=None, name=None):
    return _ops.empty(*_shape(shape), dtype=dtype)


def full(shape, fill_value, dtype=None, name=None):
    return _ops.full(_shape(shape), fill_value, dtype=dtype)


def randn(shape, dtype=None, name=None):
    return _ops.randn(*_shape(shape), dtype=dtype)


def rand(shape, dtype=None, name=None):
    return _ops.rand(*_shape(shape), dtype=dtype)


def randint(low=0, high=None, shape=(1,), dtype=None, name=None):
    return _ops.randint(low, high, _shape(shape), dtype=dtype)


def normal(mean=0.0, std=1.0, shape=None, name=None):
    return _ops.normal(mean, std, _shape(shape))


def uniform(shape, dtype=None, min=-1.0, max=1.0, seed=0, name=None):  # noqa: A002 - Paddle's names
    return _ops.uniform(_shape(shape), min, max, dtype=dtype)


def split(x, num_or_sections, axis=0, name=None):
    """Paddle's split: an int is the number of equal sections (PyTorch's is a section size); a list."""
    return list(_ops.split(x, num_or_sections=num_or_sections, dim=axis))


def _as_list(fn):
    def listed(*args, **kwargs):
        return list(fn(*args, **kwargs))
    listed.__name__, listed.__doc__ = fn.__name__, f"{fn.__doc__} A list, as Paddle's."
    return listed


chunk, unbind, meshgrid = _as_list(_ops.chunk), _as_list(_ops.unbind), _as_list(_ops.meshgrid)  # Paddle: lists


def max(x, axis=None, keepdim=False, name=None):  # noqa: A001 - Paddle's name
    """The largest values (Paddle's max returns values only; argmax gives the indices)."""
    return _ops.amax(x, dim=axis, keepdim=keepdim) if axis is not None else _ops.amax(x)


def min(x, axis=None, keepdim=False, name=None):  # noqa: A001 - Paddle's name
    return _ops.amin(x, dim=axis, keepdim=keepdim) if axis is not None else _ops.amin(x)


def sum(x, axis=None, dtype=None, keepdim=False, name=None):  # noqa: A001 - Paddle's name
    return _ops.sum(x, dim=axis, keepdim=keepdim, dtype=dtype)


def transpose(x, perm, name=None):
    """Paddle's transpose takes the whole permutation (PyTorch's swaps two dims)."""
    return _ops.permute(x, list(perm))


def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
    if transpose_x:
        x = _ops.transpose(x, -1, -2)
    if transpose_y:
        y = _ops.transpose(y, -1, -2)
    return _ops.matmul(x, y)


def gather(x, index, axis=None, name=None):
    """Paddle's gather: whole slices along axis at the 1-D index (PyTorch's index_select)."""
    return _ops.index_select(x, 0 if axis is None else axis, index)


def index_select(x, index, axis=0, name=None):
    return _ops.index_select(x, axis, index)


def scatter(x, index, updates, overwrite=True, name=None):
    """Rows `index` of x replaced by `updates` (overwrite), or set to the sum of the updates that
    name them (overwrite=False), as Paddle's scatter."""
    rows = index.reshape([-1, 1]).expand(*updates.shape[:1], *x.shape[1:]) if x.ndim > 1 else index
    if overwrite:
        return _ops.scatter(x, 0, rows, updates)
    cleared = _ops.scatter(x, 0, rows, _ops.zeros_like(updates))
    return _ops.scatter_nd_add(cleared, index.reshape([-1, 1]), updates)


def sort(x, axis=-1, descending=False, stable=False, name=None):
    """Paddle's sort: the sorted values only (argsort gives the indices)."""
    return _ops.sort(x, axis, descending, stable=stable)[0]


def median(x, axis=None, keepdim=False, name=None):
    """Paddle's median: the mean of the two middle values when their count is even."""
    if axis is None:
        x, axis = x.reshape([-1]), 0
    axis = axis % x.ndim
    n = x.shape[axis]
    s = _ops.sort(x, axis)[0]
    mid = _ops.index_select(s, axis, to_tensor([n // 2], dtype="int64"))
    if n % 2 == 0:
        mid = (mid + _ops.index_select(s, axis, to_tensor([n // 2 - 1], dtype="int64"))) / 2
    return mid if keepdim else mid.squeeze(axis)


def unique(x, return_index=False, return_inverse=False, return_counts=False, axis=None, dtype="int64", name=None):
    if return_index:
        raise NotImplementedError("unique(return_index=True) is not supported (return_inverse and return_counts are)")
    return _ops.unique(x, True, return_inverse, return_counts, axis)


def unsqueeze(x, axis, name=None):
    """axis may be a list: the new dims in order, as Paddle."""
    for a in ([axis] if isinstance(axis, int) else list(axis)):
        x = _ops.unsqueeze(x, a)
    return x


def squeeze(x, axis=None, name=None):
    if axis is None or isinstance(axis, int):
        return _ops.squeeze(x, axis)
    for a in sorted((a % x.ndim for a in axis), reverse=True):
        x = _ops.squeeze(x, a)
    return x


def trace(x, offset=0, axis1=0, axis2=1, name=None):
    if (offset, axis1 % x.ndim, axis2 % x.ndim) != (0, 0, 1) or x.ndim != 2:
        raise NotImplementedError("trace: the main diagonal of a 2-D tensor is supported")
    return _ops.trace(x)


def gelu(x, approximate=False, name=None):
    """Paddle's gelu: approximate is a bool (True: the tanh approximation; gt's takes "none" / "tanh")."""
    return nn.functional.gelu(x, approximate)


def linear(x, weight, bias=None, name=None):
    """x @ weight + bias, weight [in_features, out_features] (Paddle's layout)."""
    return nn.functional.linear(x, weight, bias)


def save(obj, path, **configs):
    """paddle.save: a state dict (or any picklable object) to the file path, atomically; a
    distributed tensor's whole value, written by rank 0."""
    _save(obj, path, global_dst_rank=0)


def load(path, **configs):
    return _load(path)


def is_tensor(x):
    return isinstance(x, Tensor)


def enable_static():
    """Static mode: paddle.static.data placeholders, calls recorded into the default main program,
    run by paddle.static.Executor (see globaltensor/paddle/static)."""
    static.program.enable()


def disable_static(place=None):
    static.program.disable()


def in_dynamic_mode():
    return not static.STATIC[0]


def _install_paddle_types():
    from ._composites import install
    install(globals(), "paddle")  # paddle.mean records as reduce_mean in static mode (graph/blocks.py's table)
    install(globals(), "paddle.scalar")


_install_paddle_types()
