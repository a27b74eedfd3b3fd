"""paddle.nn's activation layers: each applies paddle.nn.functional's function with the arguments it was made with."""
from . import functional as _F
from .initializer import Constant as _Constant
from .layer import Layer, bind_arguments

__all__ = ["CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
           "LogSigmoid", "LogSoftmax", "Maxout", "Mish", "PReLU", "RReLU", "ReLU", "ReLU6", "SELU", "Sigmoid", "Silu",
           "SiLU", "Softmax", "Softmax2D", "Softplus", "Softshrink", "Softsign", "Swish", "Tanh", "Tanhshrink",
           "ThresholdedReLU"]


def _activation(name, fn, params=(), fixed=None):
    """A Layer class applying `fn` with Paddle's parameters `params` ((name, default) pairs, in
    Paddle's order) and `fixed` keywords; its repr shows every parameter, as Paddle's."""
    params = tuple(params)

    def __init__(self, *args, name=None, **kwargs):
        Layer.__init__(self)
        self._args = bind_arguments(self, params, args, kwargs)

    def forward(self, x):
        return fn(x, **self._args, **(fixed or {}))

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in self._args.items())

    return type(name, (Layer,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                 "__doc__": f"paddle.nn.{name}: paddle.nn.functional.{fn.__name__} as a layer",
                                 "__module__": "globaltensor.paddle.nn"})


CELU = _activation("CELU", _F.celu, [("alpha", 1.0)])
ELU = _activation("ELU", _F.elu, [("alpha", 1.0)])
GELU = _activation("GELU", _F.gelu, [("approximate", False)])
GLU = _activation("GLU", _F.glu, [("axis", -1)])
Hardshrink = _activation("Hardshrink", _F.hardshrink, [("threshold", 0.5)])
Hardsigmoid = _activation("Hardsigmoid", _F.hardsigmoid)
Hardswish = _activation("Hardswish", _F.hardswish)
Hardtanh = _activation("Hardtanh", _F.hardtanh, [("min", -1.0), ("max", 1.0)])
LeakyReLU = _activation("LeakyReLU", _F.leaky_relu, [("negative_slope", 0.01)])
LogSigmoid = _activation("LogSigmoid", _F.log_sigmoid)
LogSoftmax = _activation("LogSoftmax", _F.log_softmax, [("axis", -1)])
Maxout = _activation("Maxout", _F.maxout, [("groups", None), ("axis", 1)])
Mish = _activation("Mish", _F.mish)
ReLU = _activation("ReLU", _F.relu)
ReLU6 = _activation("ReLU6", _F.relu6)
SELU = _activation("SELU", _F.selu, [("scale", 1.0507009873554804934193349852946),
                                     ("alpha", 1.6732632423543772848170429916717)])
Sigmoid = _activation("Sigmoid", _F.sigmoid)
Silu = _activation("Silu", _F.silu, [("inplace", False)])
SiLU = Silu
Softmax = _activation("Softmax", _F.softmax, [("axis", -1)])
Softmax2D = _activation("Softmax2D", _F.softmax, fixed={"axis": -3})
Softplus = _activation("Softplus", _F.softplus, [("beta", 1), ("threshold", 20)])
Softshrink = _activation("Softshrink", _F.softshrink, [("threshold", 0.5)])
Softsign = _activation("Softsign", _F.softsign)
Swish = _activation("Swish", _F.swish)
Tanh = _activation("Tanh", _F.tanh)
Tanhshrink = _activation("Tanhshrink", _F.tanhshrink)
ThresholdedReLU = _activation("ThresholdedReLU", _F.thresholded_relu, [("threshold", 1.0), ("value", 0.0)])


class RReLU(Layer):
    """paddle.nn.RReLU: random negative slopes in U[lower, upper) while training, their mean in eval."""

    def __init__(self, lower=1.0 / 8.0, upper=1.0 / 3.0, name=None):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x):
        return _F.rrelu(x, self.lower, self.upper, training=self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}"


class PReLU(Layer):
    """max(x, 0) + weight min(x, 0): one weight, or one per channel (num_parameters), init 0.25."""

    def __init__(self, num_parameters=1, init=0.25, weight_attr=None, data_format="NCHW", name=None):
        super().__init__()
        self.data_format, self.num_parameters = data_format, num_parameters
        self.weight = self.create_parameter((num_parameters,), attr=weight_attr,
                                            default_initializer=_Constant(init))

    def forward(self, x):
        return _F.prelu(x, self.weight, self.data_format)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}, data_format={self.data_format}"
