"""all_gather / all_to_all given the sizes, reduce_scatter, all_reduce and broadcast on one host in one C++ call
(_native.GatherRows, AllToAllRows, ScatterRows, AllReduceCall, BroadcastCall; issue 34 s9): values against
numpy for even and uneven sizes, strided inputs, sizes of any int sequence (an iterator too), large outputs
(shared memory, collectives.py's way), every dtype and op, and bad arguments (an error on every rank, before
any collective)."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import distributed as dist
from conftest import run_ranks


def _piece(q, rows, dtype=np.float32):
    return (np.arange(rows * 3).reshape(rows, 3) + 100 * q).astype(dtype)


def _gathers():
    from globaltensor.distributed import collectives
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    for rows_of, dtype in ((lambda q: 2, np.float32), (lambda q: q + 1, np.int64), (lambda q: 0 if q == 1 else 3, np.float64),
                           (lambda q: 3000, np.float32)):  # the last: 36 KiB per rank, an output in shared memory
        sizes = [rows_of(q) for q in range(k)]
        want = np.concatenate([_piece(q, rows_of(q), dtype) for q in range(k)])
        mine = _piece(r, rows_of(r), dtype)
        for given in (sizes, tuple(sizes), np.array(sizes), [np.int64(s) for s in sizes]):
            np.testing.assert_array_equal(dist.all_gather(mine, sizes=given), want)
        strided = np.repeat(mine, 2, axis=1)[:, ::2]
        np.testing.assert_array_equal(dist.all_gather(strided, sizes=sizes), want)
    for bad in ([2] * (k + 1), [2] * (k - 1)):
        with pytest.raises(ValueError, match="one entry per member"):
            dist.all_gather(_piece(r, 2), sizes=bad)
    np.testing.assert_array_equal(dist.all_gather(_piece(r, 2), sizes=[2] * k),  # still in step afterwards
                                  np.concatenate([_piece(q, 2) for q in range(k)]))
    assert 1 <= collectives._world_rows.kept <= 16  # the C++ path ran; at most 16 layouts kept
    return type(collectives._world_rows).__name__


def _to_alls():
    from globaltensor.distributed import collectives
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    for rows_of, dtype in ((lambda p, q: 1, np.float32), (lambda p, q: p + 2 * q, np.int64),
                           (lambda p, q: 1500 + p, np.float32)):  # the last: outputs of 18-36 KiB (shared memory)
        send = [rows_of(r, q) for q in range(k)]
        recv = [rows_of(p, r) for p in range(k)]
        x = np.concatenate([np.full((rows_of(r, q), 3), 10 * r + q, dtype) for q in range(k)])
        want = np.concatenate([np.full((rows_of(p, r), 3), 10 * p + r, dtype) for p in range(k)])
        for s, v in ((send, recv), (tuple(send), np.array(recv)), (iter(send), recv), (send, None)):
            np.testing.assert_array_equal(dist.all_to_all(x, s, recv_sizes=v), want)
        np.testing.assert_array_equal(dist.all_to_all(np.repeat(x, 2, axis=1)[:, ::2], send, recv_sizes=recv), want)
    with pytest.raises(ValueError, match="send_sizes"):
        dist.all_to_all(np.zeros((k + 1, 3), np.float32), [1] * k, recv_sizes=[1] * k)
    x = np.full((k, 3), r, np.float32)  # still in step afterwards
    np.testing.assert_array_equal(dist.all_to_all(x, [1] * k, recv_sizes=[1] * k),
                                  np.repeat(np.arange(k, dtype=np.float32), 3).reshape(k, 3))
    assert collectives._world_to_all.kept > 0  # the C++ path ran
    return type(collectives._world_to_all).__name__


def _scatters():
    from globaltensor.distributed import collectives
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.float16, np.int8, np.complex64):
        for op, fold in (("sum", np.sum), ("max", np.max), ("min", np.min)):
            if op != "sum" and dtype == np.complex64:
                continue
            for rows, sizes in ((2 * k + 1, None), (5, [5 - (k - 1)] + [1] * (k - 1)), (3000 * k, None)):
                values = [((np.arange(rows * 3).reshape(rows, 3) % 5) * (q + 1) - q).astype(dtype) for q in range(k)]
                total = fold(np.stack(values), 0).astype(dtype)
                pieces = np.split(total, np.cumsum(sizes)[:-1]) if sizes else np.array_split(total, k)
                got = dist.reduce_scatter(values[r], op, sizes=sizes)
                np.testing.assert_array_equal(got, pieces[r], err_msg=f"{dtype} {op} {rows}")
                if sizes:
                    np.testing.assert_array_equal(dist.reduce_scatter(values[r], op, sizes=np.array(sizes)), pieces[r])
            strided = np.repeat(values[r], 2, axis=1)[:, ::2]
            np.testing.assert_array_equal(dist.reduce_scatter(strided, op), np.array_split(total, k)[r])
    with pytest.raises(ValueError, match="sizes"):
        dist.reduce_scatter(np.zeros((4, 2), np.float32), sizes=[1] * k)
    with pytest.raises(ValueError):
        dist.reduce_scatter(np.zeros((4, 2), np.float32), "prod")
    x = np.full((k, 2), r + 1, np.float32)  # still in step afterwards
    np.testing.assert_array_equal(dist.reduce_scatter(x), np.full((1, 2), k * (k + 1) / 2, np.float32))
    assert collectives._world_scatter.kept > 0  # the C++ path ran
    return type(collectives._world_scatter).__name__


def _reduces_and_broadcasts():
    from globaltensor.distributed import collectives
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.float16, np.int8, np.bool_, np.complex64):
        for op, fold in (("sum", np.sum), ("max", np.max), ("min", np.min)):
            if op != "sum" and dtype == np.complex64:
                continue
            for shape in ((), (5,), (3, 4)):
                values = [np.asarray(((np.arange(int(np.prod(shape))).reshape(shape) % 3) * (q + 1) - q).astype(dtype)) for q in range(k)]
                want = fold(np.stack(values), 0)
                want = want.astype(dtype) if dtype != np.bool_ else (want if op != "sum" else np.any(np.stack(values), 0))
                x = values[r].copy()
                assert dist.all_reduce(x, op) is x
                np.testing.assert_array_equal(x, want, err_msg=f"{dtype} {op} {shape}")
        base = (np.arange(6).reshape(3, 2) % 2 + 1).astype(dtype)
        for src in (0, k - 1, np.int64(1)):
            mine = np.repeat(base if r == int(src) else np.zeros_like(base), 2, axis=1)[:, ::2]  # strided: Python's way
            np.testing.assert_array_equal(dist.broadcast(mine, src), base)
            flat = np.full(4, r, dtype)
            assert dist.broadcast(flat, src) is flat
            np.testing.assert_array_equal(flat, np.full(4, int(src), dtype))
    frozen = np.zeros(3, np.float32)
    frozen.flags.writeable = False
    for bad, error in ((lambda: dist.broadcast(np.zeros(3, np.float32), k), ValueError),
                       (lambda: dist.broadcast(frozen, 0), ValueError),
                       (lambda: dist.all_reduce(frozen), ValueError),
                       (lambda: dist.all_reduce(np.zeros(3, np.float32), "prod"), ValueError)):
        with pytest.raises(error):
            bad()
    x = np.full(2, r + 1, np.float32)  # still in step afterwards
    np.testing.assert_array_equal(dist.all_reduce(x), np.full(2, k * (k + 1) / 2, np.float32))
    return f"{type(collectives._world_reduce).__name__} {type(collectives._world_bcast).__name__}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("work, kind", [(_gathers, "GatherRows"), (_to_alls, "AllToAllRows"), (_scatters, "ScatterRows"),
                                        (_reduces_and_broadcasts, "AllReduceCall BroadcastCall")])
def test_small_calls_in_cpp_match_numpy(work, kind, k):
    assert run_ranks(work, k, timeout=100) == [kind] * k
