"""Optimizers and learning-rate schedules."""
from . import lr_scheduler
from .gradient_merge import GradientMerge
from .optimizer import SGD, Adam, AdamW, Optimizer
from .adaptive import Adagrad, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "GradientMerge", "lr_scheduler"]
