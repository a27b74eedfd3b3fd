"""paddle.static.Program: registers and op instructions (graph.program's), with Paddle's names."""
import contextlib
import copy
import itertools

import numpy as np

from ...graph.passes.prune import inference_instrs
from ...graph.program import Instr
from ...registry import REGISTRY
from .block import Block, paddle_type
from .dyn import check_folded
from .param_init import SetInitial, pending
from .recorder import SENTINELS, StaticRecorder, _Kernel, Variable, meta_array, new_reg, recording, set_instr

STATIC = [False]  # paddle.enable_static() sets it
_TOKEN = [None]  # the scope token of enable_static (disable_static resets it)


class Program:
    """Registers (graph.program.Reg: shape and dtype of each value, a dynamic dim at its sentinel
    size) and instructions: `op` (a registered op: name, static attrs as detail), `read` (a
    parameter's value), `const`, `random`, and the training steps `grad`/`step` that minimize
    appends. A Variable's piece names its register (`knows`)."""

    def __init__(self):
        self.regs, self.instrs = [], []
        self.feeds, self.vars, self.names = {}, {}, {}  # name -> reg; name -> Variable; reg -> name
        self.parameters, self.param_regs = [], {}  # parameters in order of first use; id(param) -> reg
        self.param_arrays = {}  # id(param's piece at its first use) -> (param, reg)
        self.tensor_consts = {}  # id(tensor) -> (tensor, reg, its const instruction): a buffer if changed in place
        self.draws = {}  # id(array) -> (array, draw): a factory's random draw, recorded at first use
        self.pending = {}  # id(array) -> (array, (op, kernel, static, inputs, outputs, k)): an eager op on a draw
        self.by_array = {}  # id(piece) -> reg (the pieces are kept alive by their Reg)
        self.backward_at = None  # index of the first instruction of the backward (clone(for_test) cuts there)
        self.grads = {}  # id(param) -> its gradient's reg (append_backward)
        self.minimized = []  # (loss, optimizer, average over ranks)
        self.types = {}  # id(instr) -> (Paddle op type, group) given by a layer (fc's matmul prints as mul)
        self.test_switches = []  # (first instr, end, instrs at inference) of a dropout or batch_norm: clone(for_test)
        self.hints = []  # Paddle op types to give the next ops (static.nn.fc: "mul")
        self.unexplained = []  # values computed from a dynamic dim that no run rule carries (static/dyn.py)
        self.dims_escaped = []  # int(n) / np.asarray(n) of a dynamic dim in user code (static/dyn.py: check_folded)
        self.random_seed = 0
        self._runs, self._pruned = {}, {}  # compiled runs per (fetches, fed sizes); pruned instructions per fetches
        self._startup_of = None  # the startup program whose set instructions initialize our parameters
        self.sparse_tables, self.sparse_lookups = {}, []  # sparse_embedding's: name -> table; (output, lookup)
        self.sparse_grads = []  # (the lookups' output gradient register, its sink) of append_backward
        self.named_params = {}  # ParamAttr(name=...) -> its parameter: layers naming it share it (static.nn)
        self.sparse_candidates = []  # embedding(is_sparse=True) lookups a PS job makes sparse tables (static/sparse)
        self.ps = [None]  # static/ps.py's PSState while attached to a parameter-server client (shared with clones)

    # --- registers ---------------------------------------------------------------------------------
    def knows(self, t):
        """Whether an op on t is recorded: t is a value of the program or a trainable parameter
        (its value is read at each run, so a transpose of a weight is no stale constant)."""
        r = self.by_array.get(id(t._local))
        if r is not None and self.regs[r].array is t._local:
            return True
        if t.requires_grad and t._node is None:
            return True
        seen = self.param_arrays.get(id(t._local))
        return seen is not None and seen[0]._local is t._local

    def deferred(self, t):
        """Whether t is a draw or an eager op's result on one, not yet a value of the program."""
        for table in (self.draws, self.pending):
            found = table.get(id(t._local))
            if found is not None and found[0] is t._local:
                return True
        return False

    def _materialize(self, t):
        """The register of a deferred value: its draw, or its op (inputs first), now instructions."""
        array, (name, kernel, static, inputs, outputs, k) = self.pending.pop(id(t._local))
        ins = [self.reg_of(x, name) for x in inputs]
        regs = [self._reg("value", np.asarray(o._local)) for o in outputs]
        for o in outputs:
            self.pending.pop(id(o._local), None)
        self._append(Instr("op", name, _Kernel(kernel, static), ins, regs, detail=dict(static)))
        return regs[k]

    def _reg(self, kind, array, name=None):
        r = new_reg(self.regs, kind, array)
        self.by_array[id(array)] = r
        if name is not None:
            self.names[r] = name
        return r

    def reg_of(self, t, user):
        """t's register: a Variable's own; a parameter's read (its value at each run); a random
        draw replayed; any other tensor a constant of the program."""
        r = self.by_array.get(id(t._local))
        if r is not None and self.regs[r].array is t._local:
            return r
        seen = self.param_arrays.get(id(t._local))
        if seen is not None and seen[0]._local is t._local:  # a parameter's value by another tensor (autograd's)
            return seen[1]
        if t.requires_grad and t._node is None:  # a parameter: read at every run
            r = self.param_regs.get(id(t))
            if r is None:
                name = getattr(t, "name", None) or f"param_{len(self.parameters)}"
                if hasattr(t, "__dict__") and getattr(t, "name", None) is None:
                    t.name = name  # Paddle's parameters all have one (a layer's unnamed ones: param_k)
                r = self.param_regs[id(t)] = self._reg("state", meta_array(t._local.shape, t._local.dtype), name=name)
                self.parameters.append(t)
                self.param_arrays[id(t._local)] = (t, r)
                self.instrs.append(Instr("read", name, t, [], [r]))
                self._add_initializer(t, name)
            return r
        found = self.pending.get(id(t._local))
        if found is not None and found[0] is t._local:
            return self._materialize(t)
        drawn = self.draws.pop(id(t._local), None)
        array = np.asarray(t._local)
        if drawn is not None and drawn[0] is t._local:
            r = self._reg("value", array)
            self._append(Instr("random", "uniform_random", drawn[1], [], [r], plain=True))
        else:
            r = self._reg("const", array)
            check_folded(array, self)  # 0.1 * n as an operand: a float no hook saw
            self.instrs.append(Instr("const", "assign_value", array, [], [r]))
            if not isinstance(t, Variable):
                self.tensor_consts[id(t)] = (t, r, self.instrs[-1])
        return r

    def buffer_update(self, t, r_new):
        """t (a buffer the program read as a constant) was changed in place to register r_new: it is
        read at each run instead, and takes r_new's value after it (a running statistic)."""
        found = self.tensor_consts.pop(id(t), None)
        if found is None:
            return
        _, r, instr = found
        t._local = self.regs[r].array  # its value until a run sets it
        instr.kind, instr.fn, instr.name = "read", t, "buffer"
        self.regs[r].kind = "state"
        self.instrs.append(Instr("set", "buffer", _BufferSetter(t), [r_new], []))

    def _add_initializer(self, t, name):
        """The startup program's instructions that give t its initial value: its initializer's draw
        (static.nn's layers: param_init.py, run only when the startup program runs) or a copy of
        its value now (any other parameter)."""
        startup = default_startup_program() if self._startup_of is None else self._startup_of
        deferred = pending(t)
        if deferred is not None:
            startup.instrs.append(Instr("set", name, SetInitial(t, deferred), [], [], detail={"type": deferred.paddle_type}))
            return
        value = np.array(t._local, copy=True)
        r = startup._reg("const", value)
        kind = "fill_constant" if np.all(value == value.reshape(-1)[:1]) else "uniform_random"
        startup.instrs.append(Instr("const", "initial_value", value, [], [r]))
        startup.instrs.append(set_instr(name, t, r, kind))

    def emit_op(self, name, fn, ins, outs, static):
        regs = []
        for var in outs:
            r = self._reg("value", var._local, name=var.name)
            self.vars[var.name] = var
            regs.append(r)
        self._append(Instr("op", name, fn, ins, regs, detail=dict(static)))

    def _append(self, instr):
        if self.hints:
            self.types[id(instr)] = self.hints[-1]  # the Paddle op type it prints as, where a layer says
        self.instrs.append(instr)

    def type_of(self, op_name):
        return self.hints[-1][0] if self.hints else paddle_type(op_name)

    @contextlib.contextmanager
    def hint(self, paddle_op):
        """The ops recorded inside print as one op of Paddle's type paddle_op (a composite: mean's
        sum and divide print as reduce_mean; fc's matmul as mul)."""
        self.hints.append((paddle_op, next(_GROUPS)))
        try:
            yield
        finally:
            self.hints.pop()

    @contextlib.contextmanager
    def dropout(self, x):
        """F.dropout(x) inside: its ops print as one dropout op, and clone(for_test=True) makes the
        region its input (Paddle's upscale_in_train dropout at inference). Yields done(out) -> out."""
        start, found = len(self.instrs), []
        with self.hint("dropout"):
            yield lambda out: found.append(out) or out
        if found and self.knows(x) and self.knows(found[0]) and found[0] is not x:
            x_reg, out_reg = self.reg_of(x, "dropout"), self.reg_of(found[0], "dropout")
            kept = Instr("op", "scale", _Kernel(REGISTRY["scale"].kernel, _IS_TEST), [x_reg], [out_reg],
                         detail=dict(_IS_TEST))  # x * 1.0 + 0.0: x, bitwise; an op saved as data
            self.types[id(kept)] = ("dropout", None)
            self.test_switches.append((start, len(self.instrs), [kept]))

    def recorded_apart(self, fn):
        """The instructions fn() records, taken out of the program (an op's inference form, which
        clone(for_test=True) swaps in), and fn's result."""
        start = len(self.instrs)
        result = fn()
        made = self.instrs[start:]
        del self.instrs[start:]
        return made, result

    def add_feed(self, name, shape, dtype):
        if len(shape) > len(SENTINELS):
            raise ValueError(f"data {name!r}: at most {len(SENTINELS)} dims, got {len(shape)}")
        var = Variable(meta_array([SENTINELS[i] if d is None else d for i, d in enumerate(shape)], dtype.np), name,
                       self)
        self.feeds[name] = self._reg("input", var._local, name=name)
        self.vars[name] = var
        return var

    # --- Paddle's API ------------------------------------------------------------------------------
    def all_parameters(self):
        return list(self.parameters)

    def add_parameters(self, params):
        pass  # parameters join the program at their first use (reg_of)

    def global_block(self):
        return Block(self)

    def block(self, index):
        if index != 0:
            raise IndexError(f"block {index}: a static program here has one block (0)")
        return Block(self)

    @property
    def num_blocks(self):
        return 1

    def list_vars(self):
        return list(self.vars.values()) + list(self.parameters)

    def var(self, name):
        found = self.vars.get(name)
        if found is None:
            found = next((p for p in self.parameters if getattr(p, "name", None) == name), None)
        if found is None:
            raise ValueError(f"var {name!r} is not in this program")
        return found

    def clone(self, for_test=False):
        """A copy (sharing parameters); for_test drops the backward and the updates (Paddle's
        inference program: cut at the first instruction of append_backward)."""
        twin = copy.copy(self)
        twin.instrs = list(self.instrs)
        if for_test:  # cut at the backward; dropout and batch_norm in their inference forms (graph.passes)
            twin.instrs = inference_instrs(self.instrs, self.feeds.values(), self.backward_at, self.test_switches)
            twin.test_switches = []
        twin.regs, twin.vars = list(self.regs), dict(self.vars)
        twin.feeds, twin.names, twin.by_array = dict(self.feeds), dict(self.names), dict(self.by_array)
        twin.parameters, twin.param_regs = list(self.parameters), dict(self.param_regs)
        twin.param_arrays, twin.unexplained = dict(self.param_arrays), list(self.unexplained)
        twin.dims_escaped = list(self.dims_escaped)
        twin._runs, twin._pruned, twin.hints, twin.types = {}, {}, [], dict(self.types)
        if for_test:
            twin.grads, twin.minimized, twin.backward_at = {}, [], None
        else:
            twin.grads, twin.minimized = dict(self.grads), list(self.minimized)
        return twin

    def __str__(self):
        return str(Block(self))

    __repr__ = __str__


_IS_TEST = {"scale": 1.0, "bias": 0.0, "bias_after_scale": True}  # dropout at inference (upscale_in_train)


_GROUPS = itertools.count()  # hint groups: the ops of one composite print as one Paddle op


class _BufferSetter:
    def __init__(self, t):
        self.t = t

    def __call__(self, piece):
        self.t._local = np.array(piece, copy=True)


class _Holder:
    main, startup = Program(), Program()


def default_main_program():
    return _Holder.main


def default_startup_program():
    return _Holder.startup


RECORDER = StaticRecorder(default_main_program)


def enable():
    STATIC[0] = True
    if _TOKEN[0] is None:
        _TOKEN[0] = recording(RECORDER)


def disable():
    STATIC[0] = False
    if _TOKEN[0] is not None:
        from ... import scope
        try:
            scope.current.reset(_TOKEN[0])
        except ValueError:  # entered in another context: leave the recorder out of this one
            scope.current.set(scope.current.get().but(recorder=None))
        _TOKEN[0] = None


@contextlib.contextmanager
def program_guard(main_program, startup_program=None):
    """Ops recorded inside the with block go to main_program (parameters' initializers to startup_program)."""
    before = _Holder.main, _Holder.startup
    _Holder.main = main_program
    if startup_program is not None:
        _Holder.startup = startup_program
    main_program._startup_of = _Holder.startup
    try:
        yield
    finally:
        _Holder.main, _Holder.startup = before


def data(name, shape, dtype="float32", lod_level=0):
    """paddle.static.data: a placeholder fed by Executor.run(feed={name: array}); None or -1 in
    shape is a dim the feed decides (the batch)."""
    if not STATIC[0]:
        raise RuntimeError("paddle.static.data needs static mode: call paddle.enable_static() first")
    from ...dtype import to_dtype
    dims = [None if d in (None, -1) else int(d) for d in shape]
    return _Holder.main.add_feed(name, dims, to_dtype(dtype))
