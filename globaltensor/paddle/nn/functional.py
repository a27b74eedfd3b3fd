"""paddle.nn.functional: globaltensor's functional ops (Paddle's keyword spellings accepted)."""
from ...nn.functional import *  # noqa: F401,F403
from ...nn import functional as _functional
from ...ops import sigmoid, softmax, tanh  # noqa: F401

__all__ = list(getattr(_functional, "__all__", [])) + ["sigmoid", "softmax", "tanh"]
