"""Learning-rate schedules with PyTorch's classes, arguments and values, each step chained on the current lr.

Each schedule moves `group["lr"]` from its present value (so ChainedScheduler composes them, as
PyTorch), and has a closed form of its epoch used by `step(epoch)` (the base, LRScheduler, is in
lr_base.py). Inside a graph's capture a step is recorded and runs at each replay (hooks.effect).
The cyclic ones (warm restarts, CyclicLR, OneCycleLR) and ReduceLROnPlateau are in lr_cycles.py,
re-exported here.
"""
import math
import types
from bisect import bisect_right
from collections import Counter

from .. import hooks
from .lr_base import LRScheduler
from .lr_cycles import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR, ReduceLROnPlateau  # noqa: F401 - here as in PyTorch


class LambdaLR(LRScheduler):
    """lr = base * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * f(self.last_epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        state = super().state_dict()
        state["lr_lambdas"] = [None if isinstance(f, types.FunctionType) or not hasattr(f, "__dict__") else
                               dict(f.__dict__) for f in self.lr_lambdas]  # a callable object's attributes
        return state

    def load_state_dict(self, state):
        lambdas = state.get("lr_lambdas") or []
        super().load_state_dict({k: v for k, v in state.items() if k != "lr_lambdas"})
        for f, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                f.__dict__.update(saved)


class MultiplicativeLR(LambdaLR):
    """lr *= lr_lambda(epoch) at each epoch after the first."""

    def get_lr(self):
        if self.last_epoch > 0:
            return [lr * f(self.last_epoch) for lr, f in zip(self._lrs(), self.lr_lambdas)]
        return self._lrs()


class StepLR(LRScheduler):
    """lr = base * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def closed_form(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base * gamma ** (the milestones passed; a milestone given twice counts twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        times = self.milestones.get(self.last_epoch, 0)
        return [lr * self.gamma ** times for lr in self._lrs()] if times else self._lrs()

    def closed_form(self):
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [b * self.gamma ** passed for b in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base * factor until total_iters, then base."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch == self.total_iters:
            return [lr / self.factor for lr in self._lrs()]
        return self._lrs()

    def closed_form(self):
        return [b * (self.factor if self.last_epoch < self.total_iters else 1.0) for b in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = base * factor, the factor going linearly from start_factor to end_factor in total_iters."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1; "
                             "the ending one between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, span = self.last_epoch, self.end_factor - self.start_factor
        if t == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if t > self.total_iters:
            return self._lrs()
        ratio = 1 + span / (self.total_iters * self.start_factor + (t - 1) * span)
        return [lr * ratio for lr in self._lrs()]

    def closed_form(self):
        t = min(self.last_epoch, self.total_iters)
        factor = self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters
        return [b * factor for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return self._lrs() if self.last_epoch == 0 else [lr * self.gamma for lr in self._lrs()]

    def closed_form(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, n = self.last_epoch, self.total_iters
        if t == 0 or t > n:
            return self._lrs()
        ratio = ((1 - t / n) / (1 - (t - 1) / n)) ** self.power
        return [lr * ratio for lr in self._lrs()]

    def closed_form(self):
        return [b * (1 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, for every epoch: past
    T_max the cosine goes on (back up to base at 2 T_max), as PyTorch's schedule."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803 - PyTorch's name
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, T, low = self.last_epoch, self.T_max, self.eta_min
        if t == 0:
            return self._lrs()
        if (t - 1 - T) % (2 * T) == 0:  # the trough: the ratio below would divide by zero
            return [lr + (b - low) * (1 - math.cos(math.pi / T)) / 2 for lr, b in zip(self._lrs(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [ratio * (lr - low) + low for lr in self._lrs()]

    def closed_form(self):
        cosine = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (b - self.eta_min) * cosine for b in self.base_lrs]


class SequentialLR(LRScheduler):
    """schedulers[i] from milestones[i - 1] on, each restarted at its epoch 0 there."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if not schedulers:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ValueError("SequentialLR expects all schedulers to belong to the same optimizer")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got {len(schedulers)} and {len(milestones)}")
        self.optimizer, self._schedulers, self._milestones = optimizer, list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:  # the children's first steps undone; the first one's redone
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._step()
        self._last_lr = first.get_last_lr()

    def step(self, epoch=None):
        hooks.effect("SequentialLR.step", self._advance)

    def _advance(self):
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        child = self._schedulers[i]
        child._step(0 if i > 0 and self._milestones[i - 1] == self.last_epoch else None)
        self._last_lr = child.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state):
        state = dict(state)
        for s, saved in zip(self._schedulers, state.pop("_schedulers")):
            s.load_state_dict(saved)
        self.__dict__.update(state)


class ChainedScheduler(SequentialLR):
    """Every scheduler stepped in turn each epoch: their changes to the lr compose."""

    def __init__(self, schedulers, optimizer=None):
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but got no scheduler.")
        self.optimizer = optimizer if optimizer is not None else schedulers[0].optimizer
        if any(s.optimizer is not self.optimizer for s in schedulers):
            raise ValueError("ChainedScheduler expects all schedulers to belong to the same optimizer")
        self._schedulers, self._milestones = list(schedulers), []
        self._last_lr = schedulers[-1].get_last_lr()

    def step(self, epoch=None):
        hooks.effect("ChainedScheduler.step", self._advance)

    def _advance(self):
        for s in self._schedulers:
            s._step()
        self._last_lr = self._schedulers[-1].get_last_lr()


_LRScheduler = LRScheduler  # PyTorch's older name

