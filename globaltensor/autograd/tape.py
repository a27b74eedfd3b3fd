"""The tape: each op's context (inputs, outputs, static arguments, backward) as a node on its
differentiable outputs, and the contexts a backward runs, outputs before inputs."""
from ..scope import current as _scope


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
    if not _scope.get().grad or not any(t.requires_grad for t in inputs):
        return
    differentiable = [i for i, out in enumerate(outputs) if out.dtype.is_floating or out.dtype.is_complex]
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
