"""gt.debug's collective counters nest: each sees the collectives inside its own block, and leaving
an inner one never removes an outer one that counted the same (equal counters are not the same)."""
import globaltensor as gt
from globaltensor.distributed import collectives


def test_nested_counters_each_count_their_own_block():
    with gt.debug.count_collectives() as outer:
        with gt.debug.count_collectives() as inner:
            collectives._observe("all_reduce", 8)
        assert inner == outer  # equal, yet distinct: leaving `inner` must remove `inner`
        collectives._observe("all_gather", 16)
        with gt.debug.trace_collectives() as trace:
            collectives._observe("broadcast", 4)
    assert dict(inner) == {"all_reduce": 1}
    assert dict(outer) == {"all_reduce": 1, "all_gather": 1, "broadcast": 1}
    assert [kind for kind, _, _ in trace] == ["broadcast"]
    assert collectives._observers == []
