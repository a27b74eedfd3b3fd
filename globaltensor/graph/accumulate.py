"""Gradient accumulation in a graph's step: the batch cut into k micro-batches, one reduction, one update."""
from .. import autograd, grad_buckets, ops
from ..sbp import broadcast, split
from ..tensor import Tensor


def run_micro_batches(build, args, kwargs, k, params, avg=True):
    """build(*args, **kwargs) once per micro-batch (each tensor argument whose dim 0 is the batch's
    rows cut into k equal parts along it: _Cut). Backward of the first k-1 keeps the gradients
    partial (no reduction); the k-th reduces the sum once. With avg the accumulated gradients are
    divided by k (OneFlow's set_gradient_accumulation_steps: the mean over the whole batch). The
    outputs: a 0-d tensor of each micro-batch stacked into shape (k,), other tensors joined along
    dim 0 in the batch's row order, other values the last's."""
    first = next((a for a in _leaves((args, kwargs)) if isinstance(a, Tensor) and a.ndim > 0), None)
    if first is None:
        raise ValueError(f"gradient accumulation over {k} micro-batches needs a tensor argument with a batch dim")
    if first.shape[0] % k:
        raise ValueError(f"gradient accumulation: a batch of {first.shape[0]} rows cannot be cut into {k} "
                         f"equal micro-batches (set_gradient_accumulation_steps({k}))")
    cut = _Cut(first, k)
    outs = []
    for j in range(k - 1):
        micro_args, micro_kwargs = _map((args, kwargs), lambda t: cut.take(t, j))
        with grad_buckets.no_sync():
            outs.append(build(*micro_args, **micro_kwargs))
    micro_args, micro_kwargs = _map((args, kwargs), lambda t: cut.take(t, k - 1))
    scale = _ScaleGrads(params, 1.0 / k if avg else None)
    autograd.sinks.add(scale, first=True)
    try:
        outs.append(build(*micro_args, **micro_kwargs))
    finally:
        factor, scale.factor = scale.factor, None
    for p in params if factor is not None else ():  # gradients the last backward did not reach
        if p.grad is not None and id(p) not in scale.done:
            p.grad = p.grad * factor
    return _combine(outs, cut)


class _ScaleGrads:
    """A sink of the last micro-batch's backward: each parameter's accumulated gradient (still
    partial) times 1/k before it is reduced, so the reduction stays the last op before the
    .grad (the graph's bucketing pass packs it); `done`: the parameters scaled."""

    def __init__(self, params, factor):
        self.ids, self.factor, self.done = {id(p) for p in params}, factor, set()

    def begin(self, run):
        return self if self.factor is not None else None

    def take(self, leaf, g):
        """g (the held gradient added in when their layouts agree) times the factor; a held
        gradient of another layout (reduced by an earlier micro-batch) is scaled where it is."""
        if id(leaf) not in self.ids or id(leaf) in self.done:
            return g
        self.done.add(id(leaf))
        if leaf.grad is not None:
            leaf.grad = leaf.grad * self.factor
        return None if g is None else g * self.factor

    def finish(self):
        pass

    abandon = finish


class _Cut:
    """Micro-batch j of a batch of `rows` rows, with recorded ops. A batch whose SBP splits dim 0
    into n pieces (S(0) on some mesh axes, broadcast on the others) with rows divisible by n * k:
    rows [j*m, (j+1)*m) of every piece, by reshapes that move nothing ((rows,) -> (n, k, m) ->
    pick j -> (n*m,)); else the contiguous rows [j*rows/k, (j+1)*rows/k) (global slicing, which
    may move rows)."""

    def __init__(self, first, k):
        self.k, self.rows = k, first.shape[0]
        n = _row_pieces(first)
        self.ranks = n if n is not None and n > 1 and self.rows % (n * k) == 0 else None

    def _local_cut(self, t):
        return self.ranks is not None and _row_pieces(t) == self.ranks

    def take(self, t, j):
        if not isinstance(t, Tensor) or t.ndim == 0 or t.shape[0] != self.rows:
            return t
        if self._local_cut(t):
            n, m = self.ranks, self.rows // (self.ranks * self.k)
            grouped = t.reshape((n, self.k, m) + tuple(t.shape[1:]))
            return grouped[:, j].reshape((n * m,) + tuple(t.shape[1:]))
        size = self.rows // self.k
        return t[j * size:(j + 1) * size]

    def join(self, outs):
        """The micro-batches' outputs (dim 0 their rows) in the batch's row order."""
        head = outs[0]
        if self._local_cut(head) and all(self._local_cut(o) for o in outs) and \
                head.shape[0] == self.rows // self.k:
            n, m = self.ranks, head.shape[0] // self.ranks
            parts = [o.reshape((n, 1, m) + tuple(o.shape[1:])) for o in outs]
            return ops.cat(parts, 1).reshape((n * self.k * m,) + tuple(head.shape[1:]))
        return ops.cat(list(outs), 0)


def _row_pieces(t):
    """How many pieces t's SBP cuts dim 0 into, when each mesh axis splits dim 0 or broadcasts."""
    if not isinstance(t, Tensor) or not t.is_global:
        return None
    n = 1
    for size, s in zip(t.placement.hierarchy, t.sbp):
        if s == split(0):
            n *= size
        elif s != broadcast:
            return None
    return n


def _combine(outs, cut):
    head = outs[0]
    if isinstance(head, Tensor):
        if head.ndim == 0:
            return ops.stack(list(outs), 0)
        return cut.join(list(outs))
    if isinstance(head, (tuple, list)):
        items = [_combine([o[i] for o in outs], cut) for i in range(len(head))]
        return type(head)(*items) if hasattr(head, "_fields") else type(head)(items)
    if isinstance(head, dict):
        return {key: _combine([o[key] for o in outs], cut) for key in head}
    return outs[-1]


def _leaves(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def _map(value, fn):
    if isinstance(value, (tuple, list)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {key: _map(v, fn) for key, v in value.items()}
    return fn(value)
