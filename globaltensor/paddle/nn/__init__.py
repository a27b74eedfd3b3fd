"""paddle.nn: Layer (gt's Module with Paddle's methods) and layers under Paddle's names and
parameter layouts (Linear's weight is [in_features, out_features])."""
from ... import nn as _nn
from ...autograd import no_grad as _no_grad, seeds_ones as _seeds_ones
from ... import ops as _ops
from ...creation import zeros as _zeros
from ...nn.init import xavier_uniform_ as _xavier_uniform_
from ...nn.module import Module, Parameter
from ..static.program import STATIC as _STATIC, default_main_program as _main_program, has_variable as _has_variable, \
    record as _record
from . import functional  # noqa: F401 - paddle.nn.functional

__all__ = ["Layer", "Linear", "ReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "Dropout", "Embedding", "LayerNorm",
           "Sequential", "LayerList", "MSELoss", "CrossEntropyLoss", "Parameter", "functional", "SiLU", "LeakyReLU",
           "Identity", "Flatten", "Conv1D", "Conv2D", "MaxPool2D", "AvgPool2D", "AdaptiveAvgPool2D",
           "MultiHeadAttention", "BatchNorm1D", "BatchNorm2D", "ReLU6", "ELU", "SELU", "Softplus", "Softsign",
           "Softshrink", "Hardshrink", "Hardtanh", "Hardsigmoid", "Hardswish", "Swish", "LogSigmoid", "Tanhshrink",
           "ThresholdedReLU", "LogSoftmax", "GroupNorm", "L1Loss", "KLDivLoss", "NLLLoss", "SmoothL1Loss",
           "ParameterList", "PReLU", "SyncBatchNorm"]


class Layer(Module):
    """paddle.nn.Layer: a Module with Paddle's method names as well. Assigning a distributed
    parameter (dist.shard_tensor) replicates the layer's other, dense parameters on its mesh, in
    place (Paddle's rule: a dense parameter next to distributed ones is replicated)."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if not isinstance(value, Parameter):
            return
        _seeds_ones(value)  # Paddle's rule: a non-scalar backward that reaches it seeds ones
        if value.is_global:
            from ..distributed.auto_parallel import replicate_in_place
            for p in self._parameters.values():
                if p is not None and p.is_local:
                    replicate_in_place(p, value.placement)

    def __call__(self, *args, **kwargs):
        if _STATIC[0] and (_has_variable(args) or _has_variable(kwargs)):  # a static program's layer call
            _main_program().add_parameters(self.parameters())  # the program trains and owns them, as fc's
            return _record(super().__call__, args, kwargs, label=type(self).__name__)
        return super().__call__(*args, **kwargs)

    def set_state_dict(self, state_dict, use_structured_name=True):
        """Copy the values in (each keeps its parameter's placement and SBP); returns the
        (missing, unexpected) keys, as Paddle."""
        return self.load_state_dict(state_dict, strict=False)

    set_dict = set_state_dict

    def clear_gradients(self, set_to_zero=True):
        self.zero_grad(set_to_none=not set_to_zero)

    def sublayers(self, include_self=False):
        found = list(self.modules())
        return found if include_self else found[1:]

    def named_sublayers(self, prefix="", include_self=False):
        found = list(self.named_modules(prefix))
        return found if include_self else found[1:]

    def add_sublayer(self, name, sublayer):
        self.add_module(name, sublayer)
        return sublayer

    def create_parameter(self, shape, dtype=None, is_bias=False, default_initializer=None, attr=None):
        return _create_parameter(shape, dtype, is_bias, default_initializer, attr)


def _create_parameter(shape, dtype=None, is_bias=False, default_initializer=None, attr=None):
    """A new Parameter of this shape: zeros for a bias, Xavier-uniform otherwise (Paddle's defaults:
    fans from dims 0 and 1, times the receptive field dims 2... of a convolution's weight); a
    ParamAttr's initializer and trainable flag apply."""
    p = Parameter(_zeros(*shape, dtype=dtype))
    _seeds_ones(p)
    initializer = getattr(attr, "initializer", None) or default_initializer
    if initializer is not None:
        with _no_grad():  # an initializer fills the parameter in place
            initializer(p)
    elif not is_bias:
        _xavier_uniform_(p)
    if attr is not None and not getattr(attr, "trainable", True):
        p.requires_grad_(False)
    return p


class Linear(Layer):
    """y = x @ weight + bias, weight [in_features, out_features] (Paddle's layout: Shard(1) on it
    splits the output features), Xavier-uniform weight and zero bias as Paddle initializes them."""

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None, name=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = self.create_parameter((in_features, out_features), attr=weight_attr)
        if bias_attr is False:
            self.register_parameter("bias", None)
        else:
            self.bias = self.create_parameter((out_features,), is_bias=True, attr=bias_attr)

    def forward(self, x):
        y = _ops.matmul(x, self.weight)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


def _paddle_class(name, base, doc):
    return type(name, (base, Layer), {"__doc__": doc, "__module__": __name__})


ReLU = _paddle_class("ReLU", _nn.ReLU, "max(x, 0)")
Dropout = _paddle_class("Dropout", _nn.Dropout, "Zero elements with probability p, scale the rest by 1/(1-p)")
Embedding = _paddle_class("Embedding", _nn.Embedding, "Rows of a [num_embeddings, embedding_dim] table")
Sequential = _paddle_class("Sequential", _nn.Sequential, "Layers applied in order")
LayerList = _paddle_class("LayerList", _nn.ModuleList, "A list of layers")
MSELoss = _paddle_class("MSELoss", _nn.MSELoss, "Mean squared error")


class GELU(_nn.GELU, Layer):
    def __init__(self, approximate=False, name=None):
        super().__init__("tanh" if approximate else "none")


class LayerNorm(_nn.LayerNorm, Layer):
    def __init__(self, normalized_shape, epsilon=1e-05, weight_attr=None, bias_attr=None, name=None):
        super().__init__(normalized_shape, eps=epsilon)


class CrossEntropyLoss(_nn.CrossEntropyLoss, Layer):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1, name=None):
        if weight is not None or soft_label or axis != -1:
            raise NotImplementedError("CrossEntropyLoss: weight=, soft_label=True and axis= other than -1 are not "
                                      "supported")
        super().__init__(reduction=reduction, ignore_index=ignore_index)


Tanh = _paddle_class("Tanh", _nn.Tanh, "tanh(x)")
Sigmoid = _paddle_class("Sigmoid", _nn.Sigmoid, "1 / (1 + exp(-x))")
Softmax = _paddle_class("Softmax", _nn.Softmax, "softmax over axis (default the last)")
SiLU = _paddle_class("SiLU", _nn.SiLU, "x * sigmoid(x)")
LeakyReLU = _paddle_class("LeakyReLU", _nn.LeakyReLU, "x, or negative_slope * x where x < 0")
Identity = _paddle_class("Identity", _nn.Identity, "the input itself")
Flatten = _paddle_class("Flatten", _nn.Flatten, "dims start_axis..stop_axis as one")
Conv1D = _paddle_class("Conv1D", _nn.Conv1d, "1-D convolution, weight [out, in / groups, k]")
Conv2D = _paddle_class("Conv2D", _nn.Conv2d, "2-D convolution, weight [out, in / groups, kh, kw]")
MaxPool2D = _paddle_class("MaxPool2D", _nn.MaxPool2d, "the largest value of each window")
AvgPool2D = _paddle_class("AvgPool2D", _nn.AvgPool2d, "the mean of each window")
AdaptiveAvgPool2D = _paddle_class("AdaptiveAvgPool2D", _nn.AdaptiveAvgPool2d, "means over output_size bins")
MultiHeadAttention = _paddle_class("MultiHeadAttention", _nn.MultiHeadAttention, "attention over num_heads heads")


class _PaddleBatchNorm(Layer):
    """Paddle's momentum keeps that much of the running statistics (PyTorch's momentum is 1 - it)."""

    def __init__(self, num_features, momentum=0.9, epsilon=1e-05, weight_attr=None, bias_attr=None,
                 data_format=None, use_global_stats=None, name=None):
        super().__init__(num_features, eps=epsilon, momentum=1.0 - momentum)


class BatchNorm1D(_PaddleBatchNorm, _nn.BatchNorm1d):
    pass


class BatchNorm2D(_PaddleBatchNorm, _nn.BatchNorm2d):
    pass


def _activation(name, fn, params):
    """A Layer applying paddle.nn.functional's `fn` with the arguments it was made with (Paddle's
    parameter names, in Paddle's order)."""

    def __init__(self, *args, name=None, **kwargs):
        Layer.__init__(self)
        if len(args) > len(params):
            raise TypeError(f"{type(self).__name__} takes at most {len(params)} arguments ({', '.join(params)})")
        unknown = set(kwargs) - set(params)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(unknown)}; it takes {list(params)}")
        self._args = {**dict(zip(params, args)), **kwargs}

    def forward(self, x):
        return fn(x, **self._args)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self._args.items())

    return type(name, (Layer,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                 "__doc__": f"paddle.nn.{name}: paddle.nn.functional.{fn.__name__} as a layer",
                                 "__module__": __name__})


_F = functional
ReLU6 = _activation("ReLU6", _F.relu6, ())
ELU = _activation("ELU", _F.elu, ("alpha",))
SELU = _activation("SELU", _F.selu, ("scale", "alpha"))
Softplus = _activation("Softplus", _F.softplus, ("beta", "threshold"))
Softsign = _activation("Softsign", _F.softsign, ())
Softshrink = _activation("Softshrink", _F.softshrink, ("threshold",))
Hardshrink = _activation("Hardshrink", _F.hardshrink, ("threshold",))
Hardtanh = _activation("Hardtanh", _F.hardtanh, ("min", "max"))
Hardsigmoid = _activation("Hardsigmoid", _F.hardsigmoid, ())
Hardswish = _activation("Hardswish", _F.hardswish, ())
Swish = _activation("Swish", _F.swish, ())
LogSigmoid = _activation("LogSigmoid", _F.log_sigmoid, ())
Tanhshrink = _activation("Tanhshrink", _F.tanhshrink, ())
ThresholdedReLU = _activation("ThresholdedReLU", _F.thresholded_relu, ("threshold",))
LogSoftmax = _activation("LogSoftmax", _F.log_softmax, ("axis",))
ParameterList = _paddle_class("ParameterList", _nn.ParameterList, "A list of parameters")


class L1Loss(_nn.L1Loss, Layer):
    """mean (or sum) of |input - label|; Paddle's signature (reduction first)."""

    def __init__(self, reduction="mean", name=None):
        super().__init__(reduction=reduction)


class KLDivLoss(_nn.KLDivLoss, Layer):
    """label * (log(label) - input); Paddle's signature (reduction first)."""

    def __init__(self, reduction="mean"):
        super().__init__(reduction=reduction)


class NLLLoss(_nn.NLLLoss, Layer):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", name=None):
        super().__init__(weight=weight, ignore_index=ignore_index, reduction=reduction)


class SmoothL1Loss(Layer):
    """Paddle's smooth L1 (the Huber loss with delta): see paddle.nn.functional.smooth_l1_loss."""

    def __init__(self, reduction="mean", delta=1.0, name=None):
        super().__init__()
        self.reduction, self.delta = reduction, delta

    def forward(self, input, label):
        return _F.smooth_l1_loss(input, label, self.reduction, self.delta)


class GroupNorm(_nn.GroupNorm, Layer):
    def __init__(self, num_groups, num_channels, epsilon=1e-05, weight_attr=None, bias_attr=None, data_format="NCHW",
                 name=None):
        if data_format not in ("NCHW", "NCL", "NC"):
            raise NotImplementedError(f"GroupNorm: data_format={data_format!r}; channels come first here")
        super().__init__(num_groups, num_channels, eps=epsilon, affine=weight_attr is not False)


class PReLU(Layer):
    """max(x, 0) + weight min(x, 0): one weight, or one per channel (num_parameters), init 0.25."""

    def __init__(self, num_parameters=1, init=0.25, weight_attr=None, data_format="NCHW", name=None):
        super().__init__()
        from ...nn.init import constant_
        self.data_format = data_format
        self.weight = self.create_parameter((num_parameters,), attr=weight_attr,
                                            default_initializer=lambda p: constant_(p, init))

    def forward(self, x):
        return _F.prelu(x, self.weight, self.data_format)


class SyncBatchNorm(BatchNorm2D):
    """BatchNorm over a batch split across ranks: the statistics of the whole batch (every
    BatchNorm here is synchronized: its sums are SBP-reduced), Paddle's momentum."""

    @classmethod
    def convert_sync_batchnorm(cls, layer):
        """The layer itself: its BatchNorm layers already use the whole batch's statistics."""
        return layer
