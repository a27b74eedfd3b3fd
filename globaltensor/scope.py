"""The scoped state of a thread (contextvars): grad mode, the capture recorder, gradient sync, autocast."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator


class State:
    """One context's settings; never changed in place (a scope sets a new one and puts the old
    one back), so a thread or task started elsewhere keeps its own."""

    __slots__ = ("grad", "recorder", "sync", "amp")

    def __init__(self, grad: bool = True, recorder: Any = None, sync: bool = True, amp: Any = None) -> None:
        # amp: the autocast policy in force (globaltensor.amp.autocast), or None
        self.grad, self.recorder, self.sync, self.amp = grad, recorder, sync, amp

    def but(self, **changes: Any) -> State:
        return State(**{**{k: getattr(self, k) for k in self.__slots__}, **changes})

    def __repr__(self):
        return f"State(grad={self.grad}, recorder={self.recorder!r}, sync={self.sync}, amp={self.amp!r})"


DEFAULT = State()
current = contextvars.ContextVar("globaltensor.scope", default=DEFAULT)  # .get() on the hot path
# OneFlow's global_mode (utils/global_view.py): None, or (placement, sbp tuple); read by the source
# factories and a global tensor's .device only, so it stays off the hot path's State
global_mode = contextvars.ContextVar("globaltensor.global_mode", default=None)


@contextlib.contextmanager
def scoped(**changes: Any) -> Iterator[None]:
    """Inside the with block this context's state has `changes` (grad=, recorder=, sync=, amp=); the
    previous state comes back on exit, exception or not. A new thread starts from DEFAULT, as
    PyTorch's grad mode is per thread."""
    token = current.set(current.get().but(**changes))
    try:
        yield
    finally:
        current.reset(token)


def recorder() -> Any:
    """The graph capture recording this context's ops, or None."""
    return current.get().recorder
