"""nn.modules as OneFlow's and PyTorch's package path: the layers' submodules by their usual names."""
from . import utils  # noqa: F401
from .. import activation, container, conv, loss, norm, pooling, quantization, resampling, rnn  # noqa: F401
from ..module import Module  # noqa: F401

batchnorm = norm  # OneFlow's nn.modules.batchnorm (its _BatchNorm is norm's base class)
# OneFlow's module files of the quantization-aware training layers
min_max_observer = moving_average_min_max_observer = fake_quantization = quantization  # noqa: F811
