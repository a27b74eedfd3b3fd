"""Activation recompute (torch.utils.checkpoint): keep a segment's inputs, re-run it in backward."""
import functools
import sys
import types
import warnings

from .. import hooks
from .. import random as _random
from ..autograd import enable_grad, is_grad_enabled, no_grad, record
from ..autograd.engine import _run
from ..autograd.tape import _topological
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def _detached(args):
    """The tensor arguments cut from the graph (requires_grad kept): the segment's own leaves."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad = a.requires_grad
            out.append(d)
        else:
            out.append(a)
    return out


def _tensors(out):
    """The floating tensors among a segment's outputs (those backward gives a gradient)."""
    return [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, Tensor) and o.dtype.is_floating]


def _leaves(outputs, own):
    """Leaves that need a gradient which the segment's graph reaches, other than its own inputs
    (the parameters it used), in the order the graph meets them: the same on every rank."""
    found, seen = [], set(own)
    for ctx in _topological(outputs):
        for t in ctx.inputs:
            if t.requires_grad and t._node is None and id(t) not in seen:
                seen.add(id(t))
                found.append(t)
    return found


def _segment(function, args, kwargs, rng_cell):
    """Run function on detached copies of args with grad on and the RNG at rng_cell["state"] (if
    given); the default generator's own state comes back after. The RNG moves are host effects:
    a graph's capture records them, so each replay recomputes with that replay's draws.
    -> (detached args, outputs)."""
    inner = _detached(args)
    if rng_cell is not None:
        hooks.effect("checkpoint.restore_rng", functools.partial(_swap_rng, rng_cell))
    try:
        with enable_grad():
            out = function(*inner, **kwargs)
    finally:
        if rng_cell is not None:
            hooks.effect("checkpoint.resume_rng", functools.partial(_resume_rng, rng_cell))
    return inner, out


def _save_rng(cell):
    cell["state"] = _random.get_rng_state()


def _swap_rng(cell):
    cell["now"] = _random.get_rng_state()
    _random.set_rng_state(cell["state"])


def _resume_rng(cell):
    _random.set_rng_state(cell["now"])


def _recompute(function, args, kwargs, preserve_rng_state):
    """Forward keeping only the inputs: the segment's graph is walked once (which parameters it
    reads) and dropped; backward re-runs the segment with the RNG state forward had, so dropout
    draws the same mask, and hands back the gradients of the inputs and of those parameters."""
    rng_state = {} if preserve_rng_state else None
    if rng_state is not None:
        hooks.effect("checkpoint.save_rng", functools.partial(_save_rng, rng_state))
    inner, out = _segment(function, args, kwargs, None)
    own = [a for a in args if isinstance(a, Tensor)]
    params = _leaves([o for o in _tensors(out) if o.requires_grad], {id(t) for t in inner})
    del inner
    out = _cut(out)
    inputs = own + params

    def backward(_, *grads):
        again, redone = _segment(function, args, kwargs, rng_state)
        roots = [(o, g) for o, g in zip(_tensors(redone), grads) if g is not None and o.requires_grad]
        mine = [t for t in again if isinstance(t, Tensor)] + params
        with no_grad():
            found = _run([o for o, _ in roots], [g for _, g in roots], wanted={id(t) for t in mine}) if roots else {}
        return tuple(found.get(id(t)) for t in mine)

    record("CheckpointFunction", backward, inputs, _tensors(out), {})
    return out


def _cut(out):
    """The outputs without the segment's graph (its activations are freed here)."""
    if isinstance(out, Tensor):
        return out.detach()
    if isinstance(out, (tuple, list)):
        return type(out)(o.detach() if isinstance(o, Tensor) else o for o in out)
    return out


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               early_stop=True, **kwargs):
    """torch.utils.checkpoint.checkpoint: function(*args, **kwargs) whose activations are not kept;
    backward runs it again (grad on, the RNG state forward had when preserve_rng_state=True).
    use_reentrant=True (PyTorch's default, with its warning when not given) refuses kwargs and gives
    no gradient when no input requires grad, as PyTorch's; False gives parameters their gradient then."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if use_reentrant is None:
        warnings.warn("globaltensor.utils.checkpoint: pass use_reentrant explicitly (PyTorch's default, True, "
                      "is taken); use_reentrant=False is recommended", stacklevel=2)
        use_reentrant = True
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if context_fn is not None and use_reentrant:
        raise ValueError("Passing context_fn is only supported when use_reentrant=False.")
    if not is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
        with no_grad():
            return function(*args, **kwargs)
    return _recompute(function, args, kwargs, preserve)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002 - torch's name
    """torch.utils.checkpoint.checkpoint_sequential: run `functions` (a Sequential or a list) in
    `segments` chunks, each but the last checkpointed."""
    preserve = kwargs.pop("preserve_rng_state", True)
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = len(functions) // segments
    end = -1

    def run(start, stop):
        def forward(x):
            for f in functions[start:stop + 1]:
                x = f(x)
            return x
        return forward

    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)


class _CallableModule(types.ModuleType):
    """`gt.utils.checkpoint(fn, *args)` works too, besides `from gt.utils.checkpoint import checkpoint`."""

    def __call__(self, function, *args, **kwargs):
        return checkpoint(function, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
