"""adaptive_mean: adaptive average pooling along one dim whose bins all have the same length, one op."""
import numpy as np

from ..backends.devices import array_module
from ..registry import op, rules
from ._front import apply, constant_full

B, P, S = rules.B, rules.P, rules.split


def _rows(s, o, st):
    """Linear and dim-local: B and P pass, a split on any other dim stays split."""
    return [((B,), (B,)), ((P,), (P,))] + [((S(d),), (S(d),)) for d in range(len(s[0])) if d != st["dim"]]


def _meta(s, dt, st):
    shape = list(s[0])
    if shape[st["dim"]] != st["size"] or st["size"] % st["n_out"]:
        raise ValueError(f"adaptive_mean: {st['n_out']} bins do not divide dim {st['dim']} of shape {tuple(s[0])}")
    shape[st["dim"]] = st["n_out"]
    return [tuple(shape)], [dt[0]]


def _weight_shape(ndim, dim, n_out):
    return [n_out if d == dim else 1 for d in range(ndim)]


def _backward(ctx, g):
    """Each input gets its bin's g * w, w = 1 / the bin's length (the taps' index_adds added zeros
    elsewhere, so the same values): g * w repeated over each bin."""
    from .shape import expand
    dim, n_out, size = ctx.static["dim"], ctx.static["n_out"], ctx.static["size"]
    w = constant_full(_weight_shape(g.ndim, dim, n_out), 1.0 / (size // n_out), g)
    gw = apply("multiply", [g, w])
    lead, tail = list(g.shape[:dim]), list(g.shape[dim + 1:])
    return expand(gw.reshape(*lead, n_out, 1, *tail), *lead, n_out, size // n_out, *tail).reshape(*ctx.inputs[0].shape)


@op("adaptive_mean", _rows, _backward, meta=_meta)
def _adaptive_mean(x, dim=0, n_out=1, size=1):
    """The bins' means along dim as resize's taps sum them: ((x_0 w + x_1 w) + x_2 w) + ..., x_j
    the j-th element of each bin, w = 1 / the bin's length in x's dtype (the same bits)."""
    k = size // n_out
    bins = x.reshape(x.shape[:dim] + (n_out, k) + x.shape[dim + 1:])
    w = array_module(x).full(_weight_shape(x.ndim, dim, n_out), 1.0 / k, x.dtype)
    at = (slice(None),) * (dim + 1)
    out = bins[at + (0,)] * w
    for j in range(1, k):
        out = out + bins[at + (j,)] * w
    return out


def adaptive_mean(x, dim, n_out):
    """x's adaptive average pooling along dim into n_out bins of x.shape[dim] // n_out each (they must divide)."""
    return apply("adaptive_mean", [x], {"dim": dim, "n_out": n_out, "size": x.shape[dim]})
