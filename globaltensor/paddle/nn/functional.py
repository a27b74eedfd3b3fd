"""paddle.nn.functional: globaltensor's functional ops, with Paddle's meanings where they differ
(linear's weight is [in_features, out_features], dropout's third parameter is axis, gelu's
approximate is a bool)."""
from ... import ops as _ops
from ...nn.functional import cross_entropy as _cross_entropy
from ...nn.functional import embedding, layer_norm, log_softmax, mse_loss, relu  # noqa: F401
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


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                  use_softmax=True, name=None):
    """Paddle's cross_entropy: a label of shape [N, 1] is the class column; use_softmax=False takes
    input as probabilities (the negative log of the labelled one)."""
    if weight is not None or soft_label or axis not in (-1, input.ndim - 1):
        raise NotImplementedError("cross_entropy: weight=, soft_label=True and an axis other than the last are not "
                                  "supported")
    if label.ndim == input.ndim and label.shape[-1] == 1:
        label = label.squeeze(-1)
    if use_softmax:
        return _cross_entropy(input, label, ignore_index=ignore_index, reduction=reduction)
    picked = -_ops.gather(input.log(), -1, label.unsqueeze(-1)).squeeze(-1)
    return {"mean": picked.mean, "sum": picked.sum}.get(reduction, lambda: picked)()


def _recordable_all():
    from ..static.program import recordable
    for name in __all__:
        globals()[name] = recordable(globals()[name])


_recordable_all()
