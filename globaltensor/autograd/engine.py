"""Backward: runs the tape from a root; each finished leaf gradient goes to the registered sinks
(gradient buckets, a graph's capture), then into the leaf's .grad, owning its memory."""
from __future__ import annotations

import weakref
from typing import Optional

import numpy as np

from ..boxing import convert
from ..creation import ones_like
from ..sbp import without_partial
from ..scope import current as _scope, scoped
from ..tensor import Tensor
from .tape import _topological


_ones_rule = {}  # id(leaf) -> weakref: leaves made by Paddle's face, whose backward of a non-scalar seeds ones


def seeds_ones(t: Tensor) -> None:
    """Mark t (a leaf a face made) as following Paddle's rule: a backward that reaches it seeds a
    non-scalar root with ones instead of raising (PyTorch's rule, the default). The rule follows
    the tensors, so importing a face changes nothing for other code in the process."""
    key = id(t)
    if key not in _ones_rule:
        _ones_rule[key] = weakref.ref(t, lambda _, key=key: _ones_rule.pop(key, None))


def _ones_for(roots, order):
    """Whether a non-scalar root is seeded with ones: a leaf under it follows Paddle's rule."""
    if not _ones_rule:
        return False
    return any(id(t) in _ones_rule for t in roots) or \
        any(id(t) in _ones_rule for ctx in order for t in ctx.inputs if t._node is None)


_zeroed = {}  # id(t) -> (weakref to t, weakref to its piece): .grads zeroed by zero_in_place, still zeros


def zero_in_place(t: Tensor) -> None:
    """t (a .grad) reads as zeros, keeping its identity, and backward treats it as absent while it
    holds that piece: the next gradient replaces it (bitwise what set_to_none gives) instead of being
    added into zeros, so gradient buckets may take it in place. On cpu the zeros are one read-only
    zero broadcast to t's shape (no memory, no pass over it: a gradient bucket's view is dropped
    rather than zero-filled every step; a write through numpy raises instead of being missed;
    tensor ops replace the piece, which ends the mark); elsewhere t.zero_()."""
    piece = t._local
    if not isinstance(piece, np.ndarray) or t._node is not None:
        t.zero_()
        return
    zeros = np.ndarray(piece.shape, piece.dtype, np.zeros((), piece.dtype), 0, (0,) * piece.ndim)  # strides 0
    zeros.flags.writeable = False  # np.broadcast_to's array, without its Python frames
    t._local = zeros
    key = id(t)
    _zeroed[key] = (weakref.ref(t, lambda _, key=key: _zeroed.pop(key, None)), weakref.ref(zeros))


def is_zeroed(t: Optional[Tensor]) -> bool:
    """Whether t is a .grad that zero_in_place left all zeros (nothing replaced its piece since)."""
    entry = _zeroed.get(id(t)) if t is not None else None
    return entry is not None and entry[0]() is t and entry[1]() is t._local


def _seed_sbp(t):
    """The seed's layout: d(sum of pieces)/d(piece) = 1 on every rank, so partial -> broadcast."""
    if t.is_local:
        return None
    return without_partial(t.sbp)


def _accumulate(grads, t, g):
    key = id(t)
    grads[key] = g if key not in grads else grads[key] + g


def _finishing(order):
    """{index in order: leaves whose gradient is complete once that context has run}."""
    last = {}
    for i, ctx in enumerate(order):
        for t in ctx.inputs:
            if t.requires_grad and t._node is None:
                last[id(t)] = (i, t)
    done = {}
    for i, t in last.values():
        done.setdefault(i, []).append(t)
    return done


def _start(r, g, roots, order):
    """The gradient a backward of root r starts from: g, else ones (a fresh seed, which the leaf
    gradients may share) when r is a scalar or a leaf under it follows Paddle's rule."""
    if not r.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn (backward: "
                           "no input of the tensor requires grad)")
    if g is not None:
        return g
    if (r.dtype.is_complex or r.numel() != 1) and not _ones_for(roots, order):
        if r.dtype.is_complex:
            raise RuntimeError(f"backward: grad can be implicitly created only for real scalar outputs, got "
                               f"{r.dtype.name} (take .real, abs() or pass a gradient)")
        raise RuntimeError(f"backward of a tensor of shape {r.shape} needs a gradient argument")
    piece = r._local
    if r._placement is None and type(piece) is np.ndarray and piece.dtype == r._dtype.np and \
            _scope.get().recorder is None:  # a local numpy loss (every DataParallel step): no factory's frames
        return Tensor(np.ones(piece.shape, piece.dtype), None, r._dtype)
    return ones_like(r, sbp=_seed_sbp(r))


def _run(roots, root_grads, wanted=None, order=None, on_leaf=None, on_retained=None, create_graph=False,
         finishing=None):
    """Propagate from roots; returns {id(tensor): grad} for leaves (or for `wanted`). With
    on_leaf, each leaf's gradient goes to on_leaf(leaf, grad_or_None) as soon as it is complete;
    with on_retained, each complete gradient of a non-leaf that retain_grad() marked goes to
    on_retained(tensor, grad); with create_graph, the gradient ops are recorded on the tape (each
    backward is written with registered ops), so the gradients can be differentiated again."""
    if order is None:
        order = _topological(roots)
    grads = {}
    result = {}
    for r, g in zip(roots, root_grads):
        seed = _start(r, g, roots, order)
        _accumulate(grads, r, seed)
        if wanted is not None and id(r) in wanted and r._node is not None:
            _accumulate(result, r, seed)  # d root / d root: its own seed, plus what flows in from other roots
    if finishing is None:  # backward() passes the one it made: one walk of the order fewer
        finishing = _finishing(order) if on_leaf is not None else {}
    with scoped(grad=bool(create_graph), amp=None):  # backward runs in the forward's dtypes, autocast off
        for i, ctx in enumerate(order):
            held = ctx.alive()  # a dead output has no gradient
            outs = [None if o is None else grads.pop(id(o), None) for o in held]
            if on_retained is not None:
                for o, g in zip(held, outs):
                    if g is not None and getattr(o, "_retains_grad", False):
                        on_retained(o, g)
            live = False
            for g in outs:  # a loop, not any(): no generator frame per context
                if g is not None:
                    live = True
                    break
            if live:
                in_grads = ctx.backward(ctx, *outs)
                if not isinstance(in_grads, (tuple, list)):
                    in_grads = (in_grads,)
                for t, g in zip(ctx.inputs, in_grads):
                    if g is None or not t.requires_grad:
                        continue
                    if t._node is None or (wanted is not None and id(t) in wanted):
                        _accumulate(result, t, g)
                    if t._node is not None:
                        _accumulate(grads, t, g)
            for leaf in finishing.get(i, ()):
                on_leaf(leaf, result.pop(id(leaf), None))
    for r in roots:  # a root that is itself a leaf
        if r._node is None and id(r) in grads:
            if on_leaf is not None:
                on_leaf(r, grads[id(r)])
            else:
                _accumulate(result, r, grads[id(r)])
    return result


def fit(t, g):
    """A gradient laid out like its tensor (leaf: the leaf's placement and SBP, or grad_sbp)."""
    if t.is_global:
        sbp = getattr(t, "_grad_sbp", None) or t.sbp
        if g.placement != t.placement or g.sbp != sbp:
            g = convert(g, t.placement, sbp)  # inside backward: nothing to record
    return g


class _Sinks:
    """Where finished leaf gradients go, held weakly in the order they registered: the same on
    every rank, so every rank offers each gradient to them in one order. A sink's
    begin(run) -> a taker for this backward or None; taker.take(leaf, g) -> g (passed on) or None
    (taken: the sink owns it now; g may be None: the leaf got no gradient); taker.finish() after
    the last leaf; taker.abandon() when backward raised."""

    def __init__(self):
        self._refs = []

    def add(self, sink, first=False):
        """Register sink, after those registered before it (first: before them all)."""
        self._refs.insert(0 if first else len(self._refs), weakref.ref(sink))

    def __iter__(self):
        self._refs = [r for r in self._refs if r() is not None]
        return iter([s for s in (r() for r in self._refs) if s is not None])


sinks = _Sinks()


class Run:
    """One backward as its sinks see it: the contexts in execution order, the leaves in the order
    their gradients finish, and how a gradient is stored into a .grad. A sink that replays what it
    records (a graph's capture) sets `assigns`: no in-place accumulation, no private copies."""

    def __init__(self, order, leaves, start):
        self.order, self.leaves = order, leaves
        self.assigns = False
        self._handed = {id(_root(start._local))}  # arrays a .grad must not share: backward's start

    def merge(self, leaf, g):
        """g in the leaf's dtype, with the .grad the leaf already holds added in (taken out of it):
        in place when that .grad owns its memory, as PyTorch (no fresh pages per micro-batch)."""
        if g is None:
            return None
        if g.dtype != leaf.dtype:
            g = g.cast(leaf.dtype)
        held = leaf.grad
        if _is_rows(g) or _is_rows(held):  # a row gradient (sparse embedding): sums concatenate, never in place
            leaf.grad = None
            return g if held is None or is_zeroed(held) else held + g
        if is_zeroed(held) and not self.assigns:  # zeros: replaced, not added into (same bits as None)
            leaf.grad = None
            if not _same_layout(held, g):
                return g
            held._local = g._local  # the .grad object a caller kept gets the new gradient
            _zeroed.pop(id(held), None)
            return held
        if held is not None and not self.assigns and _adds_in_place(held, g):
            held._local += g._local
            g, leaf.grad = held, None
        elif held is not None and (held.is_local or held.sbp == g.sbp):
            g, leaf.grad = held + g, None  # before the sinks: no_sync steps stay partial
        return g

    def store(self, leaf, g):
        """leaf.grad = g (added to what it holds), g owning its memory (see _private)."""
        g = g.detach()
        fresh = leaf.grad is None or is_zeroed(leaf.grad)
        if _is_rows(g):  # never written in place (sums concatenate): it may share the output gradient's memory
            leaf.grad = g if fresh else leaf.grad + g
            return
        leaf.grad = self._private(g) if fresh else (leaf.grad + g).detach()

    def _private(self, g):
        """g, or a copy of it, such that the .grad it becomes owns its piece: one whose memory is
        backward's start (the caller's gradient or the seed) or another .grad's (add's backward
        hands one array to both inputs), views followed, is copied, so accumulating into a .grad
        later (in place, or zeroed by clear_grad) changes nothing else."""
        if self.assigns:
            return g
        root = id(_root(g._local))
        if root in self._handed:
            g = Tensor(g._local.copy(), g._global_shape, g._dtype, g._placement, g._sbp)
            root = id(g._local)
        self._handed.add(root)
        return g


def backward(tensor: Tensor, gradient: Optional[Tensor] = None) -> None:
    """Accumulate d tensor / d leaf into each leaf's .grad. Each leaf's gradient, once complete,
    is offered to the sinks in registration order (gradient buckets start their all_reduce as
    they fill, overlapping the rest of backward); what none takes is fitted to the leaf's layout
    and stored."""
    order = _topological([tensor])
    loss_scale = getattr(_scope.get().amp, "loss_scale", None) if gradient is None else None
    gradient = _start(tensor, gradient, [tensor], order)  # bad calls raise before any sink begins
    if loss_scale is not None:  # a graph's grad scaler (graph/amp_step.py): the seed is the loss scale
        gradient = gradient * loss_scale
    finishing = _finishing(order)
    leaves = [leaf for i in sorted(finishing) for leaf in finishing[i]]
    if tensor._node is None:
        leaves.append(tensor)
    run = Run(order, leaves, gradient)
    takers = []
    try:
        for sink in sinks:
            taker = sink.begin(run)
            if taker is not None:
                takers.append(taker)

        def on_leaf(leaf, g):
            g = run.merge(leaf, g)
            if _is_rows(g) and any(getattr(t, "owns", None) and t.owns(leaf) for t in takers):
                g = g.to_dense()  # a gradient bucket files it dense (the same values); the other sinks: global leaves
            for taker in takers:
                g = taker.take(leaf, g)
            if g is not None:
                run.store(leaf, fit(leaf, g))

        _run([tensor], [gradient], order=order, on_leaf=on_leaf, on_retained=lambda t, g: run.store(t, fit(t, g)),
             finishing=finishing)
    except BaseException:
        for taker in takers:
            taker.abandon()
        raise
    for taker in takers:
        taker.finish()


def _is_rows(g):
    """A row gradient (ops.embedding_lookup.RowGrad: only the looked-up rows of a table)."""
    return type(g) is not Tensor and g is not None and getattr(g, "is_rows", False)


def _root(a):
    """The array whose memory `a` views (itself when it owns it): views share their root."""
    while hasattr(getattr(a, "base", None), "shape"):
        a = a.base
    return a


def _adds_in_place(grad, g):
    """May g be added into grad's own memory? Same layout and dtype, and grad's piece is an array
    of its own (not a view into a gradient bucket or another tensor)."""
    return (_same_layout(grad, g) and grad._node is None and not grad.requires_grad
            and getattr(grad._local, "base", 0) is None
            and getattr(grad._local.flags, "writeable", True))  # cupy arrays have no read-only flag


def _same_layout(a, b):
    return (a._global_shape == b._global_shape and (a._dtype is b._dtype or a._dtype == b._dtype)
            and a._placement == b._placement and a._sbp == b._sbp)
