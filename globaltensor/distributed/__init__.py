"""Processes and collectives: spawn, groups, and shared-memory collectives on numpy arrays.

DataParallel, no_sync and set_bucket_size belong to the training layer above
(globaltensor/data_parallel.py); the package's __init__ puts them here under these names.

The launcher is `python -m globaltensor.distributed.launch`.

Loading this package gives the device backend its collectives: devices.device("cpu").collectives
is collectives.py, devices.device("cuda").collectives is device_collectives.py.
"""
from .launcher_mode import surface_package as _surface_package


def _load_surface():
    """Every name of distributed (its _surface.py)."""
    from . import _surface
    return _surface


__getattr__ = _surface_package(globals(), _load_surface)
