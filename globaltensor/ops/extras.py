"""OneFlow's and PyTorch's less common ops: batch_gather, tensor_scatter_nd_update, mode,
searchsorted, atan2, bincount, digamma/lgamma, hann_window, stft, logspace, rand/randn/randint_like, as_tensor.

Primitives carry their SBP rows here (each with its reason); the rest are composites of
registered ops, which give them rows and gradients."""
import math

import numpy as np

from .. import creation
from .. import dtype as _dtype
from ..errors import DTypeError, wrap_dim
from ..registry import op, rules
from ._front import apply, as_tensor, constant, promoted_pair, tensors
from .complex_ops import view_as_complex
from .concat_split import concat
from .elementwise import _binary_backward, _unary_backward
from .gather_scatter import gather, index_select, scatter_add_
from .gather_scatter_nd import scatter_nd_add
from .resize import pad
from .reduction import return_type

B, P, S = rules.B, rules.P, rules.split


def _index_dtype(t):
    return t.dtype.np.kind in "iu"


def batch_gather(input, indices):
    """OneFlow's batch_gather: indices [b0, .., bk-2, m] pick along dim k - 1 of input, per batch
    entry: out[b.., j, ...] = input[b.., indices[b.., j], ...] (a gather; gradient a scatter-add)."""
    input, indices = tensors(input, indices)
    if input.ndim == 0:
        raise RuntimeError(f"The dimension of the input tensor should be greater than zero, but got {input.ndim}")
    if indices.ndim == 0:
        raise RuntimeError(f"The dimension of the indices tensor should be greater than zero, but got {indices.ndim}")
    if indices.ndim > input.ndim:
        raise RuntimeError(f"The dimension of the input tensor should be greater than or equal to the dimension of the "
                           f"indices tensor, but found that the dimension of the input tensor is {input.ndim}, and "
                           f"the dimension of the indices tensor is {indices.ndim}")
    if not _index_dtype(indices):
        raise TypeError(f"The dtype of the indices tensor must be int32 or int64, got {indices.dtype}")
    k = indices.ndim
    for d in range(k - 1):
        if indices.shape[d] != input.shape[d]:
            raise RuntimeError(f"The size of indices tensor must match the size of input tensor at dimension {d} when "
                               f"two tensors are both dynamic or neither ({tuple(indices.shape)} vs "
                               f"{tuple(input.shape)})")
    tail = tuple(input.shape[k:])
    index = indices.reshape(*indices.shape, *([1] * len(tail))).expand(*indices.shape, *tail)
    return gather(input, k - 1, index)


def tensor_scatter_nd_update(tensor, indices, updates):
    """A copy of tensor with the entries (or slices) that indices address replaced by updates
    (TensorFlow's / OneFlow's): gradient g where nothing was written to tensor, g at the
    addressed places to updates."""
    tensor, indices, updates = tensors(tensor, indices, updates)
    if not _index_dtype(indices):
        raise TypeError(f"tensor_scatter_nd_update: indices must be an integer tensor, got {indices.dtype}")
    if updates.dtype != tensor.dtype:
        raise DTypeError(f"The dtype of tensor and updates must be same. (tensor_scatter_nd_update: tensor is "
                         f"{tensor.dtype}, updates {updates.dtype})")
    written = scatter_nd_add(tensor.detach() * 0, indices, updates.detach() * 0 + 1) > 0
    kept = tensor * (~written).to(tensor.dtype)
    return scatter_nd_add(kept, indices, updates.to(tensor.dtype))


def scatter_add(input, dim, index, src):
    """A copy of input with src added at index along dim (PyTorch's out-of-place scatter_add)."""
    return scatter_add_(input, dim, index, src)


def _mode_rows(s, o, st):
    """Rows along the other dims: mode(x)[i] = mode(x[i]) for a dim other than the reduced one."""
    dim = st["dim"]
    rows = [((B,), (B, B))]
    for d in range(len(s[0])):
        if d != dim:
            out_d = d if st["keepdim"] or d < dim else d - 1
            rows.append(((S(d),), (S(out_d), S(out_d))))
    return rows


def _mode_meta(s, dt, st):
    shape = list(s[0])
    shape[st["dim"]] = 1
    if not st["keepdim"]:
        del shape[st["dim"]]
    return [tuple(shape)] * 2, [dt[0], np.dtype(np.int64)]


@op("mode", _mode_rows, meta=_mode_meta)
def _mode(x, dim=0, keepdim=False):
    """The most frequent value of each row (the smallest of ties) and the last index it is at."""
    rows = np.moveaxis(x, dim, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    values, where = np.empty(len(flat), x.dtype), np.empty(len(flat), np.int64)
    for i, row in enumerate(flat):
        uniq, counts = np.unique(row, return_counts=True)
        values[i] = uniq[np.argmax(counts)]
        where[i] = len(row) - 1 - np.argmax((row == values[i])[::-1])
    shape = rows.shape[:-1] + ((1,) if keepdim else ())
    if keepdim:
        return np.moveaxis(values.reshape(shape), -1, dim), np.moveaxis(where.reshape(shape), -1, dim)
    return values.reshape(shape), where.reshape(shape)


def mode(input, dim=-1, keepdim=False):
    """PyTorch's mode: (values, indices) of the most frequent value along dim."""
    (input,) = tensors(input)
    dim = wrap_dim(dim, max(input.ndim, 1))
    if input.ndim and input.shape[dim] == 0:
        raise IndexError(f"IndexError: Expected reduction dim {dim} to have non-zero size.")
    if input.ndim == 0:
        return return_type("mode")(input, as_tensor(np.int64(0), input))
    values, indices = apply("mode", [input], {"dim": dim, "keepdim": bool(keepdim)}, multi=True)
    return return_type("mode")(values, indices)


@op("searchsorted", lambda s, o, st: [((B, B), (B,))] + ([((B, S(d)), (S(d),)) for d in range(len(s[1]))]
                                                          if len(s[0]) == 1 else []),
    meta=lambda s, dt, st: ([tuple(s[1])], [np.dtype(np.int32 if st["out_int32"] else np.int64)]))
def _searchsorted(sorted_sequence, values, right=False, out_int32=False):
    """Each value's insertion index in its row of sorted_sequence (a 1-D sequence serves every
    value: values split anyhow stay split): PyTorch's bisection, step for step, so an unsorted
    sequence gives PyTorch's answer too."""
    seq = sorted_sequence.reshape(-1, sorted_sequence.shape[-1])
    if sorted_sequence.ndim == 1:
        rows = np.zeros(values.size, np.int64)
    else:
        rows = np.repeat(np.arange(len(seq)), values.shape[-1] if values.ndim else 1)
    vals = values.reshape(-1)
    start, end = np.zeros(vals.size, np.int64), np.full(vals.size, seq.shape[-1], np.int64)
    while (start < end).any():
        active = start < end
        mid = start + ((end - start) >> 1)
        probe = seq[rows, np.minimum(mid, seq.shape[-1] - 1)]
        go_right = ~(probe > vals) if right else ~(probe >= vals)
        start = np.where(active & go_right, mid + 1, start)
        end = np.where(active & ~go_right, mid, end)
    return start.reshape(values.shape).astype(np.int32 if out_int32 else np.int64)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """PyTorch's searchsorted: input's insertion indices (OneFlow calls it values; a scalar gives a 0-d result)."""
    if sorter is not None:
        raise NotImplementedError("searchsorted: sorter is not supported")
    (sorted_sequence,) = tensors(sorted_sequence)
    values = as_tensor(input, sorted_sequence) if not hasattr(input, "shape") else tensors(input)[0]
    right = right or side == "right"
    if sorted_sequence.ndim > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"searchsorted: boundaries {tuple(sorted_sequence.shape)} and input "
                           f"{tuple(values.shape)} must have the same leading dims")
    return apply("searchsorted", [sorted_sequence, values], {"right": bool(right), "out_int32": bool(out_int32)})


def bincount(input, weights=None, minlength=0):
    """PyTorch's bincount: counts (or summed weights) of each value of a 1-D non-negative int
    tensor; the length is read from the data (every rank reads the same full value)."""
    (input,) = tensors(input)
    if input.ndim != 1 or not _index_dtype(input):
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got {input.dtype} of shape "
                           f"{tuple(input.shape)}")
    values = input.numpy()
    if values.size and values.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    length = max(int(values.max()) + 1 if values.size else 0, int(minlength))
    src = input.detach() * 0 + 1 if weights is None else tensors(weights)[0]
    dt = _dtype.int64 if weights is None else src.dtype
    base = constant(np.zeros(length, dt.np), input)
    return scatter_add_(base, 0, input.long(), src.to(dt))


def _digamma_np(x):
    """psi(x): reflection below 1/2, recurrence up to 6, then the asymptotic series."""
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    reflect = x < 0.5
    xr = np.where(reflect, 1 - x, x)
    shift = np.zeros_like(xr)
    while (xr < 6).any():
        low = xr < 6
        shift -= np.where(low, 1 / np.where(low, xr, 1), 0)
        xr = np.where(low, xr + 1, xr)
    inv2 = 1 / (xr * xr)
    out = np.log(xr) - 0.5 / xr - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    out = out + shift
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(reflect, out - np.pi / np.tan(np.pi * x), out)
        pole = np.where(x == 0, np.copysign(np.inf, -x), np.nan)  # PyTorch: -inf at +0, inf at -0
        return np.where((x <= 0) & (x == np.floor(x)), pole, out)


def _trigamma_np(x):
    """psi'(x): reflection below 1/2, recurrence up to 6, then the asymptotic series."""
    x = np.asarray(x, np.float64)
    reflect = x < 0.5
    xr = np.where(reflect, 1 - x, x)
    acc = np.zeros_like(xr)
    while (xr < 6).any():
        low = xr < 6
        acc += np.where(low, 1 / np.where(low, xr, 1) ** 2, 0)
        xr = np.where(low, xr + 1, xr)
    inv2 = 1 / (xr * xr)
    out = acc + 1 / xr + inv2 / 2 + inv2 / xr * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(reflect, -out + (np.pi / np.sin(np.pi * x)) ** 2, out)


def _float_kernel(fn):
    """fn computed in float64, returned in x's floating dtype (float16 and bfloat16 included), else float32."""
    return lambda x: fn(x).astype(x.dtype if _dtype.of_array(x).is_floating else np.float32, copy=False)


def _lgamma(v):
    """log|Gamma(v)|, inf at the poles (0 and the negative integers) as PyTorch (math.lgamma raises)."""
    return math.inf if v <= 0 and math.isfinite(v) and v == math.floor(v) else math.lgamma(v)


_lgamma_vec = np.vectorize(_lgamma, otypes=[np.float64])
op("trigamma", rules.elementwise(None))(_float_kernel(_trigamma_np))
op("digamma", rules.elementwise(None), _unary_backward(lambda x, y, g: g * apply("trigamma", [x])))(
    _float_kernel(_digamma_np))
_erfc_vec = np.vectorize(math.erfc, otypes=[np.float64])
op("erfc", rules.elementwise(None), _unary_backward(lambda x, y, g: -g * (-(x * x)).exp() * (2 / math.sqrt(math.pi))))(
    _float_kernel(lambda x: _erfc_vec(np.asarray(x, np.float64))))
op("lgamma", rules.elementwise(None), _unary_backward(lambda x, y, g: g * apply("digamma", [x])))(
    _float_kernel(lambda x: _lgamma_vec(np.asarray(x, np.float64))))


op("atan2", rules.elementwise(None), _binary_backward(
    (lambda a, b, y, g: g * b / (a * a + b * b), lambda a, b, y, g: -g * a / (a * a + b * b))))(np.arctan2)


def atan2(input, other):
    """Element-wise atan(input / other) in the quadrant of (other, input) (integers give floats)."""
    return apply("atan2", promoted_pair(input, other, "float", "atan2"))


def digamma(input):
    """Element-wise psi(x) = d/dx log Gamma(x) (integers give float32)."""
    return apply("digamma", tensors(input))


def lgamma(input):
    """Element-wise log |Gamma(x)| (integers give float32)."""
    return apply("lgamma", tensors(input))


def hann_window(window_length, periodic=True, *, dtype=None, placement=None, sbp=None, device=None,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / N), N = window_length (periodic) or window_length - 1."""
    dt = _dtype.get_default_dtype() if dtype is None else _dtype.to_dtype(dtype)
    if not dt.is_floating:
        raise RuntimeError(f"hann_window expects floating point dtypes, got: {dt}")
    n = int(window_length)
    denom = n if periodic else n - 1
    values = np.ones(n) if n == 1 else 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / max(denom, 1))
    kw = {"placement": placement, "sbp": sbp} if placement is not None else {"device": device}
    return creation.tensor(values.astype(dt.np), dtype=dt, requires_grad=requires_grad, **kw)


def _stft_checks(input, n_fft, hop, win, window):
    if input.ndim not in (1, 2):
        raise RuntimeError(f"Expected a 1D or 2D tensor,but got {input.ndim}D")
    if n_fft <= 0 or n_fft > input.shape[-1]:
        raise RuntimeError(f"Expected 0 < n_fft < {input.shape[-1]} ,but got {n_fft}")
    if hop <= 0:
        raise RuntimeError(f"Expected hop_length > 0, but got {hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"Expected 0 < win_length <=n_fft ,but got {win}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win):
        raise RuntimeError(f"Expected a 1D window tensor of size equal to win_length={win}, but got window with size "
                           f"{tuple(window.shape)}")


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """PyTorch's stft of a real 1-D or [B, L] signal: frames (index_select), windowed, then a
    DFT as two matrix products; [.., n_freq, n_frames, 2] (real, imag), or complex."""
    (input,) = tensors(input)
    n_fft = int(n_fft)
    if n_fft <= 0:
        raise RuntimeError(f"Expected 0 < n_fft , but got {n_fft}")
    hop = int(hop_length) if hop_length is not None else n_fft // 4
    win = int(win_length) if win_length is not None else n_fft
    window = None if window is None else tensors(window)[0]
    if input.ndim not in (1, 2):
        raise RuntimeError(f"Expected a 1D or 2D tensor,but got {input.ndim}D")
    x = input.unsqueeze(0) if input.ndim == 1 else input
    if center:
        x = pad(x.unsqueeze(1), (n_fft // 2, n_fft // 2), pad_mode).squeeze(1)
    _stft_checks(input if not center else x, n_fft, hop, win, window)
    frames_n = 1 + (x.shape[-1] - n_fft) // hop
    idx = (np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1)
    frames = index_select(x, 1, constant(idx, x)).reshape(x.shape[0], frames_n, n_fft)
    if window is not None:
        left = (n_fft - win) // 2
        frames = frames * pad(window.to(frames.dtype), (left, n_fft - win - left))
    freqs = n_fft // 2 + 1 if onesided is None or onesided else n_fft
    angle = 2 * np.pi * np.outer(np.arange(n_fft), np.arange(freqs)) / n_fft
    scale = n_fft ** -0.5 if normalized else 1.0
    real = frames @ constant((np.cos(angle) * scale).astype(frames.dtype.np), frames)
    imag = frames @ constant((-np.sin(angle) * scale).astype(frames.dtype.np), frames)
    parts = [real.unsqueeze(-1).transpose(1, 2), imag.unsqueeze(-1).transpose(1, 2)]  # [B, freq, frames, 1]
    out = concat(parts, -1)
    if return_complex:
        out = view_as_complex(out)
    return out.squeeze(0) if input.ndim == 1 else out


def logspace(start, end, steps, base=10.0, *, dtype=None, placement=None, sbp=None, device=None,
             requires_grad=False):
    """base ** linspace(start, end, steps) (PyTorch's logspace)."""
    dt = _dtype.get_default_dtype() if dtype is None else _dtype.to_dtype(dtype)
    values = np.power(float(base), np.linspace(float(start), float(end), int(steps)))
    kw = {"placement": placement, "sbp": sbp} if placement is not None else {"device": device}
    return creation.tensor(values.astype(dt.np), dtype=dt, requires_grad=requires_grad, **kw)


def randint_like(input, low, high=None, *, dtype=None, placement=None, sbp=None, device=None,
                 requires_grad=False, generator=None):
    """randint of input's shape (and its dtype, placement and sbp unless given)."""
    if high is None:
        low, high = 0, low
    if placement is None and getattr(input, "is_global", False):
        placement, sbp = input.placement, input.sbp if sbp is None else sbp
    return creation.randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, placement=placement, sbp=sbp,
                            device=device if placement is None else None, requires_grad=requires_grad,
                            generator=generator)


def _drawn_like(draw, input, dtype, device, requires_grad, generator):
    """draw(*shape, ...) with input's shape, dtype and layout (a partial sum drawn broadcast); a local
    input's device unless device= names another."""
    from ..sbp import broadcast, partial_sum
    where = {"placement": input.placement, "sbp": tuple(broadcast if s == partial_sum else s for s in input.sbp)} \
        if input.is_global else {"device": input.device if device is None else device}
    return draw(*input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad, generator=generator, **where)


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None, generator=None):
    """rand of input's shape, dtype and layout (PyTorch's layout / memory_format: taken, dense only)."""
    return _drawn_like(creation.rand, tensors(input)[0], dtype, device, requires_grad, generator)


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
               generator=None):
    """randn of input's shape, dtype and layout (PyTorch's layout / memory_format: taken, dense only)."""
    return _drawn_like(creation.randn, tensors(input)[0], dtype, device, requires_grad, generator)


def as_tensor(data, dtype=None, device=None):
    """data itself when it is a tensor of that dtype (and device), else gt.tensor(data) (PyTorch's
    as_tensor: no copy when none is needed)."""
    from ..tensor import Tensor
    if isinstance(data, Tensor):
        moved = data if device is None or data.is_global else data.to(device)
        return moved if dtype is None else moved.to(dtype)
    return creation.tensor(data, dtype=dtype, device=device)


EVERYDAY = ["atan2", "scatter_add", "mode", "searchsorted", "bincount", "digamma", "lgamma", "hann_window", "stft",
            "logspace", "randint_like", "rand_like", "randn_like", "as_tensor"]  # PyTorch's names
            # (tests/ops/test_everyday_signatures.py)
METHODS = ["atan2", "scatter_add", "mode", "bincount", "digamma", "lgamma", "stft"]  # where torch.Tensor has them
ONEFLOW_ONLY = ["batch_gather", "tensor_scatter_nd_update"]  # OneFlow's names, on gt too
