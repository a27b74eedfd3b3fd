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


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill(tensor, _like(tensor, lambda *s, **k: creation.uniform(s, a, b, generator=generator, **k),
                               *tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill(tensor, _like(tensor, lambda *s, **k: creation.normal(mean, std, s, generator=generator, **k),
                               *tensor.shape))


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


def _gain(nonlinearity, a):
    if nonlinearity == "leaky_relu":
        return math.sqrt(2.0 / (1 + a * a))
    gains = {"relu": math.sqrt(2.0), "tanh": 5.0 / 3, "selu": 0.75}
    return gains.get(nonlinearity, 1.0)  # linear, sigmoid and the conv family: 1


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """PyTorch's signature; Linear's default init calls it with a=sqrt(5)."""
    fan = _fans(tensor)[0 if mode == "fan_in" else 1]
    bound = _gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    fan = _fans(tensor)[0 if mode == "fan_in" else 1]
    return normal_(tensor, 0.0, _gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0, generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)
