"""Processes and collectives: spawn, groups, and shared-memory collectives on numpy arrays.

The launcher is `python -m globaltensor.distributed.launch`.
"""
from .._C import CollectiveError, CollectiveTimeoutError, SharedMemoryExhausted
from .collectives import (Work, all_gather, all_reduce, all_reduce_async, all_to_all, barrier, broadcast,
                          empty_shared, recv, reduce_scatter, send)
from .group import Group, new_group, world_group
from .spawn import SpawnError, spawn
from .store import StoreError


def __getattr__(name):  # DataParallel imports the tensor layer: load it on first use
    if name == "DataParallel":
        from .data_parallel import DataParallel
        return DataParallel
    raise AttributeError(name)


def no_sync(model=None):
    """Inside: backward accumulates partial gradients without communicating."""
    from ..autograd import no_sync as _no_sync
    return _no_sync()


def set_bucket_size(megabytes):
    """The size of the gradient buckets reduced by one all_reduce each (default 25 MB)."""
    from ..autograd import BUCKET_BYTES
    BUCKET_BYTES[0] = int(megabytes * (1 << 20))


__all__ = [
    "CollectiveError", "CollectiveTimeoutError", "SharedMemoryExhausted", "StoreError", "SpawnError",
    "Group", "new_group", "world_group", "spawn", "barrier", "all_reduce", "all_reduce_async", "Work",
    "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send", "recv", "empty_shared", "no_sync",
    "set_bucket_size", "DataParallel",
]
