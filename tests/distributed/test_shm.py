"""The shared-memory arena: block lifetime, reuse, exhaustion, without peers."""
import os

import numpy as np
import pytest

from globaltensor import _native
from globaltensor import distributed as dist


def _node(arena_bytes=64 << 20):
    node = _native.Node(f"/gt_test{os.getpid()}_{np.random.randint(1 << 30)}_", 0, arena_bytes)
    node.unlink_arena()
    return node


def test_block_lives_as_long_as_any_view():
    node = _node()
    block = node.alloc(1 << 16)
    view = np.frombuffer(block, dtype=np.float32).reshape(16, -1)
    del block
    assert node.used_bytes == 1 << 16
    view[:] = 3
    assert node.contains(view) and node.contains(view[2:5])
    del view
    assert node.used_bytes == 0 and node.cached_bytes == 1 << 16


def test_blocks_are_reused_and_coalesced():
    node = _node()
    a, b, c = (node.alloc(1 << 20) for _ in range(3))
    offsets = (a.offset, b.offset, c.offset)
    del a, b
    d = node.alloc(2 << 20)  # a and b merged into one free block
    assert d.offset == offsets[0]
    del c, d
    node.release_cached()
    assert node.used_bytes == 0 and node.cached_bytes == 0
    e = node.alloc(3 << 20)  # released pages are committed again on reuse
    np.frombuffer(e, np.uint8)[:] = 7
    assert e.offset == offsets[0]


def test_exhausted_arena_raises_memory_error():
    node = _node(arena_bytes=1 << 20)
    with pytest.raises(MemoryError, match="out of address space"):
        node.alloc(2 << 20)
    assert issubclass(dist.SharedMemoryExhausted, MemoryError)


def test_empty_shared_places_large_arrays_in_the_arena():
    from globaltensor.distributed.world import world

    big = dist.empty_shared((256, 256), np.float32)
    small = dist.empty_shared((4,), np.float64)
    assert world().node.contains(big) and not world().node.contains(small)
    assert big.shape == (256, 256) and big.dtype == np.float32 and big.flags.writeable
