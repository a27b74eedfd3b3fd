"""Ops that draw from the sharding-invariant generator: dropout, bernoulli, multinomial, randperm."""
import numpy as np

from .. import dtype as _dtype
from .. import random as _random
from ._front import tensors
from ..errors import ShapeError
from ..creation import allocate, build, rand
from ..sbp import partial_sum as P
from ..scope import recorder as _recorder


def _like_layout(x):
    from ..sbp import without_partial
    if x.is_local:
        return {}
    return {"placement": x.placement, "sbp": without_partial(x.sbp)}


def dropout(input, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1 / (1 - p). The mask comes
    from the sharding-invariant generator, so it does not depend on the layout."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0:
        return input
    from ..sbp import broadcast
    if input.is_global:
        u = rand(*input.shape, dtype=input.dtype, placement=input.placement, sbp=tuple(
            s if s is not P else broadcast for s in input.sbp))
    else:
        u = rand(*input.shape, dtype=input.dtype)
    keep = (u >= p).astype(input.dtype)
    return input * keep * (1.0 / (1.0 - p)) if p < 1 else input * 0.0


def bernoulli(input, p=None, *, generator=None):
    """1 with probability x (element-wise), else 0; same layout as x and x's dtype (the default
    float dtype for integer probabilities)."""
    (input,) = tensors(input)
    probs = input if p is None else input * 0 + p
    dt = input.dtype if input.dtype.is_floating else _dtype.get_default_dtype()
    u = rand(*input.shape, dtype=dt, generator=generator, **_like_layout(input))
    return (u < probs).astype(dt)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples class indices per row of the probabilities x (1-D or 2-D), int64.
    With replacement: inverse CDF of uniform draws; without: Gumbel top-k."""
    from .sorting import topk
    from .reduction import cumsum, sum
    (input,) = tensors(input)
    squeeze = input.ndim == 1
    probs = input.unsqueeze(0) if squeeze else input
    layout = _like_layout(probs)
    if replacement:
        cdf = cumsum(probs / sum(probs, -1, keepdim=True), -1)
        u = rand(probs.shape[0], num_samples, dtype=probs.dtype, generator=generator, **layout)
        # the number of cdf entries below u is the sampled class
        out = sum((cdf.unsqueeze(1) < u.unsqueeze(2)).astype("int64"), -1).clip(None, probs.shape[1] - 1)
    else:
        if num_samples > probs.shape[1]:
            raise ValueError("multinomial without replacement needs num_samples <= number of classes")
        u = rand(*probs.shape, dtype="float64", generator=generator, **layout)
        keys = (probs.astype("float64").log() - (-(u.clip(1e-300, None)).log()).log())
        out = topk(keys, num_samples, -1)[1]
    return out.squeeze(0) if squeeze else out


def randperm(n, *, generator=None, dtype=None, placement=None, sbp=None):
    """A random permutation of 0..n-1 (the argsort of n uniform draws), int64 by default."""
    dt = _dtype.to_dtype(dtype, _dtype.int64)
    if n < 0:
        raise ShapeError(f"Trying to create tensor with negative dimension {n}: [{n}] (randperm)")

    def draw():
        seed, counter = _random.next_key(generator)
        keys = np.empty(n, np.float64)
        _random.fill(keys, _random.UNIFORM, (n,), (0,), counter, seed=seed)
        perm = np.argsort(keys, kind="stable")

        def fill(box):
            (lo, hi), = box
            out = allocate((hi - lo,), dt)
            out[...] = perm[lo:hi]
            return out

        return build((n,), dt, placement, sbp, fill)

    t = draw()
    if (rec := _recorder()) is not None:  # a graph replays the draw
        rec.random(t, lambda: draw()._local)
    return t

