"""Grad mode: whether ops record for backward, per thread (scope), as PyTorch's."""
from __future__ import annotations

import contextlib

from ..scope import current as _scope, scoped


def is_grad_enabled() -> bool:
    """Whether ops record for backward in this thread (grad mode is per thread, as PyTorch's)."""
    return _scope.get().grad


def no_grad() -> contextlib.AbstractContextManager:
    """Ops inside record nothing for backward (a context manager and a decorator).

    Examples:
        >>> with gt.no_grad():
        ...     y = model(x)          # y.requires_grad is False
    """
    return scoped(grad=False)


def enable_grad() -> contextlib.AbstractContextManager:
    """Ops inside record for backward again (inside a no_grad block)."""
    return scoped(grad=True)


class set_grad_enabled:  # noqa: N801 - PyTorch's name: a function and a context manager
    """Grad mode on or off from here (PyTorch's set_grad_enabled); used in a with block, the
    previous mode comes back at its end."""

    def __init__(self, mode: bool) -> None:
        self._previous = _scope.get().grad
        _scope.set(_scope.get().but(grad=bool(mode)))

    def __enter__(self) -> set_grad_enabled:
        return self

    def __exit__(self, *exc) -> None:
        _scope.set(_scope.get().but(grad=self._previous))
