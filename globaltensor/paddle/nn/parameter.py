"""Parameters made as Paddle makes them: ParamAttr, the global initializer, then the layer's default."""
from ...autograd import seeds_ones as _seeds_ones
from ...creation import zeros as _zeros
from ...nn.module import Parameter
from ..toplevel import ParamAttr
from . import initializer as _init


class EagerParamBase(Parameter):
    """A Parameter with Paddle's attributes: name, optimize_attr ({'learning_rate': factor on the
    optimizer's}), trainable (= not stop_gradient)."""

    def __init__(self, data, requires_grad=True, name=None, learning_rate=1.0):
        super().__init__(data, requires_grad)
        self.name, self.optimize_attr = name, {"learning_rate": float(learning_rate)}

    trainable = property(lambda self: self.requires_grad, lambda self, v: self.requires_grad_(bool(v)))


def create_parameter(shape, dtype=None, name=None, attr=None, is_bias=False, default_initializer=None):
    """A new parameter of this shape (dtype float32 by default). Its initializer: the ParamAttr's,
    else set_global_initializer's, else default_initializer, else Paddle's defaults (XavierUniform
    for a weight: fans [in, out] of a matrix, or [out, in, k...] of a kernel; zeros for a bias)."""
    attr = ParamAttr._to_attr(attr)
    if attr is False:
        raise ValueError("create_parameter: attr=False makes no parameter (the layer takes bias_attr=False itself)")
    shape = [int(s) for s in ([shape] if isinstance(shape, int) else shape)]
    p = EagerParamBase(_zeros(*shape, dtype=dtype or "float32"), requires_grad=attr.trainable,
                       name=attr.name or name, learning_rate=attr.learning_rate)
    _seeds_ones(p)  # Paddle's rule: a non-scalar backward that reaches it seeds ones
    initializer = attr.initializer or _init.global_initializer(is_bias) or default_initializer
    if initializer is None:
        initializer = _init.Constant(0.0) if is_bias else _init.XavierUniform()
    initializer(p)
    return p


def paddle_parameters(layer, weight_attr=None, bias_attr=None, weight_init=None, bias_init=None, names=None):
    """The layer's weight and bias made again as Paddle makes them (same shapes): weight_attr /
    bias_attr, with the layer's Paddle defaults weight_init / bias_init; an attr of False removes that
    parameter (a norm layer's scale or shift, a convolution's bias)."""
    weight_name, bias_name = names or ("weight", "bias")
    for pname, attr, default, is_bias in ((weight_name, weight_attr, weight_init, False),
                                         (bias_name, bias_attr, bias_init, True)):
        old = getattr(layer, pname, None)
        if old is None:
            continue
        if attr is False:
            layer.register_parameter(pname, None)
            continue
        new = create_parameter(tuple(old.shape), old.dtype, attr=attr, is_bias=is_bias, default_initializer=default)
        setattr(layer, pname, new)
    return layer
