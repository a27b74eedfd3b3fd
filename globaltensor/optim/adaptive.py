"""RMSprop and Adagrad as PyTorch's: each an update op (element-wise, so split states stay split) beside its optimizer."""
import numpy as np

from ..registry import op
from .optimizer import Optimizer, _no_differentiable
from .updates import update_rules

_RULES, _META = update_rules(2, linear=False)  # lr, step; dividing by a root: no P row


@op("rmsprop_update", _RULES, meta=_META)
def rmsprop_update(w, g, square_avg, *rest, alpha, eps, weight_decay=0.0, momentum=0.0, centered=False,
                   maximize=False):
    """square_avg = alpha * square_avg + (1 - alpha) * g^2; avg = sqrt(square_avg - grad_avg^2 if
    centered else square_avg) + eps; w -= lr * (buf = momentum * buf + g / avg if momentum else
    g / avg). rest = ([momentum_buffer,] [grad_avg,] lr, step)."""
    lr = float(rest[-2])
    states = list(rest[:-2])
    buf = states.pop(0) if momentum else None
    grad_avg = states.pop(0) if centered else None
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * w
    square_avg *= alpha
    square_avg += (1 - alpha) * g * g
    if centered:
        grad_avg *= alpha
        grad_avg += (1 - alpha) * g
        avg = np.sqrt(square_avg - grad_avg * grad_avg) + eps
    else:
        avg = np.sqrt(square_avg) + eps
    if momentum:
        buf *= momentum
        buf += g / avg
        w -= lr * buf
    else:
        w -= (lr * g / avg).astype(w.dtype, copy=False)
    return (w, square_avg) + ((buf,) if momentum else ()) + ((grad_avg,) if centered else ())


class RMSprop(Optimizer):
    """RMSprop (Hinton's), centered optional, with momentum and L2 weight decay: rmsprop_update."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or alpha < 0:
            raise ValueError("lr, alpha, eps, momentum and weight_decay must be non-negative")
        _no_differentiable(differentiable)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize, foreach=foreach, capturable=capturable))

    def _plan(self, group):
        names = ("square_avg",) + (("momentum_buffer",) if group["momentum"] else ()) + \
            (("grad_avg",) if group["centered"] else ())
        return "rmsprop_update", names, {"alpha": group["alpha"], "eps": group["eps"],
                                         "weight_decay": group["weight_decay"], "momentum": group["momentum"],
                                         "centered": bool(group["centered"]), "maximize": bool(group["maximize"])}


@op("adagrad_update", _RULES, meta=_META)
def adagrad_update(w, g, state_sum, lr, step, *, lr_decay=0.0, eps=1e-10, weight_decay=0.0,
                   initial_accumulator_value=0.0, maximize=False):
    """state_sum += g^2 (starting at initial_accumulator_value); w -= lr / (1 + (step - 1) * lr_decay)
    * g / (sqrt(state_sum) + eps)."""
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * w
    if int(step) == 1 and initial_accumulator_value:
        state_sum += initial_accumulator_value
    state_sum += g * g
    clr = float(lr) / (1 + (int(step) - 1) * lr_decay)
    w -= (clr * g / (np.sqrt(state_sum) + eps)).astype(w.dtype, copy=False)
    return w, state_sum


class Adagrad(Optimizer):
    """Adagrad with lr decay, L2 weight decay and an initial accumulator: adagrad_update."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if lr < 0 or lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
            raise ValueError("lr, lr_decay, weight_decay, initial_accumulator_value and eps must be non-negative")
        _no_differentiable(differentiable)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, maximize=maximize,
                                      foreach=foreach, fused=fused))

    def _plan(self, group):
        return "adagrad_update", ("sum",), {
            "lr_decay": group["lr_decay"], "eps": group["eps"], "weight_decay": group["weight_decay"],
            "initial_accumulator_value": group["initial_accumulator_value"], "maximize": bool(group["maximize"])}
