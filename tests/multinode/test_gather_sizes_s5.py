"""An all_gather across hosts trusts the sizes every rank passes (no exchange): a rank whose array disagrees
still makes every rank raise, with non-blocking MPI calls (GLOBALTENSOR_INTERHOST_BLOCKING_BYTES=0) (issue 32)."""
import pytest

from test_two_hosts import _env, _two_host_job, needs_hosts

pytestmark = pytest.mark.timeout(120)


@needs_hosts
def test_an_all_gather_whose_sizes_lie_raises_on_every_rank(tmp_path):
    got = _two_host_job(tmp_path, "gather_lie", env={**_env(), "GLOBALTENSOR_TIMEOUT": "3",
                                                       "GLOBALTENSOR_INTERHOST_BLOCKING_BYTES": "0"}, timeout=90)
    assert got[3].startswith("ValueError: all_gather: rank 3 passes 24 bytes"), got[3]
    for message in got[:3]:
        assert message.startswith("CollectiveError") or "rank 3" in message, message


class _Comm:  # a stand-in all_gather communicator: every member passes the same bytes
    def __init__(self, k):
        self.k, self.calls = k, 0

    def Allgather(self, send, recv):
        self.calls += 1
        recv[0].reshape(self.k, -1)[:] = send[0].reshape(1, -1).view(recv[0].dtype)


def _stand_in(ranks, hosts, rank):
    """An InterHostGroup's all_gather side without MPI: rank `rank` of `ranks`, the hosts' members given."""
    from globaltensor.distributed.interhost import InterHostGroup
    g = object.__new__(InterHostGroup)
    g.ranks, g.size, g.index, g.rank = tuple(ranks), len(ranks), ranks.index(rank), rank
    g.host_members = [tuple(h) for h in hosts]
    g.host_index = next(i for i, h in enumerate(hosts) if rank in h)
    g.local = g.host_members[g.host_index]
    g.MPI, g.armed, g._in_flight, g._rows_plans, g._host_peer = type("MPI", (), {"BYTE": None}), None, [], {}, None
    g._gather_comm, g._gather_direct = _Comm(len(ranks)), None  # mpi4py's path (the C++ one needs MPI)
    g._hosts_fit()
    return g


def test_a_kept_plan_still_checks_a_new_layout_and_stays_bounded():
    """gather_rows keeps a checked plan per (shape, dtype, sizes) (s7): a layout seen before skips the checks
    and gives the right answer (strided input too); a lying layout is new, so it still raises before MPI."""
    import numpy as np
    from globaltensor.distributed import interhost_gather
    g = _stand_in([0, 1], [[0], [1]], 0)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for sizes in ([3, 3], (3, 3), [3, 3]):
        np.testing.assert_array_equal(g.gather_rows(x, sizes), np.concatenate([x, x]))
    np.testing.assert_array_equal(g.gather_rows(np.repeat(x, 2, axis=1)[:, ::2], [3, 3]), np.concatenate([x, x]))
    assert len(g._rows_plans) == 1 and g._gather_comm.calls == 4  # a list and a tuple of sizes: one plan
    with pytest.raises(ValueError, match="rank 0 passes 32 bytes"):
        g.gather_rows(np.zeros((4, 2), np.float32), [3, 3])
    assert g._gather_comm.calls == 4
    for n in range(1, 2 * interhost_gather._PLANS_KEPT):
        g.gather_rows(np.zeros((n,), np.int8), [n, n])
    assert len(g._rows_plans) <= interhost_gather._PLANS_KEPT


def test_the_host_path_needs_two_hosts_of_equal_blocks():
    """Every member decides alike from the group alone: [0, 1 | 2, 3] takes the host path from HOSTS_BYTES
    (the peer: the same local index on the other host); interleaved or uneven hosts keep the Allgather."""
    import numpy as np
    from globaltensor.distributed import interhost_gather as ig
    rows = ig.HOSTS_BYTES // 4 // 4  # float32 rows of 4 members filling HOSTS_BYTES
    for ranks, hosts, rank, peer in (([0, 1, 2, 3], [[0, 1], [2, 3]], 2, 0), ([0, 1, 2, 3], [[0, 1], [2, 3]], 1, 3),
                                     ([3, 0, 2, 1], [[3, 2], [0, 1]], 3, None), ([0, 1, 3], [[0, 1], [3]], 0, None)):
        g = _stand_in(ranks, hosts, rank)
        assert g._host_peer == peer
        x = np.zeros(rows, np.float32)
        how = g._rows_plan(x, [rows] * len(ranks))[1]
        total = rows * len(ranks) * 4  # otherwise: one Allgather, or point to point (None) from 1 MiB shares
        other = ig._ALLGATHER if total < ig.BLOCKING_BYTES and rows * 4 < ig.PAIRS_SHARE_BYTES else None
        assert how == (ig._HOSTS if peer is not None and total >= ig.HOSTS_BYTES else other)
        assert g._rows_plan(x[:2], [2] * len(ranks))[1] == ig._ALLGATHER


def test_an_output_nobody_holds_is_written_again_and_a_held_one_never():
    """gather_rows keeps its last small output per layout (s8): the next call writes into it only when no
    name, view or container holds it any more; a held output keeps its values."""
    import numpy as np
    g = _stand_in([0, 1], [[0], [1]], 0)
    x = np.arange(4, dtype=np.float32)
    first = g.gather_rows(x, [4, 4])
    second = g.gather_rows(x + 1, [4, 4])
    assert second.ctypes.data != first.ctypes.data  # first is held by its name
    view, address = second[2:], second.ctypes.data
    del second
    third = g.gather_rows(x + 2, [4, 4])
    assert third.ctypes.data != address  # a view holds second
    held = [third]
    address = third.ctypes.data
    del third
    fourth = g.gather_rows(x + 3, [4, 4])
    assert fourth.ctypes.data != address  # a list holds third
    address = fourth.ctypes.data
    del fourth
    fifth = g.gather_rows(x + 4, [4, 4])
    assert fifth.ctypes.data == address  # nothing held fourth: written again
    np.testing.assert_array_equal(first, np.concatenate([x, x]))
    np.testing.assert_array_equal(view, np.concatenate([x + 1, x + 1])[2:])
    np.testing.assert_array_equal(held[0], np.concatenate([x + 2, x + 2]))
    np.testing.assert_array_equal(fifth, np.concatenate([x + 4, x + 4]))


def test_plans_keep_outputs_under_keep_bytes_and_a_budget_per_group():
    """gather_rows' plans keep an output slot only under KEEP_BYTES (16 MiB, s10) and while the group's kept
    outputs add up to at most KEEP_TOTAL_BYTES; plans cleared when full start the budget again."""
    import numpy as np
    from globaltensor.distributed import interhost_gather as ig
    g = _stand_in([0, 1], [[0], [1]], 0)
    big = np.zeros(ig.KEEP_BYTES // 2, np.uint8)  # a member's half of a KEEP_BYTES output: not kept (not under)
    assert g._rows_plan(big, [big.size] * 2)[3] is None
    piece = ig.KEEP_BYTES // 8  # outputs of KEEP_BYTES / 4 each
    kept = [g._rows_plan(np.zeros(piece + i, np.uint8), [piece + i] * 2)[3] is not None for i in range(20)]
    fits = ig.KEEP_TOTAL_BYTES // (2 * piece + 40)
    assert kept[:fits] == [True] * fits and not any(kept[fits + 1:]), kept
    g._rows_plans.clear()
    assert g._rows_plan(np.zeros(piece, np.uint8), [piece] * 2)[3] is not None
