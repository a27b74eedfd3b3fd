"""Rebuild: each instruction's prepared call (fn) from its data: registry op, layouts, named state."""
import functools

import numpy as np

from .. import creation, layout as layout_lib
from ..backends.devices import device
from ..boxing import _group, plan
from ..random import UNIFORM, fill as philox_fill, next_key
from ..registry import REGISTRY
from ..tensor import Tensor
from .p2p import Recv, Send, link_sends
from .capture import _AllReduce, _CheckCleared, _LocalCall, _StateSetter, _finish, _run_box


class ProgramState:
    """What a program reads and writes by name: state tensors (parameters, buffers, optimizer
    state), scalars (lr, step counts) and the constants' pieces (by register)."""

    def __init__(self, tensors=None, scalars=None, consts=None, generator=None):
        self.tensors = dict(tensors or {})
        self.scalars = dict(scalars or {})
        self.consts = dict(consts or {})
        self.generator = generator  # the stream the program's random draws take (None: the default)

    def tensor(self, name, what):
        found = self.tensors.get(name)
        if found is None:
            raise KeyError(f"{what}: the program reads state {name!r}, which the saved state does not hold "
                           f"(it holds {sorted(self.tensors)[:8]}...)")
        return found


def rebuild(program, state, rank):
    """Set every instruction's fn (and an op's target) from its data; returns the program."""
    for ins in program.instrs:
        maker = _MAKERS.get(ins.kind)
        if maker is None:
            raise ValueError(f"graph.load: a {ins.kind} instruction ({ins.name}) cannot be rebuilt from data")
        ins.fn = maker(program, ins, state, rank)
    link_sends(program.instrs)  # a send before a recv from its peer waits for it (graph/p2p.py)
    return program


def _op(program, ins, state, rank):
    opdef = REGISTRY.get(ins.name)
    if opdef is None:
        raise KeyError(f"graph.load: op {ins.name!r} is not registered in this globaltensor")
    static = ins.detail or {}
    regs = program.regs
    first = regs[ins.ins[0]].layout if ins.ins else None
    kernel = opdef.kernel if not ins.hints else functools.partial(opdef.kernel, out=None, order=ins.hints["order"])
    if first is None:  # an op on local tensors
        call = functools.partial(kernel, **static) if static else kernel
        return call if ins.plain else _LocalCall(call, device(regs[ins.ins[0]].device if ins.ins else "cpu"))
    placement = first.placement
    coord = placement.mesh_coord(rank)
    outs = [regs[r].layout for r in ins.outs]
    dev = device(placement.type)
    if coord is None:  # off the op's placement: empty pieces, as capture records it
        ins.target = None
        empties = tuple(dev.empty((0,) * max(1, len(lay.shape)), lay.dtype.np) for lay in outs)
        return lambda *_: empties
    ins.target = opdef
    return prepared_call(opdef, static, [regs[r].layout for r in ins.ins], outs, ins.plain, coord, ins.hints)


def prepared_call(opdef, static, in_layouts, out_layouts, plain, coord, hints=None):
    """The kernel with its static arguments (and offsets, and layout hints) bound; wrapped as
    dispatch finishes a kernel's result (tuple, device array, dtype cast) unless `plain`."""
    kernel = opdef.kernel
    if hints:
        kernel = functools.partial(kernel, out=None, order=hints.get("order"))
    placement = out_layouts[0].placement
    if opdef.takes_offsets:
        offsets = tuple(tuple(a for a, _ in layout_lib.local_box(lay.shape, placement.hierarchy, lay.sbp, coord))
                        for lay in in_layouts)
        kernel = functools.partial(kernel, offsets=offsets)
    call = functools.partial(kernel, **static) if static else kernel
    if plain:
        return call
    finish = functools.partial(_finish, device(placement.type), [lay.dtype.np for lay in out_layouts],
                               len(out_layouts) == 1)
    return _Finished(call, finish)


class _Finished:
    def __init__(self, call, finish):
        self.call, self.finish = call, finish

    def __call__(self, *pieces):
        return self.finish(self.call(*pieces))


def _box(program, ins, state, rank):
    src, dst = program.regs[ins.ins[0]].layout, program.regs[ins.outs[0]].layout
    p = plan(src.placement, src.sbp, dst.placement, dst.sbp, src.shape, src.dtype.itemsize)
    ins.detail = p
    return functools.partial(_run_box, p, src.dtype)


def _reduce(program, ins, state, rank):
    placement = program.regs[ins.outs[0]].layout.placement
    coord = placement.mesh_coord(rank)
    group = None if coord is None else _group(placement.axes_ranks(tuple(ins.detail), coord))
    return _AllReduce(device(placement.type), group)


def _read(program, ins, state, rank):
    return state.tensor(ins.name, "read")


def _const(program, ins, state, rank):
    return state.consts[ins.outs[0]]


def _scalar(program, ins, state, rank):
    if ins.name not in state.scalars:
        raise KeyError(f"graph.load: scalar {ins.name!r} has no saved value")
    return _Scalar(state.scalars, ins.name)


class _Scalar:
    def __init__(self, scalars, name):
        self.scalars, self.name = scalars, name

    def __call__(self):
        return self.scalars[self.name]


def _update(program, ins, state, rank):
    return functools.partial(REGISTRY[ins.name].kernel, **(ins.detail or {}))


def _grad(program, ins, state, rank):
    return _GradInto(state.tensor(ins.name, "grad"), program.regs[ins.ins[0]].layout)


class _GradInto:
    """leaf.grad = the register's piece (a graph's backward assigns)."""

    def __init__(self, leaf, layout):
        self.leaf, self.layout = leaf, layout

    def __call__(self, piece):
        self.leaf.grad = Tensor(piece) if self.layout is None else Tensor._wrap(piece, self.layout)


def _set(program, ins, state, rank):
    return _StateSetter(state.tensor(ins.name, "set"))


def _step(program, ins, state, rank):
    data = ins.detail or {}
    if "advance" in data:
        return _Advance(state.scalars, list(data["advance"]))
    if "clear_grads" in data:
        return _ClearNamed([state.tensors[n] for n in data["clear_grads"] if n in state.tensors])
    if "check_cleared" in data:
        names = list(data["check_cleared"])
        return _CheckCleared([state.tensor(n, "check") for n in names], names)
    raise ValueError(f"graph.load: step {ins.name} says nothing a saved program can rebuild")


class _Advance:
    """An optimizer's step counts advance by one (their scalars are read after it)."""

    def __init__(self, scalars, names):
        self.scalars, self.names = scalars, names

    def __call__(self):
        for name in self.names:
            if name in self.scalars:
                self.scalars[name] = self.scalars[name] + 1


class _ClearNamed:
    def __init__(self, tensors):
        self.tensors = tensors

    def __call__(self):
        for t in self.tensors:
            t.grad = None


def _send(program, ins, state, rank):
    return Send(int(ins.detail["peer"]))


def _recv(program, ins, state, rank):
    reg = program.regs[ins.outs[0]]
    return Recv(int(ins.detail["peer"]), reg.local_shape, reg.dtype, device(reg.device))


def _random(program, ins, state, rank):
    spec = ins.detail or {}
    if spec.get("draw") != "philox":
        raise ValueError(f"graph.load: random draw {spec!r} is not one this globaltensor rebuilds")
    return _Draw(spec, type(UNIFORM)(spec["kind"]), state.generator)


class _Draw:
    """A random factory's draw (creation's Philox fill of each piece) from the program's own
    generator (its stream saved with it)."""

    def __init__(self, spec, kind, generator):
        self.spec, self.kind, self.generator = spec, kind, generator

    def __call__(self):
        spec, kind = self.spec, self.kind
        shape, dt, a, b = spec["shape"], spec["dtype"], spec["a"], spec["b"]
        seed, counter = next_key(self.generator)

        def fill(box):
            out = creation.allocate(tuple(hi - lo for lo, hi in box), dt)
            philox_fill(out, kind, shape, [lo for lo, _ in box], counter, a, b, seed)
            return out
        return creation.build(shape, dt, spec["placement"], spec["sbp"], fill, spec["device"])._local


_MAKERS = {"op": _op, "box": _box, "reduce": _reduce, "read": _read, "const": _const, "scalar": _scalar,
           "update": _update, "grad": _grad, "set": _set, "step": _step, "send": _send, "recv": _recv,
           "random": _random}
