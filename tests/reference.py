"""Numpy references for the training tests: a ReLU MLP trained with MSE and SGD, in float64."""
import numpy as np

import globaltensor as gt
import globaltensor.nn as nn


def draws(seed, layers, x_shape, y_shape, steps):
    """The values a script draws after gt.manual_seed(seed) (None: the default seed): one
    nn.Linear(i, o) per layer, then per step x and y, as float64 numpy arrays."""
    saved = gt.random.get_rng_state()
    gt.random.set_rng_state((gt.random.DEFAULT_SEED if seed is None else seed, 0))
    try:
        params = []
        for i, o in layers:
            lin = nn.Linear(i, o)
            params.append((lin.weight.numpy().astype(np.float64), lin.bias.numpy().astype(np.float64)))
        data = [(gt.randn(*x_shape).numpy().astype(np.float64), gt.randn(*y_shape).numpy().astype(np.float64))
                for _ in range(steps)]
    finally:
        gt.random.set_rng_state(saved)
    return params, data


def train_mlp(params, data, lr):
    """Losses of SGD on relu(x @ W1.T + b1) ... @ Wn.T + bn against y (mean squared error)."""
    params = [(w.copy(), b.copy()) for w, b in params]
    losses = []
    for x, y in data:
        acts = [x]
        for j, (w, b) in enumerate(params):
            z = acts[-1] @ w.T + b
            acts.append(np.maximum(z, 0) if j < len(params) - 1 else z)
        out = acts[-1]
        losses.append(float(np.mean((out - y) ** 2)))
        g = 2 * (out - y) / out.size
        grads = []
        for j in reversed(range(len(params))):
            w, _ = params[j]
            grads.append((g.T @ acts[j], g.sum(0)))
            g = (g @ w) * (acts[j] > 0) if j > 0 else None
        for (w, b), (dw, db) in zip(params, reversed(grads)):
            w -= lr * dw
            b -= lr * db
    return losses
