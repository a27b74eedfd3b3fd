"""all_reduce of private (heap) buffers by cross-memory attach, and its fallback, against numpy."""
import os

import numpy as np

from globaltensor import distributed as dist
import globaltensor as gt
from conftest import heap_array, rank_data, run_ranks


def _cases(disable_on):
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    if r == disable_on:  # read at the group's first large private all_reduce: the ranks must agree
        os.environ["GLOBALTENSOR_CMA"] = "0"
    for n, dtype, op in ((70_001, np.float32, "sum"), (300_003, np.float64, "max"), (140_000, np.float16, "sum")):
        want_parts = [rank_data(n, p, n, dtype) for p in range(k)]
        wide = np.float32 if np.dtype(dtype).itemsize == 2 else dtype
        want = want_parts[0].astype(wide)
        for part in want_parts[1:]:
            want = (np.add if op == "sum" else np.maximum)(want, part.astype(wide))
        want = want.astype(dtype)
        # in place on the heap
        x = heap_array(n, dtype)
        x[...] = want_parts[r]
        dist.all_reduce(x, op)
        np.testing.assert_array_equal(x.view(np.uint8), want.view(np.uint8))
        # out of place, heap input, shared output on rank 0 and heap output elsewhere: input kept
        x = heap_array(n, dtype)
        x[...] = want_parts[r]
        out = dist.empty_shared((n,), dtype) if r == 0 else heap_array(n, dtype)
        dist.all_reduce(x, op, out=out)
        np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
        np.testing.assert_array_equal(x.view(np.uint8), want_parts[r].view(np.uint8))
        # a member in shared memory meets a member on the heap
        y = dist.empty_shared((n,), dtype) if r == 1 else heap_array(n, dtype)
        y[...] = want_parts[r]
        dist.all_reduce(y, op)
        np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))
    return True


def test_heap_all_reduce_cross_memory_attach():
    assert run_ranks(_cases, 2, -1, timeout=120) == [True, True]


def test_heap_all_reduce_one_rank_refuses_attach_three_ranks():
    assert run_ranks(_cases, 3, 2, timeout=120) == [True, True, True]
