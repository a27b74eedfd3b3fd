"""cupy's array API over numpy: cuda placements run without a GPU (GLOBALTENSOR_CUDA_SIMULATE=1).

Its arrays behave as cupy's do where the difference matters to a caller: they refuse to be
turned into numpy arrays implicitly (`np.asarray(x)` raises TypeError; `asnumpy`/`.get()` are
the way), they refuse numpy arrays among the arguments of an operation, and indexing or
reducing gives 0-d arrays, never scalars. numpy's functions reach them through
`__array_function__` / `__array_ufunc__`, as they reach cupy arrays. So code that passes the
tests on simulated cuda placements keeps host and device apart as real cupy needs.
"""
import collections

import numpy as np

# Moves between host and device so far ("to_device", "to_host"; reading a 0-d array as a Python
# number counts as one): on a GPU each waits for the stream, so tests assert a step makes none.
transfers = collections.Counter()

_REFUSED = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy array "
            "explicitly.")


class ndarray:  # noqa: N801 - cupy's name
    """A device array: a numpy array behind a wall. A view keeps its root array alive and names
    it as `.base`, as cupy's views do (so reference counts of a base tell whether views exist)."""

    __slots__ = ("_host", "_root")
    __array_priority__ = 100

    def __init__(self, host, root=None):
        self._host, self._root = host, root

    shape = property(lambda self: self._host.shape)
    dtype = property(lambda self: self._host.dtype)
    ndim = property(lambda self: self._host.ndim)
    size = property(lambda self: self._host.size)
    nbytes = property(lambda self: self._host.nbytes)
    itemsize = property(lambda self: self._host.itemsize)
    strides = property(lambda self: self._host.strides)
    flags = property(lambda self: _Flags(self._host.flags))
    base = property(lambda self: self._root)
    T = property(lambda self: _wrap(self._host.T, self))

    def __array__(self, dtype=None, copy=None):
        raise TypeError(_REFUSED)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "at":  # cupy's arrays refuse np.add.at and friends (cupyx.scatter_add is theirs)
            return NotImplemented
        result = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        return _wrap(result, self)

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)), self)

    def get(self):
        """A numpy copy (the device-to-host move)."""
        transfers["to_host"] += 1
        return np.array(self._host, copy=True)

    def __getitem__(self, key):
        return _wrap(self._host[_unwrap(key)], self)

    def __setitem__(self, key, value):
        self._host[_unwrap(key)] = _unwrap(value)

    def __getattr__(self, name):
        if name.startswith("__"):  # no __array_interface__ and friends: numpy must not read through
            raise AttributeError(name)
        found = getattr(self._host, name)
        if not callable(found):
            return _wrap(found, self)
        return lambda *args, **kwargs: _wrap(found(*_unwrap(args), **_unwrap(kwargs)), self)

    def __len__(self):
        return len(self._host)

    def __iter__(self):
        return (ndarray(np.asarray(row)) for row in self._host)

    def __bool__(self):
        transfers["to_host"] += 1
        return bool(self._host)

    def __float__(self):
        transfers["to_host"] += 1
        return float(self._host)

    def __int__(self):
        transfers["to_host"] += 1
        return int(self._host)

    def __index__(self):
        transfers["to_host"] += 1
        return self._host.__index__()

    def __repr__(self):
        return "simulated_cupy." + repr(self._host)

    def __reduce__(self):
        raise TypeError("a simulated device array cannot be pickled; move it to the host with .get()")


def _binary(ufunc):
    return (lambda self, other: ufunc(self, other)), (lambda self, other: ufunc(other, self)), \
        (lambda self, other: ufunc(self, other, out=self))


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                      ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
                      ("matmul", np.matmul), ("and", np.bitwise_and), ("or", np.bitwise_or),
                      ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift)]:
    _forward, _reflected, _inplace = _binary(_ufunc)
    setattr(ndarray, f"__{_name}__", _forward)
    setattr(ndarray, f"__r{_name}__", _reflected)
    setattr(ndarray, f"__i{_name}__", _inplace)
for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                      ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(ndarray, f"__{_name}__", _binary(_ufunc)[0])
for _name, _ufunc in [("neg", np.negative), ("pos", np.positive), ("abs", np.absolute), ("invert", np.invert)]:
    setattr(ndarray, f"__{_name}__", lambda self, _u=_ufunc: _u(self))
ndarray.__hash__ = None


class _Flags:
    """cupy's flags: c_contiguous, f_contiguous and owndata; no writeable (cupy has no read-only arrays)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, host_flags):
        self.c_contiguous, self.f_contiguous = host_flags.c_contiguous, host_flags.f_contiguous
        self.owndata = host_flags.owndata

    def __getitem__(self, name):
        return getattr(self, name.lower())


def scatter_add(a, slices, value):
    """cupyx.scatter_add: a[slices] += value in place, repeated positions adding up."""
    np.add.at(a._host, _unwrap(slices), _unwrap(value))


def _unwrap(value):
    """numpy arrays from device arrays, inside tuples, lists and dicts; a numpy array given
    where a device array belongs raises TypeError, as cupy does."""
    kind = type(value)
    if kind is ndarray:
        return value._host
    if kind is tuple or kind is list:
        return kind(_unwrap(v) for v in value)
    if kind is dict:
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        raise TypeError(f"Unsupported type {kind} (a numpy array where a device array belongs)")
    return value


def _wrap(value, source=None):
    """Device arrays of numpy results; one sharing memory with `source` is a view of its root."""
    if isinstance(value, np.ndarray):
        if source is None:
            return ndarray(value)
        if value is source._host:
            return source
        root = source if source._root is None else source._root
        return ndarray(value, root if np.may_share_memory(value, source._host) else None)
    if isinstance(value, np.generic):
        return ndarray(np.asarray(value))
    if type(value) is tuple or type(value) is list:
        return type(value)(_wrap(v, source) for v in value)
    return value


def asarray(a, dtype=None, order=None):
    """A device array of `a` (host data is copied over; a device array is kept)."""
    if type(a) is ndarray:
        return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
    transfers["to_device"] += 1
    return ndarray(np.array(_host_data(a), dtype=dtype, order=order or "K", copy=True))


def array(a, dtype=None, copy=True, order="K"):
    if type(a) is ndarray:
        return ndarray(np.array(a._host, dtype=dtype, copy=copy, order=order))
    return asarray(a, dtype)


def ascontiguousarray(a, dtype=None):
    return ndarray(np.ascontiguousarray(_unwrap(a), dtype=dtype))


def _host_data(a):
    if isinstance(a, (list, tuple)):
        return type(a)(_host_data(v) for v in a)
    return a


def asnumpy(a):
    """The host copy of a device array (numpy input is returned as it is)."""
    return a.get() if type(a) is ndarray else np.asarray(a)


def get_array_module(*arrays):
    import sys
    return sys.modules[__name__] if any(type(a) is ndarray for a in arrays) else np


def __getattr__(name):
    """numpy's other names: types and constants as they are, functions (the creation ones
    among them: zeros, empty, arange, ...) returning device arrays."""
    found = getattr(np, name)
    if isinstance(found, type) or not callable(found) or isinstance(found, np.ufunc):
        return found
    return lambda *args, **kwargs: _wrap(found(*_unwrap(args), **_unwrap(kwargs)))
