"""Autograd: a tape that records each op, a backward that runs it and hands each leaf gradient
to the registered sinks, grad mode per thread, and custom differentiable Functions."""
from __future__ import annotations

from typing import Optional

from ..tensor import Tensor
from .engine import Run, backward, fit, seeds_ones, sinks
from .grad import grad
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .tape import Context, Node, clock, record, seen_inputs

__all__ = ["Function", "FunctionCtx", "backward", "grad", "no_grad", "enable_grad", "is_grad_enabled",
           "set_grad_enabled", "record", "sinks", "Run", "fit", "seeds_ones", "clock", "seen_inputs", "Context",
           "Node"]


def _tensor_backward(self: Tensor, gradient: Optional[Tensor] = None) -> None:
    """Accumulate the gradient of this tensor into the .grad of every leaf it depends on."""
    backward(self, gradient)


Tensor.backward = _tensor_backward
