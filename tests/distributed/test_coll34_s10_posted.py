"""Posted small broadcasts (issue 34 s10): the root writes its message into a numbered slot and returns.
Values against numpy on 2 and 3 ranks (every dtype, sizes around the posting bound, roots rewriting their
buffer at once, roots running ahead of a slow reader, mixed with the phased collectives), and every way
ranks can disagree raising within seconds on every rank (the timeout is the default 300 s): sizes across
the bound, two ranks naming themselves root, readers naming each other, a post met by a phased
collective, a root whose script ended; send/recv stay a rendezvous (crossed sends raise at once)."""
import os
import time

import numpy as np
import pytest

import globaltensor as gt
from globaltensor import distributed as dist
from globaltensor import dtype as _dtype
from conftest import run_ranks

_DTYPES = [d.np for d in _dtype.ALL]
_BOUND = 16 << 10  # kernels/broadcast.cpp kPostBytes: the largest posted broadcast
_SLOTS = 64        # kPostSlots: how far a root runs ahead of its slowest reader
_QUICK = 60.0      # seconds: far under the 300 s timeout (errors come in 0.01-2 s), loose for a busy CI machine


def _value(rank, n, dtype, salt=0):
    v = (np.arange(n) * 3 + rank * 7 + salt) % 11
    return (v % 2).astype(dtype) if dtype == np.dtype(np.bool_) else v.astype(dtype)


def _mixed_calls():
    """Broadcasts of every dtype and size class from changing roots, each root rewriting its buffer
    right after the call, interleaved with phased collectives (on the world and on a sub-group that
    shares no state), a root many calls ahead of a reader that sleeps (it waits for the slots'
    acknowledgements), a non-contiguous buffer, send/recv on a pair."""
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    sizes = [0, 1, 2, 7, _BOUND // 8, _BOUND // 4, _BOUND // 4 + 1, 3 * _BOUND]  # float32: up to and past the bound
    pair = dist.new_group([0, 1])
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
            if call % 7 == 3 and r < 2:  # a posted broadcast on a sub-group of the world
                y = _value(1, 6, np.int32, salt=call) if r == 1 else np.zeros(6, np.int32)
                dist.broadcast(y, src=1, group=pair)
                assert np.array_equal(y, _value(1, 6, np.int32, salt=call))
    for i in range(3 * _SLOTS):  # rank 0 runs ahead; the last rank reads late: slots reused after their reads
        if r == k - 1 and i == 0:
            time.sleep(0.3)
        x = _value(0, 9, np.float64, salt=i) if r == 0 else np.zeros(9)
        dist.broadcast(x, src=0)
        assert np.array_equal(x, _value(0, 9, np.float64, salt=i)), i
    for i in range(2 * k):  # one rank late at a time: the others' waits (posts, acknowledgements, phases) sleep
        if r == i % k:  # and run their liveness checks, which must not take a late peer for a mismatch
            time.sleep(0.25)
        z = _value((i + 1) % k, 5, np.int32, salt=i) if r == (i + 1) % k else np.zeros(5, np.int32)
        dist.broadcast(z, src=(i + 1) % k)
        assert np.array_equal(z, _value((i + 1) % k, 5, np.int32, salt=i)), i
        assert np.array_equal(dist.all_reduce(np.full(2, r + i)), np.full(2, sum(range(k)) + k * i)), i
    m = np.zeros((6, 4), np.float32)
    view = m[:, 1]  # not contiguous
    if r == 1:
        view[...] = _value(1, 6, np.float32)
    dist.broadcast(view, src=1)
    assert np.array_equal(m[:, 1], _value(1, 6, np.float32)) and not m[:, [0, 2, 3]].any()
    for i in range(5):  # send/recv: rank 0 sends 5 messages, rank 1 receives them in order
        if r == 0:
            dist.send(_value(0, 4, np.int32, salt=i), 1)
        elif r == 1:
            assert np.array_equal(dist.recv(np.empty(4, np.int32), 0), _value(0, 4, np.int32, salt=i)), i
    dist.barrier()
    return call


@pytest.mark.parametrize("nprocs", [2, 3])
def test_posted_broadcasts_mixed_with_other_collectives(nprocs):
    for _ in range(2):  # mixed layouts run more than once
        assert len(set(run_ranks(_mixed_calls, nprocs, timeout=120))) == 1


def _disagree(case):
    """Each rank's (error text or None, seconds until it raised) for one kind of disagreement; the
    second call is where a rank that returned from the first meets the others' error."""
    r = gt.env.get_rank()
    t = time.monotonic()
    try:
        if case == "sizes":  # the root posts 4 floats; the reader expects 8
            dist.broadcast(np.ones(4 if r == 0 else 8, np.float32), src=0)
        elif case == "across_bound":  # the root posts; the reader's size takes the phased path
            dist.broadcast(np.ones(16 if r == 0 else _BOUND, np.float32), src=0)
        elif case == "self_roots":  # both name themselves root: both post and return
            dist.broadcast(np.ones(4, np.float32), src=r)
        elif case == "crossed_roots":  # each names the other: both await a post
            dist.broadcast(np.ones(4, np.float32), src=1 - r)
        elif case == "post_vs_phased":  # rank 0 posts, rank 1 calls all_reduce
            if r == 0:
                dist.broadcast(np.ones(4, np.float32), src=0)
            else:
                dist.all_reduce(np.ones(4, np.float32))
        elif case == "crossed_sends":  # both send first: a rendezvous, so an error at once
            dist.send(np.ones(4, np.float32), 1 - r)
        dist.all_reduce(np.ones(3))
        dist.barrier()
    except dist.CollectiveError as exc:
        return str(exc), time.monotonic() - t
    return None, time.monotonic() - t


@pytest.mark.parametrize("case, says", [
    ("sizes", "16 bytes"), ("across_bound", "different"), ("self_roots", "small broadcasts before"),
    ("crossed_roots", "different roots"), ("post_vs_phased", "different"), ("crossed_sends", "different roots")])
def test_ranks_that_disagree_raise_within_seconds_on_every_rank(case, says):
    results = run_ranks(_disagree, 2, case, timeout=120)
    assert all(e is not None for e, _ in results), results
    assert all(s < _QUICK and "timed out" not in e for e, s in results), results  # found, not timed out
    assert any(says in e for e, _ in results), results


def _root_gone():
    dist.barrier()  # both have joined: rank 0 then awaits a post
    if gt.env.get_rank() == 1:
        return None  # the script ends without the broadcast
    t = time.monotonic()
    with pytest.raises(dist.CollectiveError, match="rank 1") as info:
        dist.broadcast(np.zeros(4, np.float32), src=1)
    return str(info.value), time.monotonic() - t


def test_a_reader_whose_root_ended_raises_naming_it():
    text, seconds = run_ranks(_root_gone, 2, timeout=120)[0]
    assert seconds < _QUICK and "broadcast on ranks [0, 1]: rank 0 waited" in text and "timed out" not in text
    assert "rank 1: finished the script" in text or "rank 1: exited" in text, text


def _fronts_called_from_the_type():
    """The world's C++ fronts are called through their type's own slot (bindings/fastcall.h): positional
    arguments only, checked; errors of the fallback and of the collective arrive as from pybind11."""
    from globaltensor.distributed import collectives
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    x = np.full(3, float(r))
    dist.all_gather(x, sizes=[3] * k)  # the world's fronts exist from here
    front = collectives._world_bcast
    for bad in [lambda: front(x), lambda: front(x, 0, 1), lambda: front(x, src=0)]:
        with pytest.raises(TypeError, match="BroadcastCall"):
            bad()
    with pytest.raises(ValueError, match="src rank 7 is not in the group"):
        front(x, 7)  # the fallback's own error
    assert front.__call__(x, 1) is x and x.tolist() == [1.0] * 3  # pybind11's __call__ still works
    x[...] = r + 5.0
    assert front(x, 0) is x and x.tolist() == [5.0] * 3
    assert dist.all_gather(x, sizes=[3] * k).tolist() == [5.0] * 3 * k and collectives._world_rows.kept == 1
    return type(front).__name__, type(collectives._world_rows).__name__


def test_cpp_fronts_check_their_arguments_and_pass_errors_on():
    assert run_ranks(_fronts_called_from_the_type, 2, timeout=60) == [("BroadcastCall", "GatherRows")] * 2


def _readers_in_a_cycle():
    """Rank 0 awaits rank 1's post on the pair [0, 1]; ranks 1 and 2 await rank 0's on the world: no phase
    moves and no post comes, so only the deadlock detector (2 s) can tell; every rank raises well before
    the 300 s timeout, rank 0 naming the cycle."""
    r = gt.env.get_rank()
    pair = dist.new_group([0, 1])
    if r < 2:
        dist.barrier(group=pair)
    dist.barrier()
    t = time.monotonic()
    try:
        if r == 0:
            dist.broadcast(np.zeros(4, np.float32), src=1, group=pair)
        else:
            dist.broadcast(np.zeros(4, np.float32), src=0)
    except dist.CollectiveError as exc:
        return str(exc), time.monotonic() - t
    return None, time.monotonic() - t


def test_readers_waiting_for_each_other_in_two_groups_are_a_deadlock():
    results = run_ranks(_readers_in_a_cycle, 3, timeout=120)
    assert all(e is not None and s < _QUICK and "timed out" not in e for e, s in results), results
    assert any("deadlock: these ranks wait for each other" in e for e, _ in results), results


def _root_ahead(path):
    """Rank 0 makes its small broadcasts and only then lets rank 1 read them (a file it writes): a root
    that waited for its readers would never write it, and rank 1 would give up waiting for the file."""
    r = gt.env.get_rank()
    dist.barrier()  # both have joined the job (a rank joins on its first collective)
    if r == 0:
        for i in range(5):
            dist.broadcast(np.full(3, float(i)), src=0)
        with open(path, "w") as f:
            f.write("done")
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            assert time.monotonic() < deadline, "rank 0 did not return from its broadcasts before rank 1 read them"
            time.sleep(0.01)
        for i in range(5):
            assert np.array_equal(dist.broadcast(np.zeros(3), src=0), np.full(3, float(i))), i
    dist.barrier()
    return r


def test_a_root_returns_before_its_readers_read(tmp_path):
    assert run_ranks(_root_ahead, 2, str(tmp_path / "sent"), timeout=120) == [0, 1]
