"""Paddle's face functions whose ops here are a composite, recorded under Paddle's one op type (graph/blocks.py)."""
import functools
import numbers

from .. import scope
from ..graph.blocks import PADDLE_COMPOSITES, REDUCED_LOSSES


def _recording():
    """The main program where static mode records (None in dygraph: the call runs as it is)."""
    recorder = scope.current.get().recorder
    return recorder.current() if getattr(recorder, "records_paddle_static", False) else None  # static/recorder.py


def as_paddle_op(fn, paddle_type, scalar_only=False):
    """fn whose recorded ops print as one op of paddle_type (program.hint) while static mode records;
    scalar_only: only where an operand after the first is a plain number (x - 1.0 is Paddle's scale).
    Inside another composite (a hint is open) the outer one names the ops: mean's divide is not a scale."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        program = _recording()
        inner = program is not None and program.hints and not (  # a loss's own reduction prints after it
            paddle_type.startswith("reduce_") and program.hints[-1][0] in REDUCED_LOSSES)
        if program is None or inner or (scalar_only and not any(
                isinstance(a, numbers.Number) for a in list(args[1:]) + list(kwargs.values()))):
            return fn(*args, **kwargs)
        with program.hint(paddle_type):
            return fn(*args, **kwargs)
    wrapped.__paddle_op__ = paddle_type
    return wrapped


def install(namespace, face):
    """Wrap the functions of namespace (a face module's globals, or a class's attributes by
    setattr) that PADDLE_COMPOSITES lists for face; called where the face defines them."""
    for name, paddle_type in PADDLE_COMPOSITES[face].items():
        fn = namespace.get(name) if isinstance(namespace, dict) else getattr(namespace, name, None)
        if fn is None or getattr(fn, "__paddle_op__", None):
            continue
        made = as_paddle_op(fn, paddle_type, scalar_only=face.endswith(".scalar"))
        if isinstance(namespace, dict):
            namespace[name] = made
        else:
            setattr(namespace, name, made)
