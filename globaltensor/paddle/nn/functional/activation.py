"""paddle.nn.functional's activations: Paddle's names and defaults, translated to the core's functions."""
from .... import creation as _creation
from .... import ops as _ops
from ....nn import activation_fns as _act
from ....ops import relu, sigmoid, tanh  # noqa: F401 - Paddle's names are the core's

__all__ = ["relu", "sigmoid", "tanh", "silu", "swish", "mish", "gelu", "leaky_relu", "relu6", "elu", "celu", "selu",
           "softplus", "softsign", "softshrink", "hardshrink", "hardtanh", "hardsigmoid", "hardswish", "log_sigmoid",
           "tanhshrink", "thresholded_relu", "prelu", "rrelu", "glu", "maxout", "softmax", "log_softmax",
           "gumbel_softmax", "relu_", "elu_", "softmax_", "hardtanh_", "leaky_relu_", "thresholded_relu_", "tanh_"]


def silu(x, inplace=False, name=None):
    return _act.silu(x)


def swish(x, name=None):
    return _act.silu(x)


def mish(x, name=None):
    return _act.mish(x)


def gelu(x, approximate=False, name=None):
    """approximate: True (or 'tanh') the tanh approximation, False (or 'none') the exact erf form."""
    exact = approximate in (False, "none")
    return _ops.gelu(x, "none" if exact else "tanh")


def leaky_relu(x, negative_slope=0.01, name=None):
    return _act.leaky_relu(x, negative_slope)


def relu6(x, name=None):
    return _act.relu6(x)


def elu(x, alpha=1.0, name=None):
    return _act.elu(x, alpha)


def celu(x, alpha=1.0, name=None):
    return _act.celu(x, alpha)


def selu(x, scale=1.0507009873554804934193349852946, alpha=1.6732632423543772848170429916717, name=None):
    """scale * elu(x, alpha) (Paddle lets both constants be chosen)."""
    if scale <= 1.0 or alpha < 0:
        raise ValueError(f"selu: scale must be greater than 1.0 and alpha at least 0, got scale={scale}, alpha={alpha}")
    return _act.elu(x, alpha) * scale


def softplus(x, beta=1, threshold=20, name=None):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return _act.softplus(x, beta, threshold)


def softsign(x, name=None):
    return _act.softsign(x)


def softshrink(x, threshold=0.5, name=None):
    return _act.softshrink(x, threshold)


def hardshrink(x, threshold=0.5, name=None):
    return _act.hardshrink(x, threshold)


def hardtanh(x, min=-1.0, max=1.0, name=None):  # noqa: A002 - Paddle's names
    return _act.hardtanh(x, min, max)


def hardsigmoid(x, slope=0.1666667, offset=0.5, name=None):
    """clip(slope * x + offset, 0, 1) (Paddle's slope 0.1666667, not exactly 1/6)."""
    return _act.hardtanh(x * slope + offset, 0.0, 1.0)


def hardswish(x, name=None):
    return _act.hardswish(x)


def log_sigmoid(x, name=None):
    return _act.logsigmoid(x)


def tanhshrink(x, name=None):
    return _act.tanhshrink(x)


def thresholded_relu(x, threshold=1.0, value=0.0, name=None):
    """x where x > threshold, value elsewhere."""
    return _act.threshold(x, threshold, value)


def prelu(x, weight, data_format="NCHW", name=None):
    """x where x > 0, weight * x elsewhere; weight one value or one per channel (dim 1 for NC..., the
    last dim for N...C)."""
    if data_format not in ("NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC"):
        raise ValueError(f"prelu: unknown data_format {data_format!r}")
    if data_format[-1] == "C" and data_format != "NC" and weight.numel() > 1:
        return _ops.movedim(_act.prelu(_ops.movedim(x, -1, 1), weight), 1, -1)
    return _act.prelu(x, weight)


def rrelu(x, lower=1.0 / 8.0, upper=1.0 / 3.0, training=True, name=None):
    """Negative elements times a slope drawn from U[lower, upper) in training, (lower + upper) / 2 else."""
    if not 0 <= lower <= upper <= 1:
        raise ValueError(f"rrelu: 0 <= lower <= upper <= 1 needed, got lower={lower}, upper={upper}")
    return _act.rrelu(x, lower, upper, training)


def glu(x, axis=-1, name=None):
    """a * sigmoid(b), a and b the halves of x along axis."""
    return _act.glu(x, axis)


def maxout(x, groups, axis=1, name=None):
    """The largest of each run of `groups` consecutive channels along axis (C / groups channels out)."""
    axis = axis % x.ndim
    channels = x.shape[axis]
    if channels % groups:
        raise ValueError(f"maxout: {channels} channels along axis {axis} do not divide into groups of {groups}")
    shape = list(x.shape[:axis]) + [channels // groups, groups] + list(x.shape[axis + 1:])
    return _ops.amax(_ops.reshape(x, shape), dim=axis + 1)


def softmax(x, axis=-1, dtype=None, name=None):
    return _ops.softmax(x, axis, dtype=dtype)


def log_softmax(x, axis=-1, dtype=None, name=None):
    return _ops.log_softmax(x, axis, dtype=dtype)


def gumbel_softmax(x, temperature=1.0, hard=False, axis=-1, name=None):
    """softmax((x + g) / temperature), g Gumbel(0, 1) noise from the sharding-invariant generator;
    hard=True: the one-hot of the largest, with the soft sample's gradient."""
    where = {"placement": x.placement, "sbp": x.sbp} if x.is_global else {}
    u = _creation.uniform(tuple(x.shape), 1e-10, 1.0, dtype=x.dtype, **where)
    soft = _ops.softmax((x - _ops.log(-_ops.log(u))) / temperature, axis)
    if not hard:
        return soft
    index = _ops.argmax(soft, axis, keepdim=True)
    one_hot = _ops.scatter(_ops.zeros_like(soft), axis % x.ndim, index, 1.0)
    return one_hot - soft.detach() + soft


def _in_place(fn):
    def apply(x, *args, **kwargs):
        return x.copy_(fn(x, *args, **kwargs))
    apply.__name__ = fn.__name__ + "_"
    apply.__doc__ = f"{fn.__name__} in place"
    return apply


relu_ = _in_place(relu)
elu_ = _in_place(elu)
softmax_ = _in_place(softmax)
hardtanh_ = _in_place(hardtanh)
leaky_relu_ = _in_place(leaky_relu)
thresholded_relu_ = _in_place(thresholded_relu)
tanh_ = _in_place(tanh)
