"""Capture: run a step eagerly once while recording every kernel, boxing plan, draw and update."""
import functools
import gc

import numpy as np

from .. import autograd, dispatch, scope
from ..backends.devices import device, of_array
from ..boxing import _group, run as run_plan
from ..env import get_rank
from ..grad_buckets import reducible_axes
from ..tensor import Layout, Tensor
from .program import Instr, Program, Reg, share_roots


class CaptureError(RuntimeError):
    """A step that a graph cannot record (a value read into Python, a data-dependent shape, a
    tensor computed outside the dispatcher)."""


class Recorder:
    """The target of globaltensor.hooks while a step runs eagerly: every value is a register,
    known by the identity of its array; a tensor alive before the capture began is state, read
    from the tensor at each replay; one made during it by a factory is a constant."""

    def __init__(self, inputs, names=None):
        self.regs, self.instrs = [], []
        self._by_array = {}  # id(array) -> register (the arrays are kept alive by their Reg)
        self._names = dict(names or {})  # id(state tensor) -> its name in the program text
        # type(t), not isinstance: a deprecated proxy (torch.distributed.reduce_op) warns on __class__
        self._alive = {id(t): t for t in gc.get_objects() if issubclass(type(t), Tensor)}
        self._grad_leaves, self._grad_regs, self._grad_set, self._became = {}, {}, {}, {}
        self.inputs = [self._new_reg("input", t) for t in inputs]

    # --- registers ------------------------------------------------------------------------------
    def _new_reg(self, kind, t=None, array=None, layout=None):
        array = t._local if array is None else array
        if layout is None and t is not None and t._placement is not None:
            layout = t.layout()
        reg = Reg(len(self.regs), kind, layout, array)
        self.regs.append(reg)
        self._by_array[id(array)] = reg.index
        return reg.index

    def _known(self, array):
        r = self._by_array.get(id(array))
        return r if r is not None and self.regs[r].array is array else None

    def reg_of(self, t, user):
        """The register holding t's piece; a state tensor's is read here, at its first use."""
        r = self._known(t._local)
        if r is not None:
            return r
        if id(t) in self._alive:
            r = self._new_reg("state", t)
            self._emit(Instr("read", self._name(t), t, [], [r]))
            return r
        where = "" if t._placement is None else f" {t.placement} {t.sbp}"
        raise CaptureError(f"{user}: an input of shape {tuple(t.shape)}{where} was computed outside the dispatcher "
                           f"during the capture (a step the graph cannot record); compute it with gt ops, or run "
                           f"this step eagerly (GLOBALTENSOR_GRAPH=0)")

    def _name(self, t):
        name = self._names.get(id(t))
        if name is None:
            name = self._names[id(t)] = f"tensor{len(self._names)}"
        return name

    def _emit(self, instr):
        self.instrs.append(instr)
        return instr

    def _outputs(self, kind, arrays, layouts):
        return [self._new_reg(kind, array=a, layout=lay) for a, lay in zip(arrays, layouts)]

    # --- what the lower layers report ------------------------------------------------------------
    def apply(self, opdef, kernel, tensors, static):
        """An op, run as replay will run it: boxing plans, then one prepared kernel call."""
        name = opdef.name
        if opdef.data_dependent:
            raise CaptureError(f"{name}: its output shape depends on the values, which a graph cannot capture "
                               f"(its program has fixed shapes); run it outside the graph")
        ins = [self.reg_of(t, name) for t in tensors]
        order = kernel.keywords.get("order") if isinstance(kernel, functools.partial) else None
        hints = {"order": order} if order else None  # a rank's fact steering only the kernel (saved with it)
        if tensors[0]._placement is None:
            dispatch._check_placements(name, tensors)
            if opdef.real_only:
                opdef.refuse_complex(tensors)
            call = functools.partial(kernel, **static) if static else kernel
            raw = call(*[t._local for t in tensors])
            plain = type(raw) is np.ndarray
            fn = call if plain else _LocalCall(call, of_array(tensors[0]._local))
            arrays = (raw,) if plain else fn.finish(raw)
            outs = self._outputs("value", arrays, [None] * len(arrays))
            self._emit(Instr("op", name, fn, ins, outs, plain=plain, detail=static, hints=hints))
            return tuple(Tensor(a) for a in arrays)
        decision = dispatch.decision_for(opdef, tensors, static)
        pieces = [t._local for t in tensors]
        for i, (t, p) in enumerate(zip(tensors, decision.plans or ())):
            if p is not None:
                pieces[i], ins[i] = self._box(p, t, ins[i])
        if decision.offsets is not None:
            kernel = functools.partial(kernel, offsets=decision.offsets)
        fn, plain, arrays = _global_call(kernel, static, decision, pieces)
        for j, a in enumerate(arrays):
            if decision.participates and a.shape != decision.pieces[j]:
                dispatch._wrong_piece(opdef, decision, j, a, tensors)
        outs = self._outputs("value", arrays, decision.out_layouts)
        self._emit(Instr("op", name, fn, ins, outs, plain=plain, detail=static,
                         target=opdef if decision.participates else None, hints=hints))
        return tuple(Tensor._wrap(a, lay) for a, lay in zip(arrays, decision.out_layouts))

    def _box(self, p, t, r):
        fn = functools.partial(_run_box, p, t._dtype)
        array = fn(t._local)
        out = self._new_reg("value", array=array, layout=Layout.of(t.shape, t.dtype, p.dst_placement, p.dst_sbp))
        self._emit(Instr("box", "to_global", fn, [r], [out], plain=True, detail=p))
        return array, out

    def convert(self, x, p):
        """boxing.convert between layouts of a global tensor."""
        array, _ = self._box(p, x, self.reg_of(x, "to_global"))
        return Tensor(array, x.shape, x.dtype, p.dst_placement, p.dst_sbp)

    def from_local(self, x, make):
        """to_global of a local tensor: a constant's conversion is a constant; a value of the step
        cannot be converted inside a graph (from_local exchanges its shapes)."""
        if self._known(x._local) is not None:
            raise CaptureError("to_global of a local tensor inside a graph: pass global tensors to the graph (convert "
                               "them before the call)")
        t = make()
        self.constant(t)
        return t

    def constant(self, t):
        r = self._new_reg("const", t)
        self._emit(Instr("const", f"{tuple(t.shape)}", t._local, [], [r]))

    def random(self, t, draw, spec=None):
        """A factory's random draw: replayed, so the generator advances as in eager mode. `spec`
        describes the draw as data (graph/rebuild.py), when the factory gives one."""
        last = self.instrs[-1] if self.instrs else None
        if last is not None and last.kind == "const" and self.regs[last.outs[0]].array is t._local:
            self.instrs.pop()  # the factory reported it as a constant first
        r = self._new_reg("value", t)
        self._emit(Instr("random", "draw", draw, [], [r], plain=True, detail=spec))

    def reduce_grad(self, leaf, g, axes):
        """A leaf's partial gradient summed over `axes` into the leaf's layout: one all_reduce over
        those axes, as eager mode's gradient buckets sum it (the bucketing pass packs these)."""
        placement = leaf.placement
        coord = placement.mesh_coord(get_rank())
        group = None if coord is None else _group(placement.axes_ranks(axes, coord))
        fn = _AllReduce(device(placement.type), group)
        array = fn(g._local)
        lay = Layout.of(leaf.shape, g.dtype, placement, leaf.sbp)
        out = self._new_reg("value", array=array, layout=lay)
        self._emit(Instr("reduce", "all_reduce", fn, [self.reg_of(g, "backward")], [out], plain=True, detail=axes))
        return Tensor._wrap(array, lay)

    def host_step(self, name, fn, tensors):
        ins = [self.reg_of(t, name) for t in tensors]
        array = fn(*[t._local for t in tensors])
        out = self._new_reg("value", array=array, layout=None)
        self._emit(Instr("host", name, fn, ins, [out], plain=True))
        return array

    def became(self, t):
        """t took a new piece (an in-place op): a state tensor takes it at every replay."""
        if id(t) in self._alive:
            self._became.setdefault(id(t), t)

    def backward_starts(self, leaves):
        """A leaf may hold a .grad only when an earlier backward of this capture made it (micro-
        batches accumulating in one step); one from before the call would be added to at capture
        but not at replay."""
        for leaf in leaves:
            if leaf.grad is not None and not self._grad_made_here(leaf):
                raise CaptureError(f"backward inside a graph: {self._names.get(id(leaf), 'a leaf')} already has a .grad; a "
                                   f"graph's backward assigns gradients, so clear them before the call "
                                   f"(optimizer.zero_grad(), or add_optimizer, which clears them after each step)")

    def _grad_made_here(self, leaf):
        """Whether leaf.grad is a register of this capture (an earlier backward of the step set it)."""
        return id(leaf) in self._grad_leaves and self._known(leaf.grad._local) is not None

    def backward_ends(self, leaves):
        for leaf in leaves:
            self._grad_leaves.setdefault(id(leaf), leaf)
        self.sync_grads()

    def sync_grads(self):
        """Record leaf.grad = register for each leaf whose gradient changed since last recorded."""
        for key, leaf in self._grad_leaves.items():
            g = leaf.grad
            r = None if g is None else self.reg_of(g, "backward")
            if r is not None and self._grad_regs.get(key) != r:
                self._grad_set.setdefault(key, leaf)
                self._grad_regs[key] = r
                self._emit(Instr("grad", self._names.get(key, "leaf"), _GradSetter(leaf, g), [r], []))

    def step(self, name, fn, data=None):
        """An effect outside the dispatcher (optimizer step, zero_grad, scheduler step): run now,
        outside the recording, and at every replay, after the gradients it may read are set.
        `data` says what it does in terms a saved program can rebuild (graph/rebuild.py)."""
        self.sync_grads()
        if data:  # tensors named (a module's zero_grad gives its parameters)
            data = {k: [self._name(t) if isinstance(t, Tensor) else t for t in v] for k, v in data.items()}
        self._emit(Instr("step", name, fn, [], [], detail=data))
        with scope.scoped(recorder=None):
            result = fn()
        for key, leaf in self._grad_leaves.items():  # it may have cleared or replaced gradients
            self._grad_regs[key] = None if leaf.grad is None else self._known(leaf.grad._local)
        return result

    def name_of(self, t):
        """t's name in the program text (a module's parameter: its path, as fc.weight)."""
        return self._name(t)

    def knows(self, t):
        """Whether t's piece is a register of this capture (made by a recorded step)."""
        return self._known(t._local) is not None

    def update(self, opdef, tensors, states, scalars, static):
        """An optimizer's update op (writes its pieces in place): the parameter and gradient are
        registers, each state tensor is read through its reader ((reader, tensor): the optimizer's
        entry at each replay), each scalar (lr, step) is a register its reader gives at each replay."""
        ins = [self.reg_of(t, opdef.name) for t in tensors]
        for reader, t in states:
            ins.append(self._new_reg("state", t))
            self._emit(Instr("read", reader.label, reader, [], [ins[-1]]))
        for name, reader in scalars:
            ins.append(self._new_reg("scalar", array=np.asarray(reader()), layout=None))
            self._emit(Instr("scalar", name, reader, [], [ins[-1]], plain=True))
        call = functools.partial(opdef.kernel, **static)
        call(*[self.regs[r].array for r in ins])
        self._emit(Instr("update", opdef.name, call, ins, [], detail=static))

    def refuse_readback(self, what, t):
        r = self._known(t._local)
        made = ""
        if r is not None:
            producer = next((i for i in reversed(self.instrs) if r in i.outs), None)
            made = f", made by {producer.name}" if producer is not None else " (an input of the graph)"
        raise CaptureError(f"{what} reads the value of a tensor ({tuple(t.shape)}{made}) into Python inside a graph: "
                           f"a replay runs no Python between its ops. Return the tensor from build() and read it "
                           f"after the call, or run the graph eagerly (GLOBALTENSOR_GRAPH=0)")

    # --- the program --------------------------------------------------------------------------
    def finish(self, outputs, label):
        """The Program: the recorded steps, the state tensors' new pieces and the outputs."""
        self.sync_grads()
        for t in self._became.values():
            r = self._known(t._local)
            if r is not None and self.regs[r].kind != "state":
                self._emit(Instr("set", self._name(t), _StateSetter(t), [r], []))
        if self._grad_set:  # before anything runs: a gradient left from before raises on every rank
            leaves = list(self._grad_set.values())
            names = [self._names.get(id(leaf), f"leaf {i}") for i, leaf in enumerate(leaves)]
            self.instrs.insert(0, Instr("step", "check_gradients_cleared", _CheckCleared(leaves, names), [], [],
                                        detail={"check_cleared": names}))
        outs = [self.reg_of(t, "output") for t in outputs]
        for r in outs:
            self.regs[r].escapes = True
        for ins in self.instrs:
            if ins.kind in ("grad", "set"):
                self.regs[ins.ins[0]].escapes = True
        self._alive = None
        share_roots(self.regs)
        return Program(self.regs, self.instrs, self.inputs, outs, label)


def _run_box(p, dt, piece):
    return run_plan(p, piece, dt)


class _LocalCall:
    """A kernel on local tensors' pieces, as dispatch runs it (outputs made arrays of the device)."""

    def __init__(self, call, dev):
        self.call, self.dev = call, dev

    def __call__(self, *pieces):
        return self.finish(self.call(*pieces))

    def finish(self, out):
        return tuple(self.dev.asarray(o) for o in (out if isinstance(out, tuple) else (out,)))


def _global_call(kernel, static, decision, pieces):
    """(fn, plain, arrays): the prepared call of a kernel on this rank's pieces, doing what
    dispatch._apply_global does after the kernel; plain when it returns one array as it is."""
    dev = decision.device
    if not decision.participates:
        empties = tuple(dev.empty((0,) * max(1, len(lay.shape)), lay.dtype.np) for lay in decision.out_layouts)
        return (lambda *_: empties), False, empties
    call = functools.partial(kernel, **static) if static else kernel
    raw = call(*pieces)
    wanted = [lay.dtype.np for lay in decision.out_layouts]
    if decision.single and type(raw) is np.ndarray and raw.dtype == wanted[0]:
        return call, True, (raw,)
    finish = functools.partial(_finish, dev, wanted, decision.single)
    return (lambda *p: finish(call(*p))), False, finish(raw)


def _finish(dev, wanted, single, out):
    if single:
        if type(out) is tuple:
            out = out[0]
        out = (out,)
    return tuple(o if o.dtype == w else o.astype(w) for o, w in zip((dev.asarray(o) for o in out), wanted))


class _AllReduce:
    """A piece summed over a group in one all_reduce (the piece itself off the placement)."""

    def __init__(self, dev, group):
        self.dev, self.group = dev, group

    def __call__(self, piece):
        if self.group is None:
            return piece
        out = self.dev.empty(piece.shape, piece.dtype)
        self.dev.collectives.all_reduce(piece if piece.flags.c_contiguous else piece.copy(), group=self.group, out=out)
        return out


class _GradSetter:
    """leaf.grad = the register's piece (a graph's backward assigns, never adds)."""

    def __init__(self, leaf, like):
        self.leaf = leaf
        self.layout = like.layout() if like.is_global else None

    def __call__(self, piece):
        self.leaf.grad = Tensor(piece) if self.layout is None else Tensor._wrap(piece, self.layout)


class _CheckCleared:
    """A replay's first step: the leaves whose .grad it assigns have none (eager mode would add
    to it), checked before any kernel or collective runs."""

    def __init__(self, leaves, names):
        self.leaves, self.names = leaves, names

    def __call__(self):
        for leaf, name in zip(self.leaves, self.names):
            if leaf.grad is not None:
                raise RuntimeError(f"graph: {name} has a .grad from before this call; a graph's backward assigns "
                                   f"gradients (eager mode would add to it): clear them first (optimizer.zero_grad(), "
                                   f"or add_optimizer, which clears them after each step)")


class _StateSetter:
    def __init__(self, t):
        self.t = t

    def __call__(self, piece):
        self.t._local = piece


class _BackwardSink:
    """autograd's sink while a graph captures: the backward assigns gradients (run.assigns), and a
    broadcast leaf's partial gradient is reduced by a recorded all_reduce (Recorder.reduce_grad),
    which the graph's bucketing pass packs, instead of eager mode's buckets."""

    def begin(self, run):
        rec = scope.recorder()
        if rec is None:
            return None
        rec.backward_starts(run.leaves)
        run.assigns = True
        return _BackwardTaker(rec, run.leaves)


class _BackwardTaker:
    def __init__(self, rec, leaves):
        self.rec, self.leaves = rec, leaves

    def take(self, leaf, g):
        if g is not None and leaf.is_global:
            axes = reducible_axes(leaf, g)
            if axes is not None:
                g = self.rec.reduce_grad(leaf, g, axes)
        return g

    def finish(self):
        self.rec.backward_ends(self.leaves)

    def abandon(self):
        pass


BACKWARD_SINK = _BackwardSink()
autograd.sinks.add(BACKWARD_SINK)  # after grad_buckets' (imported above): no_sync's keeping comes first
