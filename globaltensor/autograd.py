"""Autograd: a tape of nodes and a topological backward; gradients are ordinary (global) ops."""
import contextlib

_enabled = [True]  # process-wide grad mode (a list: read on the hot path without a lookup chain)


def is_grad_enabled():
    return _enabled[0]


@contextlib.contextmanager
def _grad_mode(on):
    previous = _enabled[0]
    _enabled[0] = on
    try:
        yield
    finally:
        _enabled[0] = previous


def no_grad():
    """Ops inside record nothing for backward."""
    return _grad_mode(False)


def enable_grad():
    return _grad_mode(True)


class Context:
    """What a backward sees: the op's inputs (tensors), outputs and static arguments."""

    __slots__ = ("inputs", "outputs", "static", "backward")

    def __init__(self, inputs, outputs, static, backward):
        self.inputs, self.outputs, self.static, self.backward = inputs, outputs, static, backward


class Node:
    """One recorded op: its backward, its context, and which output this tensor is."""

    __slots__ = ("backward", "ctx", "index", "name")

    def __init__(self, name, backward, ctx, index):
        self.name, self.backward, self.ctx, self.index = name, backward, ctx, index


def record(name, backward, inputs, outputs, static):
    """Attach a node to each output when grad mode is on and an input requires grad."""
    if not is_grad_enabled() or not any(t.requires_grad for t in inputs):
        return
    if backward is None:
        raise RuntimeError(f"{name} is not differentiable, but an input requires grad")
    ctx = Context(tuple(inputs), tuple(outputs), static, backward)
    for i, out in enumerate(outputs):
        out.requires_grad = True
        out._node = Node(name, backward, ctx, i)


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
        stack.extend((i, False) for i in ctx.inputs if i.requires_grad)
    return order[::-1]


def _seed_sbp(t):
    """The seed's layout: d(sum of pieces)/d(piece) = 1 on every rank, so partial -> broadcast."""
    if t.is_local:
        return None
    from .sbp import broadcast, partial_sum
    return tuple(broadcast if s is partial_sum else s for s in t.sbp)


def _accumulate(grads, t, g):
    from .ops import add
    key = id(t)
    grads[key] = g if key not in grads else add(grads[key], g)


def _run(roots, root_grads, wanted=None):
    """Propagate from roots; returns {id(tensor): grad} for leaves (or for `wanted`)."""
    from .ops.creation import ones_like
    grads = {}
    for r, g in zip(roots, root_grads):
        if not r.requires_grad:
            raise RuntimeError("backward: the tensor does not require grad (no input of it requires grad)")
        if g is None:
            if r.numel() != 1:
                raise RuntimeError(f"backward of a tensor of shape {r.shape} needs a gradient argument")
            g = ones_like(r, sbp=_seed_sbp(r))
        _accumulate(grads, r, g)
    result = {}
    with no_grad():
        for ctx in _topological(roots):
            outs = [grads.pop(id(o), None) for o in ctx.outputs]
            if all(g is None for g in outs):
                continue
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
    for r in roots:
        if r._node is None and id(r) in grads:
            _accumulate(result, r, grads[id(r)])
    return result


def _fit(t, g):
    """A gradient laid out like its tensor (leaf: the leaf's placement and SBP, or grad_sbp)."""
    if t.is_global:
        sbp = getattr(t, "_grad_sbp", None) or t.sbp
        if g.placement != t.placement or g.sbp != sbp:
            g = g.to_global(placement=t.placement, sbp=sbp)
    return g


def backward(tensor, gradient=None):
    """Accumulate d tensor / d leaf into each leaf's .grad."""
    from .ops import add
    leaves = {}
    stack, seen = [tensor], set()
    while stack:  # find the leaves
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t._node is None:
            leaves[id(t)] = t
        else:
            stack.extend(i for i in t._node.ctx.inputs if i.requires_grad)
    for key, g in _run([tensor], [gradient]).items():
        leaf = leaves[key]
        g = _fit(leaf, g).detach()
        leaf.grad = g if leaf.grad is None else add(leaf.grad, g).detach()


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
