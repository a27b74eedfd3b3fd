"""paddle.amp.GradScaler: Paddle's dynamic loss scaling (incr/decr counters) with the inf skip agreed across ranks."""
import warnings

import numpy as np

from ...amp.grad_scaler import agree_found_inf, grads_of, unscale_and_check
from ...creation import tensor as _tensor
from .auto_cast import last_amp_dtype

INIT, UNSCALED, STEPPED = "init", "unscaled", "stepped"


class GradScaler:
    """paddle.amp.GradScaler(enable=True, init_loss_scaling=2.**16, incr_ratio=2.0, decr_ratio=0.5,
    incr_every_n_steps=2000, decr_every_n_nan_or_inf=1, use_dynamic_loss_scaling=True).
    scale(loss); then minimize(optimizer, scaled) (unscale, step unless an inf or nan was found on
    any rank of the parameters' placements, update), or step(optimizer) and update(). As Paddle, the
    first scale() outside float16 amp (the latest auto_cast's dtype is not float16) disables it."""

    def __init__(self, enable=True, init_loss_scaling=2.0 ** 16, incr_ratio=2.0, decr_ratio=0.5,
                 incr_every_n_steps=2000, decr_every_n_nan_or_inf=1, use_dynamic_loss_scaling=True):
        self._enable = bool(enable)
        self._use_dynamic_loss_scaling, self._init_loss_scaling = False, 1.0
        self._scale = 1.0
        if self._enable:
            if not incr_ratio > 1.0:
                raise AssertionError("The incr_ratio must be > 1.0.")
            if not decr_ratio < 1.0:
                raise AssertionError("The decr_ratio must be < 1.0.")
            self._init_loss_scaling = self._scale = float(init_loss_scaling)
            self._incr_ratio, self._decr_ratio = float(incr_ratio), float(decr_ratio)
            self._incr_every_n_steps = int(incr_every_n_steps)
            self._decr_every_n_nan_or_inf = int(decr_every_n_nan_or_inf)
            self._incr_count = self._decr_count = 0
            self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        self._states = {}  # id(optimizer) -> [stage, found_inf]
        self._found_inf = False

    def scale(self, var):
        if self._enable and last_amp_dtype.get() != "float16" and self._use_dynamic_loss_scaling:
            self._enable, self._use_dynamic_loss_scaling, self._init_loss_scaling = False, False, 1.0
            warnings.warn(f"It is not recommended to use dynamic loss scaling for {last_amp_dtype.get()}, so "
                          f"GradScaler is disable by default.")
        if not self._enable:
            return var
        return var * self._scale

    def _state(self, optimizer):
        return self._states.setdefault(id(optimizer), [INIT, False])

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, once per step; an inf or nan on any rank
        of the parameters' placements is found on every rank (one all_reduce)."""
        if not self._enable:
            return
        state = self._state(optimizer)
        if state[0] == UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state[0] == STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        pairs = grads_of(optimizer)
        found = unscale_and_check(pairs, 1.0 / self._scale)
        state[1] = self._found_inf = agree_found_inf(found, [p for p, _ in pairs])
        state[0] = UNSCALED

    def step(self, optimizer):
        if not self._enable:
            return optimizer.step()
        state = self._state(optimizer)
        if state[0] == STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state[0] == INIT:
            self.unscale_(optimizer)
        if not state[1]:
            optimizer.step()
        state[0] = STEPPED
        return None

    def update(self):
        if not self._enable:
            return
        if self._use_dynamic_loss_scaling:
            self._update()
        self._states.clear()

    def minimize(self, optimizer, *args, **kwargs):
        """unscale (unless done), optimizer.minimize unless an inf or nan was found, update."""
        if not self._enable:
            return optimizer.minimize(*args, **kwargs)
        state = self._state(optimizer)
        if state[0] == INIT:
            self.unscale_(optimizer)
        result = (None, None) if state[1] else optimizer.minimize(*args, **kwargs)
        if self._use_dynamic_loss_scaling:
            self._update()
        self._states.clear()
        return result

    def _update(self):
        if self._found_inf:
            self._incr_count, self._decr_count = 0, self._decr_count + 1
            if self._decr_count == self._decr_every_n_nan_or_inf:
                self._scale *= self._decr_ratio
                self._decr_count = 0
        else:
            self._decr_count, self._incr_count = 0, self._incr_count + 1
            if self._incr_count == self._incr_every_n_steps:
                self._scale *= self._incr_ratio
                self._incr_count = 0

    # --- Paddle's accessors -------------------------------------------------------------------
    def is_enable(self):
        return self._enable

    def is_use_dynamic_loss_scaling(self):
        return self._use_dynamic_loss_scaling

    def get_init_loss_scaling(self):
        return self._init_loss_scaling

    def set_init_loss_scaling(self, new_init_loss_scaling):
        self._init_loss_scaling = self._scale = float(new_init_loss_scaling)

    def get_loss_scaling(self):
        return _tensor(np.float32(self._scale))

    def __getattr__(self, name):  # get_/set_ incr_ratio, decr_ratio, incr_every_n_steps, decr_every_n_nan_or_inf
        for prefix in ("get_", "set_"):
            field = "_" + name[len(prefix):]
            if name.startswith(prefix) and field in _FIELDS:
                if prefix == "get_":
                    return lambda: self.__dict__[field]
                return lambda value: self.__dict__.__setitem__(field, type(self.__dict__[field])(value))
        raise AttributeError(f"GradScaler has no attribute {name!r}")

    def state_dict(self):
        if not self._enable:
            return {}
        return {"scale": np.array([self._scale], np.float32), "incr_ratio": self._incr_ratio,
                "decr_ratio": self._decr_ratio, "incr_every_n_steps": self._incr_every_n_steps,
                "decr_every_n_nan_or_inf": self._decr_every_n_nan_or_inf, "incr_count": self._incr_count,
                "decr_count": self._decr_count, "use_dynamic_loss_scaling": self._use_dynamic_loss_scaling}

    def load_state_dict(self, state_dict):
        if not self._enable:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The input state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = self._init_loss_scaling = float(np.asarray(state_dict["scale"]).reshape(-1)[0])
        for field in _FIELDS:
            self.__dict__[field] = state_dict[field[1:]]
        self._use_dynamic_loss_scaling = state_dict["use_dynamic_loss_scaling"]


_FIELDS = ("_incr_ratio", "_decr_ratio", "_incr_every_n_steps", "_decr_every_n_nan_or_inf", "_incr_count",
           "_decr_count")

AmpScaler = GradScaler

__all__ = ["GradScaler", "AmpScaler"]
