"""all_gather and all_to_all of private (heap) inputs copied by their owners straight into every member's
output when every output lies in its arena (kernels/push.cpp), broadcasts of arena messages copied by every
member in shares, the path taken counted (`pushed`), the staged fallbacks when some output is private or
overlaps its input; and copy_bytes at every relative alignment (kernels/reduce.cpp), against numpy."""
import numpy as np
import pytest

from globaltensor import _native
from globaltensor import distributed as dist
from globaltensor.distributed.world import world
import globaltensor as gt
from conftest import heap_array, placed, rank_data, run_ranks


def _push_cases():
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    g = world().group(tuple(range(k)))
    # float32 elements: under the 64 KiB push bound (staged before the phase), at it, above it, above a 1 MiB
    # staging slot, and outputs past the 8 MiB streaming-store bound
    for n in (8_000, 16_384, 70_001, 300_007, 1_100_003):
        rows = [n + 1000 * p for p in range(k)]
        parts = [rank_data(n, p, rows[p], np.float32) for p in range(k)]
        want = np.concatenate(parts)
        pushes = n * 4 >= 64 << 10  # rank 0's share alone decides it (every share is at least n rows)
        for outs in ("shared", "one private", "overlapping"):
            x = placed(parts[r], "heap")
            if outs == "shared" or (outs == "one private" and r != k - 1):
                out = dist.empty_shared((want.size,), np.float32)
            elif outs == "one private":
                out = heap_array(want.size)
            else:  # MPI's in place: this rank's input is its own piece of its output
                out = dist.empty_shared((want.size,), np.float32)
                lo = sum(rows[:r])
                out[lo:lo + rows[r]] = parts[r]
                x = out[lo:lo + rows[r]]
            before = g.pushed
            g.all_gather(x, out)
            np.testing.assert_array_equal(out, want)
            assert g.pushed - before == (1 if pushes and outs == "shared" else 0), (n, outs)
        # all_to_all, member p sends (p + q + 1) * n // k rows to member q
        send = [[(p + q + 1) * n // k for q in range(k)] for p in range(k)]
        data = [rank_data(n + 7, p, sum(send[p]), np.float32) for p in range(k)]
        recv = [send[p][r] for p in range(k)]
        want = np.concatenate([data[p][sum(send[p][:r]):sum(send[p][:r + 1])] for p in range(k)])
        for outs in ("shared", "one private"):
            out = heap_array(sum(recv)) if outs == "one private" and r == 0 else dist.empty_shared((sum(recv),), np.float32)
            before = g.pushed
            g.all_to_all(placed(data[r], "heap"), [4 * s for s in send[r]], out, [4 * s for s in recv])
            np.testing.assert_array_equal(out, want)
            largest = max(sum(row) for row in send) * 4  # a member at the bound leaves its input unstaged
            assert g.pushed - before == (1 if outs == "shared" and largest >= 64 << 10 else 0), (n, outs)
        # the public calls give the same values whichever way they go
        got = dist.all_gather(placed(parts[r], "heap"), sizes=rows)
        np.testing.assert_array_equal(got, np.concatenate(parts))
        got = dist.all_to_all(placed(data[r], "heap"), send[r], recv_sizes=recv)
        np.testing.assert_array_equal(got, want)
    # broadcast from every root: shared by every member when every buffer is in its arena (from 64 KiB), odd
    # sizes so the shares end off page boundaries; a private buffer on one member: its readers copy alone
    for nbytes in (40_000, 65_536, 65_537, 1_234_567):
        for root in range(k):
            value = rank_data(nbytes, root, nbytes, np.uint8)
            for bufs in ("shared", "one private"):
                private = bufs == "one private" and r == (root + 1) % k
                x = heap_array(nbytes, np.uint8) if private else dist.empty_shared((nbytes,), np.uint8)
                x[...] = value if r == root else 0
                before = g.pushed
                g.broadcast(x, root)
                np.testing.assert_array_equal(x, value)
                assert g.pushed - before == (1 if bufs == "shared" and nbytes >= 65_536 else 0), (nbytes, root, bufs)
    return True


def test_push_two_ranks():
    assert run_ranks(_push_cases, 2, timeout=120) == [True, True]


def test_push_three_ranks():
    assert run_ranks(_push_cases, 3, timeout=120) == [True, True, True]


@pytest.mark.parametrize("nbytes", [1, 2047, 2048, 4096 + 13, 65_536, 300_001])
@pytest.mark.parametrize("nontemporal", [False, True])
def test_copy_bytes_every_relative_alignment(nbytes, nontemporal):
    rng = np.random.default_rng(nbytes)
    src_buf = rng.integers(0, 256, nbytes + 64, dtype=np.uint8)
    for s_off in (0, 3, 16):
        for d_off in (0, 1, 8, 16, 24, 40, 48, 56, 63):
            dst_buf = np.zeros(nbytes + 128, np.uint8)
            src = src_buf[s_off:s_off + nbytes]
            dst = dst_buf[d_off:d_off + nbytes]
            _native.copy_bytes(dst, src, nontemporal)
            np.testing.assert_array_equal(dst, src)
            assert not dst_buf[:d_off].any() and not dst_buf[d_off + nbytes:].any()  # nothing written outside
