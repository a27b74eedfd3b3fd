"""OneFlow's functional losses (flow._C.softmax_cross_entropy(_grad), sparse_(softmax_)cross_entropy): its checks and messages, composites of our ops.

Composites of registered ops (log_softmax, gather, sum, log), so a global tensor split on its
batch dims or on its class dim gets SBP rows and gradients from those ops. Checks read global
shapes and dtypes only, so every rank raises alike before any collective."""
from ..errors import DTypeError, ShapeError
from ._front import tensors
from .activations import log_softmax
from .elementwise import log
from .gather_scatter import gather
from .oneflow_functional import dtype_text, is_index_dtype, shape_text
from .reduction import sum as _sum
from .shape import squeeze, unsqueeze


def _at_least_2d(t, name):
    if t.ndim < 2:
        raise ShapeError(f"The dimension of {name} must be greater than or equal to 2, but found {t.ndim}")


def _same_dtype(a, b, names):
    if a.dtype != b.dtype:
        raise DTypeError(f"{names[0]} and {names[1]} are expected to have the same dtype, but found "
                         f"{dtype_text(a.dtype)} and {dtype_text(b.dtype)}")


def _sparse_checks(prediction, label, name="prediction"):
    """OneFlow's checks of a (..., classes) prediction and its (...) integer labels."""
    _at_least_2d(prediction, name)
    if label.ndim != prediction.ndim - 1:
        raise ShapeError("The dimension of label is expected to be less than that of prediction by 1, but found "
                         f"{label.ndim} and {prediction.ndim - 1}")
    for i in range(label.ndim):
        if prediction.shape[i] != label.shape[i]:
            raise ShapeError(f"The size of {name} ({prediction.shape[i]}) must match the size of label "
                             f"({label.shape[i]}) at dimension {i}")
    if not is_index_dtype(label.dtype):
        raise DTypeError(f"The dtype of label must be integer, but found {dtype_text(label.dtype)}")


def _picked(values, label):
    """values[..., label[...]]: the entry of each row's label along the last dim."""
    return squeeze(gather(values, -1, unsqueeze(label, -1)), -1)


def softmax_cross_entropy(logits, label):
    """-sum(label * log_softmax(logits)) over the last dim (label: a distribution per row)."""
    logits, label = tensors(logits, label)
    _at_least_2d(logits, "prediction")
    if tuple(label.shape) != tuple(logits.shape):
        raise ShapeError(f"The size of label {shape_text(label.shape)} must match the size of prediction "
                         f"{shape_text(logits.shape)}")
    _same_dtype(label, logits, ("label", "prediction"))
    return -_sum(label * log_softmax(logits, -1), -1)


def softmax_cross_entropy_grad(dy, label, prob):
    """The gradient of softmax_cross_entropy by its logits: dy * (prob - label), prob the softmax."""
    dy, label, prob = tensors(dy, label, prob)
    _at_least_2d(prob, "prob")
    if dy.ndim != prob.ndim - 1:
        raise ShapeError("The dimension of dy is expected to be less than that of prob by 1, but found "
                         f"{dy.ndim} and {prob.ndim - 1}")
    for i in range(dy.ndim):
        if i >= label.ndim or dy.shape[i] != label.shape[i]:
            got = label.shape[i] if i < label.ndim else None
            raise ShapeError(f"The size of dy ({dy.shape[i]}) must match the size of label ({got}) at dimension {i}")
    if tuple(label.shape) != tuple(prob.shape):
        raise ShapeError(f"The size of label {shape_text(label.shape)} must match the size of prob "
                         f"{shape_text(prob.shape)}")
    _same_dtype(label, prob, ("label", "prob"))
    _same_dtype(dy, prob, ("dy", "prob"))
    return (prob - label) * unsqueeze(dy, -1)


def sparse_cross_entropy(prediction, label, depth):
    """-log(prediction[..., label]) of probabilities over depth classes (the last dim)."""
    prediction, label = tensors(prediction, label)
    _sparse_checks(prediction, label)
    if depth != prediction.shape[-1]:
        raise ShapeError(f"sparse_cross_entropy: depth ({depth}) must be the number of classes, the size of "
                         f"prediction {shape_text(prediction.shape)} at its last dimension")
    return -log(_picked(prediction, label))


def sparse_softmax_cross_entropy(logits, label):
    """-log_softmax(logits)[..., label]: the cross entropy of integer labels, classes on the last dim."""
    logits, label = tensors(logits, label)
    _sparse_checks(logits, label)
    return -_picked(log_softmax(logits, -1), label)


def check_smooth_l1(input, target, beta):
    """OneFlow's checks of smooth_l1_loss's arguments, in its order."""
    input, target = tensors(input, target)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"The size of input {shape_text(input.shape)} must match the size of target "
                         f"{shape_text(target.shape)}")
    if beta < 0:
        raise ShapeError(f"beta must be greater than or equal to 0, but found it to be {beta}")
    _same_dtype(input, target, ("input", "target"))
    return input, target
