"""Bitwise ops on integer and bool tensors (~ & | ^ as in PyTorch: logical on bool tensors).

Element-wise, so their rows are element-wise: S(d) -> S(d) and B -> B. Not linear: a partial
sum is boxed first ((a1 + a2) & b != (a1 & b) + (a2 & b)). Not differentiable (integer results).
"""
import numpy as np

from ..registry import rules
from ._front import apply, promoted, tensors
from ..registry import op

# name: numpy kernel
_BINARY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


def _no_grad(ctx, *grads):
    return (None,) * len(ctx.inputs)


def _check(name, xs):
    """TypeError (as PyTorch) unless every input is an integer or bool tensor."""
    for x in xs:
        if x.dtype.np.kind not in "biu":
            raise TypeError(f"{name}: only integer and bool tensors, got {x.dtype!r} (as in PyTorch)")


def _make_binary(name, kernel):
    op(name, rules.elementwise(), _no_grad)(kernel)

    def front(input, other):
        _check(name, tensors(input, other))
        return apply(name, promoted(input, other, name=name))  # PyTorch's result type (uint8 & int8: int32 here)
    front.__name__ = name
    front.__doc__ = f"Element-wise {name} of integer or bool tensors (numpy broadcasting; logical on bool)."
    return front


bitwise_and, bitwise_or, bitwise_xor = (_make_binary(n, k) for n, k in _BINARY.items())

op("bitwise_not", rules.elementwise(), _no_grad)(np.invert)


def bitwise_not(input):
    """~x: bits flipped on an integer tensor, logical not on a bool tensor."""
    xs = tensors(input)
    _check("bitwise_not", xs)
    return apply("bitwise_not", xs)


__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"]
