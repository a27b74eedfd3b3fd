"""Convolution layers (PyTorch's names and signatures; Paddle's spellings too): Conv1d, Conv2d, Conv3d
over ops/conv.py's unfolded patches (pooling layers: pooling.py)."""
import math

from ..creation import empty
from ..ops import conv as F
from ..ops.conv3d import conv3d
from ..ops.resize import pad
from . import init
from .module import Module, Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d"]


class _ConvNd(Module):
    def __init__(self, in_channels, out_channels, kernel, stride, padding, dilation, groups, bias, padding_mode="zeros"):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must divide by groups {groups}")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of 'zeros', 'reflect', 'replicate' or 'circular', got "
                             f"{padding_mode!r}")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.padding_mode = padding_mode
        self.weight = Parameter(empty(out_channels, in_channels // groups, *kernel))
        fan_in = in_channels // groups * math.prod(kernel)
        bound = 1 / math.sqrt(fan_in) if fan_in else 0.0  # PyTorch's kaiming_uniform(a=sqrt(5)) bound
        init.uniform_(self.weight, -bound, bound)
        if bias:
            self.bias = Parameter(empty(out_channels))
            init.uniform_(self.bias, -bound, bound)
        else:
            self.register_parameter("bias", None)

    def _padded(self, input):
        """(input, padding) for the convolution: a padding_mode other than zeros pads the input
        first (F.pad, last dim first) and the convolution pads nothing."""
        if self.padding_mode == "zeros":
            return input, self.padding
        n = len(self.kernel_size)
        as_tuple = lambda v: (int(v),) * n if isinstance(v, int) else tuple(v)  # noqa: E731
        if isinstance(self.padding, str):
            before, after = F.same_padding(type(self).__name__, self.padding, self.kernel_size, as_tuple(self.stride),
                                           as_tuple(self.dilation))
        else:
            before = after = as_tuple(self.padding)
        pads = [p for b, a in zip(reversed(before), reversed(after)) for p in (b, a)]
        return pad(input, pads, self.padding_mode), 0

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, groups={self.groups}")


class Conv2d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros"):
        super().__init__(in_channels, out_channels, F._pair(kernel_size), stride, padding, dilation, groups, bias,
                         padding_mode)

    def forward(self, input):
        input, padding = self._padded(input)
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros"):
        kernel = (int(kernel_size),) if isinstance(kernel_size, int) else tuple(kernel_size)
        super().__init__(in_channels, out_channels, kernel, stride, padding, dilation, groups, bias, padding_mode)

    def forward(self, input):
        input, padding = self._padded(input)
        return F.conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
        kernel = (int(kernel_size),) * 3 if isinstance(kernel_size, int) else tuple(kernel_size)
        super().__init__(in_channels, out_channels, kernel, stride, padding, dilation, groups, bias)

    def forward(self, input):
        return conv3d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
