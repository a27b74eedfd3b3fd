"""Paddle's block view of a static program: ops with Paddle's op types (a name table, data) and its text."""
from .recorder import sentinel_of

# registered op name -> the op type Paddle prints (Program.global_block().ops[i].type); a name not
# here prints as itself. Kept as data so the graph's own block view can take it over.
PADDLE_TYPES = {
    "add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
    "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
    "pow": "elementwise_pow", "matmul": "matmul_v2", "sum": "reduce_sum", "max": "reduce_max",
    "min": "reduce_min", "prod": "reduce_prod", "reshape": "reshape2", "permute": "transpose2",
    "squeeze": "squeeze2", "unsqueeze": "unsqueeze2", "expand": "expand_v2", "getitem": "slice",
    "embedding": "lookup_table_v2", "conv2d": "conv2d", "max_pool2d": "pool2d", "neg": "scale",
    "greater_than": "greater_than", "index_select": "index_select", "layer_norm": "layer_norm",
    "channel_affine": "batch_norm", "channel_sums": "reduce_sum", "sgd_update": "sgd", "adam_update": "adam",
    "adamw_update": "adamw", "momentum_update": "momentum", "mse_mean": "mse_loss", "linear": "matmul_v2",
    "linear_in_out": "matmul_v2",
}

# registered op -> the ops Paddle records for it (one primitive here, two there): (type, inputs taken)
PADDLE_SEQUENCES = {"linear_in_out": (("matmul_v2", 2), ("elementwise_add", 1))}

# optimizer class -> the update op Paddle appends per parameter
UPDATE_TYPES = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw", "Momentum": "momentum", "Lamb": "lamb"}


def paddle_type(op_name):
    return PADDLE_TYPES.get(op_name, op_name)


class Operator:
    """One op of the block: its Paddle type, the names of what it reads and writes, its attrs."""

    def __init__(self, type, inputs, outputs, attrs=None):
        self.type, self.input_arg_names, self.output_arg_names = type, inputs, outputs
        self.attrs = dict(attrs or {})

    def attr(self, name):
        return self.attrs[name]

    def has_attr(self, name):
        return name in self.attrs

    def __repr__(self):
        attrs = ", ".join(f"{k} = {v!r}" for k, v in sorted(self.attrs.items()))
        return (f"{{Out=[{', '.join(self.output_arg_names)}]}} = {self.type}(inputs={{X=["
                f"{', '.join(self.input_arg_names)}]}}{', ' + attrs if attrs else ''})")


class Block:
    """program.global_block(): ops (Operator), vars, var(name), all_parameters()."""

    idx = 0

    def __init__(self, program):
        self.program = program

    def _name(self, r):
        return self.program.names.get(r, f"tmp_{r}")

    @property
    def ops(self):
        p, ops = self.program, []
        grads = {r: f"{name}@GRAD" for name, r in _grad_names(p)}
        group = None
        for i, ins in enumerate(p.instrs):
            if ins.kind in ("op", "random"):
                kind, gid = p.types.get(id(ins), (paddle_type(ins.name), None))  # random: its name
                outs = [grads.get(r) or self._name(r) for r in ins.outs]
                if gid is not None and gid == group:  # a composite under one type: one op
                    made = set(ops[-1].output_arg_names)
                    ops[-1].input_arg_names += [self._name(r) for r in ins.ins if self._name(r) not in made]
                    ops[-1].output_arg_names = outs
                    continue
                group = gid
                suffix = "_grad" if p.backward_at is not None and i >= p.backward_at else ""
                ops += _sequence(ins.name, kind, [self._name(r) for r in ins.ins], outs, ins.detail, suffix)
            elif ins.kind == "host":
                ops.append(Operator(ins.name, [self._name(r) for r in ins.ins], [self._name(r) for r in ins.outs],
                                    ins.detail))
            elif ins.kind == "set":  # the startup program: a parameter's initializer
                ops.append(Operator(ins.detail["type"], [], [ins.name]))
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


def _sequence(name, kind, ins, outs, attrs, suffix):
    """The Operators Paddle records for one instruction: one, or a chain (each step reads the last
    one's output and its own inputs) for an op in PADDLE_SEQUENCES whose inputs are all there."""
    steps = PADDLE_SEQUENCES.get(name)
    if suffix or steps is None or len(ins) != sum(n for _, n in steps):
        return [Operator(kind + suffix, ins, outs, attrs)]
    ops, taken, last = [], 0, []
    for j, (step_type, n) in enumerate(steps):
        made = outs if j == len(steps) - 1 else [f"{outs[0]}.{step_type}"]
        ops.append(Operator(step_type, last + ins[taken:taken + n], made, attrs if j == 0 else None))
        taken, last = taken + n, made
    return ops


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
