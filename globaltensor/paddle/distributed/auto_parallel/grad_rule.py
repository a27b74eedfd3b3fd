"""Paddle's gradient rule for distributed leaves: where a leaf is replicated, a Partial gradient stays Partial."""
import weakref

from ....autograd import engine as _engine
from ....boxing import convert as _convert
from ....sbp import broadcast, partial_sum

_DIST = weakref.WeakValueDictionary()  # id -> a leaf made by the face's auto-parallel API (shard_tensor, ...)


def follows_paddles_grad_rule(t):
    """Mark t (a distributed tensor the face made): its .grad keeps Paddle's placements; returns t."""
    if t.is_global:
        _DIST[id(t)] = t
    return t


def grad_sbp(leaf_sbp, grad_sbp):
    """The SBP of the .grad Paddle keeps (semi-auto-parallel dygraph): on a mesh dim where the leaf is
    Replicate and backward made a Partial, Partial; on every other, the leaf's own."""
    return tuple(g if (s == broadcast and g == partial_sum) else s for s, g in zip(leaf_sbp, grad_sbp))


class _Taker:
    def __init__(self, run):
        self.run = run

    def take(self, leaf, g):
        """Store g with Paddle's placements when they differ from the leaf's (taken: None), else pass it on."""
        if g is None or self.run.assigns or _DIST.get(id(leaf)) is not leaf or not leaf.is_global:
            return g
        if g.placement != leaf.placement or leaf._grad_sbp is not None:
            return g
        target = grad_sbp(leaf.sbp, g.sbp)
        if target == tuple(leaf.sbp):
            return g  # the core's own rule gives the same
        if tuple(g.sbp) != target:
            g = _convert(g, leaf.placement, target)
        self.run.store(leaf, g)
        return None

    def finish(self):
        pass

    def abandon(self):
        pass


class _Sink:
    """A backward sink (autograd.engine.sinks) that only takes the marked leaves' gradients."""

    def begin(self, run):
        return _Taker(run) if len(_DIST) else None


_SINK = _Sink()  # the engine holds sinks weakly
_engine.sinks.add(_SINK, first=True)  # before the core's gradient buckets, which would reduce the Partial


def fit_grads_to_parameters(params):
    """Before an optimizer's update (which reads each gradient's piece as the parameter's): a
    Partial .grad of a replicated parameter reduced to the parameter's layout, in place of the old."""
    for p in params:
        if p._placement is None:  # a local parameter (DataParallel): its gradient is its own layout
            continue
        g = p.grad
        sbp = tuple(p._grad_sbp or p.sbp) if p.is_global else None  # ZeRO-2: the gradient's own shard layout
        if g is not None and p.is_global and g.is_global and (g.placement, tuple(g.sbp)) != (p.placement, sbp):
            p.grad = _convert(g.detach(), p.placement, sbp)
