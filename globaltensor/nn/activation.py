"""Activation and shape layers with PyTorch's constructors: SiLU, Softmax, ELU, Hardtanh, PReLU, GLU, ..., Flatten."""
from .. import ops
from . import activation_fns as fns
from .activation_fns import leaky_relu, silu
from .module import Module, Parameter

__all__ = ["SiLU", "Softmax", "LogSoftmax", "Softmin", "Softmax2d", "Tanh", "Sigmoid", "LeakyReLU", "Identity",
           "Flatten", "silu", "leaky_relu", "Threshold", "Hardtanh", "ReLU6", "ELU", "CELU", "SELU", "Hardsigmoid",
           "Hardswish", "Softplus", "Mish", "Softsign", "Tanhshrink", "LogSigmoid", "GLU", "Hardshrink",
           "Softshrink", "PReLU", "RReLU"]


class _Elementwise(Module):
    """A parameterless activation: fn(input, **its constructor's arguments)."""

    fn = None
    args = ()  # (name, default) pairs, in PyTorch's constructor order
    inplace = False  # the constructor takes inplace= (True: the input takes the result, as PyTorch's)

    def __init__(self, *args, **kwargs):
        super().__init__()
        names = [name for name, _ in self.args] + (["inplace"] if self.inplace else [])
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} arguments, got {len(args)}")
        values = dict(zip(names, args))
        for key in kwargs:
            if key not in names or key in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated argument {key!r}")
        values.update(kwargs)
        for name, default in self.args:
            if name not in values and default is _required:
                raise TypeError(f"{type(self).__name__} missing required argument {name!r}")
            setattr(self, name, values.get(name, default))
        if self.inplace:
            self.inplace = values.get("inplace", False)

    def forward(self, input):
        kwargs = {name: getattr(self, name) for name, _ in self.args}
        if self.inplace is True:
            from ..ops.inplace import inplace
            return inplace(input, lambda x: type(self).fn(x, **kwargs), type(self).__name__)
        return type(self).fn(input, **kwargs)

    def extra_repr(self):
        return ", ".join(f"{name}={getattr(self, name)}" for name, _ in self.args)


_required = object()


class SiLU(_Elementwise):
    fn, inplace = fns.silu, True


class LeakyReLU(_Elementwise):
    fn, args, inplace = fns.leaky_relu, (("negative_slope", 0.01),), True


class Threshold(_Elementwise):
    fn, args, inplace = fns.threshold, (("threshold", _required), ("value", _required)), True


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        self.min_val = min_val if min_value is None else min_value
        self.max_val = max_val if max_value is None else max_value
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise ValueError("Hardtanh: max_val must be greater than min_val")

    def forward(self, input):
        return fns.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)


class ELU(_Elementwise):
    fn, args, inplace = fns.elu, (("alpha", 1.0),), True


class CELU(_Elementwise):
    fn, args, inplace = fns.celu, (("alpha", 1.0),), True


class SELU(_Elementwise):
    fn, inplace = fns.selu, True


class Hardsigmoid(_Elementwise):
    fn, inplace = fns.hardsigmoid, True


class Hardswish(_Elementwise):
    fn, inplace = fns.hardswish, True


class Mish(_Elementwise):
    fn, inplace = fns.mish, True


class Softplus(_Elementwise):
    fn, args = fns.softplus, (("beta", 1.0), ("threshold", 20.0))


class Softsign(_Elementwise):
    fn = fns.softsign


class Tanhshrink(_Elementwise):
    fn = fns.tanhshrink


class LogSigmoid(_Elementwise):
    fn = fns.logsigmoid


class GLU(_Elementwise):
    fn, args = fns.glu, (("dim", -1),)


class Hardshrink(_Elementwise):
    fn, args, inplace = fns.hardshrink, (("lambd", 0.5),), True


class Softshrink(_Elementwise):
    fn, args, inplace = fns.softshrink, (("lambd", 0.5),), True


class Tanh(_Elementwise):
    fn = ops.tanh


class Sigmoid(_Elementwise):
    fn = ops.sigmoid


class RReLU(Module):
    """Random leaky ReLU: slopes drawn from [lower, upper) in training, (lower + upper) / 2 in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return fns.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}"


class PReLU(Module):
    """x where x > 0, weight * x elsewhere; weight: num_parameters slopes (1, or one per channel), init each."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        from .. import creation
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(creation.full((num_parameters,), init, dtype=dtype))

    def forward(self, input):
        return fns.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


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


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return fns.softmin(input, self.dim)


class Softmax2d(Module):
    """softmax over the channels (dim -3) of (C, H, W) or (N, C, H, W) inputs."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input of 3 or 4 dims, got {input.ndim}")
        return ops.softmax(input, -3)


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
