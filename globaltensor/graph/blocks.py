"""Paddle's view of a program: program.global_block().ops, each with Paddle's op type, argument names and attrs."""
# our registered op -> the op type Paddle prints (a table, as data); an op not here keeps its own name.
# The one table of the project: graph programs and Paddle's static programs (paddle/static/block.py) print from it.
PADDLE_TYPES = {
    "add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
    "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
    "pow": "elementwise_pow", "floor_divide": "elementwise_floordiv", "mod": "elementwise_mod",
    "fmod": "elementwise_mod", "matmul": "matmul_v2", "linear": "matmul_v2", "linear_in_out": "matmul_v2",
    "softmax": "softmax", "sum": "reduce_sum", "max": "reduce_max", "min": "reduce_min", "prod": "reduce_prod",
    "all": "reduce_all", "any": "reduce_any", "mse_mean": "mse_loss", "reshape": "reshape2",
    "permute": "transpose2", "squeeze": "squeeze2", "unsqueeze": "unsqueeze2", "expand": "expand_v2",
    "embedding": "lookup_table_v2", "max_pool2d": "pool2d", "getitem": "slice", "argmax": "arg_max",
    "argmin": "arg_min", "topk": "top_k_v2", "sort": "argsort", "tril": "tril_triu", "triu": "tril_triu",
    "neg": "scale", "greater_than": "greater_than", "less_than": "less_than", "equal": "equal",
    "conv2d": "conv2d", "index_select": "index_select", "layer_norm": "layer_norm",
    "channel_affine": "batch_norm", "channel_sums": "reduce_sum", "batch_norm_apply": "batch_norm",
    "batch_norm_stats": "reduce_sum",
    "sgd_update": "sgd", "momentum_update": "momentum", "adam_update": "adam", "adamw_update": "adamw",
    "diag": "diag_v2", "square": "square",
}
# registered op -> the ops Paddle records for it (one primitive here, a chain there): (type, inputs taken);
# paddle.nn.Linear records matmul_v2 then elementwise_add in Paddle 3.3.1's static Program (fc: mul, then add)
PADDLE_SEQUENCES = {"linear_in_out": (("matmul_v2", 2), ("elementwise_add", 1)),
                    "linear": (("matmul_v2", 2), ("elementwise_add", 1)),
                    "mse_mean": (("elementwise_sub", 2), ("square", 0), ("reduce_mean", 0))}
# a function of Paddle's face whose ops here are a composite -> the one op type Paddle 3.3.1 records for it
# (checked against real Paddle's static Program in tests/faces/test_paddle_static_types.py); by namespace:
# "paddle" (paddle.mean), "paddle.nn.functional" (F.silu) and "Tensor" (a Variable's x.mean()); in
# the ".scalar" tables only where an operand is a number (x - 1.0 and paddle.pow(x, 2.0): Paddle's scale, pow).
PADDLE_COMPOSITES = {
    "paddle": {"mean": "reduce_mean", "flatten": "flatten_contiguous_range", "gather": "gather", "addmm": "addmm"},
    "paddle.scalar": {"pow": "pow"},
    "paddle.nn.functional": {
        "log_softmax": "log_softmax", "silu": "silu", "swish": "swish", "leaky_relu": "leaky_relu", "elu": "elu",
        "hardswish": "hard_swish", "hardsigmoid": "hard_sigmoid", "relu6": "relu6", "mish": "mish",
        "softsign": "softsign", "tanhshrink": "tanh_shrink", "log_sigmoid": "logsigmoid", "prelu": "prelu",
        "one_hot": "one_hot_v2", "label_smooth": "label_smooth", "softplus": "softplus",
        "softmax_with_cross_entropy": "softmax_with_cross_entropy", "avg_pool2d": "pool2d",
        "adaptive_avg_pool2d": "pool2d", "group_norm": "group_norm", "nll_loss": "nll_loss",
        "cross_entropy": "softmax_with_cross_entropy", "kl_div": "kldiv_loss", "smooth_l1_loss": "huber_loss",
        "binary_cross_entropy_with_logits": "sigmoid_cross_entropy_with_logits",
    },
    "Tensor": {"mean": "reduce_mean", "flatten": "flatten_contiguous_range", "sum": "reduce_sum"},
    "Tensor.scalar": {"__add__": "scale", "__radd__": "scale", "__sub__": "scale", "__rsub__": "scale",
               "__mul__": "scale", "__rmul__": "scale", "__truediv__": "scale", "pow": "pow"},
}
# a loss composite whose reduction (x.mean(), x.sum() inside it) Paddle records as its own op after the loss op
REDUCED_LOSSES = {"softmax_with_cross_entropy", "kldiv_loss", "huber_loss", "sigmoid_cross_entropy_with_logits",
                  "nll_loss"}
# optimizer class -> the update op Paddle appends per parameter
UPDATE_TYPES = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw", "Momentum": "momentum", "Lamb": "lamb"}
# instructions other than ops, as Paddle names the op doing that work (None: a variable, no op)
KIND_TYPES = {
    "const": "assign_value", "reduce": "c_allreduce_sum", "start": "c_allreduce_sum", "wait": "c_wait_comm",
    "send": "send_v2", "recv": "recv_v2", "random": "uniform_random", "host": "memcpy", "set": "assign",
    "grad": "assign", "read": None, "scalar": None, "step": None,
}
COLLECTIVE_TYPES = {"all_reduce": "c_allreduce_sum", "all_gather": "c_allgather", "reduce_scatter": "c_reducescatter",
                    "all_to_all": "alltoall", "broadcast": "c_broadcast", "send": "send_v2", "recv": "recv_v2"}


def op_type(op_name):
    """The op type Paddle prints for registered op `op_name`."""
    return PADDLE_TYPES.get(op_name, op_name)


def paddle_type(ins):
    """The op type Paddle would print for instruction `ins` (None for a variable's read)."""
    if ins.kind in ("op", "update"):
        return op_type(ins.name)
    if ins.kind == "box":
        steps = [s.kind.collective for s in getattr(ins.detail, "steps", ()) if s.kind.collective]
        return COLLECTIVE_TYPES.get(steps[0], steps[0]) if steps else "assign"
    if ins.kind == "start":  # a bucket's all_reduce or a prefetched all_gather
        return COLLECTIVE_TYPES.get(ins.name, KIND_TYPES["start"])
    return KIND_TYPES.get(ins.kind, ins.kind)


def sequence(name, kind, ins, outs, attrs=None):
    """The Operators Paddle records for one op instruction: one of type `kind`, or a chain (each
    step reads the last one's output and its own inputs) for an op in PADDLE_SEQUENCES whose
    inputs are all there (linear without a bias is one matmul_v2)."""
    steps = PADDLE_SEQUENCES.get(name)
    if steps is None or len(ins) != sum(n for _, n in steps):
        return [Operator(kind, ins, outs, attrs)]
    ops, taken, last = [], 0, []
    for j, (step_type, n) in enumerate(steps):
        made = list(outs) if j == len(steps) - 1 else [f"{outs[0]}.{step_type}"]
        ops.append(Operator(step_type, last + list(ins[taken:taken + n]), made, attrs if j == 0 else None))
        taken, last = taken + n, made
    return ops


class Operator:
    """One op of a block: .type (Paddle's), .input_arg_names, .output_arg_names, .attr(name)."""

    def __init__(self, type, inputs, outputs, attrs=None):
        self.type, self.input_arg_names, self.output_arg_names = type, list(inputs), list(outputs)
        self.attrs = dict(attrs) if isinstance(attrs, dict) else {}

    @property
    def attr_names(self):
        return sorted(self.attrs)

    def attr(self, name):
        if name not in self.attrs:
            raise ValueError(f"op {self.type} has no attribute {name!r} (it has {self.attr_names})")
        return self.attrs[name]

    def has_attr(self, name):
        return name in self.attrs

    def all_attrs(self):
        return {k: self.attrs[k] for k in self.attr_names}

    def __repr__(self):
        outs = ", ".join(self.output_arg_names)
        ins = ", ".join(self.input_arg_names)
        attrs = ", ".join(f"{k} = {v!r}" for k, v in self.all_attrs().items())
        return f"{{Out=[{outs}]}} = {self.type}(inputs={{X=[{ins}]}}{', ' + attrs if attrs else ''})"


class Block:
    """The one block of a program (Paddle's global_block()): its ops in order and its variables.
    Paddle's static programs subclass it (paddle/static/block.py: their names, feeds, _grad ops)."""

    idx = 0

    def __init__(self, program):
        self.program = program
        self._names = {ins.outs[0]: ins.name for ins in program.instrs if ins.kind in ("read", "scalar")}
        for j, r in enumerate(program.inputs):
            self._names.setdefault(r, f"feed_{j}")

    def var_name(self, r):
        """A register's variable name: the state's name, feed_<j> for an input, else tmp_<r>."""
        return self._names.get(r, f"tmp_{r}")

    def ops_of(self, ins):
        """The Operators of one instruction ([] for a variable's read)."""
        kind = paddle_type(ins)
        if kind is None:
            return []
        names = [self.var_name(r) for r in ins.ins]
        if ins.kind in ("grad", "set"):
            outs = [ins.name + ("@GRAD" if ins.kind == "grad" else "")]
        elif ins.kind == "update":  # in place: the parameter and its state (ins: param, grad, states, scalars)
            outs = [self.var_name(r) for r in ins.ins[:1] + ins.ins[2:] if self.program.regs[r].kind != "scalar"]
        else:
            outs = [self.var_name(r) for r in ins.outs]
        if ins.kind == "op":
            return sequence(ins.name, kind, names, outs, ins.detail)
        return [Operator(kind, names, outs, ins.detail)]

    @property
    def ops(self):
        return [op for ins in self.program.instrs for op in self.ops_of(ins)]

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
