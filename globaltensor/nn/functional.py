"""nn.functional: the functional forms of the layers."""
from ..ops import cross_entropy, dropout, embedding, gelu, layer_norm, linear, log_softmax, mse_loss, relu, sigmoid, \
    softmax, tanh
from .activation import leaky_relu, silu
from .attention import scaled_dot_product_attention
from ..ops.conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, fold2d, max_pool2d, unfold2d
from .loss import binary_cross_entropy_with_logits, kl_div, l1_loss, nll_loss, smooth_l1_loss
from ..ops.norms import batch_norm

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "relu",
           "sigmoid", "softmax", "tanh", "silu", "leaky_relu", "l1_loss", "smooth_l1_loss", "nll_loss",
           "binary_cross_entropy_with_logits", "kl_div", "scaled_dot_product_attention",
           "conv1d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "unfold2d", "fold2d", "batch_norm"]
