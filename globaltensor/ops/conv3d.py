"""conv3d as a sum over depth taps of conv2d: each tap convolves the depth slices it reads."""
import numpy as np

from ._front import constant, tensors
from .conv import conv2d
from .gather_scatter import index_select
from .resize import pad


def _triple(v):
    return (int(v),) * 3 if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's conv3d: x [N, C, D, H, W], weight [O, C / groups, kd, kh, kw]. Output depth od sums,
    over the kd taps i, conv2d of input depth od * sd + i * dd - pd with weight[:, :, i]; the
    gradient and SBP rows come from conv2d, index_select and pad."""
    input, weight = tensors(input, weight)
    if input.ndim != 5 or weight.ndim != 5:
        raise ValueError(f"conv3d expects input [N, C, D, H, W] and weight [O, C / groups, kd, kh, kw], got shapes "
                         f"{tuple(input.shape)} and {tuple(weight.shape)}")
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = _triple(stride), _triple(padding), _triple(dilation)
    if min(sd, sh, sw, dd, dh, dw) < 1 or min(pd, ph, pw) < 0:
        raise ValueError(f"conv3d: stride and dilation must be >= 1 and padding >= 0, got {stride}, {dilation}, "
                         f"{padding}")
    n, c, d = input.shape[:3]
    o, kd = weight.shape[0], weight.shape[2]
    x = pad(input, (0, 0, 0, 0, pd, pd)) if pd else input
    od = (d + 2 * pd - dd * (kd - 1) - 1) // sd + 1
    if od <= 0:
        raise ValueError(f"conv3d: a depth of {d} (padding {pd}) is smaller than the kernel's {kd} (dilation {dd})")
    out = None
    for i in range(kd):
        depth = constant((np.arange(od) * sd + i * dd).astype(np.int64), x)
        slices = index_select(x, 2, depth).transpose(1, 2).reshape(n * od, c, *x.shape[3:])
        tap = index_select(weight, 2, constant(np.array([i], np.int64), weight)).squeeze(2)  # twice differentiable
        y = conv2d(slices, tap, None, (sh, sw), (ph, pw), (dh, dw), groups)
        out = y if out is None else out + y
    out = out.reshape(n, od, o, *out.shape[2:]).transpose(1, 2)
    return out if bias is None else out + tensors(bias)[0].reshape(1, o, 1, 1, 1)
