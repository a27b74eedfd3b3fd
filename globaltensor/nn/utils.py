"""nn.utils: gradient clipping over global gradients.

The gradients may live on different placements (pipeline stages on [0] and [1], a 2-D mesh
with tensor-parallel splits beside broadcast parameters, ...) and have any SBP: the total norm
is the norm of all the full (global) gradients, the one PyTorch's clip_grad_norm_ gives on the
unsharded model. Every decision below is made from global metadata only (placements, SBPs,
dtypes, the order of the parameters), never from a rank's own pieces, so every rank issues the
same collectives in the same order and gets the same total and the same clip coefficient.
"""
import math

from .. import creation
from ..autograd import no_grad

_INF = float("inf")


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients in place so their total norm is at most max_norm; returns the total
    norm before clipping as a 0-d tensor, as PyTorch, with no host synchronisation.

    norm_type: any positive number or inf. Global gradients on one placement give a total on
    that placement (broadcast). Gradients on several placements give it on one that covers
    every rank of them all: the first gradient placement that does, or else a 1-D placement of
    their ranks in increasing order (of the first gradient's device type). Each placement's
    partial norm is reduced there once and moved (boxing) to that placement; a rank outside a
    gradient's placement holds an empty piece of it and still gets the whole total. Local
    gradients give a local total; mixing local and global gradients raises RuntimeError.
    The norm is accumulated in float32 at least (float64 when a gradient is float64) and
    returned in that dtype. error_if_nonfinite=True reads the total on every rank (a
    collective, as item()) and raises RuntimeError on every rank if it is nan or inf.
    foreach is accepted for PyTorch's signature and ignored."""
    del foreach
    grads = _grads(parameters, "clip_grad_norm_")
    norm_type = _norm_type(norm_type)
    if not grads:
        return creation.tensor(0.0)
    from .. import ops
    with no_grad():
        total = _total_norm(grads, norm_type)
        if error_if_nonfinite and not math.isfinite(float(total.item())):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                               f"non-finite ({float(total.item())}), so it cannot be clipped; pass "
                               "error_if_nonfinite=False to clip anyway")
        coef = ops.clip(max_norm / (total + 1e-6), max=1.0)
        coefs = {}  # the coefficient on each gradient placement: one move per placement
        for g in grads:
            key = _key(g)
            if key not in coefs:
                coefs[key] = coef if key is None or key == coef.placement else _broadcast_on(coef, key)
            g.mul_(coefs[key])
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient in place to [-clip_value, clip_value], element by element (on the
    full global values: a partial_sum gradient is clamped as its sum, and keeps its SBP).
    Returns None, as PyTorch."""
    del foreach
    grads = _grads(parameters, "clip_grad_value_")
    clip_value = float(clip_value)
    with no_grad():
        for g in grads:
            g.clamp_(-clip_value, clip_value)


def _grads(parameters, name):
    from ..tensor import Tensor
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = list(parameters)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{name}: parameters must be tensors, got {type(p).__name__} at position {i}")
    grads = [(i, p.grad) for i, p in enumerate(params) if p.grad is not None]
    local = [(i, g) for i, g in grads if not g.is_global]
    if local and len(local) != len(grads):
        (li, _), (gi, gg) = local[0], next((i, g) for i, g in grads if g.is_global)
        raise RuntimeError(
            f"{name}: cannot mix local and global gradients: parameter {li} has a local gradient (placement: "
            f"none) and parameter {gi} a global one (placement {gg.placement}, sbp {gg.sbp}); a local "
            "gradient is each rank's own, so no total over all ranks is defined for it. Make every "
            "parameter global (module.to_global(placement, sbp)) or clip the local ones separately")
    return [g for _, g in grads]


def _norm_type(norm_type):
    try:
        p = float(norm_type)
    except (TypeError, ValueError):
        raise ValueError(f"clip_grad_norm_: norm_type must be a positive number or inf, got {norm_type!r}") from None
    if not (p > 0):  # also nan
        raise ValueError(f"clip_grad_norm_: norm_type must be a positive number or inf, got {norm_type!r}")
    return p


def _key(g):
    return g.placement if g.is_global else None


def _accumulation_dtype(grads):
    from .. import dtype as dt
    return dt.float64 if any(g.dtype == dt.float64 for g in grads) else dt.float32


def _total_norm(grads, p):
    """The p-norm of all the gradients together (global, broadcast; see clip_grad_norm_)."""
    from .. import ops
    acc = _accumulation_dtype(grads)
    groups = {}  # placement -> its gradients, in the order of first appearance (the same on every rank)
    for g in grads:
        groups.setdefault(_key(g), []).append(g)
    combine = ops.maximum if p == _INF else ops.add
    per_placement = []
    for members in groups.values():
        out = None
        for g in members:  # sums stay partial (no collective) until the group's total is moved
            part = _part(g, p, acc)
            out = part if out is None else combine(out, part)
        per_placement.append(out)
    if len(per_placement) == 1:
        total = per_placement[0]
        if total.is_global:  # one reduction; the total is broadcast on the gradients' placement
            total = _broadcast_on(total, total.placement)
    else:
        target = _covering(list(groups))
        total = None
        for part in per_placement:
            part = _broadcast_on(part, target)
            total = part if total is None else combine(total, part)
    if p == _INF or p == 1:
        return total
    return ops.sqrt(total) if p == 2 else total ** (1.0 / p)


def _part(g, p, acc):
    """One gradient's sum of |g|**p (its max |g| for inf), 0-d, in the accumulation dtype."""
    from .. import ops
    if p == _INF:
        m = ops.amax(ops.abs(g))
        return m if m.dtype == acc else ops.cast(m, acc)
    if g.dtype.itemsize < 4:  # float16/bfloat16: squares and sums overflow, so in the accumulation dtype
        g = ops.cast(g, acc)
    if p == 2:
        s = ops.sum(g * g)
    elif p == 1:
        s = ops.sum(ops.abs(g))
    else:
        s = ops.sum(ops.abs(g) ** p)
    return s if s.dtype == acc else ops.cast(s, acc)


def _covering(placements):
    """The placement the total of several gradient placements lives on: the first of them that
    holds every rank of them all, else a 1-D placement of those ranks in increasing order."""
    from ..placement import placement as Placement
    union = set()
    for pl in placements:
        union.update(pl.rank_list())
    for pl in placements:
        if set(pl.rank_list()) == union:
            return pl
    return Placement(placements[0].type, sorted(union))


def _broadcast_on(t, placement):
    from ..sbp import broadcast
    sbp = (broadcast,) * placement.ndim
    if t.placement == placement and tuple(t.sbp) == sbp:
        return t
    return t.to_global(placement=placement, sbp=sbp)
