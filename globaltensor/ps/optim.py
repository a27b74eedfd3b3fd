"""The servers' update rules (sgd, momentum, adagrad, adam) on a block or on gathered rows, in place, state beside them.

Each rule follows Paddle's dygraph optimizer of the same name, which torch.optim computes alike:
  sgd       w -= lr * g
  momentum  v = mu * v + g;  w -= lr * v            (nesterov: w -= lr * (g + mu * v))
  adagrad   G += g * g;  w -= lr * g / (sqrt(G) + eps)
  adam      m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  t += 1
            w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
weight_decay (Paddle's L2Decay regularizer) adds wd * w to g first. For a sparse table the rule runs lazily per
row: only pushed rows and their state move, and adam's t is each row's own count of pushes (Paddle's sparse tables
keep beta1_pow / beta2_pow per row; we keep the count and raise the betas to it, exact in float64)."""
from __future__ import annotations

import numpy as np

from .spec import Rule

STATE_KEYS = {"sgd": (), "momentum": ("velocity",), "adagrad": ("moment",), "adam": ("moment1", "moment2", "step")}


def new_state(rule: Rule, shape: tuple, dtype: np.dtype | str, steps: int = 1) -> dict[str, np.ndarray]:
    """Fresh state for a value of `shape`: float arrays like it, and adam's int64 step counters, `steps` of them
    (1 for a dense block, one per row for a sparse table)."""
    state = {}
    for key in STATE_KEYS[rule.kind]:
        if key == "step":
            state[key] = np.zeros(steps, dtype=np.int64)
        else:
            fill = rule.param("initial_accumulator") if key == "moment" else 0.0
            state[key] = np.full(tuple(shape), fill, dtype=dtype)
    return state


def apply(rule: Rule, value: np.ndarray, grad: np.ndarray, state: dict[str, np.ndarray]) -> None:
    """One update of `value` (any shape; rows first for adam's per-row step) by `grad`, in place on value and
    on the arrays of `state` (those of new_state: for a dense block the step has one entry)."""
    grad = np.asarray(grad, dtype=value.dtype)
    if grad.shape != value.shape:
        raise ValueError(f"{rule.kind} update: gradient shape {grad.shape} does not match the value's {value.shape}")
    decay = rule.param("weight_decay")
    if decay:
        grad = grad + value.dtype.type(decay) * value
    lr = value.dtype.type(rule.lr)
    if rule.kind == "sgd":
        value -= lr * grad
    elif rule.kind == "momentum":
        _momentum(rule, value, grad, state, lr)
    elif rule.kind == "adagrad":
        moment = state["moment"]
        moment += grad * grad
        value -= lr * grad / (np.sqrt(moment) + value.dtype.type(rule.param("epsilon")))
    elif rule.kind == "adam":
        _adam(rule, value, grad, state)
    else:
        raise ValueError(f"unknown rule kind {rule.kind!r}")


def _momentum(rule, value, grad, state, lr):
    mu = value.dtype.type(rule.param("momentum"))
    velocity = state["velocity"]
    velocity *= mu
    velocity += grad
    if rule.param("use_nesterov"):
        value -= lr * (grad + mu * velocity)
    else:
        value -= lr * velocity


def _adam(rule, value, grad, state):
    beta1, beta2 = float(rule.param("beta1")), float(rule.param("beta2"))
    m, v, step = state["moment1"], state["moment2"], state["step"]
    dtype = value.dtype.type
    m *= dtype(beta1)
    m += dtype(1 - beta1) * grad
    v *= dtype(beta2)
    v += dtype(1 - beta2) * grad * grad
    step += 1
    t = step.astype(np.float64)
    bias1 = 1.0 - beta1 ** t
    bias2_sqrt = np.sqrt(1.0 - beta2 ** t)
    per_row = (-1,) + (1,) * (value.ndim - 1)
    if step.size == 1:  # a dense block: one step for all of it
        per_row = ()
        bias1, bias2_sqrt = bias1.reshape(()), bias2_sqrt.reshape(())
    step_size = (rule.lr / bias1).astype(value.dtype).reshape(per_row)
    denom = np.sqrt(v) / bias2_sqrt.astype(value.dtype).reshape(per_row) + dtype(rule.param("epsilon"))
    value -= step_size * m / denom
