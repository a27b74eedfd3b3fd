"""Static mode's program: placeholders (Variable), the calls recorded on them, and the modes."""
import contextlib
import functools
import itertools

from ... import random as _random
from ...autograd import no_grad
from ...tensor import Tensor

STATIC = [False]  # paddle.enable_static() sets it
PROBES = (2, 3)  # two batch sizes for the stand-in values: the dims that differ are dynamic (-1)
_names = itertools.count()


class Variable:
    """A value of a static program: its name, Paddle's shape (-1 for a dynamic dim), its dtype,
    and two stand-in tensors (for the two probe batch sizes) that later calls compute on."""

    def __init__(self, program, name, standins):
        self.program, self.name, self.standins = program, name, standins
        a, b = (s.shape for s in standins)
        self.shape = [x if x == y else -1 for x, y in zip(a, b)]
        self.dtype = standins[0].dtype
        self.stop_gradient = not standins[0].requires_grad

    ndim = property(lambda self: len(self.shape))

    def __repr__(self):
        return f"Variable({self.name}, shape={self.shape}, dtype={self.dtype.name})"

    def __getattr__(self, name):
        method = getattr(Tensor, name, None)
        if method is None or not callable(method):
            raise AttributeError(f"Variable has no attribute {name!r}")
        return lambda *args, **kwargs: record(method, (self,) + args, kwargs, label=name)

    def __len__(self):
        return self.shape[0]


def _operator(name):
    method = getattr(Tensor, name)
    return lambda self, *args: record(method, (self,) + args, {}, label=name.strip("_"))


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__",
            "__neg__", "__abs__", "__getitem__", "__lt__", "__le__", "__gt__", "__ge__", "__invert__", "__and__",
            "__or__", "__xor__"):
    if hasattr(Tensor, _op):
        setattr(Variable, _op, _operator(_op))


class Call:
    """fn(*args, **kwargs) with Variables among the arguments, and the Variables it made."""

    __slots__ = ("fn", "args", "kwargs", "outs", "label")

    def __init__(self, fn, args, kwargs, outs, label):
        self.fn, self.args, self.kwargs, self.outs, self.label = fn, args, kwargs, outs, label


class Program:
    """paddle.static.Program: placeholders, the recorded calls, the parameters they made, and a
    minimize (loss, optimizer) when one was recorded."""

    def __init__(self):
        self.feeds, self.calls, self.parameters, self.minimized = {}, [], [], []
        self._runs = {}  # fetch names -> traced run (graph mode)

    def all_parameters(self):
        return list(self.parameters)

    def add_parameters(self, params):
        """Parameters of a layer the program calls (paddle.nn layers in static mode), once each."""
        known = {id(p) for p in self.parameters}
        self.parameters += [p for p in params if id(p) not in known and not known.add(id(p))]

    def global_block(self):
        return self

    def var(self, name):
        found = self.feeds.get(name) or next((v for c in self.calls for v in c.outs if v.name == name), None)
        if found is None:
            raise ValueError(f"no variable named {name!r} in the program")
        return found

    def __repr__(self):
        lines = [f"Program: {len(self.feeds)} feeds, {len(self.calls)} calls"]
        lines += [f"  feed {v.name}: shape {v.shape} {v.dtype.name}" for v in self.feeds.values()]
        for c in self.calls:
            ins = ", ".join(_text(a) for a in c.args)
            lines.append(f"  {', '.join(v.name for v in c.outs)} = {c.label}({ins})")
        lines += [f"  minimize {loss.name} with {type(opt).__name__}" for loss, opt, _ in self.minimized]
        return "\n".join(lines)


def _text(a):
    if isinstance(a, Variable):
        return a.name
    if isinstance(a, Tensor):
        return f"param{tuple(a.shape)}"
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_text(x) for x in a) + "]"
    return repr(a)


_main, _startup = [Program()], [Program()]


def default_main_program():
    return _main[0]


def default_startup_program():
    return _startup[0]


def substitute(value, pick):
    """value with every Variable replaced by pick(variable) (in lists, tuples and dicts too)."""
    if isinstance(value, Variable):
        return pick(value)
    if isinstance(value, (list, tuple)):
        return type(value)(substitute(v, pick) for v in value)
    if isinstance(value, dict):
        return {k: substitute(v, pick) for k, v in value.items()}
    return value


def has_variable(value):
    if isinstance(value, Variable):
        return True
    if isinstance(value, (list, tuple)):
        return any(has_variable(v) for v in value)
    if isinstance(value, dict):
        return any(has_variable(v) for v in value.values())
    return False


def record(fn, args, kwargs, label=None):
    """Record fn(*args, **kwargs) in the current program; its results are Variables whose
    stand-ins come from running fn on the arguments' stand-ins (random draws undone)."""
    program = _main[0]
    state = _random.get_rng_state()
    outs_by_probe = []
    try:
        with no_grad():
            for k in range(len(PROBES)):
                pick = (lambda v, k=k: v.standins[k])
                outs_by_probe.append(fn(*substitute(args, pick), **substitute(kwargs, pick)))
    finally:
        _random.set_rng_state(state)
    first = outs_by_probe[0]
    single = not isinstance(first, (tuple, list))
    label = label or getattr(fn, "__name__", type(fn).__name__)
    outs = [Variable(program, f"{label}_{next(_names)}.tmp_0", standins)
            for standins in zip(*[(o,) if single else tuple(o) for o in outs_by_probe])]
    program.calls.append(Call(fn, args, kwargs, outs, label))
    return outs[0] if single else type(first)(outs)


def data(name, shape, dtype="float32", lod_level=0):
    """paddle.static.data: a placeholder fed by Executor.run(feed={name: array}); None or -1 in
    shape is a dim the feed decides (the batch)."""
    if not STATIC[0]:
        raise RuntimeError("paddle.static.data needs static mode: call paddle.enable_static() first")
    from .. import zeros
    dims = [None if d in (None, -1) else int(d) for d in shape]
    standins = tuple(zeros([p if d is None else d for d in dims], dtype) for p in PROBES)
    var = Variable(_main[0], name, standins)
    _main[0].feeds[name] = var
    return var


@contextlib.contextmanager
def program_guard(main_program, startup_program=None):
    """Programs recorded inside the with block go to main_program."""
    before = _main[0], _startup[0]
    _main[0] = main_program
    if startup_program is not None:
        _startup[0] = startup_program
    try:
        yield
    finally:
        _main[0], _startup[0] = before


def recordable(fn):
    """fn, recorded into the current program instead of run when static mode is on and an
    argument is a placeholder (a Variable)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if STATIC[0] and (has_variable(args) or has_variable(kwargs)):
            return record(fn, args, kwargs, label=getattr(fn, "__name__", None))
        return fn(*args, **kwargs)
    call.__wrapped__ = fn
    return call
