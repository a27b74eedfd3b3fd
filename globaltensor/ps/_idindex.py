"""IdIndex: an open-addressing map from int64 ids to dense row numbers 0, 1, 2, ... (native probes, numpy fallback)."""
import numpy as np

from .. import _native
from ._mix import as_u64, splitmix64

# kernels/ps_index.cpp: one probe loop per id over the same slot arrays and hash (an older build lacks them)
_LOOKUP, _PLACE = getattr(_native, "ps_index_lookup", None), getattr(_native, "ps_index_place", None)

_SALT = np.uint64(0x5851F42D4C957F2D)  # apart from server_of_ids' hash: a server's ids all share that one mod n
_MIN_SLOTS = 1 << 10


class IdIndex:
    """Ids -> rows, linear probing over a power-of-two slot array kept at most half full.

    Rows are handed out in insertion order; `ids` gives the id of each row. Every operation works on whole
    arrays: a probe round handles all pending ids at once, so a batch costs a few numpy passes."""

    def __init__(self, capacity=0):
        self._size = 0
        self._ids = np.empty(max(capacity, 16), dtype=np.int64)
        self._alloc_slots(_slot_count(capacity))

    def __len__(self):
        return self._size

    @property
    def ids(self):
        """The id of each row (a view, length len(self))."""
        return self._ids[:self._size]

    def lookup(self, ids):
        """Row of each id, -1 where absent (int64 array like ids, 1-D). A round reads one slot per pending id:
        its own (found) or an empty one (absent) ends its probe. (Reading windows of slots a round costs more.)"""
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        out = np.full(ids.shape, -1, dtype=np.int64)
        if _LOOKUP is not None:
            _LOOKUP(self._slot_ids, self._slot_rows, int(_SALT), int(self._shift), ids, out)
            return out
        pending = np.arange(ids.size)
        pos = self._home(ids)
        while pending.size:
            rows = self._slot_rows[pos]
            empty = rows < 0
            hit = ~empty & (self._slot_ids[pos] == ids[pending])
            out[pending[hit]] = rows[hit]
            go_on = ~(empty | hit)
            pending, pos = pending[go_on], (pos[go_on] + 1) & self._mask
        return out

    def insert(self, ids):
        """Add ids that are absent and distinct; returns their new rows (consecutive, in the ids' order)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        new_rows = np.arange(self._size, self._size + ids.size, dtype=np.int64)
        if 2 * (self._size + ids.size) > self._slot_rows.size:
            self._rehash(_slot_count(self._size + ids.size))
        if self._size + ids.size > self._ids.size:
            grown = np.empty(max(2 * self._ids.size, self._size + ids.size), dtype=np.int64)
            grown[:self._size] = self._ids[:self._size]
            self._ids = grown
        self._place(ids, new_rows)
        self._ids[self._size:self._size + ids.size] = ids
        self._size += ids.size
        return new_rows

    def _home(self, ids):
        return (splitmix64(as_u64(ids) ^ _SALT) >> self._shift).astype(np.int64)

    def _alloc_slots(self, n_slots):
        self._slot_rows = np.full(n_slots, -1, dtype=np.int64)
        self._slot_ids = np.zeros(n_slots, dtype=np.int64)
        self._mask = n_slots - 1
        self._shift = np.uint64(64 - (n_slots.bit_length() - 1))

    def _rehash(self, n_slots):
        self._alloc_slots(n_slots)
        self._place(self._ids[:self._size], np.arange(self._size, dtype=np.int64))

    def _place(self, ids, rows):
        """Put (id, row) pairs into free slots. Each round every pending id writes its row into the slot it aims
        at if free; where several aim at one slot the last write stays, and the others probe on."""
        if _PLACE is not None:
            _PLACE(self._slot_ids, self._slot_rows, int(_SALT), int(self._shift),
                   np.ascontiguousarray(ids, dtype=np.int64), np.ascontiguousarray(rows, dtype=np.int64))
            return
        pending = np.arange(ids.size)
        pos = self._home(ids)
        while pending.size:
            free = self._slot_rows[pos] < 0
            aim, claim = pos[free], rows[pending[free]]
            self._slot_rows[aim] = claim
            won = self._slot_rows[aim] == claim
            self._slot_ids[aim[won]] = ids[pending[free][won]]
            placed = np.zeros(pending.size, dtype=bool)
            placed[np.flatnonzero(free)[won]] = True
            pending, pos = pending[~placed], (pos[~placed] + 1) & self._mask


def _slot_count(n_ids):
    """The smallest power of two >= 2 * n_ids (and >= _MIN_SLOTS)."""
    return max(_MIN_SLOTS, 1 << max(0, 2 * n_ids - 1).bit_length())
