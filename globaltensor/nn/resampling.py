"""Resizing, padding and patch layers (PyTorch's names): Upsample, the Pad layers, Fold and Unfold."""
import numpy as np

from ..ops import conv as C
from ..ops.resize import interpolate, pad
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
           "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d", "Fold", "Unfold", "fold", "unfold", "upsample"]


class Upsample(Module):
    """PyTorch's nn.Upsample: F.interpolate with fixed arguments."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """The old name of F.interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


class _PadNd(Module):
    mode, sides = "constant", 2

    def __init__(self, padding, value=0.0):
        super().__init__()
        n = self.sides
        self.padding = (int(padding),) * n if isinstance(padding, (int, np.integer)) else tuple(int(p) for p in padding)
        if len(self.padding) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {n} ints, got {padding}")
        self.value = float(value)

    def forward(self, input):
        return pad(input, self.padding, self.mode, self.value)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


def _pad_layer(name, mode, dims, constant=False):
    attrs = {"mode": mode, "sides": 2 * dims, "__module__": __name__, "__qualname__": name,
             "__doc__": f"PyTorch's nn.{name}: pads the last {dims} dim(s), {mode}."}
    if not constant:  # ZeroPad / Reflection / Replication / Circular take the padding only
        attrs["__init__"] = lambda self, padding: _PadNd.__init__(self, padding)
    return type(name, (_PadNd,), attrs)


ZeroPad1d, ZeroPad2d, ZeroPad3d = (_pad_layer(f"ZeroPad{n}d", "constant", n) for n in (1, 2, 3))
ConstantPad1d, ConstantPad2d, ConstantPad3d = (_pad_layer(f"ConstantPad{n}d", "constant", n, True) for n in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (_pad_layer(f"ReflectionPad{n}d", "reflect", n) for n in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (_pad_layer(f"ReplicationPad{n}d", "replicate", n)
                                                        for n in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (_pad_layer(f"CircularPad{n}d", "circular", n) for n in (1, 2, 3))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """PyTorch's F.unfold: [N, C, H, W] -> [N, C * kh * kw, L], the channel-major patches."""
    patches = C.unfold2d(input, kernel_size, stride, padding, dilation)
    n, c, kk, length = patches.shape
    return patches.reshape(n, c * kk, length)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """PyTorch's F.fold (unfold's adjoint): [N, C * kh * kw, L] -> [N, C, H, W], overlaps summed."""
    kh, kw = C._pair(kernel_size)
    if input.ndim != 3 or input.shape[1] % (kh * kw):
        raise RuntimeError(f"fold: expected a 3-D input [N, C * {kh} * {kw}, L], got shape {tuple(input.shape)}")
    n, ckk, length = input.shape
    cols = input.reshape(n, ckk // (kh * kw), kh * kw, length)
    return C.fold2d(cols, C._pair(output_size), (kh, kw), C._pair(stride), C._pair(padding), C._pair(dilation))


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)
