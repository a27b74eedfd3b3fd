"""paddle.static: static mode as far as Paddle's collective Fleet example needs it, on graph mode.

`paddle.enable_static()`; `data(name, shape=[None, 32])` makes a placeholder; Paddle functions,
layers, Tensor methods and operators applied to placeholders are recorded as calls (their
results' shapes come from stand-in values); `optimizer.minimize(cost)` records the update;
`Executor(place).run(program, feed={name: array}, fetch_list=[var or name])` runs the recorded
calls on the fed arrays through `gt.jit.trace` (the first run of a feed signature captures, the
next ones replay). In collective mode (fleet.init) each rank feeds its own batch and the
gradients are averaged over the ranks before the update.
"""
import numpy as np

from ... import hooks
from ...nn.module import zero_grads
from ...graph import trace
from .program import (STATIC, Program, Variable, data, default_main_program, default_startup_program,
                      program_guard, substitute)
from . import nn  # noqa: F401 - paddle.static.nn

__all__ = ["Program", "Variable", "data", "default_main_program", "default_startup_program", "program_guard",
           "Executor", "nn", "in_static_mode", "cpu_places", "cuda_places"]


def in_static_mode():
    return STATIC[0]


def cpu_places(device_count=None):
    """[CPUPlace()] * device_count (default 1: a rank is one process)."""
    from ..framework import CPUPlace
    return [CPUPlace() for _ in range(device_count or 1)]


def cuda_places(device_ids=None):
    """A CUDAPlace per id (default: this rank's GPU)."""
    from ..framework import CUDAPlace
    return [CUDAPlace(i) for i in (device_ids if device_ids is not None else [0])]


class Executor:
    """Runs a program: the startup program is nothing to run (parameters were made with their
    values when the program was built); the main program runs on the feed and returns the fetches
    (numpy arrays unless return_numpy=False)."""

    def __init__(self, place=None):
        self.place = place

    def run(self, program=None, feed=None, fetch_list=None, return_numpy=True, scope=None, **kwargs):
        program = program if program is not None else default_main_program()
        if program is default_startup_program() or not (program.calls or program.feeds):
            return []
        fetches = [program.var(f) if isinstance(f, str) else f for f in (fetch_list or [])]
        names = sorted(program.feeds)
        feed = feed or {}
        missing = [n for n in names if n not in feed]
        if missing:
            raise ValueError(f"Executor.run: feed has no value for {missing} (the program's placeholders: {names})")
        from .. import to_tensor
        tensors = [to_tensor(np.asarray(feed[n]).astype(program.feeds[n].dtype.np, copy=False)) for n in names]
        key = tuple(v.name for v in fetches)
        run = program._runs.get(key)
        if run is None:
            run = program._runs[key] = trace(_runner(program, names, fetches))
        outs = run(*tensors)
        return [o.numpy() for o in outs] if return_numpy else list(outs)


def _runner(program, names, fetches):
    """The program as a function of its feeds: every call on real tensors, then the minimize steps."""
    def run_program(*feeds):
        env = {id(program.feeds[n]): t for n, t in zip(names, feeds)}
        pick = (lambda v: env[id(v)])
        for call in program.calls:
            result = call.fn(*substitute(call.args, pick), **substitute(call.kwargs, pick))
            results = (result,) if len(call.outs) == 1 and not isinstance(result, (tuple, list)) else result
            for var, value in zip(call.outs, results):
                env[id(var)] = value
        for loss, optimizer, average in program.minimized:
            env[id(loss)].backward()
            if average:
                from ..distributed.fleet.utils.hybrid_parallel_util import fused_allreduce_gradients
                params = [p for g in optimizer.param_groups for p in g["params"]]
                hooks.effect("fused_allreduce_gradients", lambda: fused_allreduce_gradients(params))
            optimizer.step()
            optimizer.clear_grad(set_to_zero=False)
        # the program owns its gradients: none is left for the next run (eager mode would add to it)
        zero_grads(program.all_parameters(), set_to_none=True)
        return tuple(env[id(v)] for v in fetches)
    run_program.__name__ = "static_program"
    return run_program


def record_minimize(optimizer, loss):
    """optimizer.minimize(loss) in static mode: the program's parameters become the optimizer's
    (when it was made without any) and the update is recorded after the calls."""
    program = default_main_program()
    if not isinstance(loss, Variable):
        raise TypeError("minimize in static mode takes a Variable of the program (the loss)")
    if not any(g["params"] for g in optimizer.param_groups):
        optimizer.param_groups[0]["params"] = program.all_parameters()
    from ..distributed import fleet
    program.minimized.append((loss, optimizer, bool(fleet._state["initialized"])))
    return None, [(p, None) for p in program.all_parameters()]
