"""OneFlow's quantization-aware training modules (MinMaxObserver, MovingAverageMinMaxObserver, FakeQuantization, Quantization) and CoinFlip, composed of tensor ops."""
import math

from .. import creation
from .. import dtype as _dtype
from ..ops import where
from ..autograd import no_grad
from ..generator import Generator
from .module import Module

__all__ = ["MinMaxObserver", "MovingAverageMinMaxObserver", "FakeQuantization", "Quantization", "CoinFlip",
           "min_max_observer", "moving_average_min_max_observer", "fake_quantization", "quantization"]


def _check(formula, bit, scheme, name):
    if formula not in ("google", "cambricon"):
        raise ValueError(f"{name}: quantization_formula must be 'google' or 'cambricon', got {formula!r}")
    if scheme not in ("symmetric", "affine"):
        raise ValueError(f"{name}: quantization_scheme must be 'symmetric' or 'affine', got {scheme!r}")
    if not 2 <= int(bit) <= 8:
        raise ValueError(f"{name}: quantization_bit must be in [2, 8], got {bit}")


def _scale_zero(hi, lo, formula, bit, scheme):
    """(scale, zero_point) from the maxima and minima (OneFlow's kernels' formulas)."""
    if formula == "cambricon":
        m = hi.abs().maximum(lo.abs())
        return (m.log2().floor() - (bit - 2)), m * 0
    if scheme == "symmetric":
        m = hi.abs().maximum(lo.abs())
        return m / (2.0 ** (bit - 1) - 1), m * 0
    scale = (hi - lo) / (2.0 ** bit - 1)
    return scale, -(lo / scale).round()


def min_max_observer(input, quantization_formula="google", quantization_bit=8, quantization_scheme="symmetric",
                     per_layer_quantization=True):
    """(scale, zero_point) of the input: per layer (shape (1,)) or per channel (dim 0; google only)."""
    _check(quantization_formula, quantization_bit, quantization_scheme, "min_max_observer")
    if per_layer_quantization or quantization_formula == "cambricon":
        hi, lo = input.max().reshape(1), input.min().reshape(1)
    else:
        flat = input.reshape(input.shape[0], -1)
        hi, lo = flat.amax(dim=1), flat.amin(dim=1)
    return _scale_zero(hi, lo, quantization_formula, quantization_bit, quantization_scheme)


def moving_average_min_max_observer(input, current_train_step, moving_max, moving_min, training,
                                    stop_update_after_iters, quantization_formula, quantization_bit,
                                    quantization_scheme, momentum):
    """(scale, zero_point) from moving averages of the input's max and min; while training and
    current_train_step <= stop_update_after_iters the buffers move (a zero buffer takes the value)."""
    _check(quantization_formula, quantization_bit, quantization_scheme, "moving_average_min_max_observer")
    affine = quantization_scheme == "affine" and quantization_formula == "google"
    hi, lo = input.max().reshape(1), input.min().reshape(1)
    if not affine:
        hi = hi.abs().maximum(lo.abs())
    if training:
        with no_grad():
            moves = current_train_step.reshape(-1)[:1].to(moving_max.dtype) <= stop_update_after_iters
            new_max = where(moving_max == 0, hi.detach(), moving_max * momentum + hi.detach() * (1 - momentum))
            moving_max.copy_(where(moves, new_max, moving_max))
            if affine:
                new_min = where(moving_min == 0, lo.detach(), moving_min * momentum + lo.detach() * (1 - momentum))
                moving_min.copy_(where(moves, new_min, moving_min))
            else:
                moving_min.copy_(moving_max)
    return _scale_zero(moving_max.clone(), moving_min.clone(), quantization_formula, quantization_bit,
                       quantization_scheme)


def _quantized(input, scale, zero_point, formula, bit, scheme):
    """(round(x / scale [+ zero point]) clamped, the zero point, the scale), per layer or per channel (dim 0)."""
    if formula == "cambricon":
        scale = 2.0 ** scale.floor()
    if math.prod(scale.shape) > 1:  # per channel
        shape = (-1,) + (1,) * (input.ndim - 1)
        scale, zero_point = scale.reshape(*shape), zero_point.reshape(*shape)
    else:
        scale, zero_point = scale.reshape(()), zero_point.reshape(())
    if scheme == "affine" and formula == "google":
        zero = zero_point.round().clamp(0, 255)
        return (input / scale + zero).round().clamp(0, 2.0 ** bit - 1), zero, scale
    upper = 2.0 ** (bit - 1) - 1
    return (input / scale).round().clamp(-upper - 1, upper), None, scale


def fake_quantization(input, scale, zero_point, quantization_formula="google", quantization_bit=8,
                      quantization_scheme="symmetric"):
    """Quantize then dequantize (training-time simulation); the gradient passes straight through."""
    _check(quantization_formula, quantization_bit, quantization_scheme, "fake_quantization")
    q, zero, scale = _quantized(input, scale, zero_point, quantization_formula, quantization_bit,
                                quantization_scheme)
    out = (q - zero) * scale if zero is not None else q * scale
    return input + (out - input).detach()


def quantization(input, scale, zero_point, quantization_formula="google", quantization_bit=8,
                 quantization_scheme="symmetric"):
    """The quantized values (inference-time): round(x / scale [+ zero point]) clamped to the bit range."""
    _check(quantization_formula, quantization_bit, quantization_scheme, "quantization")
    return _quantized(input, scale, zero_point, quantization_formula, quantization_bit, quantization_scheme)[0]


class _Quant(Module):
    def __init__(self, quantization_formula="google", quantization_bit=8, quantization_scheme="symmetric"):
        super().__init__()
        _check(quantization_formula, quantization_bit, quantization_scheme, type(self).__name__)
        self.quantization_formula, self.quantization_bit = quantization_formula, quantization_bit
        self.quantization_scheme = quantization_scheme

    def extra_repr(self):
        return (f"quantization_formula={self.quantization_formula!r}, quantization_bit={self.quantization_bit}, "
                f"quantization_scheme={self.quantization_scheme!r}")


class MinMaxObserver(_Quant):
    """OneFlow's nn.MinMaxObserver: forward(input) -> (scale, zero_point)."""

    def __init__(self, quantization_formula="google", quantization_bit=8, quantization_scheme="symmetric",
                 per_layer_quantization=True):
        super().__init__(quantization_formula, quantization_bit, quantization_scheme)
        self.per_layer_quantization = per_layer_quantization

    def forward(self, input):
        return min_max_observer(input, self.quantization_formula, self.quantization_bit, self.quantization_scheme,
                                self.per_layer_quantization)


class MovingAverageMinMaxObserver(_Quant):
    """OneFlow's nn.MovingAverageMinMaxObserver: forward(input, current_train_step) -> (scale,
    zero_point); buffers moving_max and moving_min."""

    def __init__(self, stop_update_after_iters=1, quantization_formula="google", quantization_bit=8,
                 quantization_scheme="symmetric", momentum=0.95):
        super().__init__(quantization_formula, quantization_bit, quantization_scheme)
        self.stop_update_after_iters, self.momentum = stop_update_after_iters, momentum
        self.register_buffer("moving_max", creation.zeros(1))
        self.register_buffer("moving_min", creation.zeros(1))

    def reset_running_stats(self):
        with no_grad():
            self.moving_max.fill_(0)
            self.moving_min.fill_(0)

    def forward(self, input, current_train_step):
        return moving_average_min_max_observer(
            input, current_train_step, self.moving_max, self.moving_min, self.training, self.stop_update_after_iters,
            self.quantization_formula, self.quantization_bit, self.quantization_scheme, self.momentum)


class FakeQuantization(_Quant):
    """OneFlow's nn.FakeQuantization: forward(input, scale, zero_point)."""

    def forward(self, input, scale, zero_point):
        return fake_quantization(input, scale, zero_point, self.quantization_formula, self.quantization_bit,
                                 self.quantization_scheme)


class Quantization(_Quant):
    """OneFlow's nn.Quantization: forward(input, scale, zero_point)."""

    def forward(self, input, scale, zero_point):
        return quantization(input, scale, zero_point, self.quantization_formula, self.quantization_bit,
                            self.quantization_scheme)


class CoinFlip(Module):
    """OneFlow's nn.CoinFlip(batch_size, random_seed, probability, device, placement, sbp): forward() ->
    an int8 tensor of batch_size draws, 1 with the probability (a seed of None or < 0: the global
    generator)."""

    def __init__(self, batch_size=1, random_seed=None, probability=0.5, device=None, placement=None, sbp=None):
        super().__init__()
        if not 0.0 <= float(probability) <= 1.0:
            raise ValueError(f"CoinFlip: probability must be in [0, 1], got {probability}")
        self.batch_size, self.probability = int(batch_size), float(probability)
        self.device, self.placement, self.sbp = device, placement, sbp
        self.generator = None
        if random_seed is not None and random_seed >= 0:
            self.generator = Generator()
            self.generator.manual_seed(int(random_seed))

    def forward(self):
        layout = {"placement": self.placement, "sbp": self.sbp} if self.placement is not None else {}
        draws = creation.rand(self.batch_size, generator=self.generator, **layout)
        return (draws < self.probability).to(_dtype.int8)
