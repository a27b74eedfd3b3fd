"""OneFlow's functional array ops (flow._C.slice, slice_update, split_like, *_like, bias_add, arg_sort, fused_mlp, pixel_shuffle, one_hot): its checks and words, our ops.

Each is a composite of registered ops (strided_slice, slice_scatter, split, reshape, sum, expand,
add, sort), so SBP rows and gradients come from those; the checks run before any op, alike on
every rank (they read global shapes and dtypes only). Messages are OneFlow's."""
from .. import dtype as _dtype
from ..errors import DimError, DTypeError, ShapeError
from ._front import apply, tensors
from ..creation import arange, full_like
from ..sbp import broadcast
from .concat_split import split
from .elementwise import add, relu, where
from .linalg import matmul
from .reduction import amax, sum as _sum
from .shape import expand, permute, reshape, unsqueeze
from .sorting import argsort


def shape_text(shape):
    """A shape as OneFlow's Shape prints it: (4,4), (5,), ()."""
    shape = tuple(shape)
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def dtype_text(dt):
    return f"oneflow.{dt.name}"


def _check_bounds(start, stop, step):
    """OneFlow's slice / slice_update checks of one (start, stop, step) list, in its order."""
    for i, (a, b, s) in enumerate(zip(start, stop, step)):
        if s <= 0:
            raise ShapeError(f"The step list elements must be greater than 0, but got {s} at index {i}")
        if a < 0:
            raise ShapeError(f"The start list elements must be greater than or equal to 0, but got {a} at index {i}")
        if b < 0:
            raise ShapeError(f"The stop list elements must be greater than or equal to 0, but got {b} at index {i}")
        if a > b:
            raise ShapeError("The element in start list must be less than or equal to the element in stop list at "
                             f"index {i}, but got {a} and {b}")


def _slice_static(x, start, stop, step, what):
    start, stop, step = (tuple(int(v) for v in lst) for lst in (start, stop, step))
    if not len(start) == len(stop) == len(step):
        raise ShapeError(f"{what}: start, stop and step need one length, got {len(start)}, {len(stop)} and {len(step)}")
    _check_bounds(start, stop, step)
    return start, stop, step


def _static(x, start, stop, step):
    if len(start) != x.ndim:
        raise ShapeError(f"start_vec's dim not equal to ref shape's dim: {len(start)} vs {x.ndim}")
    return {"axes": tuple(range(x.ndim)), "starts": start, "ends": stop, "strides": step}


def slice(x, start, stop, step, enable_view_slice=None):  # noqa: A001 - OneFlow's name
    """x[start[d]:stop[d]:step[d]] on every dim d (non-negative starts and stops, positive steps)."""
    (x,) = tensors(x)
    start, stop, step = _slice_static(x, start, stop, step, "slice")
    return apply("strided_slice", [x], _static(x, start, stop, step))


def slice_update(ref, value, start, stop, step, inplace=False):
    """ref with ref[start:stop:step] (every dim) set to value; inplace=True writes ref itself."""
    ref, value = tensors(ref, value)
    start, stop, step = _slice_static(ref, start, stop, step, "slice_update")
    for i, (a, b, s) in enumerate(zip(start, stop, step)):
        size = (b - a + s - 1) // s
        got = value.shape[i] if i < value.ndim else None
        if size != got:
            raise ShapeError(f"The size of slice tuple must be equal to the size of value tensor at dimension {i}, "
                             f"but got {size} and {got}")
    if ref.dtype != value.dtype:
        raise DTypeError(f"Tensors ref and value must have same type, got {dtype_text(ref.dtype)} and "
                         f"{dtype_text(value.dtype)}")
    static = _static(ref, start, stop, step)
    if not inplace:
        return apply("slice_scatter", [ref, value], static)
    from .inplace import inplace as _inplace
    return _inplace(ref, lambda r: apply("slice_scatter", [r, value], static), "slice_update")


def split_like(x, like, axis):
    """x split along axis into pieces of the like tensors' sizes there (their other dims match x's)."""
    (x,) = tensors(x)
    like = tensors(*like)
    first = like[0].ndim
    if first > x.ndim:
        raise ShapeError(f"The dimension of like ({first}) should be less than or equal to input ({x.ndim})")
    if axis >= first:
        raise ShapeError(f"The axis ({axis}) should be less than the dimension of like ({first})")
    for t in like:
        if t.ndim != first:
            raise ShapeError(f"The dimension of like_i ({t.ndim}) must match the dimension of the first like ({first})")
        for j in range(first):
            if j != axis and x.shape[j] != t.shape[j]:
                raise ShapeError(f"The size of input ({x.shape[j]}) must match the size of like_i ({t.shape[j]}) at "
                                 f"dimension {j}")
    total = sum(t.shape[axis] for t in like)
    if total != x.shape[axis]:
        raise ShapeError(f"In non-dynamic shape situation, the total size of like ({total}) should be equal to the "
                         f"size of input ({x.shape[axis]}) at dimension {axis}")
    return tuple(split(x, [t.shape[axis] for t in like], axis))


def reshape_like(input, like):
    """input with like's shape (the same number of elements)."""
    input, like = tensors(input, like)
    if input.numel() != like.numel():
        raise ShapeError("The element number of the in tensor must be equal to the element number of the like "
                         f"tensor, but got {input.numel()} and {like.numel()}")
    return reshape(input, tuple(like.shape))


def reduce_sum_like(x, like, axis):
    """x summed over axis, in like's shape (no axis: x, whose shape must be like's)."""
    x, like = tensors(x, like)
    if x.dtype != like.dtype:
        raise DTypeError(f"Tensors x and like must have the same type, but got {dtype_text(x.dtype)} and "
                         f"{dtype_text(like.dtype)}")
    if not len(axis):
        if tuple(x.shape) != tuple(like.shape):
            raise ShapeError("The shape of the x tensor must be consistent to the shape of the like tensor when the "
                             f"input axis list is empty: {shape_text(x.shape)} and {shape_text(like.shape)}")
        return x
    return reshape(_sum(x, tuple(axis)), tuple(like.shape))


def broadcast_like(x, like, broadcast_axes=()):
    """x expanded to like's shape: dims of 1 and leading dims broadcast, or, with broadcast_axes,
    x holds like's shape less those axes."""
    x, like = tensors(x, like)
    xs, ls = tuple(x.shape), tuple(like.shape)
    if xs == ls:
        return x
    tail = f". Target sizes: {shape_text(ls)}. Tensor sizes: {shape_text(xs)}"
    if len(ls) < len(xs):
        raise ShapeError(f"The number of sizes provided ({len(ls)}) must be greater or equal to the number of "
                         f"dimensions in the tensor ({len(xs)}){tail}")
    if len(broadcast_axes):
        axes = {a % len(ls) for a in broadcast_axes}
        kept = tuple(1 if d in axes else n for d, n in enumerate(ls))
        if x.numel() != _numel(kept):
            raise ShapeError(f"broadcast_like: x {shape_text(xs)} does not fill like {shape_text(ls)} less the "
                             f"broadcast axes {sorted(axes)}")
        return expand(reshape(x, kept), ls)
    padded = (1,) * (len(ls) - len(xs)) + xs
    for i, (n, m) in enumerate(zip(padded, ls)):
        if n != m and n != 1:
            raise ShapeError(f"The expanded size of the tensor ({m}) must match the existing size ({n}) at "
                             f"non-singleton dimension {i}{tail}")
    return expand(reshape(x, padded), ls)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def bias_add(x, bias, axis=1):
    """x + bias along axis (bias a vector of x's size there)."""
    x, bias = tensors(x, bias)
    a = axis + x.ndim if axis < 0 else axis
    if not 0 <= a < x.ndim:
        raise DimError(f"Dimension out of range (expected to be in range of [-{x.ndim},{x.ndim - 1}], but got {a})")
    if bias.ndim == 0 or x.shape[a] != bias.shape[0]:
        raise ShapeError(f"The size of tensor x {shape_text(x.shape)} must match the size of tensor b "
                         f"{shape_text(bias.shape)} at dimension {a}")
    if bias.ndim != 1:
        raise ShapeError("Bias tensor has to be a one-dimensional vector")
    shape = [1] * x.ndim
    shape[a] = bias.shape[0]
    return add(x, reshape(bias, tuple(shape)))


def arg_sort(input, direction):
    """The indices that sort input along its last dim, "ASCENDING" or "DESCENDING"."""
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ShapeError('expected the input direction parameter value is "ASCENDING" or "DESCENDING", but found '
                         f'the value is "{direction}"')
    return argsort(input, -1, descending=direction == "DESCENDING")


def throw_error(input):
    """OneFlow's test op: fails, always (its kernel raises), on every rank alike."""
    tensors(input)
    raise RuntimeError("throw error kernel")


def is_index_dtype(dt):
    return dt in (_dtype.int32, _dtype.int64, _dtype.uint8, _dtype.int8)


def fused_mlp(x, weights, biases, skip_final_activation):
    """relu(x @ w.T + b) through each (w, b) in turn; the last relu left out if skip_final_activation."""
    if len(weights) < 1:
        raise ShapeError("The number of weights should be greater equal than 1. ")
    if len(weights) != len(biases):
        raise ShapeError("The number of weights should be equal to biases. ")
    (x,) = tensors(x)
    k = x.shape[1]
    for w, b in zip(weights, biases):
        if w.ndim != 2:
            raise ShapeError("Weight's dim size should == 2")
        if b.ndim != 1:
            raise ShapeError("Bias's dim size should == 1")
        if b.shape[0] != w.shape[0]:
            raise ShapeError("Bias's dim is not equal to weight's first dim. ")
        if w.shape[1] != k:
            raise ShapeError("weight's second dim should be equal to input's second dim. ")
        k = w.shape[0]
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = add(matmul(x, permute(w, (1, 0))), b)
        if i < len(weights) - 1 or not skip_final_activation:
            x = relu(x)
    return x


def pixel_shuffle(x, h_upscale_factor, w_upscale_factor):
    """(N, C*h*w, H, W) -> (N, C, H*h, W*w): each channel group spread over an h x w block."""
    (x,) = tensors(x)
    if x.ndim != 4:
        raise ShapeError("Only Accept 4D Tensor")
    n, c, hh, ww = x.shape
    h, w = h_upscale_factor, w_upscale_factor
    if c % (h * w):
        raise ShapeError("The channels of input tensor must be divisible by (upscale_factor * upscale_factor) or "
                         "(h_upscale_factor * w_upscale_factor)")
    out = permute(reshape(x, (n, c // (h * w), h, w, hh, ww)), (0, 1, 4, 2, 5, 3))
    return reshape(out, (n, c // (h * w), hh * h, ww * w))


def one_hot(input, num_classes=-1, on_value=1, off_value=0):
    """on_value where the last dim's index is input's entry, off_value elsewhere (num_classes -1:
    the largest entry + 1, read on every rank)."""
    (input,) = tensors(input)
    if input.dtype.is_floating or input.dtype.is_complex:
        raise DTypeError("one_hot is only applicable to index tensor.")
    depth = int(amax(input).item()) + 1 if num_classes == -1 else num_classes
    classes = arange(depth, dtype=input.dtype, placement=input.placement, sbp=(broadcast,) * input.placement.ndim) \
        if input.is_global else arange(depth, dtype=input.dtype)
    hit = unsqueeze(input, -1) == classes
    floating = isinstance(on_value, float) or isinstance(off_value, float)
    dt = _dtype.float32 if floating else _dtype.int64
    return where(hit, full_like(hit, on_value, dtype=dt), full_like(hit, off_value, dtype=dt))

