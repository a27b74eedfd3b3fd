"""PyTorch's functional activations (elu, hardtanh, softplus, prelu, glu, ...) as composites of registered ops."""
from .. import creation, ops
from ..ops._front import float32_for_bfloat16
from ..errors import wrap_dim
from ..dispatch import amp_entry

__all__ = ["threshold", "hardtanh", "relu6", "elu", "celu", "selu", "hardsigmoid", "hardswish", "softplus", "mish",
           "softsign", "tanhshrink", "logsigmoid", "softmin", "glu", "hardshrink", "softshrink", "prelu", "rrelu",
           "relu", "silu", "leaky_relu"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

# inplace=True is accepted for PyTorch's signatures; the result is a new tensor (the input is left as it is).


def relu(input, inplace=False):
    return ops.relu(input)


def silu(input, inplace=False):
    """x * sigmoid(x) (a composite: its SBP rows and backward are those of its ops)."""
    return input * ops.sigmoid(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, negative_slope * x elsewhere."""
    return ops.where(input > 0, input, input * negative_slope)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, value elsewhere."""
    return ops.where(input > threshold, input, value)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient is 0 at and beyond the bounds, as PyTorch's."""
    if min_val > max_val:
        raise ValueError("hardtanh: min_val cannot be greater than max_val")
    return ops.where(input <= min_val, min_val, ops.where(input >= max_val, max_val, input))


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)


def _negative_part(input):
    """x where x <= 0, else 0: what the exponential branches see (no overflow, no NaN gradient)."""
    return ops.where(input > 0, 0.0, input)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    return ops.where(input > 0, input, (ops.exp(_negative_part(input)) - 1) * alpha)


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha * (exp(x / alpha) - 1) elsewhere."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    return ops.where(input > 0, input, (ops.exp(_negative_part(input) * (1.0 / alpha)) - 1) * alpha)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return elu(input, SELU_ALPHA) * SELU_SCALE


def hardsigmoid(input, inplace=False):
    """0 at or below -3, 1 at or above 3, x / 6 + 1/2 between."""
    return ops.where(input <= -3, 0.0, ops.where(input >= 3, 1.0, input * (1.0 / 6) + 0.5))


def hardswish(input, inplace=False):
    """0 up to -3, x from 3, x (x + 3) / 6 between (PyTorch's gradient at the ends: 0 at -3, 1 at 3)."""
    return ops.where(input <= -3, 0.0, ops.where(input < 3, input * (input + 3) * (1.0 / 6), input))


@amp_entry("softplus")
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta; x itself where beta x > threshold."""
    scaled = input * beta if beta != 1 else input
    linear = scaled > threshold
    safe = ops.where(linear, 0.0, scaled)
    soft = ops.log1p(ops.exp(safe))
    return ops.where(linear, input, soft * (1.0 / beta) if beta != 1 else soft)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return input * ops.tanh(softplus(input))


def softsign(input):
    """x / (1 + |x|)."""
    return input / (ops.abs(input) + 1)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - ops.tanh(input)


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|; its gradient sigmoid(-x) (0.5 at 0,
    as PyTorch's, where min(x, 0) - log1p(exp(-|x|)) gave 0 there)."""
    return -softplus(-input)


def _softmax_dim(ndim):
    """PyTorch's implicit softmax dim (dim=None): 0 for 0-, 1- and 3-d inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along dim (None: PyTorch's implicit dim)."""
    if dtype is not None:
        input = ops.cast(input, dtype)
    return ops.softmax(-input, _softmax_dim(input.ndim) if dim is None else dim)


def glu(input, dim=-1):
    """a * sigmoid(b), a and b the halves of input along dim."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size "
                           f"{input.shape[dim]}")
    a, b = ops.chunk(input, 2, dim)
    return a * ops.sigmoid(b)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, 0 elsewhere."""
    return ops.where((input > lambd) | (input < -lambd), input, 0.0)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"alpha must be greater or equal to 0, but found to be {lambd}. (softshrink's lambd; "
                           f"PyTorch: lambda must be greater or equal to 0)")
    return ops.where(input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, 0.0))


@amp_entry("prelu")
def prelu(input, weight):
    """x where x > 0, weight * x elsewhere; weight has 1 or C (input's dim 1) entries."""
    n = weight.numel() if callable(getattr(weight, "numel", None)) else int(weight.size)
    if n == 1:
        slope = ops.reshape(weight, ())
    else:
        channel = 1 if input.ndim >= 2 else 0
        if input.ndim == 0 or input.shape[channel] != n:
            raise RuntimeError(f"num_parameters in prelu must be 1 or {input.shape[channel] if input.ndim else 1}. "
                               f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{n} and channel size = {input.shape[channel] if input.ndim else 1}.")
        shape = [1] * input.ndim
        shape[channel] = n
        slope = ops.reshape(weight, tuple(shape))
    return ops.where(input > 0, input, input * slope)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """leaky_relu with slope (lower + upper) / 2 in eval; in training each negative element draws its
    slope uniformly from [lower, upper) (gt's generator: sharding-invariant, not torch's stream)."""
    if not training or lower == upper:
        return leaky_relu(input, (lower + upper) / 2)
    kw = {"placement": input.placement, "sbp": input.sbp} if input.is_global else {}
    slopes = creation.uniform(tuple(input.shape), lower, upper, dtype=input.dtype, **kw)
    return ops.where(input >= 0, input, input * slopes)


# bfloat16 inputs: each composite computes in float32 and rounds once, as a fused bfloat16 kernel would
for _name in ("silu", "elu", "celu", "selu", "hardsigmoid", "hardswish", "softplus", "mish", "softsign", "tanhshrink",
              "logsigmoid"):
    globals()[_name] = float32_for_bfloat16(globals()[_name])
