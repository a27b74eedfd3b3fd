"""Autograd: a tape of nodes and a topological backward; gradients are ordinary (global) ops."""
import collections
import contextlib
import weakref

from .boxing import convert
from .hooks import recorder as _recording
from .sbp import reducible_axes, without_partial
from .tensor import Tensor

_enabled = [True]  # process-wide grad mode (a list: read on the hot path without a lookup chain)


def is_grad_enabled():
    return _enabled[0]


@contextlib.contextmanager
def _flag(cell, value):
    """Set a one-element list flag for the duration of a with block."""
    previous = cell[0]
    cell[0] = value
    try:
        yield
    finally:
        cell[0] = previous


def no_grad():
    """Ops inside record nothing for backward."""
    return _flag(_enabled, False)


def enable_grad():
    return _flag(_enabled, True)


_clock = [0]  # counts contexts: which ones read a tensor before an in-place op changed it


def clock():
    """The sequence number of the newest context."""
    return _clock[0]


def seen_inputs(ctx):
    """ctx's inputs as its op saw them: a tensor changed in place since then is replaced by the
    version it had (Tensor._become keeps it), so backward uses the values forward used and
    follows the graph as it was (PyTorch raises here; we can give the right answer)."""
    if all(t._past is None for t in ctx.inputs):
        return ctx.inputs
    return tuple(t if t._past is None else next((old for at, old in t._past if at >= ctx.seq), t)
                 for t in ctx.inputs)


class Context:
    """What a backward sees: the op's inputs (tensors), outputs and static arguments."""

    __slots__ = ("inputs", "outputs", "static", "backward", "dests", "seq")

    def __init__(self, inputs, outputs, static, backward):
        self.inputs, self.outputs, self.static, self.backward = inputs, outputs, static, backward
        self.dests = None
        _clock[0] += 1
        self.seq = _clock[0]
        for t in inputs:
            t._read_at = self.seq

    def dest(self, i):
        """Where input i's gradient piece may be written (its gradient bucket), or None."""
        return None if self.dests is None else self.dests[i]


class Node:
    """One recorded op: its backward, its context, and which output this tensor is."""

    __slots__ = ("backward", "ctx", "index", "name")

    def __init__(self, name, backward, ctx, index):
        self.name, self.backward, self.ctx, self.index = name, backward, ctx, index


def record(name, backward, inputs, outputs, static):
    """Attach a node to each floating output when grad mode is on and an input requires grad.
    Integer and bool outputs (argmax, comparisons, indices) never require grad, as in PyTorch, so
    an op with only such outputs needs no backward; an op without one raises in backward."""
    if not is_grad_enabled() or not any(t.requires_grad for t in inputs):
        return
    differentiable = [i for i, out in enumerate(outputs) if out.dtype.is_floating]
    if not differentiable:
        return
    if backward is None:  # as PyTorch: the forward runs, a backward through it raises
        backward = _not_implemented(name)
    ctx = Context(tuple(inputs), tuple(outputs), static, backward)
    for i in differentiable:
        out = outputs[i]
        out.requires_grad = True
        out._node = Node(name, backward, ctx, i)


def _not_implemented(name):
    def backward(ctx, *grads):
        raise RuntimeError(f"the derivative for {name!r} is not implemented (it has no backward); compute it "
                           f"under gt.no_grad() or from a detach()ed input")
    return backward


def _topological(roots):
    """Nodes' contexts reachable from roots, outputs before inputs."""
    order, seen = [], set()
    stack = [(r, False) for r in roots]
    while stack:
        t, done = stack.pop()
        node = t._node
        if node is None:
            continue
        ctx = node.ctx
        if done:
            if id(ctx) not in seen:
                seen.add(id(ctx))
                order.append(ctx)
            continue
        if id(ctx) in seen:
            continue
        stack.append((t, True))
        ctx.inputs = seen_inputs(ctx)
        stack.extend((i, False) for i in ctx.inputs if i.requires_grad)
    return order[::-1]


_seeds = {}
_ones_rule = {}  # id(leaf) -> weakref: leaves made by Paddle's face, whose backward of a non-scalar seeds ones


def seeds_ones(t):
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
    """The gradient a backward of root r starts from: g, else ones (a seed cached per layout) when
    r is a scalar or a leaf under it follows Paddle's rule."""
    if not r.requires_grad:
        raise RuntimeError("backward: the tensor does not require grad (no input of it requires grad)")
    if g is not None:
        return g
    if r.numel() != 1 and not _ones_for(roots, order):
        raise RuntimeError(f"backward of a tensor of shape {r.shape} needs a gradient argument")
    key = (r.shape, r.dtype.np, r.placement, r.sbp)
    g = _seeds.get(key)
    if g is None:  # a seed is never written to, so one per layout serves every backward
        from .creation import ones_like
        if len(_seeds) >= 64:
            _seeds.clear()
        g = _seeds[key] = ones_like(r, sbp=_seed_sbp(r))
    return g


def _run(roots, root_grads, wanted=None, order=None, on_leaf=None):
    """Propagate from roots; returns {id(tensor): grad} for leaves (or for `wanted`). With
    on_leaf, each leaf's gradient goes to on_leaf(leaf, grad_or_None) as soon as it is complete."""
    if order is None:
        order = _topological(roots)
    grads = {}
    for r, g in zip(roots, root_grads):
        _accumulate(grads, r, _start(r, g, roots, order))
    finishing = _finishing(order) if on_leaf is not None else {}
    result = {}
    with no_grad():
        for i, ctx in enumerate(order):
            outs = [grads.pop(id(o), None) for o in ctx.outputs]
            if any(g is not None for g in outs):
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


def _reducible(leaf, g):
    """May a bucket reduce g into leaf's layout (g partial where the leaf is broadcast)?"""
    return g.placement == leaf.placement and reducible_axes(leaf.sbp, g.sbp) is not None


def _fit(t, g):
    """A gradient laid out like its tensor (leaf: the leaf's placement and SBP, or grad_sbp)."""
    if t.is_global:
        sbp = getattr(t, "_grad_sbp", None) or t.sbp
        if g.placement != t.placement or g.sbp != sbp:
            g = convert(g, t.placement, sbp)  # inside backward: nothing to record
    return g


_sync = [True]  # False inside no_sync(): partial gradients of leaves are kept, not reduced


class _Planners:
    """The objects that plan gradient buckets (plan_buckets(leaves in completion order, sync) ->
    buckets or None), held weakly, in the order they registered: the same on every rank, so
    buckets start in one order everywhere."""

    def __init__(self):
        self._refs = []

    def add(self, planner):
        self._refs.append(weakref.ref(planner))

    def __iter__(self):
        self._refs = [r for r in self._refs if r() is not None]
        return iter([p for p in (r() for r in self._refs) if p is not None])


bucket_planners = _Planners()
BUCKET_BYTES = [25 << 20]


def backward(tensor, gradient=None):
    """Accumulate d tensor / d leaf into each leaf's .grad. The partial gradients of broadcast
    leaves are reduced in buckets of BUCKET_BYTES, one all_reduce each, started during backward
    as soon as a bucket is complete (so communication overlaps the rest of backward)."""
    order = _topological([tensor])
    gradient = _start(tensor, gradient, [tensor], order)  # bad calls raise before any bucket is planned
    finishing = _finishing(order)
    leaves_in_order = [leaf for i in sorted(finishing) for leaf in finishing[i]]
    if tensor._node is None:
        leaves_in_order.append(tensor)
    capturing = _recording[0] is not None
    if capturing:  # a graph's backward: its own pass buckets the reductions that _fit records
        _recording[0].backward_starts(leaves_in_order)
    all_buckets = []
    for planner in bucket_planners:
        if capturing and getattr(planner, "fit_in_graph", False):
            continue
        buckets = planner.plan_buckets(leaves_in_order, _sync[0])
        if buckets is not None:
            if capturing:
                raise RuntimeError(f"backward inside a graph: {type(planner).__name__} reduces gradients in buckets "
                                   f"the graph cannot record (DataParallel of local tensors); make the model global "
                                   f"(to_global with broadcast parameters) to capture it")
            all_buckets.append(buckets)
    owner = {id(leaf): b for b in all_buckets for bucket in b.plan for leaf in bucket}
    offered = _offer_destinations(order, owner)
    # the roots of the arrays a .grad holds, or backward started from (the caller's gradient or
    # the cached seed); a graph's capture copies nothing (its replays assign, never add)
    handed = None if capturing else {id(_root(gradient._local))}

    def on_leaf(leaf, g):
        if g is not None and g.dtype != leaf.dtype:
            g = g.cast(leaf.dtype)  # a leaf's gradient has the leaf's dtype
        if g is not None and leaf.grad is not None and not capturing and _adds_in_place(leaf.grad, g):
            leaf.grad._local += g._local  # accumulate in place, as PyTorch (no fresh pages per micro-batch)
            g, leaf.grad = leaf.grad, None
        elif g is not None and leaf.grad is not None and (leaf.grad.is_local or leaf.grad.sbp == g.sbp):
            g = leaf.grad + g  # accumulate before reducing (no_sync steps stay partial)
            leaf.grad = None
        buckets = owner.get(id(leaf))
        if buckets is not None:
            takes = g is not None and (leaf.is_local or _reducible(leaf, g))
            if not takes:
                g = buckets.keep_out(leaf, g)  # before ready(): that may start the bucket's all_reduce
            buckets.ready(leaf, g if takes else None)
            if takes:
                return
        if g is None:
            return
        if not _sync[0] and leaf.grad is None and leaf.is_global and _reducible(leaf, g):
            leaf.grad = _private(g.detach(), handed)  # stays partial until a backward outside no_sync
            return
        if capturing and leaf.is_global and _reducible(leaf, g):  # as the buckets would: recorded, then packed
            g = _recording[0].reduce_grad(leaf, g, reducible_axes(leaf.sbp, g.sbp))
        g = _fit(leaf, g).detach()
        leaf.grad = _private(g, handed) if leaf.grad is None else (leaf.grad + g).detach()

    try:
        _run([tensor], [gradient], order=order, on_leaf=on_leaf)
    except BaseException:
        for buckets in all_buckets:
            buckets.abandon()
        raise
    finally:
        for ctx in offered:  # a later grad() over this graph must not write into the buckets
            ctx.dests = None
    for buckets in all_buckets:
        buckets.finish()
    if capturing:
        _recording[0].backward_ends(leaves_in_order)


def _private(g, handed):
    """g, or a copy of it, such that the .grad it becomes owns its piece: one whose memory is in
    `handed` (the array backward started from — the caller's gradient or the cached seed — or one
    another leaf's .grad holds: add's backward hands one array to both inputs), views followed, is
    copied, so accumulating into a .grad later (in place, or zeroed by clear_grad) changes nothing
    else. handed None: g as it is (a capture, whose replays assign)."""
    if handed is None:
        return g
    root = id(_root(g._local))
    if root in handed:
        g = Tensor(g._local.copy(), g._global_shape, g._dtype, g._placement, g._sbp)  # the layout, its own piece
        root = id(g._local)
    handed.add(root)
    return g


def _root(a):
    """The array whose memory `a` views (itself when it owns it): views share their root."""
    while hasattr(getattr(a, "base", None), "shape"):
        a = a.base
    return a


def _adds_in_place(grad, g):
    """May g be added into grad's own memory? Same layout and dtype, and grad's piece is an array
    of its own (not a view into a gradient bucket or another tensor)."""
    return (grad.shape == g.shape and grad.dtype == g.dtype and grad.placement == g.placement
            and grad.sbp == g.sbp and grad._node is None and not grad.requires_grad
            and getattr(grad._local, "base", 0) is None
            and getattr(grad._local.flags, "writeable", True))  # cupy arrays have no read-only flag


def _offer_destinations(order, owner):
    """Point each context at the bucket views of its leaf inputs, so backward may write those
    gradients in place: only leaves used once (nothing to add up) that have no .grad yet.
    Returns the contexts given destinations."""
    if not owner:
        return ()
    uses = collections.Counter(id(t) for ctx in order for t in ctx.inputs)
    offered = []
    for ctx in order:
        dests = None
        for j, t in enumerate(ctx.inputs):
            buckets = owner.get(id(t))
            if buckets is not None and t.grad is None and uses[id(t)] == 1:
                view = buckets.dest(t)
                if view is not None:
                    dests = dests or [None] * len(ctx.inputs)
                    dests[j] = view
        if dests is not None:
            ctx.dests = dests
            offered.append(ctx)
    return offered


def no_sync():
    """Inside: backward keeps the partial gradients of broadcast leaves (no communication);
    the first backward after it reduces what was accumulated, in buckets."""
    return _flag(_sync, False)


def grad(outputs, inputs, grad_outputs=None, allow_unused=False):
    """d outputs / d inputs as a tuple, without touching .grad."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    grad_outputs = list(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else [grad_outputs] * len(outputs)
    found = _run(outputs, grad_outputs, wanted={id(t) for t in inputs})
    result = []
    for t in inputs:
        g = found.get(id(t))
        if g is None and not allow_unused:
            raise RuntimeError("grad: an input was not used to compute the outputs (pass allow_unused=True)")
        result.append(None if g is None else _fit(t, g).detach())
    return tuple(result)


def _tensor_backward(self, gradient=None):
    """Accumulate the gradient of this tensor into the .grad of every leaf it depends on."""
    backward(self, gradient)


Tensor.backward = _tensor_backward
