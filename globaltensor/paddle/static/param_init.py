"""Static mode's parameter initializers run when the startup program runs, not when a layer is built."""
import numpy as np

from ... import random as _random


class DeferredInit:
    """A parameter's initializer taken at build, run later: the draw's (seed, counter) are taken when
    the layer is built (the stream advances as an eager fill would), the values are written when
    the startup program runs (or a server asks for them first). `array` is the parameter's piece the
    fill is meant for (zeros, not yet touched: calloc'ed pages cost nothing until written)."""

    __slots__ = ("kind", "a", "b", "seed", "counter", "array")

    def __init__(self, kind, a, b, array):
        self.kind, self.a, self.b, self.array = kind, a, b, array
        self.seed, self.counter = (None, None) if kind == "constant" else _random.next_key(None)

    @property
    def paddle_type(self):
        return "fill_constant" if self.kind == "constant" else "uniform_random"

    def fill(self, out):
        """Write the initial values into out (the parameter's shape and dtype)."""
        if self.kind == "constant":
            out[...] = self.a
        else:
            code = _random.UNIFORM if self.kind == "uniform" else _random.NORMAL
            _random.fill(out, code, out.shape, [0] * out.ndim, self.counter, self.a, self.b, self.seed)

    def __call__(self):
        """The startup program's draw: a new array of the initial values."""
        out = np.empty(self.array.shape, self.array.dtype)
        self.fill(out)
        return out


class SetInitial:
    """The startup program's instruction of a deferred parameter (a `set` with no input): t takes a
    new array of its initial values."""

    __slots__ = ("t", "init")

    def __init__(self, t, init):
        self.t, self.init = t, init

    def __call__(self):
        self.t._local = self.init()


def _spec(initializer, param):
    """(kind, a, b) of an initializer whose fill is its declared one draw (Initializer._draw); None for
    any other (TruncatedNormal redraws by value, Assign, Orthogonal, a callable, a subclass with a fill
    of its own): those fill at build as before."""
    from ..nn.initializer import Initializer
    kind = type(initializer)
    if not isinstance(initializer, Initializer) or kind.__call__ is not Initializer.__call__ \
            or kind._value is not Initializer._value:
        return None
    return initializer._draw(param)


class _Deferring:
    """An initializer in a ParamAttr: called by create_parameter, it keeps the fill for later where
    it can (the parameter's `static_init`), else fills now."""

    def __init__(self, initializer):
        self.initializer = initializer

    def __call__(self, param, block=None):
        spec = _spec(self.initializer, param)
        if spec is None or param.is_global or not _valid(spec):
            return self.initializer(param)
        param.static_init = DeferredInit(*spec, param._local)


def _valid(spec):
    """Whether the eager factory would accept the spec (else it fills now, and raises as before)."""
    kind, a, b = spec
    return kind == "constant" or (kind == "uniform" and b > a) or (kind == "normal" and b >= 0)


def create_deferred(create_parameter, shape, attr, name, is_bias, default_initializer):
    """create_parameter(...) with its initializer deferred to the startup program (same values)."""
    import copy
    from ..nn import initializer as init
    initializer = attr.initializer or init.global_initializer(is_bias) or default_initializer
    if initializer is None:
        initializer = init.Constant(0.0) if is_bias else init.XavierUniform()
    attr = copy.copy(attr)
    attr.initializer = _Deferring(initializer)
    return create_parameter(shape, attr=attr, name=attr.name or name, is_bias=is_bias)


def pending(t):
    """t's DeferredInit if its values are not written yet, else None."""
    d = getattr(t, "__dict__", {}).get("static_init")
    return d if d is not None and d.array is t._local else None


def materialize(t):
    """Write t's initial values now if they are still pending (a server's initial values, read
    without running the startup program, as Paddle's init_server runs it itself)."""
    d = pending(t)
    if d is not None:
        d.fill(t._local)
        t.static_init = None
