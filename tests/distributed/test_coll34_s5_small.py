"""The small-call path of the public collectives: its fast lookups keep every check and result."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import distributed as dist
from conftest import run_ranks


def _small_calls():
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    # every check raises on every rank before any rank communicates (the next call still meets)
    for bad, err in ((lambda: dist.all_reduce(np.ones(2, np.float32), "prod"), ValueError),
                     (lambda: dist.all_reduce(np.ones(2, np.complex64), "max"), TypeError),
                     (lambda: dist.all_reduce(np.ones(2, "U1")), TypeError),
                     (lambda: dist.all_reduce([1.0, 2.0]), TypeError),
                     (lambda: dist.reduce_scatter(np.ones(4, np.float32), "avg"), ValueError),
                     (lambda: dist.reduce_scatter(np.ones(4, np.float32), sizes=[3, 3]), ValueError),
                     (lambda: dist.all_gather(np.ones(1, np.float32), sizes=[1]), ValueError),
                     (lambda: dist.broadcast(np.ones(1, np.float32), src=k), ValueError)):
        with pytest.raises(err):
            bad()
    x = np.array([r + 1.5, -r], np.float32)
    assert dist.all_reduce(x) is x
    np.testing.assert_array_equal(x, [sum(p + 1.5 for p in range(k)), -sum(range(k))])
    c = np.array([1 + 2j * r], np.complex64)
    np.testing.assert_array_equal(dist.all_reduce(c), [k + 2j * sum(range(k))])
    b = np.array([r == 0, False])
    np.testing.assert_array_equal(dist.all_reduce(b), [True, False])  # bool: logical or, still bool
    assert b.dtype == np.bool_
    m = np.array([float(r)], np.float64)
    np.testing.assert_array_equal(dist.all_reduce(m, "max"), [k - 1.0])
    strided = np.arange(6, dtype=np.int64)[::2] * (r + 1)
    np.testing.assert_array_equal(dist.all_reduce(strided), np.arange(6)[::2] * sum(range(1, k + 1)))
    rs = dist.reduce_scatter(np.arange(2 * k + 1, dtype=np.float32))  # balanced split: the first gets one more
    lo = r * 2 + min(r, 1)
    np.testing.assert_array_equal(rs, np.arange(lo, lo + (3 if r == 0 else 2), dtype=np.float32) * k)
    g = dist.all_gather(np.full(r + 1, r, np.int32), sizes=(p + 1 for p in range(k)))  # any iterable of sizes
    np.testing.assert_array_equal(g, np.concatenate([np.full(p + 1, p, np.int32) for p in range(k)]))
    bc = np.array([7.0 if r == 1 else 0.0])
    np.testing.assert_array_equal(dist.broadcast(bc, src=1), [7.0])
    got = dist.all_to_all(np.arange(k, dtype=np.float32) + 10 * r, [1] * k, recv_sizes=[1] * k)
    np.testing.assert_array_equal(got, np.arange(k, dtype=np.float32) * 10 + r)
    return True


def test_small_calls_check_and_compute_like_numpy():
    assert run_ranks(_small_calls, 2, timeout=120) == [True, True]
