"""Posted small broadcasts (issue 34 s7): the root writes its message into a numbered slot and returns;
values against numpy on 2 and 3 ranks, every dtype, sizes around the posting bound, roots that run
ahead of their readers, slots reused across many calls mixed with the other collectives, sends
running ahead of their receiver, and a size mismatch that raises on the reader while the world goes on."""
import time

import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist
from globaltensor import dtype as _dtype
from conftest import run_ranks

_DTYPES = [d.np for d in _dtype.ALL]
_BOUND = 16 << 10  # kernels/posts.cpp kPostBytes: the largest posted broadcast


def _value(rank, n, dtype, salt=0):
    v = (np.arange(n) * 3 + rank * 7 + salt) % 11
    return (v % 2).astype(dtype) if dtype == np.dtype(np.bool_) else v.astype(dtype)


def _mixed_calls():
    """Broadcasts of every dtype and size class from changing roots, each root rewriting its buffer
    right after the call, interleaved with the phased collectives; a root 12 calls ahead of a reader
    that sleeps (it waits for the slots' acknowledgements); a non-contiguous buffer."""
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    sizes = [0, 1, 2, 7, _BOUND // 8, _BOUND // 4, _BOUND // 4 + 1, 3 * _BOUND]  # float32: up to and past the bound
    call = 0
    for dt in _DTYPES:
        for n in sizes[:5] if dt != np.float32 else sizes:
            call += 1
            src = call % k
            x = _value(src, n, dt, salt=call) if r == src else np.zeros(n, dt)
            got = dist.broadcast(x, src=src)
            assert got is x
            if r == src:
                x[...] = _value(src, n, dt, salt=call + 1)  # the readers must see the posted copy
            else:
                assert np.array_equal(x, _value(src, n, dt, salt=call)), (dt, n, src)
            if call % 3 == 0:
                g = dist.all_gather(_value(r, 3, np.float32, salt=call), sizes=[3] * k)
                assert np.array_equal(g, np.concatenate([_value(p, 3, np.float32, salt=call) for p in range(k)]))
            if call % 4 == 1:
                s = dist.all_reduce(_value(r, 5, np.int64, salt=call))
                assert np.array_equal(s, sum(_value(p, 5, np.int64, salt=call) for p in range(k)))
            if call % 5 == 2:
                a = dist.all_to_all(_value(r, 2 * k, np.float32, salt=call), [2] * k, recv_sizes=[2] * k)
                want = [_value(p, 2 * k, np.float32, salt=call)[2 * r:2 * r + 2] for p in range(k)]
                assert np.array_equal(a, np.concatenate(want))
    for i in range(12):  # rank 0 runs ahead; the last rank reads late
        if r == k - 1 and i == 0:
            time.sleep(0.3)
        x = _value(0, 9, np.float64, salt=i) if r == 0 else np.zeros(9)
        dist.broadcast(x, src=0)
        assert np.array_equal(x, _value(0, 9, np.float64, salt=i)), i
    m = np.zeros((6, 4), np.float32)
    view = m[:, 1]  # not contiguous
    if r == 1:
        view[...] = _value(1, 6, np.float32)
    dist.broadcast(view, src=1)
    assert np.array_equal(m[:, 1], _value(1, 6, np.float32)) and not m[:, [0, 2, 3]].any()
    return call


def test_posted_broadcasts_mixed_with_other_collectives_on_3_ranks():
    assert len(set(run_ranks(_mixed_calls, 3, timeout=120))) == 1


def _sends_ahead_and_a_mismatch():
    r = gt.env.get_rank()
    peer = 1 - r
    for i in range(9):  # rank 0 sends 9 small messages before rank 1 receives one: it waits for slots only
        if r == 0:
            dist.send(_value(r, 4, np.int32, salt=i), peer)
    for i in range(9):
        if r == 1:
            assert np.array_equal(dist.recv(np.empty(4, np.int32), peer), _value(peer, 4, np.int32, salt=i)), i
    error = None
    try:  # the reader expects 8 elements, the root sends 4: the reader raises, the root has returned
        dist.broadcast(np.ones(4 if r == 0 else 8, np.float32), src=0)
    except dist.CollectiveError as exc:
        error = str(exc)
    x = np.full(3, r + 1.0)
    dist.all_reduce(x)  # the world goes on
    y = np.arange(5.0) if r == 0 else np.zeros(5)
    dist.broadcast(y, src=0)
    return error, x.tolist(), y.tolist()


def test_sends_ahead_and_a_size_mismatch_on_2_ranks():
    (e0, x0, y0), (e1, x1, y1) = run_ranks(_sends_ahead_and_a_mismatch, 2, timeout=60)
    assert e0 is None and "different" in e1 and "16 bytes" in e1 and "32 bytes" in e1, (e0, e1)
    assert x0 == x1 == [3.0] * 3 and y0 == y1 == [0.0, 1.0, 2.0, 3.0, 4.0]
