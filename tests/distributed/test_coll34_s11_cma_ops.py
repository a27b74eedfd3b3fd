"""all_to_all of private (heap) inputs read by cross-memory attach, all_reduce tried both ways then chosen, and
all_gather, broadcast and send/recv of heap inputs (staged), against
numpy: mixed with arena members, uneven sizes, sizes around the attach bound and above a staging slot, and the
fallback when a rank refuses to attach."""
import os

import numpy as np

from globaltensor import distributed as dist
import globaltensor as gt
from conftest import heap_array, placed, rank_data, run_ranks


def _cases(refuse_on):
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    if r == refuse_on:  # read at the group's first probe: the members must agree to stage instead
        os.environ["GLOBALTENSOR_CMA"] = "0"
    # float32 elements: all_gather shares under the 256 KiB bound (staged), at it, above it and above a 1 MiB
    # staging slot; all_to_all inputs under it, some members under and some above (90_000), all above
    for n in (60_001, 65_536, 90_000, 300_007):
        wheres = [("heap" if (p + n) % 3 else "shm") for p in range(k)]  # a mix, alike on every rank
        wheres[0] = "heap"
        # all_gather, uneven lengths, on every rank the same list
        rows = [n + 1000 * p for p in range(k)]
        parts = [rank_data(n, p, rows[p], np.float32) for p in range(k)]
        got = dist.all_gather(placed(parts[r], wheres[r]), sizes=rows)
        np.testing.assert_array_equal(got, np.concatenate(parts))
        # all_to_all, member p sends (p + q + 1) * n // k^2 rows to member q
        send = [[(p + q + 1) * n // (k * k) for q in range(k)] for p in range(k)]
        data = [rank_data(n + 7, p, sum(send[p]), np.float32) for p in range(k)]
        got = dist.all_to_all(placed(data[r], wheres[r]), send[r], recv_sizes=[send[p][r] for p in range(k)])
        want = np.concatenate([data[p][sum(send[p][:r]):sum(send[p][:r + 1])] for p in range(k)])
        np.testing.assert_array_equal(got, want)
        # broadcast from every root, into heap and arena buffers
        for root in range(k):
            value = rank_data(n + 11, root, n, np.float32)
            x = placed(value if r == root else np.zeros(n, np.float32), "heap" if (r + root) % 2 == 0 else "shm")
            dist.broadcast(x, src=root)
            np.testing.assert_array_equal(x, value)
        # send / recv between ranks 0 and 1 (a rendezvous: the phased broadcast of a pair)
        value = rank_data(n + 13, 0, n, np.float32)
        if r == 0:
            dist.send(placed(value, "heap"), 1)
        elif r == 1:
            got = dist.recv(heap_array(n), 0)
            np.testing.assert_array_equal(got, value)
    return True


def test_cma_gather_all_to_all_broadcast_two_ranks():
    assert run_ranks(_cases, 2, -1, timeout=120) == [True, True]


def test_cma_gather_all_to_all_broadcast_three_ranks():
    assert run_ranks(_cases, 3, -1, timeout=120) == [True, True, True]


def test_cma_refused_by_one_rank_stages_instead():
    assert run_ranks(_cases, 3, 1, timeout=120) == [True, True, True]


def _all_reduce_trials():
    """Heap all_reduces past each size class's trials (attached and staged in turn, then one chosen from
    every member's times): the same bits as numpy's sum in rank order before, during and after the choice."""
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    for n in (76_801, 524_288, 2_359_297):  # float32: under 1 MiB, 1-8 MiB, from 8 MiB (over the one-shot size)
        for call in range(10):  # one untimed and 3 timed trials of each, then the choice
            parts = [rank_data(n + call, p, n, np.float32) for p in range(k)]
            want = parts[0].copy()
            for part in parts[1:]:
                want = want + part
            x = heap_array(n)
            x[...] = parts[r]
            if call % 3 == 2:  # out of place now and then, into the arena on one rank
                out = dist.empty_shared((n,), np.float32) if r == 1 else heap_array(n)
                dist.all_reduce(x, out=out)
                x = out
            else:
                dist.all_reduce(x)
            np.testing.assert_array_equal(x.view(np.uint32), want.view(np.uint32))
    return True


def test_heap_all_reduce_tries_both_ways_then_chooses_alike_two_ranks():
    assert run_ranks(_all_reduce_trials, 2, timeout=120) == [True, True]


def test_heap_all_reduce_tries_both_ways_then_chooses_alike_three_ranks():
    assert run_ranks(_all_reduce_trials, 3, timeout=120) == [True, True, True]
