"""Function: a differentiable computation written as forward(ctx, ...) and backward(ctx, ...)."""
from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .grad_mode import is_grad_enabled, no_grad
from .tape import record


class FunctionCtx:
    """What forward hands to backward (PyTorch's ctx): save_for_backward(*tensors) and
    saved_tensors, needs_input_grad (one bool per forward argument), and any attribute set."""

    def __init__(self, args: tuple) -> None:
        self.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        self.saved_tensors = ()

    def save_for_backward(self, *tensors: Tensor) -> None:
        self.saved_tensors = tensors


class Function:
    """A custom differentiable computation, as PyTorch's torch.autograd.Function: subclass with
    static forward(ctx, *args, **kwargs) and backward(ctx, *output_grads), call Cls.apply(...).
    backward returns a gradient per forward argument (None for non-tensors), or one per tensor
    argument. An output that is an input, unchanged, comes back as a new tensor on the same piece.

    Examples:
        >>> class Double(gt.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * 2
        >>> Double.apply(gt.ones(3, requires_grad=True)).sum().backward()
    """

    context = FunctionCtx

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = cls.context(args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        inputs = [a for a in args if isinstance(a, Tensor)]
        if not (is_grad_enabled() and any(t.requires_grad for t in inputs)):
            return out
        single = not isinstance(out, (tuple, list))
        outs = [out] if single else list(out)
        given = {id(t) for t in inputs}
        outs = [_alias(o) if isinstance(o, Tensor) and id(o) in given else o for o in outs]
        record(cls.__name__, _bridge(cls, ctx, args), inputs, [o for o in outs if isinstance(o, Tensor)], {})
        return outs[0] if single else type(out)(outs)


def _alias(t):
    """A new tensor on t's piece and layout: a node goes on a tensor of its own, never on an input."""
    return Tensor(t._local) if t.is_local else Tensor._wrap(t._local, t._layout or t.layout())


def _bridge(cls, ctx, args):
    """autograd's backward(tape_ctx, *grads) -> cls.backward(ctx, *grads), as one gradient per
    tensor input."""
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

    def backward(_, *grads):
        found = cls.backward(ctx, *grads)
        found = tuple(found) if isinstance(found, (tuple, list)) else (found,)
        if len(found) == len(args) and len(args) != len(positions):
            found = tuple(found[i] for i in positions)
        if len(found) != len(positions):
            raise RuntimeError(f"{cls.__name__}.backward returned {len(found)} gradients for {len(positions)} "
                               f"tensor inputs ({len(args)} arguments)")
        return found
    return backward
