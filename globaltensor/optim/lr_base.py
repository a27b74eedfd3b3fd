"""The base of the learning-rate schedules: base_lrs, last_epoch, step([epoch]), the chained and closed forms, state_dict."""
from .. import hooks


class LRScheduler:
    """The base: base_lrs (each group's initial_lr), last_epoch, step([epoch]), get_last_lr()."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        if last_epoch == -1:
            self.base_lrs = [g.setdefault("initial_lr", g["lr"]) for g in optimizer.param_groups]
        else:
            missing = [i for i, g in enumerate(optimizer.param_groups) if "initial_lr" not in g]
            if missing:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{missing[0]}] when resuming "
                               "an optimizer (last_epoch != -1)")
            self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        """The next lrs from the present ones (the chainable form)."""
        raise NotImplementedError

    def closed_form(self):
        """The lrs of epoch last_epoch from base_lrs alone (step(epoch)); the chained form by default."""
        return self.get_lr()

    def step(self, epoch=None):
        """The next epoch's lrs (epoch given: that epoch's, from the closed form). Inside a graph's
        capture: recorded, run at each replay."""
        hooks.effect(f"{type(self).__name__}.step", lambda: self._step(epoch))

    def _step(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self.closed_form()
        self._set(values)

    def _set(self, values):
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)

    def _lrs(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimizer; functions (LambdaLR's) are not saved, as PyTorch."""
        return {k: (None if callable(v) else v) for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state):
        self.__dict__.update({k: v for k, v in state.items() if v is not None or k not in self.__dict__})
