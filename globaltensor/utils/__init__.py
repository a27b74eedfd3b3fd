"""Utilities: data loading."""
from . import data

__all__ = ["data"]
