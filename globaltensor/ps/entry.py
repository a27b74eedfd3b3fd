"""Admission of new sparse rows: Paddle's ProbabilityEntry, CountFilterEntry, ShowClickEntry, and the sight counts."""
from __future__ import annotations

import numpy as np

from ._idindex import IdIndex
from ._mix import unit_floats, splitmix64
from .init import row_keys


class ProbabilityEntry:
    """Admit an unseen id with probability p at each sight (a draw of (seed, table, id, sight number)).

    Paddle's meaning of "probability" (its C++ gate admits when a fresh uniform draw passes), made
    deterministic: the same id seen the same number of times is admitted alike on every server count."""
    kind = "probability"

    def __init__(self, probability):
        if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 < probability <= 1:
            raise ValueError(f"ProbabilityEntry: probability {probability!r} must be a number in (0, 1]")
        self.probability = float(probability)

    def to_spec(self):
        return ("probability", self.probability)

    def admits(self, spec, ids, sights):
        draws = unit_floats(splitmix64(row_keys(spec, ids, "entry") + sights.astype(np.uint64)))
        return draws < self.probability


class CountFilterEntry:
    """Admit an id on its n-th sight (Paddle: the count, bumped on each training pull, reaches count_filter);
    0 and 1 both admit on the first sight."""
    kind = "count_filter"

    def __init__(self, count_filter):
        if isinstance(count_filter, bool) or not isinstance(count_filter, int) or count_filter < 0:
            raise ValueError(f"CountFilterEntry: count_filter {count_filter!r} must be an int >= 0")
        self.count_filter = count_filter

    def to_spec(self):
        return ("count_filter", self.count_filter)

    def admits(self, spec, ids, sights):
        return sights >= self.count_filter


class ShowClickEntry:
    """Paddle's show/click entry names the show and click inputs its CTR accessor counts; our rules keep no
    show/click statistics, so every id is admitted on first sight (as with no entry)."""
    kind = "show_click"

    def __init__(self, show_name, click_name):
        if not isinstance(show_name, str) or not isinstance(click_name, str):
            raise ValueError(f"ShowClickEntry: show_name and click_name must be str, got {show_name!r}, {click_name!r}")
        self.show_name, self.click_name = show_name, click_name

    def to_spec(self):
        return ("show_click", self.show_name, self.click_name)

    def admits(self, spec, ids, sights):
        return np.ones(ids.shape, dtype=bool)


def entry_from_spec(entry: tuple) -> ProbabilityEntry | CountFilterEntry | ShowClickEntry | None:
    """An entry object from a SparseSpec.entry tuple; None for ("none",)."""
    kind = entry[0]
    if kind == "none":
        return None
    makers = {"probability": ProbabilityEntry, "count_filter": CountFilterEntry, "show_click": ShowClickEntry}
    if kind not in makers:
        raise ValueError(f"unknown entry {entry!r}: use ('none',), ('probability', p), ('count_filter', n) "
                         "or ('show_click', show, click)")
    return makers[kind](*entry[1:])


class Admission:
    """One table's gate: counts the sights of ids not admitted yet and asks the entry about each new sight."""

    def __init__(self, spec):
        self.spec = spec
        self.entry = entry_from_spec(spec.entry)
        self._seen = IdIndex()
        self._sights = np.zeros(0, dtype=np.int64)

    def admit(self, ids):
        """Record one sight of each of `ids` (distinct, not in the table) and return which are admitted now."""
        if self.entry is None or type(self.entry) is ShowClickEntry:
            return np.ones(ids.shape, dtype=bool)
        rows = self._seen.lookup(ids)
        new = rows < 0
        if new.any():
            rows[new] = self._seen.insert(ids[new])
            self._grow(len(self._seen))
        self._sights[rows] += 1
        return self.entry.admits(self.spec, ids, self._sights[rows])

    def state(self):
        """(ids, sights) of every counted id."""
        return self._seen.ids, self._sights[:len(self._seen)]

    def load_state(self, ids, sights):
        self._seen = IdIndex(len(ids))
        self._seen.insert(np.asarray(ids, dtype=np.int64))
        self._sights = np.asarray(sights, dtype=np.int64).copy()

    def _grow(self, n):
        if n > self._sights.size:
            grown = np.zeros(max(n, 2 * self._sights.size), dtype=np.int64)
            grown[:self._sights.size] = self._sights
            self._sights = grown
