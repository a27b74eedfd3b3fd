"""paddle.optimizer: SGD, Momentum, Adam, AdamW with Paddle's arguments (learning_rate=,
parameters=) and methods (step, clear_grad, minimize, get_lr, set_lr, set_state_dict)."""
from ..optim import optimizer as _optim

__all__ = ["SGD", "Momentum", "Adam", "AdamW"]


class _PaddleMethods:
    """What Paddle calls on an optimizer, over gt.optim's."""

    def step(self, closure=None):
        """The update; a Partial gradient (Paddle's rule for a replicated distributed parameter) is
        first reduced to its parameter's layout."""
        from .distributed.auto_parallel.grad_rule import fit_grads_to_parameters
        fit_grads_to_parameters(p for g in self.param_groups for p in g["params"])
        return super().step(closure)

    def clear_grad(self, set_to_zero=True):
        """Zero the gradients in place (Paddle's default), or forget them (set_to_zero=False)."""
        self.zero_grad(set_to_none=not set_to_zero)

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Dygraph: the update from the gradients backward() left. Static mode: the update is
        recorded in the program (after its calls, at every Executor.run)."""
        from . import static
        if static.in_static_mode():
            return static.record_minimize(self, loss)
        self.step()
        return None, [(p, p.grad) for g in self.param_groups for p in g["params"]]

    def get_lr(self):
        group = self.param_groups[0]
        return group["lr"] / group.get("lr_scale", 1.0)

    def set_lr(self, value):
        for group in self.param_groups:
            group["lr"] = float(value) * group.get("lr_scale", 1.0)

    def set_state_dict(self, state_dict):
        self.load_state_dict(state_dict)


def _params(parameters, lr):
    """The parameter groups: one, or one per ParamAttr learning_rate factor (its lr is the
    optimizer's times the factor; set_lr keeps the factors)."""
    if parameters is None:
        from .static import in_static_mode
        if in_static_mode():
            return []  # minimize(loss) gives it the program's parameters
        raise ValueError("parameters= is needed in dygraph mode (the list of parameters to update)")
    params = list(parameters)
    scales = {}
    for p in params:
        scales.setdefault(getattr(p, "optimize_attr", {}).get("learning_rate", 1.0), []).append(p)
    if set(scales) <= {1.0}:
        return params
    return [{"params": ps, "lr": lr * s, "lr_scale": s} for s, ps in scales.items()]


def _decay(weight_decay):
    if weight_decay is None:
        return 0.0
    if not isinstance(weight_decay, (int, float)):
        raise TypeError("weight_decay: a float (L2 coefficient) is supported; regularizer objects are not")
    return float(weight_decay)


def _lazy(optimizer, lazy_mode):
    """Paddle's lazy_mode: a sparse gradient updates its rows only (else every row, as a dense one).
    Paddle's sparse Adam kernel reads the beta powers one step ahead (bias corrections of step t + 1
    at the t-th update, lazy or not; measured on Paddle 3.0.0 and 3.3.1): rows_step_ahead 1 does the same."""
    for where in [optimizer.defaults] + optimizer.param_groups:
        where["lazy_mode"], where["rows_step_ahead"] = bool(lazy_mode), 1


def _rows_dense(optimizer):
    """A sparse gradient updates every row as the dense one would (Paddle's SGD with L2 decay, Momentum)."""
    for where in [optimizer.defaults] + optimizer.param_groups:
        where["rows_dense"] = True


class SGD(_PaddleMethods, _optim.SGD):
    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None, name=None):
        super().__init__(_params(parameters, learning_rate), lr=learning_rate, weight_decay=_decay(weight_decay))
        _rows_dense(self)


class Momentum(_PaddleMethods, _optim.SGD):
    def __init__(self, learning_rate=0.001, momentum=0.9, parameters=None, use_nesterov=False, weight_decay=None,
                 grad_clip=None, name=None):
        super().__init__(_params(parameters, learning_rate), lr=learning_rate, momentum=momentum, nesterov=use_nesterov,
                         weight_decay=_decay(weight_decay))
        _rows_dense(self)


class Adam(_PaddleMethods, _optim.Adam):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, parameters=None, weight_decay=None,
                 grad_clip=None, name=None, lazy_mode=False, amsgrad=False):
        super().__init__(_params(parameters, learning_rate), lr=learning_rate, betas=(beta1, beta2), eps=epsilon,
                         weight_decay=_decay(weight_decay), amsgrad=amsgrad)
        _lazy(self, lazy_mode)


class AdamW(_PaddleMethods, _optim.AdamW):
    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, parameters=None, weight_decay=0.01,
                 grad_clip=None, name=None, lazy_mode=False, amsgrad=False):
        super().__init__(_params(parameters, learning_rate), lr=learning_rate, betas=(beta1, beta2), eps=epsilon,
                         weight_decay=_decay(weight_decay), amsgrad=amsgrad)
        _lazy(self, lazy_mode)
