"""gt.jit.trace: a function of tensors captured once per input signature and replayed (graph mode)."""
from .graph import CaptureError, Traced, trace

__all__ = ["CaptureError", "Traced", "trace"]
