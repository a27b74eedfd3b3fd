"""Optimizer updates as registered ops: each writes its parameter and state pieces in place.

An update's inputs are the parameter, its gradient, its state tensors (written in place too),
then its scalars: the learning rate and, for stateful ones, the step (the number of this update,
1 first), read from the optimizer at every call, so a scheduler's lr needs no recapture. Each
kernel returns the arrays it wrote (the parameter first, then the states). Updates are not
differentiable (no backward: an optimizer runs them outside autograd).

SBP rows (one mesh axis; the scalars are always B):
    S(k), ..., S(k) -> S(k), ...   update(w, g, m)[i] = update(w[i], g[i], m[i]): element-wise, so a
                                   state split like its parameter stays split and no collective runs
    B, ..., B -> B, ...            every rank updates its whole copy alike
    P, ..., P -> P, ...            (SGD and momentum only) linear in (w, g, m) together:
                                   sum_r (w_r - lr * (g_r + wd * w_r)) = w - lr * (g + wd * w)
Adam's update divides by sqrt(v): not linear, no P row (optimizer.py says so before it runs).
"""
import threading

import numpy as np

from .. import _native
from ..registry import op
from ..sbp import broadcast as B
from ..sbp import partial_sum as P
from ..sbp import split

_FUSED = (np.dtype(np.float32), np.dtype(np.float64))


def _axpby(y, x, a, b):
    """y = b * y + a * x in place: one fused pass in _native for float32/float64 numpy arrays, array
    operations otherwise (cupy too)."""
    if type(y) is np.ndarray and y.dtype in _FUSED and x.dtype == y.dtype and y.flags.c_contiguous and x.flags.c_contiguous:
        _native.axpby(y, x, a, b)
        return
    if b != 1:
        y *= b
    y += a * x if a != 1 else x


_local = threading.local()


def _scratch(like):
    """A reusable buffer shaped like `like`, this thread's (no fresh temporaries: large ones cost
    page faults every step); only a kernel's temporary, never kept past its call."""
    try:
        found = _local.buffers
    except AttributeError:
        found = _local.buffers = {}
    key = (like.shape, like.dtype, type(like))
    buf = found.get(key)
    if buf is None:
        buf = found[key] = np.empty_like(like)
    return buf


def update_rules(n_scalars, linear):
    """The rows of an update over (parameter, gradient, states..., scalars...), which writes every
    array but the gradient (the docstring above gives the algebra); its meta: the written inputs'
    shapes and dtypes."""
    def rules(in_shapes, out_shapes, static):
        arrays = len(in_shapes) - n_scalars
        scalars, n = (B,) * n_scalars, arrays - 1
        rows = [((split(d),) * arrays + scalars, (split(d),) * n) for d in range(len(in_shapes[0]))]
        rows.append(((B,) * arrays + scalars, (B,) * n))
        if linear:
            rows.append(((P,) * arrays + scalars, (P,) * n))
        return rows

    def meta(in_shapes, in_dtypes, static):
        written = [0] + list(range(2, len(in_shapes) - n_scalars))
        return [in_shapes[i] for i in written], [in_dtypes[i] for i in written]
    return rules, meta


_SGD_RULES, _SGD_META = update_rules(1, linear=True)


@op("sgd_update", _SGD_RULES, meta=_SGD_META)
def sgd_update(w, g, lr, *, weight_decay=0.0, maximize=False):
    """w -= lr * (g + weight_decay * w) (maximize: -g for g)."""
    g = -g if maximize else g
    if weight_decay:
        tmp = _scratch(w)
        np.multiply(w, weight_decay, out=tmp)
        tmp += g
        g = tmp
    _axpby(w, g, -float(lr), 1.0)
    return w


_MOMENTUM_RULES, _MOMENTUM_META = update_rules(2, linear=True)


@op("momentum_update", _MOMENTUM_RULES, meta=_MOMENTUM_META)
def momentum_update(w, g, buf, lr, step, *, momentum, dampening=0.0, weight_decay=0.0, nesterov=False,
                    maximize=False):
    """g' = g + weight_decay * w; buf = g' at step 1, else momentum * buf + (1 - dampening) * g';
    w -= lr * (g' + momentum * buf if nesterov else buf) (maximize: -g for g)."""
    g = -g if maximize else g
    tmp = _scratch(w) if weight_decay or nesterov else None
    if weight_decay:
        np.multiply(w, weight_decay, out=tmp)
        tmp += g
        g = tmp
    if int(step) == 1:
        buf[...] = g
    else:
        _axpby(buf, g, 1 - dampening, momentum)
    if nesterov:
        if g is tmp:
            tmp += momentum * buf
        else:
            np.multiply(buf, momentum, out=tmp)
            tmp += g
        g = tmp
    else:
        g = buf
    _axpby(w, g, -float(lr), 1.0)
    return w, buf


def _fusable(w, arrays, scalars):
    """Whether _native.adam_update takes these: Python scalars (numpy rounds them to w's dtype) and
    C-contiguous numpy arrays of w's float32/float64 dtype, w writeable (loops: no generator frames)."""
    for x in scalars:
        if type(x) not in (float, int):
            return False
    if type(w) is not np.ndarray or w.dtype not in _FUSED or not w.flags.writeable:
        return False
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != w.dtype or not a.flags.c_contiguous:
            return False
    return True


def _adam(w, g, m, v, rest, betas, eps, weight_decay, amsgrad, decoupled):
    """Adam's update in place; rest = ([max_exp_avg_sq,] lr, step). float32/float64 numpy arrays:
    _native.adam_update, one pass with the bits of the numpy passes below (about a dozen, with
    full-size temporaries); other arrays (cupy, half types): those passes."""
    lr, step = float(rest[-2]), int(rest[-1])
    b1, b2 = betas
    vmax = rest[0] if amsgrad else None
    arrays = (w, g, m, v) + ((vmax,) if amsgrad else ())
    if _fusable(w, arrays, (b1, b2, eps, weight_decay)):
        _native.adam_update(w, g, m, v, vmax, float(b1), float(b2), float(eps), float(weight_decay),
                            1 - lr * weight_decay, lr / (1 - b1 ** step), 1 - b2 ** step, bool(decoupled))
        return (w, m, v) + ((vmax,) if amsgrad else ())
    if weight_decay:
        if decoupled:
            w *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * w
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    written = (w, m, v)
    if amsgrad:
        vmax = rest[0]
        np.maximum(vmax, v, out=vmax)
        v = vmax
        written += (vmax,)
    step_size = lr / (1 - b1 ** step)
    denom = np.sqrt(v / (1 - b2 ** step)) + eps
    w -= (step_size * m / denom).astype(w.dtype, copy=False)
    return written


_ADAM_RULES, _ADAM_META = update_rules(2, linear=False)


@op("adam_update", _ADAM_RULES, meta=_ADAM_META)
def adam_update(w, g, exp_avg, exp_avg_sq, *rest, betas, eps, weight_decay=0.0, amsgrad=False, maximize=False):
    """Adam, L2 weight decay added to the gradient; rest = ([max_exp_avg_sq,] lr, step); maximize: -g for g."""
    return _adam(w, -g if maximize else g, exp_avg, exp_avg_sq, rest, betas, eps, weight_decay, amsgrad,
                 decoupled=False)


@op("adamw_update", _ADAM_RULES, meta=_ADAM_META)
def adamw_update(w, g, exp_avg, exp_avg_sq, *rest, betas, eps, weight_decay=0.0, amsgrad=False, maximize=False):
    """AdamW: w *= 1 - lr * weight_decay first (decoupled), then Adam's step; rest as adam_update."""
    return _adam(w, -g if maximize else g, exp_avg, exp_avg_sq, rest, betas, eps, weight_decay, amsgrad,
                 decoupled=True)
