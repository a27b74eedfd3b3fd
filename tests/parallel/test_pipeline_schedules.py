"""Pipeline schedules: complete, deadlock-free orders, bubbles, peaks, transfer placement."""
import re
from fractions import Fraction

import pytest

from globaltensor.pipeline import schedules
from globaltensor.pipeline.schedules import (
    Action, GPipe, Interleaved1F1B, OneFOneB, ScheduleError, Transfer, bubble_formula,
    schedule_from, simulate, simulate_blocking, with_transfers)


def _micro_batches(p):
    """The micro-batch counts tried with p pranks."""
    return sorted({1, 2, p, 2 * p, 2 * p + 1, 16})


def _cases():
    """(schedule name, stage_ranks, m) for every placement and micro-batch count tried."""
    for p in (1, 2, 3, 4):
        for m in _micro_batches(p):
            yield "gpipe", list(range(p)), m
            yield "1f1b", list(range(p)), m
            yield "gpipe", [s % p for s in range(2 * p)], m
            for v in (1, 2, 3):
                yield "interleaved", [s % p for s in range(v * p)], m


def _text(order):
    """An order as 'F0.0 F0.1 ...'."""
    return " ".join(map(str, order))


def _exact_bubble(timeline):
    """The bubble as a fraction (integer costs give exact float times)."""
    total = timeline.n_ranks * Fraction(timeline.makespan)
    return 1 - sum(map(Fraction, timeline.busy)) / total


@pytest.mark.parametrize("name, stage_ranks, m", list(_cases()))
def test_orders_are_complete_and_run_both_ways(name, stage_ranks, m):
    orders = schedule_from(name).orders(stage_ranks, m)
    timeline = simulate(orders, stage_ranks, m)
    events = with_transfers(orders, stage_ranks, m, timeline)
    blocking = simulate_blocking(events, stage_ranks, m)
    assert [[e for e in order if isinstance(e, Action)] for order in events] == orders
    assert blocking.busy == timeline.busy and blocking.makespan >= timeline.makespan
    for t in {e for order in events for e in order if isinstance(e, Transfer)}:
        made = Action("F" if t.kind == "act" else "B", t.src_stage, t.mb)
        used = made._replace(stage=t.dst_stage)
        assert blocking.end[made] <= blocking.start[t] == blocking.end[t] <= blocking.start[used]


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", [(p, m) for p in (1, 2, 3, 4) for m in _micro_batches(p)])
def test_gpipe_and_1f1b_bubble_is_the_formula(name, p, m):
    stage_ranks = list(range(p))
    timeline = simulate(schedule_from(name).orders(stage_ranks, m), stage_ranks, m)
    assert _exact_bubble(timeline) == Fraction(p - 1, m + p - 1)
    assert timeline.bubble == pytest.approx(bubble_formula(name, p, m), abs=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4])
def test_gpipe_over_two_chunks_per_prank_has_the_interleaved_bubble_once_m_reaches_p(p):
    stage_ranks = [s % p for s in range(2 * p)]
    for m in (p, 2 * p + 1):
        timeline = simulate(GPipe().orders(stage_ranks, m), stage_ranks, m)
        assert _exact_bubble(timeline) == Fraction(p - 1, 2 * m + p - 1)


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("v", [1, 2, 3])
@pytest.mark.parametrize("rounds", [1, 2, 4])
def test_interleaved_bubble_is_the_formula_when_m_is_a_multiple_of_p(p, v, rounds):
    m, stage_ranks = rounds * p, [s % p for s in range(v * p)]
    timeline = simulate(Interleaved1F1B().orders(stage_ranks, m), stage_ranks, m)
    assert _exact_bubble(timeline) == Fraction(p - 1, v * m + p - 1)
    assert _exact_bubble(timeline) <= Fraction(p - 1, m + p - 1)   # gpipe's


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("m", [1, 2, 3, 8])
def test_activation_peaks(p, m):
    stage_ranks = list(range(p))
    gpipe = simulate(GPipe().orders(stage_ranks, m), stage_ranks, m)
    one_f_one_b = simulate(OneFOneB().orders(stage_ranks, m), stage_ranks, m)
    assert gpipe.in_flight[0] == m
    assert one_f_one_b.in_flight == [min(p - r, m) for r in range(p)]


def test_1f1b_order_is_megatrons():
    orders = OneFOneB().orders([0, 1], 4)
    assert _text(orders[0]) == "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3"
    assert _text(orders[1]) == "F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3"


def test_interleaved_order_is_megatrons():
    orders = Interleaved1F1B().orders([0, 1, 0, 1], 4)
    assert _text(orders[0]) == ("F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 "
                                "B2.2 B2.3 B0.2 B0.3")
    assert _text(orders[1]) == ("F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 "
                                "F3.3 B3.3 B1.2 B1.3")


@pytest.mark.parametrize("m", [1, 3, 4, 7])
def test_interleaved_with_one_chunk_is_1f1b(m):
    assert Interleaved1F1B().orders([0, 1, 2], m) == OneFOneB().orders([0, 1, 2], m)


def test_uneven_rounds_fall_back_to_a_warmup_that_does_not_deadlock():
    p, v, m = 4, 3, 5
    stage_ranks = [s % p for s in range(v * p)]
    orders = Interleaved1F1B().orders(stage_ranks, m)
    forwards = [[a for a in order if a.kind == "F"] for order in orders]
    backwards = [[a for a in order if a.kind == "B"] for order in orders]
    megatron = [schedules._one_f_one_b(f, b, (p - r - 1) * 2 + (v - 1) * p)
                for r, (f, b) in enumerate(zip(forwards, backwards))]
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate(megatron, stage_ranks, m)
    assert orders == [schedules._one_f_one_b(f, b, (p - r - 1) + (v - 1) * p)
                      for r, (f, b) in enumerate(zip(forwards, backwards))]
    assert max(simulate(orders, stage_ranks, m).in_flight) < v * m    # all-forwards would hold 15


def _orders(*texts):
    """Per-prank orders from texts like 'F0.0 B0.0'."""
    return [[Action(a[0], *map(int, a[1:].split("."))) for a in text.split()] for text in texts]


def test_a_deadlock_names_where_each_prank_waits():
    orders = _orders("F0.0 B0.0 F0.1 B0.1", "F1.1 B1.1 F1.0 B1.0")
    with pytest.raises(ScheduleError) as error:
        simulate(orders, [0, 1], 2)
    assert str(error.value) == ("deadlock: prank 0 waits at B0.0 for B1.0 (prank 1); "
                                "prank 1 waits at F1.1 for F0.1 (prank 0)")


@pytest.mark.parametrize("texts, message", [
    (("F0.0 F0.1 B0.1 B0.0", "F1.0 B1.0 F1.1"), "missing actions: B1.1"),
    (("F0.0 F0.1 B0.1 B0.0 F1.1", "F1.0 B1.0 F1.1 B1.1"), "F1.1 is on prank 0, but stage 1 lives"),
    (("F0.0 F0.1 B0.1 B0.0", "F1.0 B1.0 F1.1 B1.1 F1.1"), "F1.1 appears twice"),
    (("F0.0 F0.1 B0.1 B0.0", "B1.0 F1.0 F1.1 B1.1"), "prank 1 runs B1.0 before F1.0"),
    (("F0.0 F0.1 B0.1 B0.0", "F1.0 B1.0 F1.1 B1.1 F1.2"), "unknown action F1.2 on prank 1"),
    (("F0.0 F0.1 B0.1 B0.0",), "got 1 action lists, expected one per prank (2)"),
])
def test_bad_orders_raise(texts, message):
    with pytest.raises(ScheduleError, match=re.escape(message)):
        simulate(_orders(*texts), [0, 1], 2)


def test_transfers_sit_between_producer_and_consumer():
    stage_ranks, m = [0, 1, 2, 0, 1, 2], 5
    orders = Interleaved1F1B().orders(stage_ranks, m)
    events = with_transfers(orders, stage_ranks, m, simulate(orders, stage_ranks, m))
    transfers = [e for e in events[0] if isinstance(e, Transfer)]
    assert transfers and all(0 in t.pranks and t.pranks[0] != t.pranks[1] for t in transfers)
    for t in {e for order in events for e in order if isinstance(e, Transfer)}:
        made = Action("F" if t.kind == "act" else "B", t.src_stage, t.mb)
        used = made._replace(stage=t.dst_stage)
        source, target = events[t.pranks[0]], events[t.pranks[1]]
        assert source.index(made) < source.index(t) and target.index(t) < target.index(used)
    shared = [[e for e in order if isinstance(e, Transfer) and set(e.pranks) == {0, 1}]
              for order in events[:2]]
    assert shared[0] == shared[1]


def test_no_transfers_between_stages_on_one_prank():
    orders = Interleaved1F1B().orders([0, 0, 0], 3)
    events = with_transfers(orders, [0, 0, 0], 3, simulate(orders, [0, 0, 0], 3))
    assert events == orders


def test_blocking_transfers_out_of_order_deadlock():
    stage_ranks, m = [0, 1], 2
    orders = OneFOneB().orders(stage_ranks, m)
    events = with_transfers(orders, stage_ranks, m, simulate(orders, stage_ranks, m))
    first = events[1].pop(0)
    assert str(first) == "act0>1.0" and str(events[1][0]) == "F1.0"
    events[1].insert(1, first)         # after the forward that needs it
    with pytest.raises(ScheduleError) as error:
        simulate_blocking(events, stage_ranks, m)
    assert str(error.value) == ("deadlock: prank 0 waits at act0>1.0 for prank 1 (at F1.0); "
                                "prank 1 waits at F1.0 for act0>1.0 (pranks 0 and 1)")
    events[1].remove(first)
    with pytest.raises(ScheduleError, match="prank 1: missing transfers act0>1.0"):
        simulate_blocking(events, stage_ranks, m)


def test_blocking_rendezvous_can_be_slower_than_messages():
    stage_ranks, m = [0, 1, 0, 1], 4
    orders = Interleaved1F1B().orders(stage_ranks, m)
    timeline = simulate(orders, stage_ranks, m)
    blocking = simulate_blocking(with_transfers(orders, stage_ranks, m, timeline), stage_ranks, m)
    assert (timeline.makespan, blocking.makespan) == (27, 31)
    assert blocking.bubble > timeline.bubble


def test_costs_give_exact_times():
    cost = {"F": 0.5, "B": 1.25}
    orders = OneFOneB().orders([0, 1], 2)
    timeline = simulate(orders, [0, 1], 2, cost=lambda a: cost[a.kind])
    assert timeline.end[Action("B", 0, 1)] == timeline.makespan == 0.5 * 3 + 1.25 * 3
    assert timeline.busy == [3.5, 3.5]
    assert "B0.1" in timeline.grid()
    with pytest.raises(ScheduleError, match=r"cost\(F0.0\) is 0; it must be > 0"):
        simulate(orders, [0, 1], 2, cost=lambda a: 0)


def test_grid():
    orders = OneFOneB().orders([0, 1], 4)
    grid = simulate(orders, [0, 1], 4).grid()
    lines = grid.splitlines()
    assert lines[0] == ("rank 0 | F0.0 F0.1 .    .    B0.0      F0.2 B0.1      F0.3 B0.2      "
                        ".    B0.3")
    assert lines[1].startswith("rank 1 | .    F1.0 B1.0      F1.1")
    assert lines[2:] == ["bubble 20.0% (formula (p-1)/(m+p-1) = 20.0%)",
                         "activations in flight per rank: 2, 1"]
    wrapped = simulate(orders, [0, 1], 4).grid(width=40).splitlines()
    assert max(map(len, wrapped[:-2])) <= 40 and "t = 6" in wrapped
    assert sum(line.startswith("rank 1 |") for line in wrapped) == 3


def test_grid_of_interleaved_names_v():
    stage_ranks = [0, 1, 2, 0, 1, 2]
    grid = simulate(Interleaved1F1B().orders(stage_ranks, 6), stage_ranks, 6).grid()
    assert sum(line.startswith("rank ") for line in grid.splitlines()) == 3
    assert "(formula (p-1)/(v*m+p-1), v=2 = 14.3%)" in grid


def test_schedule_from():
    assert [type(schedule_from(n)) for n in ("gpipe", "1f1b", "interleaved")] == [
        GPipe, OneFOneB, Interleaved1F1B]
    schedule = OneFOneB()
    assert schedule_from(schedule) is schedule and repr(schedule) == "gt.pipeline.OneFOneB()"
    with pytest.raises(ValueError, match="'zero-bubble'; expected one of 'gpipe', '1f1b', "
                                         "'interleaved'"):
        schedule_from("zero-bubble")
    with pytest.raises(TypeError, match="got int"):
        schedule_from(3)


@pytest.mark.parametrize("schedule, stage_ranks, m, message", [
    (GPipe(), [0, 1], 0, "micro-batches must be an int >= 1, got 0"),
    (GPipe(), [0, 1], 2.0, "micro-batches must be an int >= 1, got 2.0"),
    (GPipe(), [], 2, "stage_ranks is empty"),
    (GPipe(), [1, 0], 2, r"stage_ranks \[1, 0\] must number the pranks 0, 1, ..."),
    (GPipe(), [0, 2], 2, r"stage_ranks \[0, 2\] must number"),
    (OneFOneB(), [0, 1, 0, 1], 2, "1f1b needs one stage per placement"),
    (Interleaved1F1B(), [0, 0, 1, 1], 2, "interleaved needs stage s on prank s % p"),
    (Interleaved1F1B(), [0, 1, 0], 2, "interleaved needs stage s on prank s % p"),
])
def test_orders_check_their_arguments(schedule, stage_ranks, m, message):
    with pytest.raises(ValueError, match=message):
        schedule.orders(stage_ranks, m)


def test_bubble_formula():
    assert bubble_formula("gpipe", 4, 12) == bubble_formula("1f1b", 4, 12) == 3 / 15
    assert bubble_formula("interleaved", 4, 12, v=2) == 3 / 27
    for name in ("1f1b", "gpipe"):  # several stages per rank in gpipe's order do not interleave
        with pytest.raises(ValueError, match="v = 2"):
            bubble_formula(name, 4, 12, v=2)


def test_blocking_simulation_misses_no_micro_batch():
    stage_ranks, m = [0, 1], 3
    orders = OneFOneB().orders(stage_ranks, m)
    events = with_transfers(orders, stage_ranks, m, simulate(orders, stage_ranks, m))
    without_last = [[e for e in order if e.mb != m - 1] for order in events]
    with pytest.raises(ScheduleError, match="missing actions: F0.2"):
        simulate_blocking(without_last, stage_ranks, m)
