"""The single-file format of OneFlow and PyTorch: any picklable object, tensors by value."""
import contextlib
import contextvars
import io
import os
import pickle
import zipfile

import numpy as np

from .. import dtype as _dtype
from ..env import get_rank
from ..tensor import Tensor

MAGIC = "globaltensor-pickle-1"
EXTERNAL = "pickled_data"  # save_as_external_data: this file and one .npy a tensor in a directory
_context = contextvars.ContextVar("globaltensor.serialization", default=None)


class GlobalTensorSaveError(ValueError, AssertionError):
    """A global tensor given to save without global_dst_rank (OneFlow asserts; both classes catch it)."""


class _Saving:
    def __init__(self, global_dst_rank, external):
        self.global_dst_rank, self.external, self.count = global_dst_rank, external, 0


class _Loading:
    def __init__(self, external, map_location):
        self.external, self.map_location = external, map_location


def _reduce_ex(self, protocol):
    """Tensor.__reduce_ex__: by value inside save (a global tensor gathered: every rank must call
    save, in one order); the default slot-wise form elsewhere (copy.deepcopy, multiprocessing)."""
    ctx = _context.get()
    if not isinstance(ctx, _Saving):
        return object.__reduce_ex__(self, protocol)
    if self.is_global and ctx.global_dst_rank is None:
        raise GlobalTensorSaveError("Please set global_dst_rank in `flow.save` to save global tensor (the rank that "
                                    "writes the gathered values)")
    value = self.numpy()  # a global tensor's whole value (collective), a local one's piece, on the host
    stored = value.view(np.uint16) if self.dtype.name == "bfloat16" else np.ascontiguousarray(value)
    args = (type(self), self.dtype.name, bool(self.requires_grad))
    if ctx.external is not None:
        name = f"tensor_{ctx.count}.npy"
        ctx.count += 1
        if ctx.global_dst_rank is None or get_rank() == ctx.global_dst_rank:
            np.save(os.path.join(ctx.external, name), stored, allow_pickle=False)
        return (_external_tensor, args + (name,))
    return (_tensor, args + (stored,))


def _made(cls, dtype_name, requires_grad, array):
    dt = _dtype.to_dtype(dtype_name)
    array = array.view(dt.np) if dtype_name == "bfloat16" else array
    t = Tensor(array, dtype=dt)
    if cls is not Tensor:  # a Parameter
        t = cls(t)
    t.requires_grad = requires_grad
    ctx = _context.get()
    where = ctx.map_location if isinstance(ctx, _Loading) else None
    return _placed(t, where)


def _placed(t, where):
    """map_location: a device string/object (the piece moves), a placement (broadcast there), or
    a function of (tensor, "cpu")."""
    if where is None:
        return t
    if callable(where) and not isinstance(where, str) and not hasattr(where, "rank_list"):
        return where(t, "cpu")
    if hasattr(where, "rank_list"):
        from ..sbp import broadcast
        return t.to_global(placement=where, sbp=(broadcast,) * where.ndim)
    return t.to(str(where))


def _tensor(cls, dtype_name, requires_grad, array):
    return _made(cls, dtype_name, requires_grad, array)


def _external_tensor(cls, dtype_name, requires_grad, name):
    ctx = _context.get()
    return _made(cls, dtype_name, requires_grad, np.load(os.path.join(ctx.external, name), allow_pickle=False))


Tensor.__reduce_ex__ = _reduce_ex


@contextlib.contextmanager
def _scoped(value):
    token = _context.set(value)
    try:
        yield
    finally:
        _context.reset(token)


def dumps(obj, global_dst_rank=None, external=None):
    """The bytes of obj (every rank computes them: global tensors gather)."""
    with _scoped(_Saving(global_dst_rank, external)):
        return pickle.dumps({"format": MAGIC, "data": obj}, protocol=4)


def loads(blob, map_location=None, external=None):
    with _scoped(_Loading(external, map_location)):
        try:
            found = pickle.loads(blob)
        except (pickle.UnpicklingError, EOFError, IndexError, KeyError, TypeError) as exc:
            raise ValueError(f"Cannot load file: not a globaltensor checkpoint ({type(exc).__name__}: {exc})") from exc
    if not (isinstance(found, dict) and found.get("format") == MAGIC):
        raise ValueError("Cannot load file: not a globaltensor checkpoint (a pickle without its format mark)")
    return found["data"]


def is_torch_file(path):
    """PyTorch's .pt files are zip archives (torch.save's default since 1.6)."""
    return os.path.isfile(path) and zipfile.is_zipfile(path)


def from_torch(path, map_location=None):
    """A PyTorch checkpoint of plain tensors (a state dict, nested containers) as gt tensors."""
    try:
        import torch
    except ImportError:
        raise ImportError(f"load: {path} is a PyTorch checkpoint; install torch to read it") from None
    found = torch.load(path, map_location="cpu", weights_only=True)

    def convert(v):
        if isinstance(v, torch.Tensor):
            t = v.detach()
            array = t.view(torch.int16).numpy().view(_dtype.bfloat16.np) if t.dtype == torch.bfloat16 else t.numpy()
            return _placed(Tensor(array.copy()), map_location)
        if isinstance(v, dict):  # OrderedDict (a state dict) stays one
            return type(v)((k, convert(x)) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return type(v)(convert(x) for x in v)
        return v
    return convert(found)


def read_bytes(path_or_buffer):
    if isinstance(path_or_buffer, (str, os.PathLike)):
        with open(path_or_buffer, "rb") as f:
            return f.read()
    return path_or_buffer.read()


def is_buffer(obj):
    return isinstance(obj, io.IOBase) or (hasattr(obj, "write") and hasattr(obj, "flush")) or hasattr(obj, "read")
