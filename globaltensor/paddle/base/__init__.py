"""paddle.base: the names user code reaches through Paddle's base package (core, framework)."""
from . import core, framework

__all__ = ["core", "framework"]
