"""Pipeline-parallel schedules as data: per-prank action lists, checked and timed by simulation."""
import collections
import functools
import math
from typing import NamedTuple


class Action(NamedTuple):
    """One compute step: the forward ("F") or backward ("B") of a stage on one micro-batch."""
    kind: str
    stage: int
    mb: int

    def __str__(self):
        return f"{self.kind}{self.stage}.{self.mb}"


class Transfer(NamedTuple):
    """A blocking rendezvous between two pranks: an activation ("act") going to stage src+1, or
    an input gradient ("grad") going to stage src-1; pranks = (src stage's, dst stage's)."""
    kind: str
    src_stage: int
    dst_stage: int
    mb: int
    pranks: tuple

    def __str__(self):
        return f"{self.kind}{self.src_stage}>{self.dst_stage}.{self.mb}"


class ScheduleError(ValueError):
    """Action lists that are incomplete, misplaced, or deadlock."""


def default_cost(action):
    """Forward 1, backward 2: the usual ideal model."""
    return 1 if action.kind == "F" else 2


def _n_ranks_of(stage_ranks):
    """The number of pranks, after checking they are numbered 0, 1, ... as they first appear."""
    if not stage_ranks:
        raise ValueError("stage_ranks is empty; expected one prank id per stage, e.g. [0, 1]")
    first_seen = list(dict.fromkeys(stage_ranks))
    if first_seen != list(range(len(first_seen))):
        raise ValueError(f"stage_ranks {list(stage_ranks)} must number the pranks 0, 1, ... in "
                         f"order of first appearance, e.g. [0, 1, 0, 1]")
    return len(first_seen)


def _check_micro_batches(m):
    """Raise unless m is a positive int."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"the number of micro-batches must be an int >= 1, got {m!r}")


def _one_f_one_b(forwards, backwards, warmup):
    """warmup forwards, then one forward and one backward in turn, then the remaining backwards."""
    steady = len(forwards) - warmup
    alternating = [a for pair in zip(forwards[warmup:], backwards[:steady]) for a in pair]
    return forwards[:warmup] + alternating + backwards[steady:]


class Schedule:
    """Base of the schedules: orders() checks its arguments, then builds one list per prank."""
    name = None

    def orders(self, stage_ranks, m):
        """For each prank, the ordered actions it runs; stage_ranks[s] is the prank of stage s."""
        _check_micro_batches(m)
        stage_ranks = list(stage_ranks)
        return self._orders(stage_ranks, m, _n_ranks_of(stage_ranks))

    def __repr__(self):
        return f"gt.pipeline.{type(self).__name__}()"


class GPipe(Schedule):
    """All forwards (stage by stage, micro-batches in order), then all backwards in reverse."""
    name = "gpipe"

    def _orders(self, stage_ranks, m, n_ranks):
        orders = []
        for rank in range(n_ranks):
            forwards = [Action("F", s, mb) for s, r in enumerate(stage_ranks) if r == rank
                        for mb in range(m)]
            orders.append(forwards + [Action("B", s, mb) for _, s, mb in reversed(forwards)])
        return orders


class OneFOneB(Schedule):
    """Classic 1F1B, one stage per prank: p - r - 1 warm-up forwards on prank r, then one forward
    and one backward in turn; several stages on a prank raise (that is 'interleaved')."""
    name = "1f1b"

    def _orders(self, stage_ranks, m, n_ranks):
        if n_ranks != len(stage_ranks):
            raise ValueError(f"1f1b needs one stage per placement, got stage_ranks {stage_ranks}; "
                             f"use 'interleaved' (or 'gpipe')")
        return [_one_f_one_b([Action("F", r, mb) for mb in range(m)],
                            [Action("B", r, mb) for mb in range(m)], min(n_ranks - r - 1, m))
                for r in range(n_ranks)]


class Interleaved1F1B(Schedule):
    """Megatron's interleaved 1F1B: stage s on prank s % p, v = n_stages / p chunks per prank;
    micro-batches go in rounds of p (the last may be shorter), each round through chunk 0, 1, ...
    forward and through the chunks in reverse backward. Warm-up forwards on prank r: Megatron's
    (p - r - 1) * 2 + (v - 1) * p (v = 1: 1F1B's p - r - 1). Where that deadlocks (some m that
    are not a multiple of p), the first that does not of: (p - r - 1) + (v - 1) * p, then all
    forwards first (which never deadlocks)."""
    name = "interleaved"

    def _orders(self, stage_ranks, m, n_ranks):
        p, v = n_ranks, len(stage_ranks) // n_ranks
        if stage_ranks != [s % p for s in range(v * p)]:
            raise ValueError(f"interleaved needs stage s on prank s % p with the same number of "
                             f"stages on every prank, got stage_ranks {stage_ranks}")
        rounds = [range(start, min(start + p, m)) for start in range(0, m, p)]
        forwards = [[Action("F", c * p + r, mb) for mbs in rounds for c in range(v) for mb in mbs]
                    for r in range(p)]
        backwards = [[Action("B", c * p + r, mb) for mbs in rounds for c in reversed(range(v))
                      for mb in mbs] for r in range(p)]
        warmups = ([(p - r - 1) * (2 if v > 1 else 1) + (v - 1) * p for r in range(p)],
                   [(p - r - 1) + (v - 1) * p for r in range(p)],
                   [v * m] * p)
        candidates = ([_one_f_one_b(f, b, min(w, v * m))
                       for f, b, w in zip(forwards, backwards, ws)] for ws in warmups)
        return next(orders for orders in candidates if not _deadlocks(orders, stage_ranks, m))


_SCHEDULES = {cls.name: cls for cls in (GPipe, OneFOneB, Interleaved1F1B)}


def schedule_from(schedule):
    """A Schedule from its name ("gpipe", "1f1b", "interleaved") or as is."""
    if isinstance(schedule, Schedule):
        return schedule
    names = ", ".join(repr(name) for name in _SCHEDULES)
    if not isinstance(schedule, str):
        raise TypeError(f"a pipeline schedule is a name ({names}) or a Schedule, "
                        f"got {type(schedule).__name__}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; expected one of {names}")
    return _SCHEDULES[schedule]()


def _ideal_bubble(p, m, v):
    """(p - 1) / (v * m + p - 1): the idle fraction of a step in the ideal model."""
    return (p - 1) / (v * m + p - 1)


def bubble_formula(name, p, m, v=1):
    """The ideal bubble as a fraction of the step: gpipe and 1f1b (p-1)/(m+p-1), interleaved
    (p-1)/(v*m+p-1) with v chunks per prank; the issue's (p-1)/(v*m) is that same idle time
    relative to the ideal compute instead of to the step."""
    if schedule_from(name).name != "interleaved" and v != 1:  # gpipe's order with v > 1 is no interleaving
        raise ValueError(f"the formula with v = {v} chunks per prank is interleaved's, not {name}'s")
    return _ideal_bubble(p, m, v)


def _dependencies(action, n_stages):
    """The actions whose results `action` needs: the previous stage's forward, or the same
    stage's forward and the next stage's backward."""
    kind, s, mb = action
    if kind == "F":
        return [Action("F", s - 1, mb)] if s > 0 else []
    return [Action("F", s, mb)] + ([Action("B", s + 1, mb)] if s < n_stages - 1 else [])


def _producer(transfer):
    """The action whose result a transfer carries."""
    return Action("F" if transfer.kind == "act" else "B", transfer.src_stage, transfer.mb)


def _transfer_of(dependency, action, stage_ranks):
    """The transfer that brings a dependency's result to action's stage."""
    kind = "act" if dependency.kind == "F" else "grad"
    pranks = (stage_ranks[dependency.stage], stage_ranks[action.stage])
    return Transfer(kind, dependency.stage, action.stage, action.mb, pranks)


def _all_transfers(stage_ranks, m):
    """Every transfer between stages on different pranks."""
    n_stages = len(stage_ranks)
    return [_transfer_of(d, a, stage_ranks) for s in range(n_stages) for mb in range(m)
            for a in (Action("F", s, mb), Action("B", s, mb))
            for d in _dependencies(a, n_stages)
            if d.stage != s and stage_ranks[d.stage] != stage_ranks[s]]


def _check_actions(orders, stage_ranks, m):
    """Raise ScheduleError unless every action appears once, on its stage's prank, F before B."""
    n_ranks = _n_ranks_of(stage_ranks)
    if len(orders) != n_ranks:
        raise ScheduleError(f"got {len(orders)} action lists, expected one per prank ({n_ranks})")
    placed = {}
    for rank, order in enumerate(orders):
        for action in order:
            if (not isinstance(action, Action) or action.kind not in ("F", "B")
                    or not 0 <= action.stage < len(stage_ranks) or not 0 <= action.mb < m):
                raise ScheduleError(f"unknown action {action} on prank {rank}: expected F or B, "
                                    f"stage in 0..{len(stage_ranks) - 1}, mb in 0..{m - 1}")
            if action in placed:
                raise ScheduleError(f"{action} appears twice (pranks {placed[action]} and {rank})")
            if stage_ranks[action.stage] != rank:
                raise ScheduleError(f"{action} is on prank {rank}, but stage {action.stage} lives "
                                    f"on prank {stage_ranks[action.stage]}")
            forward = action._replace(kind="F")
            if action.kind == "B" and forward not in placed:
                raise ScheduleError(f"prank {rank} runs {action} before {forward}")
            placed[action] = rank
    missing = [str(Action(kind, s, mb)) for kind in "FB" for s in range(len(stage_ranks))
               for mb in range(m) if Action(kind, s, mb) not in placed]
    if missing:
        raise ScheduleError(f"missing actions: {' '.join(missing)}")


def _check_transfers(events, stage_ranks, m):
    """Raise ScheduleError unless each prank holds exactly the transfers that involve it, once."""
    expected = [[] for _ in events]
    for t in _all_transfers(stage_ranks, m):
        for rank in t.pranks:
            expected[rank].append(t)
    for rank, order in enumerate(events):
        held = collections.Counter(e for e in order if isinstance(e, Transfer))
        want = collections.Counter(expected[rank])
        unexpected = [str(t) for t in held if t not in want]
        missing = [str(t) for t in want if t not in held]
        repeated = sorted(str(t) for t, n in held.items() if n > 1)
        for what, names in (("unexpected", unexpected), ("missing", missing),
                            ("repeated", repeated)):
            if names:
                raise ScheduleError(f"prank {rank}: {what} transfers {' '.join(names)}")


def _run(orders, stage_ranks, needs, cost):
    """Time the per-prank event lists: an action starts when its prank is free and `needs` are
    done; a transfer completes, taking no time, once each of its pranks has reached it."""
    position, free = [0] * len(orders), [0.0] * len(orders)
    start, end = {}, {}

    def head(rank):
        """The next event of a prank, None once it is through."""
        return orders[rank][position[rank]] if position[rank] < len(orders[rank]) else None

    def blockers(event):
        """What event still waits for: unfinished needs, and pranks not yet at this transfer."""
        waiting = [d for d in needs(event) if d not in end]
        if isinstance(event, Transfer):
            waiting += [rank for rank in event.pranks if head(rank) != event]
        return waiting

    def waiting_at(rank):
        """'prank r waits at X for Y (where Y is)', for a deadlock report."""
        event = head(rank)
        blocker = blockers(event)[0]
        if isinstance(blocker, int):
            at = "finished" if head(blocker) is None else f"at {head(blocker)}"
            return f"prank {rank} waits at {event} for prank {blocker} ({at})"
        where = (f"pranks {blocker.pranks[0]} and {blocker.pranks[1]}"
                 if isinstance(blocker, Transfer) else f"prank {stage_ranks[blocker.stage]}")
        return f"prank {rank} waits at {event} for {blocker} ({where})"

    progress = True
    while progress:
        progress = False
        for rank in range(len(orders)):
            while (event := head(rank)) is not None and not blockers(event):
                ready = max([end[d] for d in needs(event)], default=0.0)
                if isinstance(event, Transfer):
                    start[event] = end[event] = max([ready] + [free[r] for r in event.pranks])
                    for r in event.pranks:
                        position[r] += 1
                        free[r] = end[event]
                else:
                    duration = cost(event)
                    if not duration > 0:
                        raise ScheduleError(f"cost({event}) is {duration!r}; it must be > 0")
                    start[event] = max(ready, free[rank])
                    end[event] = free[rank] = start[event] + duration
                    position[rank] += 1
                progress = True
    stuck = [rank for rank in range(len(orders)) if head(rank) is not None]
    if stuck:
        raise ScheduleError("deadlock: " + "; ".join(map(waiting_at, stuck)))
    return start, end


class Timeline:
    """When each event of a run started and ended (start, end), makespan, busy time per prank,
    bubble (the idle fraction of n_ranks * makespan) and in_flight (peak activations per prank)."""

    def __init__(self, orders, stage_ranks, m, start, end):
        self.orders, self.stage_ranks, self.m = orders, list(stage_ranks), m
        self.n_ranks = len(orders)
        self.start, self.end = start, end
        computes = [[a for a in order if isinstance(a, Action)] for order in orders]
        self.makespan = max(end.values())
        self.busy = [sum(end[a] - start[a] for a in actions) for actions in computes]
        self.bubble = 1 - sum(self.busy) / (self.n_ranks * self.makespan)
        self.in_flight = [_peak_in_flight(actions) for actions in computes]

    def grid(self, width=None):
        """A text chart, one row per prank, one cell per shortest action's duration (idle: '.');
        rows wider than `width` characters are cut into blocks; a footer gives the numbers."""
        actions = [a for order in self.orders for a in order if isinstance(a, Action)]
        unit = min(self.end[a] - self.start[a] for a in actions)
        cell = 1 + max(len(str(a)) for a in actions)

        def at(t):
            return math.floor(t / unit + 0.5)

        rows = []
        for order in self.orders:
            cells = [".".ljust(cell)] * at(self.makespan)
            for a in order:
                if isinstance(a, Action):
                    first, last = at(self.start[a]), at(self.end[a])
                    text = str(a).ljust((last - first) * cell)
                    cells[first:last] = [text[i * cell:(i + 1) * cell] for i in range(last - first)]
            rows.append(cells)
        per_block = len(rows[0]) if width is None else max(1, (width - 9) // cell)
        lines = []
        for begin in range(0, len(rows[0]), per_block):
            if begin:
                lines.append(f"t = {begin * unit:g}")
            lines += [f"rank {r:<2}| " + "".join(cells[begin:begin + per_block]).rstrip()
                      for r, cells in enumerate(rows)]
        return "\n".join(lines + [self.footer()])

    def footer(self):
        """The bubble (and the ideal formula's, where stages spread evenly) and the peaks."""
        p, n_stages = self.n_ranks, len(self.stage_ranks)
        text = f"bubble {self.bubble:.1%}"
        if n_stages % p == 0:
            v = n_stages // p
            formula = "(p-1)/(m+p-1)" if v == 1 else f"(p-1)/(v*m+p-1), v={v}"
            text += f" (formula {formula} = {_ideal_bubble(p, self.m, v):.1%})"
        peaks = ", ".join(map(str, self.in_flight))
        return f"{text}\nactivations in flight per rank: {peaks}"


def _peak_in_flight(actions):
    """The most forwards done and not yet backward on a prank, over its run."""
    held = peak = 0
    for a in actions:
        held += 1 if a.kind == "F" else -1
        peak = max(peak, held)
    return peak


def _deadlocks(orders, stage_ranks, m):
    """True if the (complete) action lists deadlock."""
    try:
        simulate(orders, stage_ranks, m)
    except ScheduleError:
        return True
    return False


def simulate(orders, stage_ranks, m, cost=None):
    """Check per-prank action lists and time them with messages taking no time (asynchronous)."""
    _check_micro_batches(m)
    _check_actions(orders, stage_ranks, m)
    needs = functools.partial(_dependencies, n_stages=len(stage_ranks))
    start, end = _run(orders, stage_ranks, needs, cost or default_cost)
    return Timeline(orders, stage_ranks, m, start, end)


def with_transfers(orders, stage_ranks, m, timeline):
    """The action lists with every cross-prank transfer placed in one global order (its producer's
    end in the timeline), so blocking rendezvous cannot deadlock."""
    kinds = ("act", "grad")
    events = [[] for _ in orders]
    for t in _all_transfers(stage_ranks, m):
        key = (timeline.end[_producer(t)], 0, kinds.index(t.kind), t.src_stage, t.mb)
        for rank in t.pranks:
            events[rank].append((key, t))
    for rank, order in enumerate(orders):
        events[rank] += [((timeline.start[a], 1, i), a) for i, a in enumerate(order)]
    return [[event for _, event in sorted(keyed, key=lambda pair: pair[0])] for keyed in events]


def simulate_blocking(events, stage_ranks, m, cost=None):
    """Check and time per-prank events whose transfers are blocking rendezvous of both pranks."""
    computes = [[e for e in order if not isinstance(e, Transfer)] for order in events]
    _check_actions(computes, stage_ranks, m)
    _check_transfers(events, stage_ranks, m)
    n_stages = len(stage_ranks)

    def needs(event):
        """A transfer needs its producer; an action its local inputs and incoming transfers."""
        if isinstance(event, Transfer):
            return [_producer(event)]
        return [d if stage_ranks[d.stage] == stage_ranks[event.stage]
                else _transfer_of(d, event, stage_ranks) for d in _dependencies(event, n_stages)]

    start, end = _run(events, stage_ranks, needs, cost or default_cost)
    return Timeline(events, stage_ranks, m, start, end)
