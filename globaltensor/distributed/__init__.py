"""Processes and collectives: spawn, groups, and shared-memory collectives on numpy arrays.

DataParallel, no_sync and set_bucket_size belong to the training layer above
(globaltensor/data_parallel.py); the package's __init__ puts them here under these names.

The launcher is `python -m globaltensor.distributed.launch`.

Loading this package gives the device backend its collectives: devices.device("cpu").collectives
is collectives.py, devices.device("cuda").collectives is device_collectives.py.
"""
from .launcher_mode import adopt as _adopt, load_deferred as _load_deferred, load_or_defer as _load_or_defer


def _load_surface():
    """Every name of the package (distributed/_surface.py): at import, or in a launcher process on first use."""
    from . import _surface
    _adopt(globals(), _surface)


def __getattr__(name):
    """In a launcher process (launcher_mode.py) the first name used loads the deferred packages."""
    if _load_deferred(__file__, name) and name in globals():
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_load_or_defer(_load_surface)
