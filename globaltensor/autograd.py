"""Autograd: a tape of nodes and a topological backward; gradients are ordinary (global) ops."""
import contextlib

import numpy as np

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


_seeds = {}


def _ops():
    """globaltensor.ops (it imports this module, so it is looked up at call time)."""
    from . import ops
    return ops


def _seed_sbp(t):
    """The seed's layout: d(sum of pieces)/d(piece) = 1 on every rank, so partial -> broadcast."""
    if t.is_local:
        return None
    from .sbp import broadcast, partial_sum
    return tuple(broadcast if s is partial_sum else s for s in t.sbp)


def _accumulate(grads, t, g):
    key = id(t)
    grads[key] = g if key not in grads else _ops().add(grads[key], g)


def _run(roots, root_grads, wanted=None):
    """Propagate from roots; returns {id(tensor): grad} for leaves (or for `wanted`)."""
    ones_like = _ops().creation.ones_like
    grads = {}
    for r, g in zip(roots, root_grads):
        if not r.requires_grad:
            raise RuntimeError("backward: the tensor does not require grad (no input of it requires grad)")
        if g is None:
            if r.numel() != 1:
                raise RuntimeError(f"backward of a tensor of shape {r.shape} needs a gradient argument")
            key = (r.shape, r.dtype.np, r.placement, r.sbp)
            g = _seeds.get(key)
            if g is None:  # a seed is never written to, so one per layout serves every backward
                g = _seeds[key] = ones_like(r, sbp=_seed_sbp(r))
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


_sync = [True]  # False inside no_sync(): partial gradients of leaves are kept, not reduced
post_backward_hooks = []  # called with the set of ids of the leaves whose .grad a backward changed
BUCKET_BYTES = [25 << 20]


def backward(tensor, gradient=None):
    """Accumulate d tensor / d leaf into each leaf's .grad. The partial gradients of broadcast
    leaves are reduced in buckets of BUCKET_BYTES (one all_reduce each), not one per leaf."""
    add = _ops().add
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
    pending = []
    for key, g in _run([tensor], [gradient]).items():
        leaf = leaves[key]
        if leaf.grad is not None and (leaf.grad.is_local or leaf.grad.sbp == g.sbp):
            g = add(leaf.grad, g)  # accumulate before reducing (no_sync steps stay partial)
            leaf.grad = None
        if leaf.is_global and _reducible(leaf, g):
            if not _sync[0] and leaf.grad is None:
                leaf.grad = g.detach()
                continue
            pending.append((leaf, g))  # a reduced .grad from an earlier backward is added after
            continue
        g = _fit(leaf, g).detach()
        leaf.grad = g if leaf.grad is None else add(leaf.grad, g).detach()
    _reduce_in_buckets(pending)
    for hook in list(post_backward_hooks):
        hook(set(leaves))


def _reducible(leaf, g):
    """True when g differs from the leaf's layout only by partial sums where the leaf is B."""
    from .sbp import broadcast, partial_sum
    if g.placement != leaf.placement or g.sbp == leaf.sbp:
        return False
    return all(gs == ls or (gs is partial_sum and ls is broadcast) for gs, ls in zip(g.sbp, leaf.sbp))


def _reduce_in_buckets(pending):
    """One all_reduce per bucket of same-layout gradients (per mesh axis that is partial)."""
    from .sbp import partial_sum
    groups = {}
    for leaf, g in pending:
        axes = tuple(a for a, s in enumerate(g.sbp) if s is partial_sum and leaf.sbp[a] is not partial_sum)
        groups.setdefault((leaf.placement, axes, g.dtype.np), []).append((leaf, g))
    for (placement, axes, np_dtype), items in groups.items():
        coord = placement.mesh_coord(get_rank())
        buckets, current, size = [], [], 0
        for leaf, g in items:
            if current and size + g._local.nbytes > BUCKET_BYTES[0]:
                buckets.append(current)
                current, size = [], 0
            current.append((leaf, g))
            size += g._local.nbytes
        if current:
            buckets.append(current)
        for bucket in buckets:
            if coord is not None:
                flat = collectives.empty_shared((sum(g._local.size for _, g in bucket),), np_dtype)
                np.concatenate([g._local.reshape(-1) for _, g in bucket], out=flat)
                for a in axes:
                    collectives.all_reduce(flat, group=_boxing._group(placement.axis_ranks(a, coord)))
            start = 0
            for leaf, g in bucket:
                n = g._local.size
                piece = flat[start:start + n].reshape(g._local.shape) if coord is not None else g._local
                start += n
                reduced = Tensor(piece, leaf.shape, leaf.dtype, leaf.placement, leaf.sbp)
                leaf.grad = reduced if leaf.grad is None else _ops().add(leaf.grad, reduced).detach()


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


from . import boxing as _boxing  # noqa: E402 - boxing needs autograd's module to exist first
from .distributed import collectives  # noqa: E402
from .env import get_rank  # noqa: E402
from .tensor import Tensor  # noqa: E402
