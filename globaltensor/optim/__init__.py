"""Optimizers and learning-rate schedules."""
from . import lr_scheduler
from .optimizer import SGD, Adam, AdamW, Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
