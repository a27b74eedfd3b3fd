"""Utilities: data loading, activation recompute (checkpoint), OneFlow's global_view."""
from . import checkpoint, data, global_view

__all__ = ["checkpoint", "data", "global_view"]
