"""Paddle's keyword spellings of the ops' OneFlow/PyTorch parameters: one table, applied where the
ops are exported (gt.NAME, Tensor methods, nn.functional)."""
import functools
import inspect

# Paddle's name -> ours (PyTorch's). A row applies to an op that has our parameter and not
# Paddle's; `name` (Paddle's op label, which every Paddle op takes) is accepted and dropped.
COMMON = {"x": "input", "y": "other", "axis": "dim", "shape": "size", "label": "target", "epsilon": "eps"}
BY_OP = {
    "pow": {"y": "exponent"},
    "addmm": {"x": "mat1", "y": "mat2"},
    "bmm": {"y": "mat2"},
    "dot": {"y": "tensor"},
    "flip": {"axis": "dims"},
    "roll": {"axis": "dims"},
    "tile": {"repeat_times": "dims"},
    "flatten": {"start_axis": "start_dim", "stop_axis": "end_dim"},
    "concat": {"x": "tensors"}, "cat": {"x": "tensors"}, "stack": {"x": "tensors"},
    "split": {"x": "tensor"},
    "diag": {"offset": "diagonal"},
    "eye": {"num_rows": "n", "num_columns": "m"},
    "linspace": {"stop": "end", "num": "steps"},
    "uniform": {"min": "low", "max": "high"},
}


def table(op_name, params):
    """The Paddle spellings an op with these parameters takes: {Paddle's name: its parameter}."""
    rows = {**COMMON, **BY_OP.get(op_name, {})}
    return {paddle: ours for paddle, ours in rows.items() if paddle not in params and ours in params}


def accept_paddle_keywords(op_name, fn):
    """fn, also taking Paddle's keyword names (and `name=`); its signature stays fn's."""
    params = inspect.signature(fn).parameters
    names = table(op_name, params)
    kinds = [p.kind for p in params.values()]
    varargs = None
    if inspect.Parameter.VAR_POSITIONAL in kinds:  # with the parameters before it, which come first
        at = kinds.index(inspect.Parameter.VAR_POSITIONAL)
        varargs = (list(params)[at], list(params)[:at])
    drop_name = "name" not in params

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if kwargs:
            args, kwargs = _translate(op_name, names, varargs, drop_name, args, kwargs)
        return fn(*args, **kwargs)
    op.paddle_keywords = names
    return op


def _translate(op_name, names, varargs, drop_name, args, kwargs):
    if drop_name:
        kwargs.pop("name", None)
    for paddle, ours in names.items():
        if paddle in kwargs:
            if ours in kwargs:
                raise TypeError(f"{op_name}() got {paddle}= (Paddle's name) and {ours}= (PyTorch's) for one "
                                f"parameter; give one")
            kwargs[ours] = kwargs.pop(paddle)
    if varargs is not None and varargs[0] in kwargs:  # reshape(x, shape=[2, 3]), zeros(size=(2, 3))
        rest, before = varargs
        if len(args) > len(before):
            raise TypeError(f"{op_name}() got {rest} both by position and as a keyword")
        missing = [p for p in before[len(args):] if p not in kwargs]
        if missing:
            raise TypeError(f"{op_name}() missing {', '.join(missing)}")
        args = args + tuple(kwargs.pop(p) for p in before[len(args):]) + (kwargs.pop(rest),)
    return args, kwargs
