"""The tape: each op's context (inputs, outputs, static arguments, backward) as a node on its
differentiable outputs, and the contexts a backward runs, outputs before inputs."""
import weakref

from ..scope import current as _scope
from ..tensor import Tensor


_clock = [0]  # counts contexts: which ones read a tensor before an in-place op changed it


def clock():
    """The sequence number of the newest context."""
    return _clock[0]


def seen_inputs(ctx):
    """ctx's inputs as its op saw them: a tensor changed in place since then is replaced by the
    version it had (Tensor._become keeps it), so backward uses the values forward used and
    follows the graph as it was (PyTorch raises here; we can give the right answer)."""
    for t in ctx.inputs:  # a loop, not all(): this runs for every context of every backward
        if t._past is not None:
            break
    else:
        return ctx.inputs
    return tuple(t if t._past is None else next((old for at, old in t._past if at >= ctx.seq), t)
                 for t in ctx.inputs)


class Context:
    """What a backward sees: the op's inputs (tensors), outputs and static arguments. Outputs that
    carry this context's node are held weakly (with their pieces): a tensor -> node -> context ->
    tensor cycle would keep each step's whole graph, activations included, until the cyclic
    garbage collector ran (fresh pages every step). One that died is rebuilt from its piece,
    with this context's node again, when a backward asks for it."""

    __slots__ = ("inputs", "_outs", "static", "backward", "dests", "seq", "name")

    def __init__(self, inputs, outputs, static, backward, name=None):
        self.inputs, self.static, self.backward, self.name = inputs, static, backward, name
        self._outs = _held(outputs)
        self.dests = None
        _clock[0] += 1
        self.seq = _clock[0]
        for t in inputs:
            t._read_at = self.seq

    @property
    def outputs(self):
        found = []
        for e in self._outs:  # loops, not comprehensions: backward functions read this often
            t = e[0]() if type(e) is tuple else e
            if t is None:
                return tuple(self.output(i) for i in range(len(self._outs)))
            found.append(t)
        return tuple(found)

    @outputs.setter
    def outputs(self, values):
        self._outs = _held(values)

    def alive(self):
        """The outputs, None for each that died (nothing can hold a gradient for it)."""
        return [e[0]() if type(e) is tuple else e for e in self._outs]

    def output(self, i):
        """Output i: the tensor itself, or, when it died, its piece again as this op's output."""
        entry = self._outs[i]
        if type(entry) is not tuple:
            return entry
        t = entry[0]()
        if t is None:
            t = Tensor(*entry[1:])
            t.requires_grad, t._node = True, Node(self.name, self.backward, self, i)
            self._outs[i] = (weakref.ref(t),) + entry[1:]
        return t

    def dest(self, i):
        """Where input i's gradient piece may be written (its gradient bucket), or None."""
        return None if self.dests is None else self.dests[i]


def drop_piece(t):
    """Forget the piece t's context keeps to rebuild t, while t itself lives on (its owner gives the
    memory back, as fully_shard does with a gathered parameter between forward and backward)."""
    node = t._node
    entry = node.ctx._outs[node.index] if node is not None else None
    if type(entry) is tuple:
        node.ctx._outs[node.index] = (entry[0], None) + entry[2:]


def _held(outputs):
    """Each differentiable output weakly, with what rebuilds it; any other strongly (it has no node)."""
    return [(weakref.ref(t), t._local, t._global_shape, t._dtype, t._placement, t._sbp)
            if t._dtype.is_floating or t._dtype.is_complex else t for t in outputs]


class Node:
    """One recorded op: its backward, its context, and which output this tensor is."""

    __slots__ = ("backward", "ctx", "index", "name")

    def __init__(self, name, backward, ctx, index):
        self.name, self.backward, self.ctx, self.index = name, backward, ctx, index


def record(name, backward, inputs, outputs, static):
    """Attach a node to each floating output when grad mode is on and an input requires grad.
    Integer and bool outputs (argmax, comparisons, indices) never require grad, as in PyTorch, so
    an op with only such outputs needs no backward; an op without one raises in backward."""
    if not _scope.get().grad:
        return
    for t in inputs:  # loops, not any() and a comprehension: this runs once per op
        if t.requires_grad:
            break
    else:
        return
    differentiable = []
    for i, out in enumerate(outputs):
        if out._dtype.is_floating or out._dtype.is_complex:
            differentiable.append(i)
    if not differentiable:
        return
    if backward is None:  # as PyTorch: the forward runs, a backward through it raises
        backward = _not_implemented(name)
    ctx = Context(tuple(inputs), tuple(outputs), static, backward, name)
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
        for i in ctx.inputs:
            if i.requires_grad:
                stack.append((i, False))
    return order[::-1]
