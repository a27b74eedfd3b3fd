"""globaltensor: global tensors with eager execution (see SPEC.md for the contract)."""
from .distributed.launcher_mode import adopt as _adopt, load_deferred as _load_deferred, load_or_defer as _load_or_defer


def _load_surface():
    """Every top-level name (globaltensor/_surface.py), once: at import, or in a launcher process on first use."""
    from . import _surface
    _adopt(globals(), _surface)


def __getattr__(name):
    """gt.unittest (flow.unittest), gt.framework, gt.sysconfig and gt._oneflow_internal on first use: importing the package
    loads neither. In a launcher process (distributed/launcher_mode.py) any other name loads the package first."""
    if name == "unittest":
        from .unittest import TestCase  # noqa: F401 - loads the submodule, which the import system sets here
        return globals()["unittest"]
    if name == "framework":
        from .framework import args_tree  # noqa: F401 - as above
        return globals()["framework"]
    if name == "sysconfig":
        from .sysconfig import with_cuda  # noqa: F401 - as above
        return globals()["sysconfig"]
    if name == "_oneflow_internal":
        from ._oneflow_internal import cpu_broadcast  # noqa: F401 - as above
        return globals()["_oneflow_internal"]
    if _load_deferred(__file__, name) and name in globals():
        return globals()[name]
    raise AttributeError(f"module 'globaltensor' has no attribute {name!r}")


_load_or_defer(_load_surface)
