"""gt.autocast: a context-local policy under which listed ops cast their floating inputs (PyTorch's)."""
import functools

from .. import dtype as _dtype
from .. import scope
from ..ops._front import cast_to
from ..tensor import Tensor
from . import lists

_DEFAULT_DTYPE = {"cpu": _dtype.bfloat16, "cuda": _dtype.float16}
_LOW = (_dtype.float16, _dtype.bfloat16)


class Policy:
    """Which dtype each listed op computes in ({op name: dtype}), for tensors of one device type
    (None: any, as Paddle's face).
    Kept in the context's scope.State (never process-wide): dispatch.apply and dispatch.amp_entry
    read it; a new thread starts without one, as PyTorch's autocast state is per thread."""

    __slots__ = ("device_type", "dtype", "ops", "loss_scale")

    def __init__(self, device_type, dtype, lower, float32, ops=None, loss_scale=None):
        self.device_type, self.dtype = device_type, dtype
        self.loss_scale = loss_scale  # a graph's grad scaler: backward() without a gradient seeds this
        self.ops = ops if ops is not None else {}
        for name in lower:
            self.ops[name] = dtype
        for name in float32:
            self.ops[name] = _dtype.float32
        for name in lists.NEVER:
            self.ops.pop(name, None)

    def cast_inputs(self, name, tensors):
        """The op's tensor inputs, each floating one (float64 aside) cast to the op's dtype when it
        lives on this policy's device type; the casts are differentiable (gradients come back in the
        input's dtype)."""
        want = self.ops[name]
        if not _on_device(tensors[0], self.device_type):
            return tensors
        return [cast_to(t, want) if _eligible(t, want) else t for t in tensors]

    def call(self, name, fn, args, kwargs):
        """A composite on the lists: its tensor arguments cast as cast_inputs, its body run with
        autocast off (its inner ops in the dtypes it was given)."""
        want = self.ops[name]
        first = next((a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)), None)
        if first is not None and _on_device(first, self.device_type):
            args = tuple(cast_to(a, want) if isinstance(a, Tensor) and _eligible(a, want) else a for a in args)
            kwargs = {k: cast_to(v, want) if isinstance(v, Tensor) and _eligible(v, want) else v
                      for k, v in kwargs.items()}
        with scope.scoped(amp=None):
            return fn(*args, **kwargs)

    def __repr__(self):
        return f"Policy({self.device_type!r}, {self.dtype}, {len(self.ops)} ops)"


def _eligible(t, want):
    dt = t._dtype
    return dt.is_floating and dt is not _dtype.float64 and dt is not want


def _on_device(t, device_type):
    return device_type is None or ("cuda" if t.is_cuda else "cpu") == device_type


def _check(device_type, dtype):
    if device_type not in lists.LISTS:
        raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
    found = _DEFAULT_DTYPE[device_type] if dtype is None else _dtype.to_dtype(dtype)
    if found not in _LOW:
        raise ValueError(f"autocast: dtype must be gt.bfloat16 or gt.float16 (on {device_type}), got {dtype!r}")
    return found


class autocast:  # noqa: N801 - PyTorch's name
    """PyTorch's torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): inside
    the with block (or the decorated function) the ops of globaltensor/amp/lists.py for that device
    type cast their floating inputs: matmul/linear/conv to `dtype`, losses (and on cuda softmax,
    exp, log, ...) to float32; other ops run in their inputs' dtypes. Nestable (autocast(enabled=False)
    inside turns it off); the state is context-local (contextvars), never process-wide. Backward runs
    with autocast off, in the dtypes the forward chose.

    Examples:
        >>> with gt.autocast("cpu", dtype=gt.bfloat16):
        ...     y = model(x)              # linear layers in bfloat16
        ...     loss = F.cross_entropy(y, t)   # float32
        >>> loss.backward()
    """

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type of type str, got {type(device_type).__name__}")
        self.device_type = device_type
        self.fast_dtype = _check(device_type, dtype)
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled
        self._tokens = []

    def _policy(self):
        if not self._enabled:
            return None
        lower, float32 = lists.LISTS[self.device_type]
        return Policy(self.device_type, self.fast_dtype, lower, float32)

    def __enter__(self):
        state = scope.current.get()
        self._tokens.append(scope.current.set(state.but(amp=self._policy())))
        return self

    def __exit__(self, *exc):
        scope.current.reset(self._tokens.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return run


def using(policy):
    """A with block under `policy` (a Policy, or None for autocast off): the faces' entry."""
    return scope.scoped(amp=policy)


def is_autocast_enabled(device_type=None):
    """Whether autocast is on in this context (for device_type when given)."""
    policy = scope.current.get().amp
    return policy is not None and (device_type is None or policy.device_type == device_type)


def get_autocast_dtype(device_type):
    """The low dtype autocast uses for device_type here (its default when off, as PyTorch)."""
    policy = scope.current.get().amp
    if policy is not None and policy.device_type == device_type:
        return policy.dtype
    return _check(device_type, None)


__all__ = ["Policy", "autocast", "using", "is_autocast_enabled", "get_autocast_dtype"]
