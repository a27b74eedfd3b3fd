"""OneFlow's framework.session_context: globaltensor has one implicit session a process, always open."""
import functools


class SessionStatus:
    OPEN = "OPEN"
    RUNNING = "RUNNING"
    CLOSED = "CLOSED"


class _Session:
    """The process's session: nothing to start or close (eager ops need none; graphs hold their own state)."""

    status = SessionStatus.RUNNING

    def TryInit(self):  # noqa: N802 - OneFlow's name
        return self


_SESSION = _Session()


def GetDefaultSession():  # noqa: N802 - OneFlow's name
    return _SESSION


def try_init_default_session(func):
    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        GetDefaultSession().TryInit()
        return func(*args, **kwargs)
    return wrapped
