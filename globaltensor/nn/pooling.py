"""Pooling layers and their functional forms, 1-D to 3-D (PyTorch's signatures) over ops/pooling.py."""
import types
from typing import Optional

from ..ops import pooling as P
from . import common_types
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"]


def _max_fn(spatial):
    def max_pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return P.max_pool(input, spatial, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    max_pool.__name__ = f"max_pool{spatial}d"
    max_pool.__doc__ = f"PyTorch's F.max_pool{spatial}d: the largest value of each window (padding never wins)."
    return max_pool


def _avg_fn(spatial):
    def avg_pool(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        return P.avg_pool(input, spatial, kernel_size, stride, padding, ceil_mode, count_include_pad,
                          divisor_override)
    avg_pool.__name__ = f"avg_pool{spatial}d"
    avg_pool.__doc__ = f"PyTorch's F.avg_pool{spatial}d: the mean of each window."
    return avg_pool


def _adaptive_fn(spatial, kind):
    def adaptive(input, output_size, return_indices=False):
        if return_indices:
            raise NotImplementedError(f"adaptive_max_pool{spatial}d: return_indices=True is not supported")
        if kind == "avg":
            return P.adaptive_avg_pool(input, output_size, spatial)
        return P.adaptive_max_pool(input, output_size, spatial)
    adaptive.__name__ = f"adaptive_{kind}_pool{spatial}d"
    adaptive.__doc__ = f"PyTorch's F.adaptive_{kind}_pool{spatial}d over PyTorch's bins."
    return adaptive


def _unpool_fn(spatial):
    def max_unpool(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        return P.max_unpool(input, indices, spatial, kernel_size, stride, padding, output_size)
    max_unpool.__name__ = f"max_unpool{spatial}d"
    max_unpool.__doc__ = f"PyTorch's F.max_unpool{spatial}d: max_pool{spatial}d's values put back at its indices."
    return max_unpool


max_pool1d, max_pool2d, max_pool3d = _max_fn(1), _max_fn(2), _max_fn(3)
max_unpool1d, max_unpool2d, max_unpool3d = _unpool_fn(1), _unpool_fn(2), _unpool_fn(3)
avg_pool1d, avg_pool2d, avg_pool3d = _avg_fn(1), _avg_fn(2), _avg_fn(3)
adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d = (_adaptive_fn(n, "avg") for n in (1, 2, 3))
adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d = (_adaptive_fn(n, "max") for n in (1, 2, 3))
FUNCTIONS = ["max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
             "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
             "adaptive_max_pool2d", "adaptive_max_pool3d"]


class _MaxPoolNd(Module):
    spatial = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return P.max_pool(input, self.spatial, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class _MaxUnpoolNd(Module):
    spatial = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input, indices, output_size=None):
        return P.max_unpool(input, indices, self.spatial, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    spatial = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.ceil_mode = kernel_size, stride, padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return P.avg_pool(input, self.spatial, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePoolNd(Module):
    spatial, kind = 2, "avg"

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return _adaptive_fn(self.spatial, self.kind)(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


def _annotated_init(base, spatial):
    """base.__init__ with the argument types of PyTorch's and OneFlow's n-d layer (_size_<n>_t ...):
    code that reads a layer's signature (OneFlow's autotest draws its random arguments by them)
    finds them on each class's own __init__."""
    fn = base.__init__
    init = types.FunctionType(fn.__code__, fn.__globals__, "__init__", fn.__defaults__, fn.__closure__)
    size = getattr(common_types, f"_size_{spatial}_t")
    kinds = {"kernel_size": size, "stride": Optional[size], "padding": size, "dilation": size, "ceil_mode": bool,
             "count_include_pad": bool, "divisor_override": Optional[int], "return_indices": bool,
             "output_size": getattr(common_types, f"_size_{spatial}_opt_t", common_types._size_any_opt_t)}
    init.__annotations__ = {k: v for k, v in kinds.items() if k in fn.__code__.co_varnames[:fn.__code__.co_argcount]}
    init.__kwdefaults__, init.__doc__ = fn.__kwdefaults__, fn.__doc__
    return init


def _layer(base, name, **attrs):
    return type(name, (base,), dict(attrs, __init__=_annotated_init(base, attrs["spatial"]), __module__=__name__,
                                    __qualname__=name, __doc__=f"PyTorch's nn.{name}."))


MaxPool1d, MaxPool2d, MaxPool3d = (_layer(_MaxPoolNd, f"MaxPool{n}d", spatial=n) for n in (1, 2, 3))
MaxUnpool1d, MaxUnpool2d, MaxUnpool3d = (_layer(_MaxUnpoolNd, f"MaxUnpool{n}d", spatial=n) for n in (1, 2, 3))
AvgPool1d, AvgPool2d, AvgPool3d = (_layer(_AvgPoolNd, f"AvgPool{n}d", spatial=n) for n in (1, 2, 3))
AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d = (
    _layer(_AdaptivePoolNd, f"AdaptiveAvgPool{n}d", spatial=n, kind="avg") for n in (1, 2, 3))
AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d = (
    _layer(_AdaptivePoolNd, f"AdaptiveMaxPool{n}d", spatial=n, kind="max") for n in (1, 2, 3))
