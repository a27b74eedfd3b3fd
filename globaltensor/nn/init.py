"""Parameter initialisers, drawing from the sharding-invariant generator (in place)."""
import math

from ..autograd import no_grad
from .. import creation


def _fill(t, fresh):
    with no_grad():
        if t.is_global:
            fresh = fresh.to_global(placement=t.placement, sbp=t.sbp) if fresh.is_global else fresh
        t._local[...] = fresh._local
    return t


def _like(t, factory, *args):
    if t.is_global:
        from ..sbp import without_partial
        sbp = without_partial(t.sbp)
        return factory(*args, dtype=t.dtype, placement=t.placement, sbp=sbp)
    return factory(*args, dtype=t.dtype)


def uniform_(t, a=0.0, b=1.0):
    return _fill(t, _like(t, lambda *s, **k: creation.uniform(s, a, b, **k), *t.shape))


def normal_(t, mean=0.0, std=1.0):
    return _fill(t, _like(t, lambda *s, **k: creation.normal(mean, std, s, **k), *t.shape))


def zeros_(t):
    return _fill(t, _like(t, creation.zeros, *t.shape))


def ones_(t):
    return _fill(t, _like(t, creation.ones, *t.shape))


def constant_(t, value):
    return _fill(t, _like(t, lambda *s, **k: creation.full(s, value, **k), *t.shape))


def _fans(t):
    fan_in = t.shape[1] if len(t.shape) > 1 else t.shape[0]
    fan_out = t.shape[0]
    receptive = math.prod(t.shape[2:]) if len(t.shape) > 2 else 1
    return fan_in * receptive, fan_out * receptive


def kaiming_uniform_(t, a=math.sqrt(5)):
    """PyTorch's default for Linear weights."""
    fan_in, _ = _fans(t)
    gain = math.sqrt(2.0 / (1 + a * a))
    bound = gain * math.sqrt(3.0 / fan_in) if fan_in else 0.0
    return uniform_(t, -bound, bound)


def xavier_uniform_(t, gain=1.0):
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain=1.0):
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
