"""Activation and shape layers: SiLU, Softmax, LogSoftmax, Tanh, Sigmoid, LeakyReLU, Identity, Flatten."""
from .. import ops
from .module import Module

__all__ = ["SiLU", "Softmax", "LogSoftmax", "Tanh", "Sigmoid", "LeakyReLU", "Identity", "Flatten", "silu",
           "leaky_relu"]


def silu(input):
    """x * sigmoid(x) (a composite: its SBP rows and backward are those of its ops)."""
    return input * ops.sigmoid(input)


def leaky_relu(input, negative_slope=0.01):
    """x where x > 0, negative_slope * x elsewhere."""
    return ops.where(input > 0, input, input * negative_slope)


class SiLU(Module):
    def forward(self, input):
        return silu(input)


class _AlongDim(Module):
    """A layer applying `fn` along one dim (the last by default)."""

    fn = None

    def __init__(self, dim=None):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, input):
        return type(self).fn(input, self.dim)


class Softmax(_AlongDim):
    fn = ops.softmax


class LogSoftmax(_AlongDim):
    fn = ops.log_softmax


class Tanh(Module):
    def forward(self, input):
        return ops.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return ops.sigmoid(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input):
        return leaky_relu(input, self.negative_slope)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return ops.flatten(input, self.start_dim, self.end_dim)
