"""Paddle's view of a program: program.global_block().ops, each with Paddle's op type, argument names and attrs."""
# our registered op -> the op type Paddle prints (a table, as data); an op not here keeps its own name
PADDLE_TYPES = {
    "add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
    "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
    "pow": "elementwise_pow", "floor_divide": "elementwise_floordiv", "mod": "elementwise_mod",
    "fmod": "elementwise_mod", "matmul": "matmul_v2", "linear": "fc", "linear_in_out": "fc", "softmax": "softmax",
    "sum": "reduce_sum", "max": "reduce_max", "min": "reduce_min", "prod": "reduce_prod",
    "all": "reduce_all", "any": "reduce_any", "mse_mean": "mse_loss", "reshape": "reshape2",
    "permute": "transpose2", "squeeze": "squeeze2", "unsqueeze": "unsqueeze2", "expand": "expand_v2",
    "embedding": "lookup_table_v2", "max_pool2d": "pool2d", "getitem": "slice", "argmax": "arg_max",
    "argmin": "arg_min", "topk": "top_k_v2", "sort": "argsort", "tril": "tril_triu", "triu": "tril_triu",
    "neg": "scale", "greater_than": "greater_than", "less_than": "less_than", "equal": "equal",
    "sgd_update": "sgd", "momentum_update": "momentum", "adam_update": "adam", "adamw_update": "adamw",
}
# instructions other than ops, as Paddle names the op doing that work (None: a variable, no op)
KIND_TYPES = {
    "const": "assign_value", "reduce": "c_allreduce_sum", "start": "c_allreduce_sum", "wait": "c_wait_comm",
    "send": "send_v2", "recv": "recv_v2", "random": "uniform_random", "host": "memcpy", "set": "assign",
    "grad": "assign", "read": None, "scalar": None, "step": None,
}
COLLECTIVE_TYPES = {"all_reduce": "c_allreduce_sum", "all_gather": "c_allgather", "reduce_scatter": "c_reducescatter",
                    "all_to_all": "alltoall", "broadcast": "c_broadcast", "send": "send_v2", "recv": "recv_v2"}


def paddle_type(ins):
    """The op type Paddle would print for instruction `ins` (None for a variable's read)."""
    if ins.kind in ("op", "update"):
        return PADDLE_TYPES.get(ins.name, ins.name)
    if ins.kind == "box":
        steps = [s.kind.collective for s in getattr(ins.detail, "steps", ()) if s.kind.collective]
        return COLLECTIVE_TYPES.get(steps[0], steps[0]) if steps else "assign"
    return KIND_TYPES.get(ins.kind, ins.kind)


class Operator:
    """One op of a block: .type (Paddle's), .input_arg_names, .output_arg_names, .attr(name)."""

    def __init__(self, block, ins):
        self.block, self.instr = block, ins
        self.type = paddle_type(ins)

    @property
    def input_arg_names(self):
        return [self.block.var_name(r) for r in self.instr.ins]

    @property
    def output_arg_names(self):
        if self.instr.kind in ("grad", "set"):
            return [self.instr.name + ("@GRAD" if self.instr.kind == "grad" else "")]
        if self.instr.kind == "update":  # in place: the parameter and its state (ins: param, grad, states, scalars)
            ins = self.instr.ins
            return [self.block.var_name(r) for r in ins[:1] + ins[2:] if self.block.program.regs[r].kind != "scalar"]
        return [self.block.var_name(r) for r in self.instr.outs]

    @property
    def attr_names(self):
        detail = self.instr.detail
        return sorted(detail) if isinstance(detail, dict) else []

    def attr(self, name):
        detail = self.instr.detail if isinstance(self.instr.detail, dict) else {}
        if name not in detail:
            raise ValueError(f"op {self.type} has no attribute {name!r} (it has {self.attr_names})")
        return detail[name]

    def has_attr(self, name):
        return name in self.attr_names

    def all_attrs(self):
        return {k: self.attr(k) for k in self.attr_names}

    def __repr__(self):
        outs = ", ".join(self.output_arg_names)
        ins = ", ".join(self.input_arg_names)
        attrs = ", ".join(f"{k} = {v!r}" for k, v in self.all_attrs().items())
        return f"{{Out=[{outs}]}} = {self.type}(inputs={{X=[{ins}]}}{', ' + attrs if attrs else ''})"


class Block:
    """The one block of a program (Paddle's global_block()): its ops in order and its variables."""

    def __init__(self, program):
        self.program = program
        self.idx = 0
        self._names = {ins.outs[0]: ins.name for ins in program.instrs if ins.kind in ("read", "scalar")}
        for j, r in enumerate(program.inputs):
            self._names.setdefault(r, f"feed_{j}")

    def var_name(self, r):
        """A register's variable name: the state's name, feed_<j> for an input, else tmp_<r>."""
        return self._names.get(r, f"tmp_{r}")

    @property
    def ops(self):
        return [Operator(self, ins) for ins in self.program.instrs if paddle_type(ins) is not None]

    @property
    def vars(self):
        return {self.var_name(reg.index): reg for reg in self.program.regs}

    def var(self, name):
        found = self.vars.get(name)
        if found is None:
            raise ValueError(f"block has no variable {name!r}")
        return found

    def __repr__(self):
        return "\n".join(repr(op) for op in self.ops)
