"""nn.functional: the functional forms of the layers."""
from ..ops import cross_entropy, dropout, embedding, gelu, layer_norm, linear, log_softmax, mse_loss, relu, sigmoid, \
    softmax

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "relu",
           "sigmoid", "softmax"]
