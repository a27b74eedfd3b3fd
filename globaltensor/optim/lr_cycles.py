"""Cyclic learning-rate schedules and the plateau rule, as PyTorch's: CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR, ReduceLROnPlateau."""
import math

from .. import hooks
from .lr_base import LRScheduler


def _per_group(name, optimizer, value):
    """One value per parameter group (a list or tuple of them, or one for all)."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups: "
                             f"{len(optimizer.param_groups)} values, got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _momentum_key(optimizer):
    """Where a cycled momentum goes: "betas" (its beta1) or "momentum"; ValueError for neither."""
    if "betas" in optimizer.defaults:
        return "betas"
    if "momentum" in optimizer.defaults:
        return "momentum"
    raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled")


def _set_momentum(group, key, value):
    if key == "betas":
        group["betas"] = (value, *tuple(group["betas"])[1:])
    else:
        group["momentum"] = value


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine from base to eta_min over T_i epochs, then a restart at base; T_i starts at T_0 and is
    multiplied by T_mult at each restart. step(epoch) takes fractional epochs (batch-wise)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803 - PyTorch's names
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        cosine = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (b - self.eta_min) * cosine for b in self.base_lrs]

    def _step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:  # the restart n where epoch falls: T_0 (T_mult^n - 1) / (T_mult - 1) <= epoch
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n
        self.last_epoch = math.floor(epoch)
        self._set(self.get_lr())


class CyclicLR(LRScheduler):
    """The lr goes from base_lr up to max_lr in step_size_up steps and back down in step_size_down
    (triangular), the swing halved each cycle (triangular2) or scaled by gamma ** step (exp_range),
    or by scale_fn; the momentum (or Adam's beta1) goes the other way between max_ and base_momentum."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma, self.custom_scale_fn = mode, gamma, scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.momentum_key = _momentum_key(optimizer)
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m, group in zip(self.max_momentums, optimizer.param_groups):
                    _set_momentum(group, self.momentum_key, m)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x):
        if self.custom_scale_fn is not None:
            return self.custom_scale_fn(x)
        return {"triangular": 1.0, "triangular2": 1 / 2.0 ** (x - 1)}.get(self.mode, self.gamma ** x)

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        height = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                _set_momentum(group, self.momentum_key, high - (high - low) * height * scale)
        return [b + (m - b) * height * scale for b, m in zip(self.base_lrs, self.max_lrs)]

    def state_dict(self):
        state = super().state_dict()
        state.pop("custom_scale_fn", None)
        return state


class OneCycleLR(LRScheduler):
    """One cycle over total_steps (or epochs * steps_per_epoch) batches: the lr from max_lr /
    div_factor up to max_lr in pct_start of them, then down to that / final_div_factor (three_phase:
    back to the start first), by cosine or linear annealing; the momentum the other way."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
            total_steps = epochs * steps_per_epoch
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        up = float(pct_start * total_steps) - 1
        self.phases = ([(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                        (float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                        (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")] if three_phase else
                       [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                        (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")])
        if last_epoch == -1:
            for top, group in zip(_per_group("max_lr", optimizer, max_lr), optimizer.param_groups):
                group["initial_lr"], group["max_lr"] = top / div_factor, top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.momentum_key = _momentum_key(optimizer)
            if last_epoch == -1:
                for high, low, group in zip(_per_group("max_momentum", optimizer, max_momentum),
                                            _per_group("base_momentum", optimizer, base_momentum),
                                            optimizer.param_groups):
                    _set_momentum(group, self.momentum_key, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(f"Tried to step {t} times. The specified number of total steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, m_from, m_to) in enumerate(self.phases):
                if t <= end or i == len(self.phases) - 1:
                    pct = (t - start) / (end - start)
                    lrs.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        _set_momentum(group, self.momentum_key, self._anneal(group[m_from], group[m_to], pct))
                    break
                start = end
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """lr *= factor (down to min_lr) once the metric passed to step() has not improved (by threshold,
    rel or abs, in mode min or max) for more than patience epochs; then cooldown epochs of rest."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"mode {mode!r} / threshold_mode {threshold_mode!r}: min or max / rel or abs")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = threshold, threshold_mode, cooldown, eps
        self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _better(self, value):
        if self.mode == "min":
            return value < (self.best * (1 - self.threshold) if self.threshold_mode == "rel" else self.best - self.threshold)
        return value > (self.best * (1 + self.threshold) if self.threshold_mode == "rel" else self.best + self.threshold)

    def step(self, metrics, epoch=None):
        """One epoch's metric (a number or a 0-d tensor: read on every rank alike)."""
        value = float(metrics)
        hooks.effect("ReduceLROnPlateau.step", lambda: self._observe(value, epoch))

    def _observe(self, value, epoch):
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(group["lr"] * self.factor, low)
                if group["lr"] - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0
