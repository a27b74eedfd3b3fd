"""gt.jit: trace (a function of tensors captured once per input signature and replayed), save and load."""
from .graph import CaptureError, Traced, trace
from .graph.program import Program
from .graph.saved import LoadedProgram, load as _load
from .graph.serialize import export


def save(traced, path):
    """Write the latest program of a traced function or nn.Graph (or a Program / loaded program),
    with its parameters and state, to directory `path` (every rank calls it; each writes its pieces)."""
    if isinstance(traced, LoadedProgram):
        return traced.save(path)
    if isinstance(traced, Program):
        return export(traced, None, path)
    last = traced._cache()["last"] if hasattr(traced, "_cache") else None
    if last is None:
        raise ValueError(f"jit.save: {type(traced).__name__} has no captured program; call it once first")
    return export(last, None, path)


def load(path):
    """The program saved at `path`, runnable without the Python model: loaded(*tensors)."""
    return _load(path)


__all__ = ["CaptureError", "Traced", "load", "save", "trace"]
