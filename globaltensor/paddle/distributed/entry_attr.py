"""paddle.distributed's sparse-table admission entries (ProbabilityEntry, CountFilterEntry, ShowClickEntry) as data."""

__all__ = ["ProbabilityEntry", "CountFilterEntry", "ShowClickEntry"]


class EntryAttr:
    """An admission rule of a sparse table: `_to_attr()` is Paddle's attribute string, `spec()`
    the tuple globaltensor.ps.SparseSpec.entry holds."""

    _name = "none"

    def _to_attr(self):
        raise NotImplementedError

    def spec(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self._to_attr()!r})"


class ProbabilityEntry(EntryAttr):
    """An unseen id becomes a row with probability p (0 < p < 1, as Paddle); the draw is seeded by (table, id)."""

    def __init__(self, probability):
        if not isinstance(probability, float) or not 0 < probability < 1:
            raise ValueError(f"ProbabilityEntry: probability must be a float in (0, 1), got {probability!r}")
        self._name, self._probability = "probability_entry", probability

    def _to_attr(self):
        return f"{self._name}:{self._probability}"

    def spec(self):
        return ("probability", self._probability)


class CountFilterEntry(EntryAttr):
    """An unseen id becomes a row once it was pulled count_filter times (before: zeros, not inserted)."""

    def __init__(self, count_filter):
        if not isinstance(count_filter, int) or isinstance(count_filter, bool) or count_filter < 0:
            raise ValueError(f"CountFilterEntry: count_filter must be an int >= 0, got {count_filter!r}")
        self._name, self._count_filter = "count_filter_entry", count_filter

    def _to_attr(self):
        return f"{self._name}:{self._count_filter}"

    def spec(self):
        return ("count_filter", self._count_filter)


class ShowClickEntry(EntryAttr):
    """Paddle's show/click statistics entry (names of the show and click inputs). Its CTR accessor
    is not served here: spec() admits every id, as Paddle does before any statistics exist."""

    def __init__(self, show_name, click_name):
        if not isinstance(show_name, str) or not isinstance(click_name, str):
            raise ValueError("ShowClickEntry: show_name and click_name must be the names (str) of the show and "
                             "click variables")
        self._name, self._show_name, self._click_name = "show_click_entry", show_name, click_name

    def _to_attr(self):
        return f"{self._name}:{self._show_name}:{self._click_name}"

    def spec(self):
        return ("none",)
