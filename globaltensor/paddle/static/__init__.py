"""paddle.static: Paddle's static mode, recording registered ops into programs of graph instructions.

`paddle.enable_static()` puts static mode's recorder in scope: every op with a Variable among its
inputs (`data(name, shape=[None, 32])`, and what is computed from it by Paddle functions, layers,
Tensor methods and operators, composites and autograd's backward included) is recorded as an
`op` instruction of the current main program, its output shapes from the op's meta (no kernel
runs until Executor.run). `optimizer.minimize(cost)` records the backward (append_backward) and
the update; `Executor(place).run(program, feed={name: array}, fetch_list=[var or name])` runs the
program, pruned to the fetches, through graph replay. In collective mode (fleet.init, or the nccl2
transpiler) each rank feeds its own batch and the gradients are averaged over the ranks.
"""
from ... import autograd as _autograd
from .block import UPDATE_TYPES, Block, Operator
from .executor import CompiledProgram, Executor
from .program import (STATIC, Program, data, default_main_program, default_startup_program, program_guard)
from .recorder import Variable
from .io import (InputSpec, load, load_inference_model, load_program_state, save, save_inference_model,
                 set_program_state)
from . import nn  # noqa: F401 - paddle.static.nn
from .sparse import local_rule, sparse_grads

__all__ = ["Program", "Variable", "data", "default_main_program", "default_startup_program", "program_guard",
           "Executor", "CompiledProgram", "nn", "in_static_mode", "cpu_places", "cuda_places", "append_backward",
           "gradients", "save", "load", "save_inference_model", "load_inference_model", "InputSpec", "Block",
           "Operator", "global_scope", "scope_guard", "load_program_state", "set_program_state", "name_scope"]


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


class _Scope:
    """global_scope(): find_var(name).get_tensor() gives a parameter's value (Paddle's scope)."""

    def find_var(self, name):
        for q in default_main_program().parameters:
            if getattr(q, "name", None) == name:
                return _ScopeVar(q)
        return None


class _ScopeVar:
    def __init__(self, t):
        self.t = t

    def get_tensor(self):
        return self.t


def global_scope():
    return _Scope()


def scope_guard(scope):
    import contextlib
    return contextlib.nullcontext()


def name_scope(prefix=None):
    import contextlib
    return contextlib.nullcontext()


def _static_variable(value, what):
    if not isinstance(value, Variable):
        raise TypeError(f"{what} takes a Variable of a static program, got {type(value).__name__}")
    return value


def append_backward(loss, parameter_list=None, no_grad_set=None, callbacks=None, checkpoints=None):
    """Records the backward of loss into its program (ops of the gradients, from the recorded ops'
    backward rules); returns [(parameter, gradient Variable)] for the trainable parameters."""
    program = _static_variable(loss, "append_backward").program
    if program.backward_at is None:
        program.backward_at = len(program.instrs)
    params = [p for p in program.parameters if p.requires_grad]
    for p in params + [out for out, _ in program.sparse_lookups]:
        p.grad = None
    loss.backward()
    program.sparse_grads = sparse_grads(program)  # the sparse_embedding lookups' output gradients
    pairs = []
    wanted = None if parameter_list is None else {id(p) if not isinstance(p, str) else p for p in parameter_list}
    for p in params:
        g, p.grad = p.grad, None
        name = getattr(p, "name", None) or "param"
        if g is None or (wanted is not None and id(p) not in wanted and name not in wanted):
            continue
        if getattr(g, "is_rows", False):  # a sparse table's row gradient: each part's rows and values registers
            regs = [program.reg_of(t, "append_backward") for part in g.parts for t in part]
            _grad_rows(program)[id(p)] = (regs, g.shape)
            g = g.parts[0][1]
        r = program.reg_of(g, "append_backward")
        program.grads[id(p)] = r
        gname = f"{name}@GRAD"
        program.names[r] = gname
        var = Variable(program.regs[r].array, gname, program)
        program.vars[gname] = var
        pairs.append((p, var))
    return pairs


def gradients(targets, inputs, target_gradients=None, no_grad_set=None):
    """d targets / d inputs as Variables of the program (None where an input does not reach the targets)."""
    targets = list(targets) if isinstance(targets, (list, tuple)) else [targets]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    program = _static_variable(targets[0], "gradients").program
    if program.backward_at is None:
        program.backward_at = len(program.instrs)
    if target_gradients is not None and not isinstance(target_gradients, (list, tuple)):
        target_gradients = [target_gradients]
    grads = _autograd.grad(targets, inputs, grad_outputs=target_gradients, allow_unused=True)
    out = []
    for x, g in zip(inputs, grads):
        if g is None:
            out.append(None)
            continue
        r = program.reg_of(g, "gradients")
        name = f"{getattr(x, 'name', 'x')}@GRAD"
        program.names[r] = name
        var = program.vars[name] = Variable(program.regs[r].array, name, program)
        out.append(var)
    return out


class _Update:
    """The update of a minimize at each run: gradients averaged over the ranks (collective mode),
    then the optimizer's step (and the sparse tables' rows: static/sparse.py), then its gradients
    cleared (the program assigns them each run). Attached to a parameter server (static/ps.py),
    `remote` runs instead."""

    def __init__(self, optimizer, params, average, program):
        self.optimizer, self.params, self.average, self.program = optimizer, params, average, program
        self.remote = None

    def __call__(self):
        if self.remote is not None:
            return self.remote(self)
        if self.average:
            from ..distributed.fleet.utils.hybrid_parallel_util import fused_allreduce_gradients
            fused_allreduce_gradients(self.params)
        self.optimizer.step()
        self.optimizer.clear_grad(set_to_zero=False)
        if self.program.sparse_tables:
            rule = local_rule(self.program)
            for table in self.program.sparse_tables.values():
                ids, grads = table.take_grads()
                if len(ids):
                    table.local_table(rule).push(ids, grads)


class _GradSetter:
    def __init__(self, param):
        self.param = param

    def __call__(self, piece):
        from ...tensor import Tensor
        self.param.grad = Tensor(piece)


class _RowGradSetter:
    """The .grad of a table looked up with is_sparse=True: its rows and their values (a RowGrad)."""

    def __init__(self, param, shape):
        self.param, self.shape = param, shape

    def __call__(self, *pieces):  # rows, values of each part
        from ...ops.row_grad import RowGrad
        from ...tensor import Tensor
        parts = [(Tensor(pieces[i]), Tensor(pieces[i + 1])) for i in range(0, len(pieces), 2)]
        self.param.grad = RowGrad(parts, self.shape, self.param.dtype)


def _grad_rows(program):
    """{id(parameter): (its row gradient's registers: rows, values of each part; table shape)}."""
    found = program.__dict__.get("grad_rows")
    if found is None:
        found = program.grad_rows = {}
    return found


def record_minimize(optimizer, loss, average=None):
    """optimizer.minimize(loss) in static mode: append_backward, then per parameter a `grad`
    instruction (its .grad takes the gradient) and one `step` (the optimizer's update; Paddle's
    per-parameter update ops in the block view). The program's parameters become the optimizer's
    when it was made without any."""
    from ...graph.program import Instr
    program = _static_variable(loss, "minimize").program
    pairs = append_backward(loss)
    if not any(g["params"] for g in optimizer.param_groups):
        optimizer.param_groups[0]["params"] = [p for p, _ in pairs]
    if average is None:
        from ..distributed import fleet
        average = bool(fleet._state["initialized"])
    rows = _grad_rows(program)
    for p, g in pairs:
        if id(p) in rows:
            regs, shape = rows[id(p)]
            program.instrs.append(Instr("grad", g.name, _RowGradSetter(p, shape), regs, []))
        else:
            program.instrs.append(Instr("grad", g.name, _GradSetter(p), [program.grads[id(p)]], []))
    for r, sink in program.sparse_grads:
        program.instrs.append(Instr("grad", program.names[r], sink, [r], []))
    kind = UPDATE_TYPES.get(type(optimizer).__name__, type(optimizer).__name__.lower())
    detail = {"type": kind, "pairs": [(getattr(p, "name", "param"), g.name) for p, g in pairs], "average": average}
    update = _Update(optimizer, [p for p, _ in pairs], average, program)
    program.instrs.append(Instr("step", type(optimizer).__name__, update, [], [], detail=detail))
    program.minimized.append((loss, optimizer, average))
    return None, pairs
