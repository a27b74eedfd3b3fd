"""Small collectives of arena arrays in one phase (staged, issue 34 s6): values against numpy on 2
and 3 ranks, every dtype, uneven sizes, inputs rewritten right after each call, and the cached plans."""
import os

import numpy as np
import pytest

import globaltensor as gt
from globaltensor import distributed as dist
from globaltensor import dtype as _dtype
from globaltensor.distributed import call_plans
from conftest import run_ranks

_DTYPES = [d.np for d in _dtype.ALL]  # bfloat16 too
_REDUCIBLE = [d.np for d in _dtype.ALL if (d.code.arithmetic or d.code.complex) and d.np.itemsize > 1]
_COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]


def _value(rank, n, dtype, salt=0):
    """Small integers (exact in every dtype and in every sum of 3), different per rank and salt."""
    v = (np.arange(n) * 3 + rank * 7 + salt) % 11
    return (v % 2).astype(dtype) if dtype == np.dtype(np.bool_) else v.astype(dtype)


def _shared(values):
    out = dist.empty_shared(values.shape, values.dtype)
    out[...] = values
    return out


def _every_dtype():
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    rows = [p + 1 for p in range(k)]  # uneven: member p gathers p + 1 rows
    for dt in _DTYPES:
        x = _shared(_value(r, rows[r] * 2, dt).reshape(rows[r], 2))
        got = dist.all_gather(x, sizes=rows)
        want = np.concatenate([_value(p, rows[p] * 2, dt).reshape(rows[p], 2) for p in range(k)])
        assert got.dtype == want.dtype and np.array_equal(got, want), dt
        b = _shared(_value(r, 5, dt) if r == k - 1 else np.zeros(5, dt))
        assert np.array_equal(dist.broadcast(b, src=k - 1), _value(k - 1, 5, dt)), dt
        send = [(r + q) % 3 for q in range(k)]
        a = _shared(_value(r, sum(send), dt))
        recv = [(p + r) % 3 for p in range(k)]
        got = dist.all_to_all(a, iter(send), recv_sizes=recv if dt != np.float32 else None)  # any iterable
        want = [_value(p, sum((p + q) % 3 for q in range(k)), dt)[sum((p + q) % 3 for q in range(r)):][:recv[p]]
                for p in range(k)]
        assert np.array_equal(got, np.concatenate(want)), dt
    for dt in _REDUCIBLE:
        total = sum(_value(p, 7, dt) for p in range(k))  # small integers: exact in dt
        x = _shared(_value(r, 7, dt))
        assert np.array_equal(dist.all_reduce(x), total), dt
        rs = dist.reduce_scatter(_shared(_value(r, 7, dt)), sizes=[7 - 2 * (k - 1)] + [2] * (k - 1))
        lo = 0 if r == 0 else 7 - 2 * (k - 1) + 2 * (r - 1)
        assert np.array_equal(rs, total[lo:lo + rs.shape[0]]), dt
        if dt not in _COMPLEX:
            m = _shared(_value(r, 7, dt))
            assert np.array_equal(dist.all_reduce(m, "max"), np.max([_value(p, 7, dt) for p in range(k)], 0)), dt
    return True


def _rewritten_at_once(n):
    """Each rank rewrites its arena input as soon as a call returns: a peer still reading it would
    see the next value (the staged copy must be what it reads)."""
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    x = dist.empty_shared((n,), np.float32)
    buf = dist.empty_shared((n * k,), np.float32)
    for i in range(30):
        x[...] = _value(r, n, np.float32, salt=i)
        got = dist.all_gather(x, sizes=[n] * k)
        x[...] = -1
        assert np.array_equal(got, np.concatenate([_value(p, n, np.float32, salt=i) for p in range(k)])), i
        buf[...] = _value(r, n * k, np.float32, salt=i)
        got = dist.all_to_all(buf, [n] * k, recv_sizes=[n] * k)
        buf[...] = -1
        assert np.array_equal(got, np.concatenate([_value(p, n * k, np.float32, salt=i)[r * n:(r + 1) * n]
                                                   for p in range(k)])), i
        buf[...] = _value(r, n * k, np.float32, salt=i)
        got = dist.reduce_scatter(buf)
        buf[...] = -1
        want = sum(_value(p, n * k, np.float32, salt=i) for p in range(k))[r * n:(r + 1) * n]
        assert np.array_equal(got, want), i
        x[...] = _value(0, n, np.float32, salt=i) if r == 0 else 0
        dist.broadcast(x, src=0)
        got = x.copy()
        x[...] = -1
        assert np.array_equal(got, _value(0, n, np.float32, salt=i)), i
        x[...] = _value(r, n, np.float32, salt=i)
        dist.all_reduce(x)
        assert np.array_equal(x, sum(_value(p, n, np.float32, salt=i) for p in range(k))), i
    return True


def _mixed_homes():
    """Around the staging bound (8 KiB): rank 0's input in its arena, the others' on the heap, and
    inputs both sides of the bound in one call; and tiny arena buffers one rank does not stage."""
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    if r == 1:  # read when the group is made (the first collective): rank 1 stages no arena input
        os.environ["GLOBALTENSOR_STAGE_ARENA_BYTES"] = "0"
    z = _shared(_value(r, 64, np.float32))
    assert np.array_equal(dist.all_reduce(z), sum(_value(p, 64, np.float32) for p in range(k)))
    assert np.array_equal(dist.all_gather(z, sizes=[64] * k), np.concatenate([z] * k))
    for n in (2 << 10, (2 << 10) + 1, 8 << 12):  # float32 elements: 8 KiB, just over, 128 KiB
        rows = n - r  # uneven, both sides of the bound
        x = _value(r, rows, np.float32)
        if r == 0:
            x = _shared(x)
        got = dist.all_gather(x, sizes=[n - p for p in range(k)])
        assert np.array_equal(got, np.concatenate([_value(p, n - p, np.float32) for p in range(k)])), n
        y = _value(r, n, np.float32)
        y = _shared(y) if r == 0 else y
        assert np.array_equal(dist.all_reduce(y), sum(_value(p, n, np.float32) for p in range(k))), n
    return True


def test_small_arena_collectives_every_dtype():
    assert run_ranks(_every_dtype, 3, timeout=120) == [True] * 3


def test_inputs_rewritten_right_after_the_call():
    assert run_ranks(_rewritten_at_once, 2, 5, timeout=120) == [True] * 2


def test_mixed_homes_around_the_staging_bound():
    assert run_ranks(_mixed_homes, 2, timeout=120) == [True, True]


class _FakeGroup:
    size, index = 3, 1


def test_plans_are_cached_checked_and_bounded(monkeypatch):
    monkeypatch.setattr(call_plans, "MAX_PLANS", 4)
    call_plans.clear()
    g, f32 = _FakeGroup(), np.dtype(np.float32)
    assert call_plans.gather(g, (2, 3), f32, (1, 2, 3))[:3] == ((6, 3), True, None)
    assert call_plans.scatter(g, (7, 2), f32, None)[:3] == ((2, 2), True, None)  # 3, 2, 2: member 1 gets 2
    assert call_plans.to_all(g, (3,), f32, (1, 0, 2), (2, 2, 2))[:4] == ((6,), True, [4, 0, 8], [8, 8, 8])
    assert call_plans.gather(g, (1 << 14,), f32, (1 << 14,) * 3)[1] is False  # 192 KiB: shared memory
    with pytest.raises(ValueError, match="one entry per member"):
        call_plans.gather(g, (2, 3), f32, (1, 2))
    with pytest.raises(ValueError, match="adding up"):
        call_plans.scatter(g, (7, 2), f32, (3, 3, 3))
    with pytest.raises(ValueError, match="non-negative"):
        call_plans.to_all(g, (3,), f32, (4, 0, -1), (1, 1, 1))
    for n in range(10):
        call_plans.gather(g, (n,), f32, (n, n, n))
        assert len(call_plans.GATHER) <= 4
    call_plans.clear()
