"""autograd.grad with PyTorch's signature; create_graph=True records backward's ops for higher derivatives."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ..creation import zeros_like
from ..tensor import Tensor
from .engine import _run, fit
from .grad_mode import enable_grad
from .tape import record


def grad(outputs: Union[Tensor, Sequence[Tensor]], inputs: Union[Tensor, Sequence[Tensor]],
         grad_outputs: Union[None, Tensor, Sequence[Optional[Tensor]]] = None, retain_graph: Optional[bool] = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: Optional[bool] = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple[Optional[Tensor], ...]:
    """d outputs / d inputs (weighted by grad_outputs) as a tuple, without touching any .grad.

    As torch.autograd.grad. With create_graph=True the gradient ops are recorded like any op
    (each op's backward is written with registered ops), so the gradients require grad and can
    be differentiated again: second derivatives, also with respect to grad_outputs. The tape is
    never freed, so retain_graph changes nothing; only_inputs is PyTorch's deprecated no-op. An input
    that some recorded op read (or that an op made) but whose gradient here is zero gets zeros, as
    OneFlow (PyTorch's derivative formulas give zeros there too: d(dx)/dx of a relu or an average
    pool). An input no recorded op ever read raises unless allow_unused (then None), or
    materialize_grads (then zeros). is_grads_batched (vmap over grad_outputs) is not supported.

    Examples:
        >>> dx, = gt.autograd.grad(y, x, create_graph=True)
        >>> d2x, = gt.autograd.grad(dx.sum(), x)
    """
    if is_grads_batched:
        raise NotImplementedError("autograd.grad: is_grads_batched=True is not supported (call grad once per "
                                  "row of grad_outputs)")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    grad_outputs = list(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else [grad_outputs] * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(grad_outputs)} for "
                           f"{len(outputs)} outputs")
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    wanted = {id(t) for t in inputs}
    found = _run(outputs, grad_outputs, wanted=wanted, create_graph=create_graph)
    result = []
    for t in inputs:
        g = found.get(id(t))
        if g is None and not allow_unused and (t._node is not None or t._read_at > 0):
            result.append(zeros_like(t))  # in the graph, its gradient zero (OneFlow's rule; PyTorch's ops give zeros)
            continue
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
            result.append(zeros_like(t) if materialize_grads else None)
            continue
        result.append(_fit_recorded(t, g) if create_graph else fit(t, g).detach())
    return tuple(result)


def _fit_recorded(t, g):
    """engine.fit (g laid out like t) recorded on the tape: a change of layout keeps the global
    value, so its gradient is the same conversion back, itself recorded (derivatives of any order)."""
    if t.is_local or (g.placement == t.placement and g.sbp == (getattr(t, "_grad_sbp", None) or t.sbp)):
        return g
    with enable_grad():
        out = fit(t, g)
        record("to_global", lambda ctx, gg: _fit_recorded(g, gg), [g], [out], None)
    return out
