"""nn.functional: the functional forms of the layers."""
from ..ops import cross_entropy, dropout, embedding, gelu, layer_norm, linear, log_softmax, mse_loss, sigmoid, \
    softmax, tanh
from .activation_fns import celu, elu, glu, hardshrink, hardsigmoid, hardswish, hardtanh, leaky_relu, logsigmoid, \
    mish, prelu, relu, relu6, rrelu, selu, silu, softmin, softplus, softshrink, softsign, tanhshrink, threshold
from .attention import scaled_dot_product_attention
from ..ops.conv import conv1d, conv2d, fold2d, unfold2d
from ..ops.conv3d import conv3d
from ..ops.extras import hann_window, stft  # noqa: F401 - also reached as F.* in OneFlow code
from ..ops.resize import interpolate, pad
from ..ops.sampling import affine_grid, deform_conv2d, grid_sample
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d,
                      adaptive_max_pool2d, adaptive_max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d,
                      max_pool2d, max_pool3d, max_unpool1d, max_unpool2d, max_unpool3d)
from .resampling import fold, unfold, upsample
from .loss import binary_cross_entropy_with_logits, kl_div, l1_loss, nll_loss, smooth_l1_loss
from .loss_fns import binary_cross_entropy, cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss, \
    huber_loss, margin_ranking_loss, multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, \
    poisson_nll_loss, soft_margin_loss, sparse_softmax_cross_entropy, triplet_margin_loss, \
    triplet_margin_with_distance_loss
from .distance import cosine_similarity, pairwise_distance
from .ctc import ctc_loss
from ..ops.batch_norm_train import batch_norm
from ..ops.oneflow_functional import one_hot
from .norm import group_norm, rms_norm

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "relu",
           "sigmoid", "softmax", "tanh", "silu", "leaky_relu", "l1_loss", "smooth_l1_loss", "nll_loss",
           "binary_cross_entropy_with_logits", "kl_div", "scaled_dot_product_attention",
           "conv1d", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "unfold2d", "fold2d", "batch_norm",
           "threshold", "hardtanh", "relu6", "elu", "celu", "selu", "hardsigmoid", "hardswish", "softplus", "mish",
           "softsign", "tanhshrink", "logsigmoid", "softmin", "glu", "hardshrink", "softshrink", "prelu", "rrelu",
           "binary_cross_entropy", "huber_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss", "multi_margin_loss",
           "multilabel_margin_loss", "cosine_similarity", "pairwise_distance", "ctc_loss",
           "sparse_softmax_cross_entropy",
           "conv3d", "interpolate", "pad", "upsample", "affine_grid", "grid_sample", "deform_conv2d", "fold", "unfold",
           "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "one_hot", "group_norm", "rms_norm"]
