"""Utilities: data loading, activation recompute (checkpoint)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
