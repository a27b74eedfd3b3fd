"""Optimizers: SGD, Adam, AdamW. Updates act on each parameter's local piece in place; state
tensors have the parameter's placement and SBP."""

import functools

import numpy as np

from .. import _C, hooks, scope
from ..creation import zeros_like
from ..sbp import partial_sum


class Optimizer:
    """Parameter groups, per-parameter state, zero_grad and the state_dict round trip. A
    subclass's step() inside a graph's capture is recorded whole (hooks.effect) and replayed."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        inner = cls.__dict__.get("step")
        if inner is not None:
            @functools.wraps(inner)
            def step(self, closure=None):
                if closure is not None and scope.recorder() is not None:
                    raise RuntimeError(f"{cls.__name__}.step(closure) inside a graph: a closure re-runs the step in "
                                       f"Python; call step() without one")
                return hooks.effect(f"{type(self).__name__}.step", functools.partial(inner, self, closure))
            cls.step = step

    def __init__(self, params, defaults):
        params = list(params)
        groups = params if params and isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for g in groups:
            group = dict(defaults)
            group.update(g)
            group["params"] = list(group["params"])
            self.param_groups.append(group)
        self.state = {}

    def zero_grad(self, set_to_none=True):
        """Forget the gradients (set_to_none, the default), or zero them in place, as PyTorch."""
        from ..nn.module import zero_grads
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def _params(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p

    def _state(self, p, names):
        st = self.state.get(id(p))
        if st is None:
            st = self.state[id(p)] = {"step": 0, **{n: zeros_like(p) for n in names}}
        return st

    def _scratch(self, p):
        """A reusable buffer shaped like p's piece (not part of the saved state)."""
        scratch = self.__dict__.setdefault("_scratch_buffers", {})
        buf = scratch.get(id(p))
        if buf is None or buf.shape != p._local.shape or buf.dtype != p._local.dtype:
            buf = scratch[id(p)] = np.empty_like(p._local)
        return buf

    def state_dict(self):
        index = {id(p): i for i, (_, p) in enumerate((g, p) for g in self.param_groups for p in g["params"])}
        state = {index[k]: {n: (v.detach() if hasattr(v, "detach") else v) for n, v in st.items()}
                 for k, st in self.state.items() if k in index}
        groups, start = [], 0
        for g in self.param_groups:
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": list(range(start, start + len(g["params"])))})
            start += len(g["params"])
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyper-parameters and state; state tensors take each parameter's layout."""
        from ..nn.module import _copy_into
        params = [p for g in self.param_groups for p in g["params"]]
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, st in state_dict["state"].items():
            p = params[int(i)]
            mine = self._state(p, [n for n in st if n != "step"])
            mine["step"] = int(st["step"])
            for n, v in st.items():
                if n != "step":
                    _copy_into(mine[n], v, f"state {i}.{n}")


def _no_partial(p, name):
    if p.is_global and partial_sum in p.sbp:
        raise ValueError(f"{name} does not update partial_sum parameters (its update is not linear); "
                         f"convert the parameter to split or broadcast first")


def _axpby(y, x, a, b):
    """y = b * y + a * x in place: one fused pass in _C for float32/float64 numpy arrays, array
    operations otherwise (cupy too)."""
    if type(y) is np.ndarray and y.dtype in _FUSED and x.dtype == y.dtype and y.flags.c_contiguous and x.flags.c_contiguous:
        _C.axpby(y, x, a, b)
        return
    if b != 1:
        y *= b
    y += a * x if a != 1 else x


_FUSED = (np.dtype(np.float32), np.dtype(np.float64))


class SGD(Optimizer):
    """p -= lr * (g + weight_decay * p), with momentum (and Nesterov) buffers."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError("lr, momentum and weight_decay must be non-negative")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p in self._params():
            w, g = p._local, p.grad._local
            tmp = None
            if group["weight_decay"] or group["nesterov"]:
                tmp = self._scratch(p)  # no fresh temporaries: large ones cost page faults every step
            if group["weight_decay"]:
                np.multiply(w, group["weight_decay"], out=tmp)
                tmp += g
                g = tmp
            if group["momentum"]:
                st = self._state(p, ["momentum_buffer"])
                buf = st["momentum_buffer"]._local
                if st["step"] == 0:
                    buf[...] = g
                else:  # buf = momentum * buf + (1 - dampening) * g
                    _axpby(buf, g, 1 - group["dampening"], group["momentum"])
                st["step"] += 1
                if group["nesterov"]:  # g + momentum * buf
                    if g is tmp:
                        tmp += group["momentum"] * buf
                    else:
                        np.multiply(buf, group["momentum"], out=tmp)
                        tmp += g
                    g = tmp
                else:
                    g = buf
            _axpby(w, g, -group["lr"], 1.0)
        return loss


class Adam(Optimizer):
    """Adam (L2 weight decay added to the gradient); AdamW decouples it."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p in self._params():
            _no_partial(p, type(self).__name__)
            names = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])
            st = self._state(p, names)
            st["step"] += 1
            b1, b2 = group["betas"]
            w, g = p._local, p.grad._local
            if group["weight_decay"]:
                if self.decoupled:
                    w *= 1 - group["lr"] * group["weight_decay"]
                else:
                    g = g + group["weight_decay"] * w
            m, v = st["exp_avg"]._local, st["exp_avg_sq"]._local
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            if group["amsgrad"]:
                vmax = st["max_exp_avg_sq"]._local
                np.maximum(vmax, v, out=vmax)
                v = vmax
            step_size = group["lr"] / (1 - b1 ** st["step"])
            denom = np.sqrt(v / (1 - b2 ** st["step"])) + group["eps"]
            w -= (step_size * m / denom).astype(w.dtype, copy=False)
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01)."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)


