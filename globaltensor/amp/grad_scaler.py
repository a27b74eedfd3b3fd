"""gt.amp.GradScaler: dynamic loss scaling with the inf/nan skip agreed by every rank in one collective."""
import numpy as np

from ..autograd import no_grad
from ..backends.devices import array_module
from ..distributed.collectives import all_reduce
from ..distributed.group import Group
from ..tensor import Tensor

READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"


def grads_of(optimizer):
    """(parameter, gradient) for each parameter of the optimizer that has a gradient."""
    return [(p, p.grad) for group in optimizer.param_groups for p in group["params"] if p.grad is not None]


def unscale_and_check(pairs, inv_scale):
    """Each gradient times inv_scale, in place; whether this rank's pieces held an inf or nan."""
    found = False
    with no_grad():
        for _, g in pairs:
            piece = g._local
            if piece.size:
                found = found or not bool(array_module(piece).isfinite(piece).all())
            g.mul_(inv_scale)
    return found


def agree_found_inf(found, params):
    """Every rank of the parameters' placements learns whether any of them found an inf: one
    all_reduce(max) of one number over the union of those ranks (none for local parameters or one
    rank), so every rank skips alike. Each rank holds the same parameters' placements: the same group."""
    ranks = sorted({int(r) for p in params if p._placement is not None for r in p._placement.ranks.flat})
    if len(ranks) < 2:
        return found
    flag = np.array([1.0 if found else 0.0], np.float32)
    all_reduce(flag, "max", group=Group(ranks))
    return bool(flag[0])


class GradScaler:
    """PyTorch's torch.amp.GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True): scale(loss) before backward;
    step(optimizer) unscales the gradients and runs optimizer.step() unless one of them holds an inf
    or nan on any rank of the parameters' placements (agreed with one collective); update() halves
    the scale after a skipped step (backoff_factor) and grows it after growth_interval clean ones.

    Examples:
        >>> scaler = gt.amp.GradScaler()
        >>> with gt.autocast("cpu", dtype=gt.float16):
        ...     loss = loss_fn(model(x), y)
        >>> scaler.scale(loss).backward()
        >>> scaler.step(opt); scaler.update(); opt.zero_grad()
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if isinstance(device, (int, float)) and not isinstance(device, bool):  # OneFlow's GradScaler(init_scale, ...)
            device, init_scale = "cpu", device
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: the growth factor must be > 1.0, got {growth_factor!r}")
        if not backoff_factor < 1.0:
            raise ValueError(f"GradScaler: the backoff factor must be < 1.0, got {backoff_factor!r}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError(f"GradScaler: growth_interval must be an int >= 1, got {growth_interval!r}")
        self._device, self._enabled = device, bool(enabled)
        self._scale, self._growth_tracker = float(init_scale), 0
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = growth_interval
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}; cleared by update()
        self.allow_fp16_grads = False  # PyTorch refuses float16 gradients (Paddle's face allows them)

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError(f"GradScaler.scale: outputs must be a Tensor or an iterable of Tensors, got "
                         f"{type(outputs).__name__}")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": READY, "found_inf": None})

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place, and record (agreed across ranks)
        whether any held an inf or nan. At most once per optimizer between update() calls."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        pairs = grads_of(optimizer)
        if not self.allow_fp16_grads and any(g.dtype.name == "float16" for _, g in pairs):
            raise ValueError("Attempting to unscale FP16 gradients.")
        found = unscale_and_check(pairs, 1.0 / self._scale)
        state["found_inf"] = agree_found_inf(found, [p for p, _ in pairs])
        state["stage"] = UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """unscale_ (unless done already), then optimizer.step(*args, **kwargs) unless an inf or nan
        was found on any rank; returns what step returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = STEPPED
        return result

    def update(self, new_scale=None):
        """The next scale: new_scale when given; else backoff after an inf (any optimizer), growth
        after growth_interval steps without one."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values() if s["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._advance(any(found))
        self._per_optimizer.clear()

    def _advance(self, found_inf):
        if found_inf:
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
            return
        self._growth_tracker += 1
        if self._growth_tracker == self._growth_interval:
            grown = float(np.float32(self._scale * self._growth_factor))
            self._scale = grown if np.isfinite(grown) else self._scale
            self._growth_tracker = 0

    # --- reading and setting it (PyTorch's accessors) --------------------------------------------
    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def is_enabled(self):
        return self._enabled

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        return self._growth_tracker

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


class StaticGradScaler(GradScaler):
    """OneFlow's flow.amp.StaticGradScaler(scale_factor): a fixed loss scale, never updated."""

    def __init__(self, scale_factor):
        if not scale_factor > 0:
            raise ValueError(f"StaticGradScaler: scale_factor must be > 0, got {scale_factor!r}")
        super().__init__("cpu", init_scale=float(scale_factor))

    def _advance(self, found_inf):
        pass


__all__ = ["GradScaler", "StaticGradScaler", "agree_found_inf", "grads_of", "unscale_and_check"]
