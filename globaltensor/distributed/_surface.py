"""globaltensor.distributed's names: its __init__ takes them from here (at import; in a launcher, on first use)."""
from .._native import CollectiveError, CollectiveTimeoutError, SharedMemoryExhausted
from ..backends import devices as _devices
from . import collectives, device_collectives
from .collectives import (Work, all_gather, all_reduce, all_reduce_async, all_to_all, barrier, broadcast,
                          empty_shared, recv, reduce_scatter, send)
from .group import Group, job_barrier, new_group, world_group
from .spawn import SpawnError, spawn
from .store import StoreError

_devices.register_collectives("cpu", collectives)
_devices.register_collectives("cuda", device_collectives)


__all__ = [
    "CollectiveError", "CollectiveTimeoutError", "SharedMemoryExhausted", "StoreError", "SpawnError",
    "Group", "new_group", "world_group", "spawn", "barrier", "job_barrier", "all_reduce", "all_reduce_async", "Work",
    "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send", "recv", "empty_shared", "no_sync",
    "set_bucket_size", "DataParallel", "fully_shard",
]
