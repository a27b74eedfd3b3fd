"""Executor: a static program pruned to its fetches, made a graph.Program and run by graph replay."""
import functools
import inspect

import numpy as np

from ... import scope
from ...autograd import no_grad
from ...graph.program import EFFECTS, Instr, Program as GraphProgram
from ...graph.passes.prune import needed_instrs
from ...graph.replay import compile_program
from ...registry import REGISTRY
from ...tensor import Tensor
from .dyn import sentinel_of, subst_float, subst_int
from .recorder import _Kernel

RUNS_KEPT = 16  # compiled (fetch list, fed sizes) signatures kept per program


class CompiledProgram:
    """paddle.static.CompiledProgram: the program (a rank runs it whole; data parallelism across
    ranks comes from fleet or the nccl2 transpiler). with_data_parallel returns it unchanged."""

    def __init__(self, program_or_graph, build_strategy=None):
        self._program, self._build_strategy = program_or_graph, build_strategy

    def with_data_parallel(self, loss_name=None, build_strategy=None, exec_strategy=None, share_vars_from=None,
                           places=None):
        return self

    def __getattr__(self, name):
        return getattr(self._program, name)


class Executor:
    """paddle.static.Executor: run(program, feed, fetch_list, return_numpy). The startup program
    gives the parameters their initial values; a main program runs its instructions on the feed
    (the first run of a fetch list compiles it: pruned, then graph.replay's straight-line code)."""

    def __init__(self, place=None):
        self.place = place
        self._attached = {}  # id(client) -> (program, its PSState) this executor ran: close() stops the client

    def run(self, program=None, feed=None, fetch_list=None, feed_var_name="feed", fetch_var_name="fetch", scope=None,
            return_numpy=True, use_program_cache=False, **kwargs):
        from .program import default_main_program
        program = program if program is not None else default_main_program()
        program = getattr(program, "_program", program)  # a CompiledProgram
        run_by = getattr(program, "run_by", None)
        if run_by is not None:  # a pserver program or its startup (fluid/transpiler.py): serves, or sets it up
            return run_by(self)
        attached = getattr(program, "ps", (None,))[0]
        if attached is not None:  # attached to a parameter server (static/ps.py): its first pull
            attached.before_run(feed, program)
            self._attached[id(attached.client)] = (program, attached)  # one entry per client
        fetches = tuple(_fetch_reg(program, f) for f in (fetch_list or []))
        pruned = program._pruned.get(fetches)
        if pruned is None or pruned[0] != len(program.instrs):
            if len(program._pruned) >= RUNS_KEPT:
                del program._pruned[next(iter(program._pruned))]
            instrs, needed = prune(program, fetches)
            pruned = program._pruned[fetches] = (len(program.instrs), instrs,
                                                 [n for n, r in program.feeds.items() if r in needed])
        _, instrs, names = pruned
        feed = feed or {}
        missing = [n for n in names if n not in feed]
        if missing:
            raise ValueError(f"Executor.run: feed has no value for {missing} (the program needs {names})")
        arrays = [_feed_array(program, n, feed[n]) for n in names]
        sizes = _sizes(program, names, arrays)
        _refuse_unexplained(program, sizes)
        key = (fetches, tuple(sorted(sizes.items())), len(program.instrs))
        fn = program._runs.get(key)
        if fn is None:
            if len(program._runs) >= RUNS_KEPT:  # bounded: the oldest compiled signature goes
                del program._runs[next(iter(program._runs))]
            graph = GraphProgram(program.regs, specialize(instrs, sizes, program.regs),
                                 [program.feeds[n] for n in names], list(fetches), "paddle_static")
            fn = program._runs[key] = compile_program(graph)
        with _eager(), no_grad():
            outs = fn(*arrays)
        return [np.asarray(o) for o in outs] if return_numpy else [Tensor(np.asarray(o)) for o in outs]

    def close(self):
        """Paddle's close: a trainer of a parameter-server job tells the servers it is done (and
        closes its connections, where this run connected them: the transpiler's trainer program)."""
        done, self._attached = self._attached, {}
        for program, state in done.values():
            if program.ps[0] is not state:  # detached since (fleet's stop_worker stops its client itself)
                continue
            state.finish()  # static/ps.py: GEO's last deltas, async's final pull, then stop
            if state.connect and hasattr(state.client, "close"):
                state.client.close()


def _eager():
    return scope.scoped(recorder=None)


def _fetch_reg(program, f):
    name = f if isinstance(f, str) else getattr(f, "name", None)
    if not isinstance(f, str) and program.knows(f):
        return program.by_array[id(f._local)]
    var = program.var(name)
    r = program.by_array.get(id(var._local))
    if r is None:  # a parameter: its read
        r = program.param_regs.get(id(var))
    if r is None:
        raise ValueError(f"Executor.run: {name!r} is not a value of this program")
    return r


def _feed_array(program, name, value):
    reg = program.regs[program.feeds[name]]
    a = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
    if a.dtype != reg.dtype:
        a = a.astype(reg.dtype)
    if a.ndim != len(reg.local_shape) or any(x != y and not sentinel_of(y) for x, y in zip(a.shape, reg.local_shape)):
        want = [-1 if sentinel_of(y) else y for y in reg.local_shape]
        raise ValueError(f"Executor.run: feed {name!r} has shape {list(a.shape)}; the program's data has {want}")
    return a


def _refuse_unexplained(program, sizes):
    """Raise where the program holds a value computed from a dynamic dim that the run's rules
    cannot carry to the fed size (static/dyn.py), and a size other than the recorded one is fed."""
    unexplained = getattr(program, "unexplained", ())
    if unexplained and any(size != s for s, size in sizes.items()):
        raise ValueError(f"Executor.run: the program was built from a dynamic dim (-1) through "
                         f"{', '.join(unexplained)}, which it cannot recompute at the fed size "
                         f"{sorted(sizes.values())} (only k*N, k*N±1 and a/(k*N±1) are carried); give data() a "
                         f"fixed size for that dim, or build the value from tensor ops on the data (a mean)")


def prune(program, outputs):
    """The instructions that the outputs and the effects (gradients, updates, sets) need."""
    kept = needed_instrs(program.instrs, outputs, EFFECTS | {"set"})  # graph.passes' prune
    return kept, set(outputs).union(*(ins.ins for ins in kept))


def _sizes(program, names, arrays):
    """{sentinel: the fed size} from the feeds' dynamic dims (one size per sentinel: dims at one
    position of different feeds are one size, as a batch is)."""
    sizes = {}
    for name, a in zip(names, arrays):
        for n, got in zip(program.regs[program.feeds[name]].local_shape, a.shape):
            for s in sentinel_of(n):
                if sizes.setdefault(s, got) != got:
                    raise ValueError(f"Executor.run: the feeds' dims at one position of -1 must agree (a batch); "
                                     f"{name!r} has {got} where another feed has {sizes[s]}")
    return sizes


def specialize(instrs, sizes, regs):
    """The instructions at the fed sizes: each op's static attrs, each constant and each random
    draw's shape with the sentinel sizes (their multiples, a mean's 1/count, ...) replaced."""
    if not sizes:
        return instrs
    shapes = {r.index: r.local_shape for r in regs}
    out = []
    for ins in instrs:
        if ins.kind == "op" and ins.name in REGISTRY:  # not sparse_embedding's lookup (its call takes any size)
            detail = _subst(ins.detail, sizes)
            if detail != ins.detail:
                ins = Instr("op", ins.name, _Kernel(REGISTRY[ins.name].kernel, detail), ins.ins, ins.outs,
                            detail=detail)
        elif ins.kind == "const":
            ins = Instr("const", ins.name, _subst(ins.fn, sizes), ins.ins, ins.outs)
        elif ins.kind == "random" and shapes[ins.outs[0]] != _subst(shapes[ins.outs[0]], sizes):
            if "at" not in inspect.signature(ins.fn).parameters:  # creation's draws take the shape to draw at
                raise ValueError(f"Executor.run: the random op {ins.name} was recorded at a dynamic size and cannot "
                                 f"draw at the fed one; feed the size the program was built for")
            at = tuple(_subst(shapes[ins.outs[0]], sizes))
            ins = Instr("random", ins.name, functools.partial(ins.fn, at=at), ins.ins, ins.outs, plain=True)
        out.append(ins)
    return out


def _subst(value, sizes):
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return (int if isinstance(value, int) else type(value))(subst_int(int(value), sizes))
    if isinstance(value, (float, np.floating)):
        return type(value)(subst_float(float(value), sizes))
    if isinstance(value, (tuple, list)):
        return type(value)(_subst(v, sizes) for v in value)
    if isinstance(value, dict):
        return {k: _subst(v, sizes) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        shape = tuple(subst_int(n, sizes) for n in value.shape)
        if value.size == 1 and value.dtype.kind in "iuf":
            return np.full(shape, _subst(value.reshape(-1)[0].item(), sizes), value.dtype)
        if shape != value.shape:
            first = value.reshape(-1)[:1]
            if value.size and not (value == first).all():
                raise ValueError(f"Executor.run: a constant of shape {value.shape} depends on a dynamic dim and is "
                                 f"not uniform; feed the size the program was built for")
            return np.full(shape, first[0] if value.size else 0, value.dtype)
    return value
