"""Paddle's block view of a static program: ops with Paddle's op types (a name table, data) and its text."""
from ...graph.blocks import UPDATE_TYPES, Block as GraphBlock, Operator, op_type as paddle_type, sequence
from .recorder import sentinel_of

__all__ = ["Block", "Operator", "UPDATE_TYPES", "paddle_type"]  # the op-type tables live in graph/blocks.py


class Block(GraphBlock):
    """program.global_block(): graph's block view with what a static program adds: Paddle's
    variable names, feeds and parameters, `_grad` ops after append_backward, the startup
    program's initializer ops and the minimize/update ops."""

    parent_idx = -1  # a program here has one block (idx 0)

    def __init__(self, program):
        self.program = program

    def var_name(self, r):
        return self.program.names.get(r, f"tmp_{r}")

    _name = var_name

    @property
    def ops(self):
        p, ops = self.program, []
        grads = {r: f"{name}@GRAD" for name, r in _grad_names(p)}
        group, made = None, set()
        for i, ins in enumerate(p.instrs):
            if ins.kind in ("op", "random"):
                kind, gid = p.types.get(id(ins), (paddle_type(ins.name), None))  # random: its name
                outs = [grads.get(r) or self._name(r) for r in ins.outs]
                if gid is not None and gid == group:  # a composite under one type: one op
                    made.update(ops[-1].output_arg_names)
                    ops[-1].input_arg_names += [n for n in map(self._name, ins.ins)
                                                if n not in made and n not in ops[-1].input_arg_names]
                    ops[-1].output_arg_names = outs
                    continue
                group, made = gid, set()
                suffix = "_grad" if p.backward_at is not None and i >= p.backward_at else ""
                ins_names = [self._name(r) for r in ins.ins]
                ops += ([Operator(kind + suffix, ins_names, outs, ins.detail)] if suffix
                        else sequence(ins.name, kind, ins_names, outs, ins.detail))
            elif ins.kind == "host":
                ops.append(Operator(ins.name, [self._name(r) for r in ins.ins], [self._name(r) for r in ins.outs],
                                    ins.detail))
            elif ins.kind == "set" and ins.detail:  # the startup program: a parameter's initializer
                ops.append(Operator(ins.detail["type"], [], [ins.name]))
            elif ins.kind == "step" and ins.detail and getattr(getattr(p, "ps", (None,))[0], "ops", None):
                ops += p.ps[0].ops  # on a parameter server: the transpiler's send / recv (fluid/transpiler.py)
            elif ins.kind == "step" and ins.detail:
                if ins.detail.get("average"):  # the gradients' average over the ranks (nccl2 / collective)
                    ops += [Operator("c_allreduce_sum", [grad], [grad]) for _, grad in ins.detail["pairs"]]
                for param, grad in ins.detail["pairs"]:
                    ops.append(Operator(ins.detail["type"], [param, grad, "learning_rate_0"], [param]))
        return ops

    @property
    def vars(self):
        return dict(self.program.vars, **{getattr(q, "name", f"param_{i}"): q
                                          for i, q in enumerate(self.program.parameters)})

    def var(self, name):
        return self.program.var(name)

    def all_parameters(self):
        return self.program.all_parameters()

    def __str__(self):
        p = self.program
        lines = ["{ // block_idx:0  parent_idx:-1  forward_idx:-1  backward_idx:-1"]
        for name, r in p.feeds.items():
            lines.append(f"    var {name} : DENSE_TENSOR.shape({_shape(p, r)}).dtype({p.regs[r].dtype.name})"
                         f".stop_gradient(True)")
        for q in p.parameters:
            name = getattr(q, "name", "param")
            lines.append(f"    persist trainable param {name} : DENSE_TENSOR.shape({_tuple(q.shape)})"
                         f".dtype({q.dtype.name}).stop_gradient(False)")
        for op in self.ops:
            lines.append(f"    {op!r}")
        for loss, opt, average in p.minimized:
            lines.append(f"    // minimize {loss.name} with {type(opt).__name__}"
                         f"{' (gradients averaged over the ranks)' if average else ''}")
        lines.append("}")
        return "\n".join(lines)


def _shape(program, r):
    return _tuple(-1 if sentinel_of(n) else n for n in program.regs[r].local_shape)


def _tuple(dims):
    """Paddle's way: (13, 8), (8,), ()."""
    return str(tuple(int(n) for n in dims))[1:-1]


def _grad_names(program):
    for q in program.parameters:
        r = program.grads.get(id(q))
        if r is not None:
            yield getattr(q, "name", "param"), r
