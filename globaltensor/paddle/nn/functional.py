"""paddle.nn.functional: globaltensor's functional ops, with Paddle's meanings where they differ
(linear's weight is [in_features, out_features], dropout's third parameter is axis, gelu's
approximate is a bool)."""
from ... import ops as _ops
from ...nn.functional import cross_entropy, embedding, layer_norm, log_softmax, mse_loss, relu  # noqa: F401
from ...ops import sigmoid, softmax, tanh  # noqa: F401

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "relu",
           "sigmoid", "softmax", "tanh"]


def linear(x, weight, bias=None, name=None):
    """x @ weight + bias, weight [in_features, out_features] (Paddle's layout)."""
    y = _ops.matmul(x, weight)
    return y if bias is None else y + bias


def dropout(x, p=0.5, axis=None, training=True, mode="upscale_in_train", name=None):
    if axis is not None or mode != "upscale_in_train":
        raise NotImplementedError("dropout: axis= and mode='downscale_in_infer' are not supported")
    return _ops.dropout(x, p, training)


def gelu(x, approximate=False, name=None):
    return _ops.gelu(x, "tanh" if approximate else "none")
