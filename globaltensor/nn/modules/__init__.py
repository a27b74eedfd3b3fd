"""nn.modules as OneFlow's and PyTorch's package path: the layers' submodules by their usual names."""
from . import utils  # noqa: F401
from .. import activation, container, conv, loss, norm, pooling, resampling, rnn  # noqa: F401
from ..module import Module  # noqa: F401

batchnorm = norm  # OneFlow's nn.modules.batchnorm (its _BatchNorm is norm's base class)
