"""Static mode's recorder: ops on Variables become graph instructions, shapes from the ops' metas."""
import functools
import itertools

import numpy as np

from ... import dispatch, scope
from ...graph.program import Instr, Reg
from ...tensor import Tensor
from .dyn import SENTINELS, DynDim, _Traced, check_attr, sentinel_of  # noqa: F401 (names static mode shares)
from .norm import record_batch_norm

def meta_array(shape, dtype):
    """A zero-stride read-only array of this shape: a value's shape and dtype, no memory, no data."""
    return np.broadcast_to(np.zeros((), np.dtype(dtype)), tuple(shape))


class VarShape(list):
    """A Variable's shape: Paddle's list (-1 for a dynamic dim), adding to a tuple as a Size does."""

    def __getitem__(self, index):
        found = list.__getitem__(self, index)
        return VarShape(found) if isinstance(index, slice) else found

    def __add__(self, other):
        return VarShape(list(self) + list(other))

    def __radd__(self, other):
        return VarShape(list(other) + list(self))

    def numel(self):
        n = 1
        for d in self:
            n = n * d  # traced where d is a dynamic dim
        return n


class Variable(Tensor):
    """A value of a static program: a tensor whose piece is a meta array (shape and dtype only),
    with its name and Paddle's shape (-1 for a dim the feed decides)."""

    __slots__ = ("name", "_dyn", "program", "persistable")

    def __init__(self, array, name, program):
        super().__init__(array)
        self.name, self.program, self.persistable = name, program, False
        self._dyn = tuple(bool(sentinel_of(n)) for n in array.shape)

    @property
    def shape(self):
        return VarShape(DynDim(n, self.program) if d else n for n, d in zip(self._global_shape, self._dyn))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def block(self):
        """The block the variable is in (a program here has one): `loss.block.program` is its program."""
        return self.program.global_block()

    def numel(self):
        """The element count, traced where a dim is dynamic (a mean's count, a variance's n - 1)."""
        return self.shape.numel()

    def __repr__(self):
        return f"var {self.name} : shape({', '.join(map(str, self.shape))}) dtype({self.dtype.name})"

    __str__ = __repr__

    def __len__(self):
        return self.shape[0]

    def numpy(self):
        raise RuntimeError(f"{self.name} is a variable of a static program (it has no value until Executor.run "
                           f"fetches it: exe.run(program, feed=..., fetch_list=[{self.name!r}]))")

    def item(self):
        self.numpy()


class _Shaped:
    """What dispatch's shape inference reads of an input: shape and dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


class _Kernel:
    """A registered op's kernel with its static arguments, returning a tuple of arrays (replay's op call)."""

    def __init__(self, kernel, static):
        self.call = functools.partial(kernel, **static) if static else kernel

    def __call__(self, *pieces):
        out = self.call(*pieces)
        if type(out) is np.ndarray:  # the common case, without a generator per replayed op
            return (out,)
        if isinstance(out, tuple):
            return tuple(o if type(o) is np.ndarray else np.asarray(o) for o in out)
        return (np.asarray(out),)


class _Setter:
    """A state tensor takes the register's piece (a parameter's initial value: the startup program)."""

    def __init__(self, t):
        self.t = t

    def __call__(self, piece):
        self.t._local = np.array(piece, copy=True)


class StaticRecorder:
    """scope's recorder while static mode is on: an op with a Variable among its inputs is recorded
    into the current main program (its outputs: Variables from the op's meta, at both probe sizes);
    any other op runs eagerly as usual (a layer's parameter initialization, say)."""

    records_paddle_static = True  # paddle/_composites.py: the face's composites print as Paddle's ops
    takes_row_grads = True  # a sparse table's gradient stays rows (append_backward registers its parts)

    def __init__(self, current_program):
        self.current = current_program  # () -> the main program of program_guard
        self._names = itertools.count()

    # --- what dispatch and the lower layers report -------------------------------------------------
    def apply(self, opdef, kernel, tensors, static):
        program = self.current()
        if not any(program.knows(t) for t in tensors):
            outs = _eager(opdef, kernel, tensors, static)
            if any(program.deferred(t) for t in tensors):  # an op on a draw: recorded if the program uses it
                for k, out in enumerate(outs):
                    _bounded_put(program.pending, out._local, (opdef.name, kernel, static, tensors, outs, k))
            return outs
        if any(t._placement is not None for t in tensors):
            raise TypeError(f"{opdef.name}: static mode records local values (each rank runs its program on its "
                            f"own batch); a global tensor cannot enter a static program")
        if opdef.data_dependent:
            raise TypeError(f"{opdef.name}: its output shape depends on the values, which a static program cannot "
                            f"record (shapes come from the ops' metas)")
        ins = [program.reg_of(t, opdef.name) for t in tensors]
        shapes = [program.regs[r].local_shape for r in ins]
        out_shapes, dtypes = dispatch._infer(opdef, [_Shaped(s, t.dtype) for s, t in zip(shapes, tensors)], static)
        check_attr(static, program)  # a traced int the run's rule would not substitute marks the program
        static = _plain(static)  # a dynamic dim in an attribute is its sentinel size (an int) from here on
        stem = f"{program.type_of(opdef.name)}_{next(self._names)}"
        outs = [Variable(meta_array(sh, dt.np), f"{stem}.tmp_{k}", program)
                for k, (sh, dt) in enumerate(zip(out_shapes, dtypes))]
        program.emit_op(opdef.name, _Kernel(kernel, static), ins, outs, static)
        return tuple(outs)

    def dropout(self, x):
        """paddle's dropout(x) recorded as one op (Program.dropout); a context yielding done(out)."""
        return self.current().dropout(x)

    def batch_norm(self, x, running_mean, running_var, weight, bias, training, momentum, epsilon):
        """paddle's batch_norm recorded as one op updating the moving statistics (static.nn's)."""
        return record_batch_norm(self.current(), x, running_mean, running_var, weight, bias, training, momentum,
                                 epsilon)

    def constant(self, t):
        pass  # a factory's value: a constant of the program at its first use (reg_of)

    def random(self, t, draw, spec=None):
        """A factory's draw: kept (bounded) until it is used; an op on it runs eagerly and is kept
        too (`defer`). Where such a value meets the program (dropout's mask times a Variable) the
        draw and the ops on it become instructions, drawn again at each run (at the fed size); a
        value never used by the program (a parameter's initializer) leaves no trace."""
        _bounded_put(self.current().draws, t._local, draw)

    def became(self, t):
        """t took a new value in place: a Variable simply names the new register; another tensor (a
        buffer) becomes state of the program, read at each run and set to the new value after it."""
        program = self.current()
        r = program.by_array.get(id(t._local))
        if r is None or program.regs[r].array is not t._local or isinstance(t, Variable):
            return
        program.buffer_update(t, r)

    def host_step(self, name, fn, tensors):
        program = self.current()
        if not any(program.knows(t) for t in tensors):
            return fn(*[t._local for t in tensors])
        raise TypeError(f"static mode: {name} works on a variable's memory outside the ops, which a static "
                        f"program cannot record")

    def refuse_readback(self, what, t):
        program = self.current()
        r = program.by_array.get(id(t._local))
        if r is not None and program.regs[r].array is t._local and program.regs[r].kind != "const":
            raise RuntimeError(f"{what} reads the value of a variable of a static program into Python: it has no "
                               f"value until Executor.run fetches it")

    def step(self, name, fn):
        return fn()

    def from_local(self, x, make):
        return make()

    def convert(self, x, p):
        raise TypeError("static mode: a global layout conversion cannot be recorded into a static program")

    def knows(self, t):
        return self.current().knows(t)

    def name_of(self, t):
        return getattr(t, "name", None) or "tensor"

    def backward_starts(self, leaves):
        pass

    def backward_ends(self, leaves):
        pass

    def reduce_grad(self, leaf, g, axes):
        raise TypeError("static mode: a global parameter cannot be trained by a static program")


KEPT = 64  # draws and ops on draws kept until the program uses them (they are used right after they are made)


def _bounded_put(table, array, value):
    if len(table) >= KEPT:
        del table[next(iter(table))]
    table[id(array)] = (array, value)


def _plain(value):
    """value with every DynDim made a plain int (static attributes are data: saved, compared, substituted)."""
    if isinstance(value, _Traced):
        return int.__int__(value) if isinstance(value, int) else float.__float__(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v) for v in value)
    return value


def _eager(opdef, kernel, tensors, static):
    """The op as dispatch runs it without a recorder (autograd is recorded by dispatch after)."""
    if tensors[0]._placement is not None:
        return dispatch._apply_global(opdef, kernel, tensors, static)
    result = kernel(*[t._local for t in tensors], **static)
    return tuple(Tensor(np.asarray(o)) for o in (result if isinstance(result, tuple) else (result,)))


def new_reg(regs, kind, array):
    reg = Reg(len(regs), kind, None, array)
    regs.append(reg)
    return reg.index


def set_instr(name, t, reg, kind):
    """The startup program's instruction that gives t its initial value (Paddle's op type as detail)."""
    return Instr("set", name, _Setter(t), [reg], [], detail={"type": kind})


def recording(recorder):
    """The scope static mode runs in (enable_static enters it, disable_static leaves it)."""
    return scope.current.set(scope.current.get().but(recorder=recorder))


def _install_paddle_types():
    from .._composites import install
    install(Variable, "Tensor")  # x.mean() prints as reduce_mean, x - 1.0 as scale (graph/blocks.py's table)
    install(Variable, "Tensor.scalar")


_install_paddle_types()
