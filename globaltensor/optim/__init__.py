"""Optimizers and learning-rate schedules."""
from . import lr_scheduler
from .gradient_merge import GradientMerge
from .optimizer import SGD, Adam, AdamW, Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "GradientMerge", "lr_scheduler"]
