"""paddle.nn: Layer (gt's Module with Paddle's methods) and layers under Paddle's names and
parameter layouts (Linear's weight is [in_features, out_features]); parameters made from ParamAttr."""
import math

from ... import nn as _nn
from ... import ops as _ops
from ...autograd import no_grad as _no_grad
from ...nn.module import Parameter
from . import functional, initializer  # noqa: F401 - paddle.nn.functional, paddle.nn.initializer
from . import activation, loss  # noqa: F401 - paddle.nn.loss as in Paddle
from .activation import *  # noqa: F401,F403 - the activation layers
from .activation import __all__ as _activations
from .layer import Layer
from .loss import *  # noqa: F401,F403 - the loss layers
from .loss import __all__ as _losses
from .parameter import create_parameter as _create_parameter, paddle_parameters as _paddle_parameters  # noqa: F401
from .initializer import Constant as _Constant, Normal as _Normal

__all__ = ["Layer", "Linear", "Dropout", "Embedding", "LayerNorm", "Sequential", "LayerList", "Parameter",
           "functional", "initializer", "Identity", "Flatten", "Conv1D", "Conv2D", "MaxPool2D", "AvgPool2D",
           "AdaptiveAvgPool2D", "MultiHeadAttention", "BatchNorm1D", "BatchNorm2D", "GroupNorm", "ParameterList",
           "SyncBatchNorm"] + _activations + _losses


class Linear(Layer):
    """y = x @ weight + bias, weight [in_features, out_features] (Paddle's layout: Shard(1) on it
    splits the output features); weight_attr / bias_attr as Paddle's (default: XavierUniform with
    fan_in = in_features, a zero bias; bias_attr=False: none)."""

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None, name=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = self.create_parameter((in_features, out_features), attr=weight_attr)
        if bias_attr is False:
            self.register_parameter("bias", None)
        else:
            self.bias = self.create_parameter((out_features,), attr=bias_attr, is_bias=True)

    def forward(self, x):
        return _ops.linear_in_out(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


def _paddle_class(name, base, doc):
    return type(name, (base, Layer), {"__doc__": doc, "__module__": __name__})


class Dropout(_nn.Dropout, Layer):
    """Zero elements with probability p, scale the rest by 1/(1-p) (paddle.nn.functional.dropout:
    one dropout op of a static program)."""

    def __init__(self, p=0.5, axis=None, mode="upscale_in_train", name=None):
        if axis is not None or mode != "upscale_in_train":
            raise NotImplementedError("Dropout: axis= and mode='downscale_in_infer' are not supported")
        super().__init__(p)

    def forward(self, x):
        return functional.dropout(x, self.p, training=self.training)

Sequential = _paddle_class("Sequential", _nn.Sequential, "Layers applied in order")
LayerList = _paddle_class("LayerList", _nn.ModuleList, "A list of layers")


class LayerNorm(_nn.LayerNorm, Layer):
    def __init__(self, normalized_shape, epsilon=1e-05, weight_attr=None, bias_attr=None, name=None):
        super().__init__(normalized_shape, eps=epsilon)
        _paddle_parameters(self, weight_attr, bias_attr, _Constant(1.0))  # Paddle's scale 1, shift 0


class _PaddleConv(Layer):
    """Paddle's convolution arguments: weight_attr / bias_attr (default: Normal(0, sqrt(2 / fan_in))
    weight, fan_in = in_channels / groups times the kernel's size, zero bias; bias_attr=False: none)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCHW", name=None):
        if padding_mode != "zeros" or data_format not in ("NCHW", "NCL"):
            raise NotImplementedError(f"{type(self).__name__}: padding_mode={padding_mode!r} and "
                                      f"data_format={data_format!r}; zero padding, channels first are supported")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups)
        fan_in = in_channels // groups * math.prod(self.kernel_size)
        _paddle_parameters(self, weight_attr, bias_attr, _Normal(0.0, (2.0 / fan_in) ** 0.5))


class Conv1D(_PaddleConv, _nn.Conv1d):
    """1-D convolution, weight [out, in / groups, k]."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCL", name=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, padding_mode,
                         weight_attr, bias_attr, data_format)


class Conv2D(_PaddleConv, _nn.Conv2d):
    """2-D convolution, weight [out, in / groups, kh, kw]."""


class Embedding(_nn.Embedding, Layer):
    """Rows of a [num_embeddings, embedding_dim] table: weight_attr as Paddle's (default XavierUniform),
    row padding_idx zero."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, sparse=False, weight_attr=None, name=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, sparse=sparse)
        _paddle_parameters(self, weight_attr, None)
        if self.padding_idx is not None:
            with _no_grad():
                self.weight[self.padding_idx] = 0.0


Identity = _paddle_class("Identity", _nn.Identity, "the input itself")
Flatten = _paddle_class("Flatten", _nn.Flatten, "dims start_axis..stop_axis as one")
MaxPool2D = _paddle_class("MaxPool2D", _nn.MaxPool2d, "the largest value of each window")
AvgPool2D = _paddle_class("AvgPool2D", _nn.AvgPool2d, "the mean of each window")
AdaptiveAvgPool2D = _paddle_class("AdaptiveAvgPool2D", _nn.AdaptiveAvgPool2d, "means over output_size bins")
MultiHeadAttention = _paddle_class("MultiHeadAttention", _nn.MultiHeadAttention, "attention over num_heads heads")


class _PaddleBatchNorm(Layer):
    """Paddle's BatchNorm: momentum keeps that much of the running statistics (PyTorch's momentum
    is 1 - it), which take the batch's biased variance; paddle.nn.functional.batch_norm's forward
    (one op of the program in static mode). The running statistics are Paddle's buffers `_mean` /
    `_variance` (its state_dict keys, so Paddle's checkpoints load); running_mean / running_var
    name them too."""

    def __init__(self, num_features, momentum=0.9, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format=None, use_global_stats=None, name=None):
        super().__init__(num_features, eps=epsilon, momentum=1.0 - momentum)
        self._momentum_kept, self._use_global_stats = momentum, use_global_stats
        _paddle_parameters(self, weight_attr, bias_attr, _Constant(1.0))
        self._buffers = type(self._buffers)((_PADDLE_BUFFERS.get(k, k), v) for k, v in self._buffers.items()
                                            if k != "num_batches_tracked")  # Paddle has no such buffer

    running_mean = property(lambda self: self._buffers["_mean"])
    running_var = property(lambda self: self._buffers["_variance"])

    def forward(self, input):
        return functional.batch_norm(input, self._mean, self._variance, self.weight, self.bias,
                                     self.training, self._momentum_kept, self.eps,
                                     use_global_stats=self._use_global_stats)


_PADDLE_BUFFERS = {"running_mean": "_mean", "running_var": "_variance"}  # ours -> Paddle's names


class BatchNorm1D(_PaddleBatchNorm, _nn.BatchNorm1d):
    pass


class BatchNorm2D(_PaddleBatchNorm, _nn.BatchNorm2d):
    pass


ParameterList = _paddle_class("ParameterList", _nn.ParameterList, "A list of parameters")


class GroupNorm(_nn.GroupNorm, Layer):
    def __init__(self, num_groups, num_channels, epsilon=1e-05, weight_attr=None, bias_attr=None, data_format="NCHW",
                 name=None):
        if data_format not in ("NCHW", "NCL", "NC"):
            raise NotImplementedError(f"GroupNorm: data_format={data_format!r}; channels come first here")
        if (weight_attr is False) != (bias_attr is False):
            raise NotImplementedError("GroupNorm: weight_attr=False and bias_attr=False go together here")
        super().__init__(num_groups, num_channels, eps=epsilon, affine=weight_attr is not False)
        _paddle_parameters(self, weight_attr, bias_attr, _Constant(1.0))


class SyncBatchNorm(BatchNorm2D):
    """BatchNorm over a batch split across ranks: the statistics of the whole batch (every
    BatchNorm here is synchronized: its sums are SBP-reduced), Paddle's momentum."""

    @classmethod
    def convert_sync_batchnorm(cls, layer):
        """The layer itself: its BatchNorm layers already use the whole batch's statistics."""
        return layer
