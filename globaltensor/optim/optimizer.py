"""Optimizers: SGD, Adam, AdamW. Each step runs a registered update op (updates.py) per parameter
on its local piece, in place; state tensors have the parameter's placement and SBP."""

import functools

import numpy as np

from .. import hooks, scope
from ..creation import zeros_like
from ..registry import REGISTRY
from ..sbp import broadcast
from ..tensor import Tensor
from . import row_updates, updates  # noqa: F401 - registers the update ops


class Optimizer:
    """Parameter groups, per-parameter state, zero_grad and the state_dict round trip. step() runs
    each group's update op (_plan); inside a graph's capture each update is one instruction. A
    subclass's own step() inside a capture is recorded whole (hooks.effect) and replayed."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        inner = cls.__dict__.get("step")
        if inner is not None:
            @functools.wraps(inner)
            def step(self, closure=None):
                _no_closure_inside_a_graph(cls, closure)
                return hooks.effect(f"{type(self).__name__}.step", functools.partial(inner, self, closure))
            cls.step = step

    def __init__(self, params, defaults):
        params = list(params)
        groups = params if params and isinstance(params[0], dict) else [{"params": params}]
        self.defaults, self.param_groups, self.state = dict(defaults), [], {}
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        """One more group of parameters (a dict: "params" a tensor or tensors, and options; the
        others from the constructor's defaults), as PyTorch's: a parameter is in one group only."""
        group = dict(self.defaults)
        group.update(param_group)
        params = group["params"]
        group["params"] = [params] if hasattr(params, "requires_grad") else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):  # repeats inside one group: PyTorch only warns
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Forget the gradients (set_to_none, the default), or zero them in place, as PyTorch."""
        from ..nn.module import zero_grads
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """One update of every parameter with a gradient: its group's update op on its pieces, lr
        and step read now (inside a graph's capture: one instruction per parameter, lr and step
        read at each replay, so a scheduler needs no recapture)."""
        _no_closure_inside_a_graph(type(self), closure)
        rec = scope.recorder()
        if rec is not None:
            todo = self._todo()
            if all(rec.knows(p.grad) for _, p, _ in todo):
                zero = getattr(self, "_zero", None)  # ZeRO (zero.py): a sharded update records its own boxing
                fitted = [(group, p, None if _on_shard(zero, p) else _fitted_grad(p, plan), plan)
                          for group, p, plan in todo]  # before any count
                counts = [f"{type(self).__name__}[{rec.name_of(p)}].step" for _, p, plan in todo if plan[1]]
                hooks.effect(f"{type(self).__name__}.step", functools.partial(_advance, self, todo),
                             {"advance": counts})
                for group, p, g, plan in fitted:
                    _record_update(rec, self, group, p, g, plan, zero if g is None else None)
                return None
            # a gradient made outside the recording (an effect replaced it): the step recorded whole
            return hooks.effect(f"{type(self).__name__}.step", self._step_now)
        loss = closure() if closure is not None else None
        self._step_now()
        return loss

    def _step_now(self):
        """Eagerly: each parameter's update kernel on its pieces (the registry's op, without
        dispatch: _fit checks the op's rows once per layout, and an update boxes nothing)."""
        state, zero = self.state, getattr(self, "_zero", None)
        for group in self.param_groups:
            opdef = None
            for p in group["params"]:
                if p.grad is None:
                    continue
                if type(p.grad) is not Tensor and getattr(p.grad, "is_rows", False):  # a sparse embedding's rows
                    self._step_rows(group, p)
                    continue
                if opdef is None:
                    name, names, static = self._plan(group)
                    opdef, lr = REGISTRY[name], group["lr"]
                if _on_shard(zero, p):  # ZeRO: the update on p's shard
                    st = (state.get(id(p)) or self._state(p, names)) if names else None
                    if st is not None:
                        st["step"] += 1
                    zero.update(opdef, p, [st[n] for n in names], lr, None if st is None else st["step"], static)
                elif names:
                    st = state.get(id(p)) or self._state(p, names)
                    arrays = [p, p.grad] + [st[n] for n in names]
                    if p._placement is not None:
                        arrays = _fit(opdef, p, arrays, 2)  # before the count: a refused update counts none
                    st["step"] += 1
                    opdef.kernel(*[t._local for t in arrays], lr, st["step"], **static)
                elif p._placement is None:
                    opdef.kernel(p._local, p.grad._local, lr, **static)
                else:
                    w, g = _fit(opdef, p, [p, p.grad], 1)
                    opdef.kernel(w._local, g._local, lr, **static)

    def _step_rows(self, group, p):
        """The update from a row gradient: _rows_plan's op on its rows only; or, where the optimizer's
        rule is the dense one (Paddle's Adam without lazy_mode), the dense update. A group's
        rows_step_ahead (Paddle's: 1) shifts the step its bias corrections read."""
        name, names, static = self._rows_plan(group, p)
        rows, summed = p.grad.coalesced()
        if name is None:
            name, names, static = self._plan(group)
            args = [np.zeros(p._local.shape, p._local.dtype)]
            args[0][rows] = summed
        else:
            args, static = [rows, summed], {**static, "unique": True}
        kernel = REGISTRY[name].kernel
        if names:
            st = self.state.get(id(p)) or self._state(p, names)
            st["step"] += 1
            kernel(p._local, *args, *[st[n]._local for n in names], group["lr"],
                   st["step"] + group.get("rows_step_ahead", 0), **static)
        else:
            kernel(p._local, *args, group["lr"], **static)

    def _rows_plan(self, group, p):
        """(row update op, state names, static attributes) for a row gradient; (None, ...): densify."""
        raise RuntimeError(f"{type(self).__name__} does not support sparse gradients (a sparse embedding's row "
                           f"gradient of {tuple(p.shape)}); use SGD, or embedding without sparse=True")

    def _plan(self, group):
        """(update op name, state names, static attributes) of a group's update."""
        raise NotImplementedError(f"{type(self).__name__} defines step() or _plan(group)")

    def _todo(self):
        """[(group, parameter, plan)] for the parameters with a gradient (each group planned once)."""
        plans, todo = {}, []
        for group, p in self._params():
            plan = plans.get(id(group))
            if plan is None:
                plan = plans[id(group)] = self._plan(group)
            todo.append((group, p, plan))
        return todo

    def _params(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p

    def _state(self, p, names):
        st = self.state.get(id(p))
        if st is None:
            zero = getattr(self, "_zero", None)  # ZeRO (zero.py): states on p's shard
            st = self.state[id(p)] = {"step": 0, **{n: zeros_like(p) if zero is None else zero.new_state(p)
                                                    for n in names}}
        return st

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


def _no_closure_inside_a_graph(cls, closure):
    if closure is not None and scope.recorder() is not None:
        raise RuntimeError(f"{cls.__name__}.step(closure) inside a graph: a closure re-runs the step in "
                           f"Python; call step() without one")


def _advance(optimizer, todo):
    """The step counts of the stateful updates advance (state made at a parameter's first step)."""
    for _, p, (_, names, _) in todo:
        if names:
            optimizer._state(p, names)["step"] += 1


_checked = set()  # (op, layout, number of arrays): the op has a row keeping these pieces as they are


def _fit(opdef, p, arrays, n_scalars):
    """The arrays, checked once per layout against the op's rows: every array laid out as p, the
    scalars B, on every mesh axis (an update runs on local pieces, no collective). A gradient of
    another layout is boxed to p's first."""
    if p._placement is None:
        return arrays
    lay = p._layout or p.layout()
    g = arrays[1]
    if g._placement != p._placement or g.sbp != p.sbp:
        arrays = [arrays[0], g.to_global(placement=p.placement, sbp=p.sbp)] + arrays[2:]
    key = (opdef.name, lay, len(arrays))
    if key not in _checked:
        shapes = [tuple(p.shape)] * len(arrays) + [()] * n_scalars
        rows = {row[0] for row in opdef.rules(shapes, [tuple(p.shape)] * (len(arrays) - 1), {})}
        for axis, s in enumerate(p.sbp):
            if (s,) * len(arrays) + (broadcast,) * n_scalars not in rows:
                raise ValueError(f"{opdef.name} does not update {s} parameters (its update is not linear): parameter "
                                 f"{tuple(p.shape)} on {p.placement} sbp {p.sbp}; convert it to split or broadcast first")
        _checked.add(key)
    return arrays


def _fitted_grad(p, plan):
    """p's gradient in p's layout, the op's rows checked for it (_fit; states are laid out as p)."""
    name, names, _ = plan
    return _fit(REGISTRY[name], p, [p, p.grad] + [p] * len(names), 2 if names else 1)[1]


def _on_shard(zero, p):
    """Whether ZeRO updates p on its shard (its states are laid out otherwise than p)."""
    return zero is not None and zero.state_sbp(p) != p.sbp


def _record_update(rec, optimizer, group, p, g, plan, zero=None):
    """Inside a capture: one update instruction of p and its gradient g (fitted), its state read
    from the optimizer and its lr and step read from the group and the state at each replay. With
    ZeRO: the update of p's shard, then the shard gathered into p (zero.shards, zero.gather_into)."""
    name, names, static = plan
    opdef = REGISTRY[name]
    label = f"{type(optimizer).__name__}[{rec.name_of(p)}]"
    states = [(_StateRead(optimizer, p, names, n, f"{label}.{n}"), optimizer.state[id(p)][n]) for n in names]
    scalars = [(f"{label}.lr", _GroupValue(group, "lr"))]
    if names:
        scalars.append((f"{label}.step", _StateRead(optimizer, p, names, "step", "")))
    if zero is None:
        rec.update(opdef, [p, g], states, scalars, static)
        return
    w, g = zero.shards(p)
    rec.update(opdef, [w, g], states, scalars, static)
    zero.gather_into(p, w)


class _StateRead:
    """An optimizer state entry at replay time (made if a load_state_dict left none): a tensor's
    piece as ._local (a graph's state read), a step count when called."""

    def __init__(self, optimizer, p, names, name, label):
        self.optimizer, self.p, self.names, self.name, self.label = optimizer, p, names, name, label

    @property
    def _local(self):
        return self.optimizer._state(self.p, self.names)[self.name]._local

    def __call__(self):
        return self.optimizer._state(self.p, self.names)[self.name]


class _GroupValue:
    """group[key] at replay time (a scheduler's lr)."""

    def __init__(self, group, key):
        self.group, self.key = group, key

    def __call__(self):
        return self.group[self.key]


class SGD(Optimizer):
    """p -= lr * (g + weight_decay * p), with momentum (and Nesterov) buffers: sgd_update, or
    momentum_update when momentum > 0."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError("lr, momentum and weight_decay must be non-negative")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and dampening = 0")
        _no_differentiable(differentiable)  # foreach / fused: PyTorch's kernel choices; every update here is one
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach, fused=fused))

    def _rows_plan(self, group, p):
        _no_maximize_of_rows(group, p)
        if (group["momentum"] or group["weight_decay"]) and group.get("rows_dense"):
            return None, (), {}  # Paddle's Momentum and L2 decay: every row, as from the dense gradient
        if group["momentum"] or group["weight_decay"]:
            raise RuntimeError(f"SGD with momentum or weight_decay does not support sparse gradients here (a sparse "
                               f"embedding's row gradient of {tuple(p.shape)}); use plain SGD or sparse=False")
        return "sgd_rows_update", (), {}

    def _plan(self, group):
        maximize = bool(group.get("maximize"))
        if not group["momentum"]:
            return "sgd_update", (), {"weight_decay": group["weight_decay"], "maximize": maximize}
        return "momentum_update", ("momentum_buffer",), {
            "momentum": group["momentum"], "dampening": group["dampening"], "weight_decay": group["weight_decay"],
            "nesterov": group["nesterov"], "maximize": maximize}


class Adam(Optimizer):
    """Adam (L2 weight decay added to the gradient): adam_update; AdamW decouples it (adamw_update)."""

    update = "adam_update"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _no_differentiable(differentiable)  # foreach / fused / capturable: PyTorch's kernel choices
        if decoupled_weight_decay and self.update == "adam_update":  # PyTorch 2.7's switch: Adam becomes AdamW
            self.update = "adamw_update"
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable, fused=fused))

    def _rows_plan(self, group, p):
        _no_maximize_of_rows(group, p)
        """PyTorch's Adam refuses sparse gradients; Paddle's (paddle.optimizer.Adam) takes them: lazy_mode
        updates the rows only (adam_rows_update), otherwise every row as the dense gradient does."""
        lazy = group.get("lazy_mode")
        if lazy is not None and group["weight_decay"] and self.update == "adam_update":
            raise RuntimeError("Adam don't support weight_decay with sparse parameters, please set it to None.")
        if lazy is None or self.update != "adam_update" or (lazy and group["amsgrad"]):
            return super()._rows_plan(group, p)
        if not lazy:
            return None, (), {}
        return "adam_rows_update", ("exp_avg", "exp_avg_sq"), {
            "betas": tuple(group["betas"]), "eps": group["eps"], "weight_decay": group["weight_decay"]}

    def _plan(self, group):
        names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())
        return self.update, names, {"betas": tuple(group["betas"]), "eps": group["eps"],
                                    "weight_decay": group["weight_decay"], "amsgrad": bool(group["amsgrad"]),
                                    "maximize": bool(group.get("maximize"))}


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01)."""

    update = "adamw_update"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused)


def _no_differentiable(differentiable):
    if differentiable:
        raise NotImplementedError("differentiable=True (autograd through the optimizer step) is not supported: "
                                  "an update here runs outside autograd")


def _no_maximize_of_rows(group, p):
    if group.get("maximize"):
        raise NotImplementedError(f"maximize=True with a sparse embedding's row gradient of {tuple(p.shape)}; "
                                  "use sparse=False")

