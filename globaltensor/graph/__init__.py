"""Graph mode: capture a step once per input signature, plan it whole, replay it (SPEC §9)."""
from .capture import CaptureError
from .graph import Graph, Traced, trace

__all__ = ["CaptureError", "Graph", "Traced", "trace"]
