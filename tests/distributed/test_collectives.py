"""Shared-memory collectives on 1-4 real processes, checked against numpy on full values."""
import os
import time

import ml_dtypes
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import distributed as dist
from globaltensor.distributed.world import world
from conftest import heap_array, rank_data, run_ranks

REDUCE_DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64]
SIZES = [1, 5, 1000, 70_001, 300_000]  # elements: one-shot, staged rounds (1 MiB slots), zero copy


def reference_reduce(pieces, op):
    """The collective's contract: combine in rank order; half types accumulate in float32."""
    dtype = pieces[0].dtype
    wide = np.float32 if dtype.itemsize == 2 else dtype
    acc = pieces[0].astype(wide)
    for p in pieces[1:]:
        acc = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op](acc, p.astype(wide))
    return acc.astype(dtype)


def _buffer(shared, shape, dtype):
    return dist.empty_shared(shape, dtype) if shared else heap_array(shape, dtype)


def _all_reduce_cases():
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    checked = 0
    for dtype in REDUCE_DTYPES:
        for n in SIZES:
            for op in ("sum", "max", "min"):
                for shared in (False, True):
                    x = _buffer(shared, (n,), dtype)
                    x[...] = rank_data(n, r, n, dtype)
                    dist.all_reduce(x, op)
                    want = reference_reduce([rank_data(n, p, n, dtype) for p in range(k)], op)
                    np.testing.assert_array_equal(x.view(np.uint8), want.view(np.uint8),
                                                  err_msg=f"{np.dtype(dtype)} n={n} {op} shared={shared}")
                    checked += 1
    return checked


def _all_gather_cases():
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    for n in [0, 1, 3, 40_000, 400_000]:
        for shared in (False, True):
            rows = [max(0, n + 7 * p - 7) for p in range(k)]  # uneven; rank 0 may send nothing
            x = _buffer(shared, (rows[r], 2), np.float32)
            x[...] = rank_data(n, r, (rows[r], 2), np.float32)
            for sizes in (None, rows):
                got = dist.all_gather(x, sizes=sizes)
                want = np.concatenate([rank_data(n, p, (rows[p], 2), np.float32) for p in range(k)])
                np.testing.assert_array_equal(got, want)


def _reduce_scatter_cases():
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    for n in [1, 3, 1001, 300_001]:
        for shared in (False, True):
            x = _buffer(shared, (n,), np.float64)
            x[...] = rank_data(n, r, n, np.float64)
            full = reference_reduce([rank_data(n, p, n, np.float64) for p in range(k)], "sum")
            got = dist.reduce_scatter(x)
            lo = sum(n // k + (i < n % k) for i in range(r))
            np.testing.assert_array_equal(got, full[lo:lo + n // k + (r < n % k)])
            sizes = [n] + [0] * (k - 1)  # everything to rank 0
            got = dist.reduce_scatter(x, op="max", sizes=sizes)
            want = reference_reduce([rank_data(n, p, n, np.float64) for p in range(k)], "max")
            np.testing.assert_array_equal(got, want if r == 0 else want[:0])


def _broadcast_cases():
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    for n in [1, 999, 300_000, 1_000_003]:
        for root in range(k):
            for shared in (False, True):
                x = _buffer(shared, (n,), np.int32)
                x[...] = rank_data(n, r, n, np.int32)
                dist.broadcast(x, src=root)
                np.testing.assert_array_equal(x, rank_data(n, root, n, np.int32))


def _all_to_all_cases():
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    for scale in [0, 1, 3, 50_000]:
        counts = [[(p * 3 + q) % 4 * scale for q in range(k)] for p in range(k)]  # zeros included
        x = rank_data(scale, r, (sum(counts[r]), 3), np.int64)
        for recv in (None, [counts[p][r] for p in range(k)]):
            got = dist.all_to_all(x, counts[r], recv_sizes=recv)
            parts = []
            for p in range(k):
                xp = rank_data(scale, p, (sum(counts[p]), 3), np.int64)
                start = sum(counts[p][:r])
                parts.append(xp[start:start + counts[p][r]])
            np.testing.assert_array_equal(got, np.concatenate(parts))


def _send_recv_cases():
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    for n in [1, 1000, 600_000]:
        for src in range(k):
            for dst in range(k):
                if src == dst:
                    continue
                if r == src:
                    dist.send(rank_data(n, src * k + dst, n, np.float32), dst)
                elif r == dst:
                    got = dist.recv(np.empty(n, np.float32), src)
                    np.testing.assert_array_equal(got, rank_data(n, src * k + dst, n, np.float32))
        # a ring: everyone sends right and receives from the left; even ranks send first
        right, left = (r + 1) % k, (r - 1) % k
        if k > 1:
            got = np.empty(n, np.float32)
            mine = rank_data(n, r, n, np.float32)
            if r % 2 == 0:
                dist.send(mine, right)
                dist.recv(got, left)
            else:
                dist.recv(got, left)
                dist.send(mine, right)
            np.testing.assert_array_equal(got, rank_data(n, left, n, np.float32))


def _every_collective():
    cases = _all_reduce_cases()
    for case in (_all_gather_cases, _reduce_scatter_cases, _broadcast_cases, _all_to_all_cases):
        case()
    if gt.env.get_world_size() > 1:
        _send_recv_cases()
    dist.barrier()
    return cases


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_every_collective_against_numpy(nprocs):
    counts = run_ranks(_every_collective, nprocs, timeout=240)
    assert counts == [len(REDUCE_DTYPES) * len(SIZES) * 3 * 2] * nprocs


def _large(n_bytes):
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    n = n_bytes // 4
    for shared in (False, True):
        x = _buffer(shared, (n,), np.float32)
        x[...] = r + 1
        x[::4097] = r * 0.5
        dist.all_reduce(x)
        assert (x[1:4097] == k * (k + 1) / 2).all() and (x[::4097] == sum(p * 0.5 for p in range(k))).all()
        g = dist.all_gather(x[: n // k])
        assert g.shape == (n // k * k,) and g[0] == sum(p * 0.5 for p in range(k))
        s = dist.reduce_scatter(x)
        assert s.shape[0] in (n // k, n // k + 1)
        b = _buffer(shared, (n,), np.float32)
        b[...] = r
        dist.broadcast(b, src=k - 1)
        assert (b == k - 1).all()
    return True


@pytest.mark.parametrize("nprocs", [2, 4])
def test_64_mib_messages(nprocs):
    assert run_ranks(_large, nprocs, 64 << 20, timeout=240) == [True] * nprocs


def _mixed_buffers():
    """Some ranks hold shared-memory arrays, others heap arrays: every path must agree."""
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    shared = r % 2 == 0
    for n in [20_000, 70_000, 300_000, 1_000_000]:  # one-shot, and beyond it
        x = _buffer(shared, (n,), np.float32)
        x[...] = rank_data(n, r, n, np.float32)
        dist.all_reduce(x)
        want = reference_reduce([rank_data(n, p, n, np.float32) for p in range(k)], "sum")
        np.testing.assert_array_equal(x, want)
        g = dist.all_gather(x[: n // 2 + r])
        assert g.shape == (sum(n // 2 + p for p in range(k)),)
        np.testing.assert_array_equal(g[: n // 2], want[: n // 2])
        b = _buffer(shared, (n,), np.float32)
        b[...] = r
        dist.broadcast(b, src=k - 1)
        assert (b == k - 1).all()
        s = dist.reduce_scatter(x)
        lo = sum(n // k + (i < n % k) for i in range(r))
        np.testing.assert_array_equal(s, want[lo:lo + s.shape[0]] * k)
    return True


def _staged_all_reduce(n):
    k, r = gt.env.get_world_size(), gt.env.get_rank()
    x = heap_array((n,), np.float32)
    x[...] = rank_data(n, r, n, np.float32)
    out = heap_array((n,), np.float32)
    dist.all_reduce(x, out=out)
    dist.all_reduce(x)
    want = reference_reduce([rank_data(n, p, n, np.float32) for p in range(k)], "sum")
    return bool(np.array_equal(out, want) and np.array_equal(x, want))


@pytest.mark.parametrize("nprocs", [2, 5])
def test_staged_all_reduce_on_few_and_many_ranks(nprocs):
    """Up to 4 ranks each sums whole staged chunks; more ranks sum their share and copy the
    others' out: both give numpy's sum in rank order, in place and into another array."""
    assert run_ranks(_staged_all_reduce, nprocs, 700_001, timeout=120) == [True] * nprocs


@pytest.mark.parametrize("nprocs", [2, 3])
def test_shared_and_heap_buffers_mixed(nprocs):
    assert run_ranks(_mixed_buffers, nprocs) == [True] * nprocs


def _shm_used_bytes():
    """The /dev/shm pages this job holds, as this rank sees them: the job's named segments
    (gt_<job id>_..., the groups' staging) and this rank's arena (unnamed: its own count). Never
    the machine's total, which other work beside the tests changes."""
    from globaltensor.distributed.world import job_id
    prefix, named = f"gt_{job_id()}_", 0
    for name in os.listdir("/dev/shm"):
        if name.startswith(prefix):
            try:
                named += os.stat(os.path.join("/dev/shm", name)).st_blocks * 512
            except FileNotFoundError:  # a segment that went while we looked
                pass
    return named + gt.memory.memory_stats()["reserved_bytes"]


def _bounded_memory():
    k = gt.env.get_world_size()
    dist.all_reduce(np.zeros(1))  # the group's segment exists from here on
    dist.barrier()
    before = _shm_used_bytes()
    x = heap_array(16 << 20, np.float32)  # 64 MiB on the heap: staged in 1 MiB rounds
    x[...] = 1
    dist.all_reduce(x)
    dist.broadcast(x, src=0)
    grown = _shm_used_bytes() - before
    dist.barrier()
    return bool((x == k).all()), grown


def test_staging_memory_is_bounded():
    for ok, grown in run_ranks(_bounded_memory, 2):
        assert ok and grown < 8 << 20  # far below the 64 MiB message


def _gil_released_while_waiting():
    import threading
    if gt.env.get_rank() == 1:
        dist.barrier()
        time.sleep(1.0)
        dist.barrier()
        return None
    dist.barrier()
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    dist.barrier()  # waits about a second for rank 1
    stop.set()
    t.join()
    return ticks[0]


def test_gil_is_released_while_waiting():
    assert run_ranks(_gil_released_while_waiting, 2)[0] > 100_000


def _subgroups():
    r = gt.env.get_rank()
    pairs = dist.new_group([0, 1]) if r < 2 else dist.new_group([2, 3])
    evens_odds = dist.new_group([0, 2] if r % 2 == 0 else [1, 3])
    reversed_group = dist.new_group([3, 2, 1, 0])  # member order follows the list
    for step in range(20):  # alternate between groups; each sees only its members
        n = 1 + step * 5000
        x = np.full(n, r + step, np.float64)
        dist.all_reduce(x, group=pairs)
        assert (x == (1 if r < 2 else 5) + 2 * step).all()
        y = np.full(n, r, np.float64)
        dist.all_reduce(y, group=evens_odds)
        assert (y == (2 if r % 2 == 0 else 4)).all()
        z = dist.all_gather(np.array([r], np.int64), group=reversed_group)
        assert z.tolist() == [3, 2, 1, 0]
        w = np.full(3, r, np.int32)
        dist.broadcast(w, src=3, group=reversed_group)
        assert (w == 3).all()
    assert pairs.index == r % 2 and reversed_group.index == 3 - r
    return True


def test_subgroups_alternate():
    assert run_ranks(_subgroups, 4) == [True] * 4


def _errors_then_recover():
    r = gt.env.get_rank()
    messages = []
    try:  # the ranks disagree on the size: every rank raises, nobody hangs
        dist.all_reduce(np.zeros(4 + r, np.float32))
    except dist.CollectiveError as exc:
        messages.append(str(exc))
    try:  # the ranks call different collectives
        if r == 0:
            dist.all_reduce(np.zeros(4, np.float32))
        else:
            dist.all_gather(np.zeros(4, np.float32), sizes=[4, 4])
    except dist.CollectiveError as exc:
        messages.append(str(exc))
    for bad, kind in [(lambda: dist.all_reduce(np.zeros(3, np.int16)), TypeError),  # bool reduces now (OneFlow)
                      (lambda: dist.all_reduce(np.zeros(3, np.float32), op="mean"), ValueError),
                      (lambda: dist.all_reduce([1.0, 2.0]), TypeError),
                      (lambda: dist.broadcast(np.zeros(3), src=5), ValueError),
                      (lambda: dist.new_group([0, 0]), ValueError),
                      (lambda: dist.new_group([0, 7]), ValueError),
                      (lambda: dist.reduce_scatter(np.zeros(4), sizes=[1, 1]), ValueError),
                      (lambda: dist.all_reduce(np.zeros(3), group=dist.new_group([1 - r])), ValueError)]:
        with pytest.raises(kind):
            bad()
    x = np.full(5, r + 1.0)
    dist.all_reduce(x)  # the world still works
    assert (x == 3).all()
    return messages


def test_mismatched_calls_raise_on_every_rank_and_world_recovers():
    results = run_ranks(_errors_then_recover, 2)
    for messages in results:
        assert len(messages) == 2
        assert "different sizes" in messages[0] and "rank 1: all_reduce(sum, float32, 20 bytes" in messages[0]
        assert "different collectives" in messages[1] and "all_gather" in messages[1]


def _late_rank(done_flag):
    if gt.env.get_rank() == 1:  # alive, but never joins the collective; stays until rank 0 has its error
        deadline = time.monotonic() + 60
        while not os.path.exists(done_flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        return None
    x = np.zeros(1)
    dist.barrier()  # joining the job works (the store waits, under the default timeout: a late start is no failure)
    world().group((0, 1)).timeout = 1.5  # as GLOBALTENSOR_TIMEOUT=1.5 would, from here on
    start = time.monotonic()
    try:
        dist.all_reduce(x)
    except dist.CollectiveTimeoutError as exc:
        return str(exc), time.monotonic() - start
    finally:
        open(done_flag, "w").close()
    return None


def _late_rank_wrapper(done_flag):
    if gt.env.get_rank() == 1:
        dist.barrier()
    return _late_rank(done_flag)


def test_rank_that_never_arrives_times_out_with_names(tmp_path):
    results = run_ranks(_late_rank_wrapper, 2, str(tmp_path / "done"), timeout=60)
    message, elapsed = results[0]
    assert "all_reduce" in message and "timed out" in message and "rank(s) [1] did not arrive" in message
    assert "GLOBALTENSOR_TIMEOUT" in message and 1.4 < elapsed < 6  # room for a loaded machine
    assert "rank 1: running, not in a collective" in message


def _dead_rank():
    dist.barrier()
    if gt.env.get_rank() == 1:
        os._exit(0)  # gone without a word
    start = time.monotonic()
    try:
        dist.all_reduce(np.zeros(1000))
    except dist.CollectiveTimeoutError as exc:
        return str(exc), time.monotonic() - start


def test_dead_peer_is_detected_quickly():
    message, elapsed = run_ranks(_dead_rank, 2, timeout=60)[0]
    assert "rank(s) [1] will not come" in message and elapsed < 8  # the timeout is 300 s: found by the exit
    assert "rank 1: exited before the end of its script (killed, crashed, or os._exit)" in message


def _world_of_one():
    x = np.arange(4.0)
    dist.all_reduce(x)
    dist.barrier()
    gt.env.barrier()
    return x.tolist(), dist.all_gather(x).tolist(), gt.env.get_rank(), gt.env.get_world_size()


def test_world_of_one_in_a_plain_process():
    assert _world_of_one() == ([0, 1, 2, 3], [0, 1, 2, 3], 0, 1)
