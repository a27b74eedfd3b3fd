"""Memory of cpu placements: this rank's shared-memory arena (tensor pieces, collective outputs
and, in a job of several ranks, numpy's own arrays of at least GLOBALTENSOR_NUMPY_MIN_BYTES)."""
from . import _native


def _node():
    from .distributed.world import world
    return world().node


def memory_stats():
    """This rank's arena, in bytes: allocated (blocks in use), cached (freed blocks whose pages
    are kept for reuse), reserved (allocated + cached: what /dev/shm holds for this rank),
    peak_allocated (since the start or reset_peak_memory_stats()), arena (the address space,
    GLOBALTENSOR_SHM_ARENA_GB); and numpy's allocator: whether it is installed, the arrays it
    placed in the arena, and those that went to the heap because the arena was full."""
    node = _node()
    numpy = _native.numpy_alloc_stats()
    allocated, cached = node.used_bytes, node.cached_bytes
    return {
        "allocated_bytes": allocated, "cached_bytes": cached, "reserved_bytes": allocated + cached,
        "peak_allocated_bytes": node.peak_bytes, "arena_bytes": node.reserve_bytes,
        "numpy_allocator": numpy["installed"], "numpy_min_bytes": numpy["min_bytes"],
        "arena_allocs": numpy["arena_allocs"], "heap_fallbacks": numpy["heap_fallbacks"],
        "heap_fallback_bytes": numpy["heap_fallback_bytes"],
    }


def memory_allocated():
    """Bytes of this rank's arena in use now."""
    return _node().used_bytes


def max_memory_allocated():
    """The most bytes of this rank's arena in use at once (since reset_peak_memory_stats())."""
    return _node().peak_bytes


def reset_peak_memory_stats():
    """Start the peak over from what is in use now."""
    _node().reset_peak()


def empty_cache():
    """Give the pages of freed arena blocks back to the system (the next allocations fault
    fresh pages again)."""
    _node().release_cached()
