"""numpy's allocator over the shared-memory arena: in a job of several ranks, numpy's
large arrays live in the rank's arena, so collectives read them in place; freed blocks are
reused; an exhausted arena falls back to the heap with one warning; a forked child never hands
out the parent's blocks; gt.memory_stats() tells what is held."""
import os
import warnings

import numpy as np

import globaltensor as gt
import globaltensor.distributed as dist
from conftest import run_ranks
from globaltensor import _native

MIN = 256 << 10  # GLOBALTENSOR_NUMPY_MIN_BYTES' default


def _node():
    return gt.distributed.world.world().node


def _placement_and_values():
    node = _node()
    big, small = np.ones(1 << 20, np.float32), np.ones(1000, np.float32)
    zeros = np.zeros((512, 512))
    out = np.empty_like(big)
    dist.all_reduce(big)  # in place on a plain numpy array: both ranks' arrays are in their arenas
    dist.all_reduce(big, out=out)
    stats = gt.memory_stats()
    return {"big": node.contains(big), "small": node.contains(small), "zeros": node.contains(zeros),
            "zeros_are_zero": not zeros.any(), "sum": float(big[0]), "out": float(out[0]), "stats": stats}


def test_large_numpy_arrays_live_in_the_arena_and_reduce_in_place():
    for found in run_ranks(_placement_and_values, 2):
        assert found["big"] and found["zeros"] and not found["small"]
        assert found["zeros_are_zero"]
        assert found["sum"] == 2.0 and found["out"] == 4.0
        stats = found["stats"]
        assert stats["numpy_allocator"] and stats["numpy_min_bytes"] == MIN
        assert stats["allocated_bytes"] >= (4 + 2 + 4) << 20 and stats["heap_fallbacks"] == 0
        assert stats["reserved_bytes"] == stats["allocated_bytes"] + stats["cached_bytes"]
        assert stats["peak_allocated_bytes"] >= stats["allocated_bytes"]


def _reuse_and_training_pattern():
    """A training loop's pattern: activations of a few sizes made and dropped every step, a
    gradient per step, a reduced sum; after the first steps nothing new is reserved."""
    node = _node()
    rng = np.random.default_rng(0)
    sizes = [(256, 1024), (256, 4096), (1024, 4096), (300, 777)]
    reserved = []
    for step in range(30):
        acts = [np.ones(s, np.float32) * step for s in sizes]
        grad = np.zeros((1024, 4096), np.float32)
        for a in acts[::-1]:
            grad[: a.shape[0], : a.shape[1]] += a[:, :4096]
        dist.all_reduce(grad)
        assert grad[0, 0] == 2 * (4 * step), grad[0, 0]
        del acts
        tmp = rng.standard_normal(int(rng.integers(70_000, 200_000)))  # varying, above the threshold
        del tmp, grad
        reserved.append(node.used_bytes + node.cached_bytes)
    in_use_after = node.used_bytes
    before = gt.memory_stats()["arena_allocs"]
    for _ in range(10):  # one size again and again: one block, reused
        a = np.empty(3 << 20, np.uint8)
        del a
    return reserved, in_use_after, gt.memory_stats()["arena_allocs"] - before, node.used_bytes


def test_blocks_are_reused_under_a_training_loop():
    for reserved, in_use, allocs, used_after in run_ranks(_reuse_and_training_pattern, 2):
        assert reserved[5] == reserved[-1], reserved  # steady state: no growth, no fragmentation creep
        assert allocs == 10 and used_after <= in_use  # each block went back to the arena


def _exhausted():
    node = _node()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arrays = [np.full(1 << 19, float(i)) for i in range(32)]  # 128 MiB of float64 into a 64 MiB arena
        for _ in range(3):
            np.ones(1)  # the warning is a pending call: let it run
        dist.all_reduce(arrays[-1])  # a heap array still reduces (through staging)
        total = float(arrays[-1][0])
    messages = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    stats = gt.memory_stats()
    in_arena = sum(node.contains(a) for a in arrays)
    return messages, stats["heap_fallbacks"], in_arena, total


def test_an_exhausted_arena_falls_back_to_the_heap_with_one_warning():
    results = run_ranks(_exhausted, 2, env={"GLOBALTENSOR_SHM_ARENA_GB": "0.0625"})
    for messages, fallbacks, in_arena, total in results:
        assert len(messages) == 1 and "arena is full" in messages[0], messages
        assert fallbacks >= 8 and 0 < in_arena < 32
        assert total == 2 * 31.0


def _fork_child_uses_the_heap():
    node = _node()
    parent = np.full(1 << 20, 3.0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its large arrays on the heap, its frees of the parent's blocks ignored,
        ok = False  # and its writes to what it inherited its own (the parent's values stay)
        try:
            child = np.ones(1 << 20)
            ok = (not node.contains(child)) and node.contains(parent) and parent[5] == 3.0
            parent[...] = 7.0
            ok = ok and parent[5] == 7.0
            del parent, child
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    child_ok = os.read(r, 1) == b"1"
    again = np.full(1 << 20, 4.0)  # the parent's blocks are still its own
    return child_ok, node.contains(parent), float(parent.sum()), node.contains(again), float(again[0])


def test_a_forked_child_never_hands_out_the_parents_blocks():
    for child_ok, parent_in, total, again_in, again in run_ranks(_fork_child_uses_the_heap, 2):
        assert child_ok and parent_in and again_in
        assert total == 3.0 * (1 << 20) and again == 4.0


def test_one_process_keeps_numpys_allocator():
    assert "WORLD_SIZE" not in os.environ  # this test process is no rank of a job
    gt.memory_stats()  # the World exists, with its arena
    assert _native.numpy_alloc_stats()["installed"] is False
    multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray
    assert multiarray.get_handler_name(np.ones(1 << 20)) == "default_allocator"


def test_size_classes_bound_the_waste():
    for n in (1, 4095, 4096, 4097, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20, 100_000_000):
        c = _native.size_class(n)
        assert c >= n and c % 4096 == 0
        assert c - n < max(4096, n // 8 + 1), (n, c)


def _probe():
    return gt.memory_stats()["numpy_allocator"], _node().contains(np.ones(1 << 20))


def test_the_allocator_can_be_turned_off():
    for installed, contains in run_ranks(_probe, 2, env={"GLOBALTENSOR_NUMPY_ALLOCATOR": "0"}):
        assert not installed and not contains


def _zeros_after_a_merge_with_a_dirty_block():
    _node()
    n = (8 << 20) // 8  # two neighbouring 8 MiB blocks, then one 16 MiB request over both
    a, b = np.full(n, 5.0), np.full(n, 5.0)
    del a
    gt.empty_cache()  # a's pages go back to the system (they read as zeros again)
    del b  # b's pages, still holding 5.0, join them in one free block
    z = np.zeros(2 * n)
    return float(np.abs(z).max())


def test_zeros_from_a_block_merged_with_a_dirty_neighbour_are_zeros():
    assert run_ranks(_zeros_after_a_merge_with_a_dirty_block, 2) == [0.0, 0.0]
