"""What a server holds: DenseBlock (rows of a dense parameter) and SparseTable (id-keyed rows), with the rule's state."""
from __future__ import annotations

from collections import deque

import numpy as np

from .. import _native
from . import optim
from ._idindex import IdIndex
from .entry import Admission
from .init import seeded_rows
from .partition import Block
from .spec import Rule, SparseSpec

RECENT_PULLS = 32  # a table remembers the rows of its last pulls (async: a push comes several pulls later); the push
#                   of those ids skips the id lookup. Bounded: 32 x (8 + 8) B x ids a pull (13k ids: 6.7 MB)
_SGD_ROWS = getattr(_native, "ps_sgd_rows", None)  # kernels/ps_rows.cpp: SGD in place on the rows, one pass


def sum_rows_by_id(ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique ids sorted, the rows of each id summed): vectorised, no per-row loop. Ids already sorted and
    distinct (what a client sends, what the executor's lookups give) come back as they are, rows uncopied."""
    if len(ids) < 2 or bool(np.all(ids[1:] > ids[:-1])):
        return ids, rows
    order = np.argsort(ids)
    sorted_ids = ids[order]
    is_start = np.empty(len(ids), dtype=bool)
    is_start[0] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=is_start[1:])
    starts = np.flatnonzero(is_start)
    if len(starts) * 4 < len(ids) * 3:  # many repeats (a small vocabulary): one segmented sum
        return sorted_ids[starts], np.add.reduceat(rows[order], starts, axis=0)
    sums = rows[order[starts]]  # mostly distinct (a large vocabulary): add the few repeats onto their first
    repeats = np.flatnonzero(~is_start)
    if len(repeats):
        np.add.at(sums, np.cumsum(is_start)[repeats] - 1, rows[order[repeats]])
    return sorted_ids[starts], sums


class DenseBlock:
    """One block of a dense parameter on its server: `value` holds rows [row_start, row_end)."""

    def __init__(self, block: Block, value: np.ndarray, rule: Rule) -> None:
        value = np.asarray(value)
        if tuple(value.shape) != tuple(block.shape):
            raise ValueError(f"DenseBlock {block.block_name}: value shape {tuple(value.shape)} is not the block's "
                             f"{tuple(block.shape)} (rows {block.row_start}:{block.row_end} of {block.param_shape})")
        self.block, self.rule = block, rule
        dtype = value.dtype if value.dtype in (np.float32, np.float64) else np.float32
        self.value = np.array(value, dtype=dtype, copy=True)
        self._state = optim.new_state(rule, self.value.shape, self.value.dtype)

    def apply(self, grad: np.ndarray) -> None:
        """The rule, in place."""
        optim.apply(self.rule, self.value, grad, self._state)

    def add(self, delta: np.ndarray) -> None:
        """GEO: value += delta."""
        delta = np.asarray(delta, dtype=self.value.dtype)
        if delta.shape != self.value.shape:
            raise ValueError(f"DenseBlock {self.block.block_name}: delta shape {delta.shape} is not {self.value.shape}")
        self.value += delta

    def state(self) -> dict[str, np.ndarray]:
        """{"value": ..., and the rule's arrays (velocity / moment / moment1, moment2, step)}: views."""
        return {"value": self.value, **self._state}

    def load_state(self, d: dict[str, np.ndarray]) -> None:
        """Take the value and whatever rule state `d` has (missing rule state stays fresh)."""
        value = np.asarray(d["value"])
        if value.shape != self.value.shape:
            raise ValueError(f"DenseBlock {self.block.block_name}: loaded value shape {value.shape} is not "
                             f"{self.value.shape}")
        self.value[...] = value
        for key, arr in self._state.items():
            if key in d:
                arr[...] = np.asarray(d[key]).reshape(arr.shape)


class SparseTable:
    """The rows of one sparse table that hash to this server, with the rule's state per row and the entry's
    sight counts. Rows live in growable arrays indexed by an IdIndex; every call works on whole id batches."""

    def __init__(self, spec: SparseSpec, rule: Rule) -> None:
        self.spec, self.rule = spec, rule
        self._index = IdIndex()
        self._admission = Admission(spec)
        self._recent: deque = deque(maxlen=RECENT_PULLS)  # (ids, their rows) of the last pulls that found all
        self._store = None
        self._alloc(0)

    def __len__(self) -> int:
        return len(self._index)

    def pull(self, ids: np.ndarray, is_test: bool = False) -> np.ndarray:
        """(len(ids), dim) rows. Unseen ids are created with seeded_rows when the entry admits them (a training
        pull is one sight of each distinct unseen id), else read as zeros and not inserted; is_test never inserts
        nor counts. The padding id reads zeros and is never stored."""
        ids = self._ids(ids)
        rows = self._index.lookup(ids)
        missing = rows < 0
        if not is_test and missing.any():
            self._create(ids, rows, missing)
            missing = rows < 0
        if not missing.any():
            kept = ids.copy() if ids.flags.writeable else ids  # the caller may reuse its array; a frame's stays
            self._recent.append((kept, rows))  # a row's number never changes (until load_state)
            return self._values[rows]
        out = np.zeros((ids.size, self.spec.dim), dtype=self._values.dtype)
        found = ~missing
        out[found] = self._values[rows[found]]
        return out

    def push(self, ids: np.ndarray, grads: np.ndarray) -> None:
        """The rule on the rows of `ids` (lazily: only they and their state move). Repeated ids have their grads
        summed first; ids not in the table (not admitted, the padding id) are skipped."""
        rows, grads = self._present_rows(ids, grads, "grads")
        self._apply_rows(rows, grads)

    def push_parts(self, parts: list, scale: float) -> None:
        """One push of the gradients of several (ids, grads) parts (sync: each trainer's), summed then scaled."""
        checked = [(self._rows_of(self._ids(ids)), self._rows_like(ids, grads, "grads")) for ids, grads in parts]
        rows = np.concatenate([r for r, _ in checked])
        grads = np.concatenate([g for _, g in checked])
        present = rows >= 0
        if not present.all():
            rows, grads = rows[present], grads[present]
        rows, sums = sum_rows_by_id(rows, grads)  # grouped by row number: the same groups as by id
        self._apply_rows(rows, sums * sums.dtype.type(scale))

    def _apply_rows(self, rows, grads):
        """The rule on distinct table rows: each row's value and state gathered once, updated, scattered back."""
        if rows.size == 0:
            return
        if self._native_sgd(rows, grads):
            return
        picked, dim = self._store[rows], self.spec.dim  # value and float state of each row: one gather
        state = {key: picked[:, i * dim:(i + 1) * dim] for i, key in enumerate(self._float_keys, start=1)}
        if self._steps is not None:
            state["step"] = self._steps[rows]
        optim.apply(self.rule, picked[:, :dim], grads, state)
        self._store[rows] = picked
        if self._steps is not None:
            self._steps[rows] = state["step"]

    def _native_sgd(self, rows, grads):
        """Plain SGD on a float32 table in one native pass over the rows (no gather and scatter); False where
        the rule or dtypes need the numpy path."""
        if _SGD_ROWS is None or self.rule.kind != "sgd" or self.rule.param("weight_decay") \
                or self._store.dtype != np.float32:
            return False
        _SGD_ROWS(self._store, np.ascontiguousarray(rows, dtype=np.int64),
                  np.ascontiguousarray(grads, dtype=np.float32), np.float32(self.rule.lr))
        return True

    def _rows_of(self, ids):
        """The row of each id (-1: absent): from a recent pull of exactly these ids, else the index."""
        for seen, rows in reversed(self._recent):
            if seen.shape == ids.shape and (seen is ids or np.array_equal(seen, ids)):
                return rows
        return self._index.lookup(ids)

    def add(self, ids: np.ndarray, deltas: np.ndarray) -> None:
        """GEO: value += delta on the rows of `ids` (repeated ids' deltas summed; absent ids skipped)."""
        rows, deltas = self._present_rows(ids, deltas, "deltas")
        self._values[rows] += deltas

    def state(self) -> dict[str, np.ndarray]:
        """{"ids", "values", the rule's per-row arrays, "entry_ids", "entry_sights"} (views; rows in insertion
        order; the entry's counts only for ids not admitted)."""
        n = len(self._index)
        out = {"ids": self._index.ids, "values": self._values[:n]}
        out.update({key: arr[:n] for key, arr in self._state.items()})
        counted, sights = self._admission.state()
        waiting = self._index.lookup(counted) < 0
        out["entry_ids"], out["entry_sights"] = counted[waiting], sights[waiting]
        return out

    def load_state(self, d: dict[str, np.ndarray]) -> None:
        """Replace the table's rows by those of `d` (as state() gives; missing rule state starts fresh)."""
        ids = np.asarray(d["ids"], dtype=np.int64).reshape(-1)
        values = np.asarray(d["values"])
        if values.shape != (ids.size, self.spec.dim):
            raise ValueError(f"SparseTable {self.spec.name!r}: loaded values shape {values.shape} is not "
                             f"({ids.size}, {self.spec.dim}) (dim {self.spec.dim})")
        if np.unique(ids).size != ids.size:
            raise ValueError(f"SparseTable {self.spec.name!r}: loaded ids repeat")
        self._index = IdIndex(ids.size)
        self._index.insert(ids)
        self._recent.clear()
        self._store = None
        self._alloc(ids.size)
        self._values[:ids.size] = values
        for key, arr in self._state.items():
            if key in d:
                arr[:ids.size] = np.asarray(d[key]).reshape((ids.size,) + arr.shape[1:])
        self._admission = Admission(self.spec)
        if "entry_ids" in d and len(d["entry_ids"]):
            self._admission.load_state(d["entry_ids"], d["entry_sights"])

    def _create(self, ids, rows, missing):
        """Admit and insert the distinct unseen ids among ids[missing]; fills their rows in `rows`."""
        unseen, where = ids[missing], None
        if unseen.size > 1 and not bool(np.all(unseen[1:] > unseen[:-1])):  # a client's ids come sorted, distinct
            unseen, where = np.unique(unseen, return_inverse=True)
        if self.spec.padding_idx is not None:
            unseen_ok = unseen != self.spec.padding_idx
        else:
            unseen_ok = np.ones(unseen.size, dtype=bool)
        unseen_ok[unseen_ok] = self._admission.admit(unseen[unseen_ok])
        new_ids = unseen[unseen_ok]
        if new_ids.size == 0:
            return
        new_rows = self._index.insert(new_ids)
        self._grow(len(self._index))
        self._values[new_rows] = seeded_rows(self.spec, new_ids)
        row_of_unseen = np.full(unseen.size, -1, dtype=np.int64)
        row_of_unseen[unseen_ok] = new_rows
        rows[missing] = row_of_unseen if where is None else row_of_unseen[where]

    def _grow(self, n):
        """Make room for n rows (capacity x1.25 at least; new rows' state fresh). The arrays grow in place
        (realloc: the kernel remaps large ones, so no second copy of the table exists at any moment); where
        something still views them, they are copied instead."""
        capacity = self._store.shape[0]
        if n <= capacity:
            return
        new = max(n, capacity + capacity // 4, 1024)
        try:
            self._store.resize((new, self._store.shape[1]), refcheck=True)  # zero-filled beyond the old rows
            self._scratch.resize(new, refcheck=True)
            if self._steps is not None:
                self._steps.resize(new, refcheck=True)
        except ValueError:  # a view of the rows is alive (a caller of state()): copy, as numpy asks
            self._alloc(new)
            return
        self._fill_fresh(capacity)

    def _fill_fresh(self, start):
        """The rule's starting state in rows [start, capacity) of the float columns (zeros but adagrad's)."""
        dim = self.spec.dim
        fresh = optim.new_state(self.rule, (1, dim), self.spec.dtype)
        for i, key in enumerate(self._float_keys, start=1):
            if fresh[key].any():
                self._store[start:, i * dim:(i + 1) * dim] = fresh[key]

    def _alloc(self, capacity):
        """(Re)allocate the rows: value and float rule state side by side in one (capacity, k * dim) array, so a
        push gathers and scatters each row once; adam's step counts beside it. Old rows are kept."""
        dim = self.spec.dim
        fresh = optim.new_state(self.rule, (1, dim), self.spec.dtype)
        self._float_keys = [key for key in fresh if key != "step"]
        store = np.zeros((capacity, dim * (1 + len(self._float_keys))), dtype=self.spec.dtype)
        steps = np.zeros(capacity, dtype=np.int64) if "step" in fresh else None
        kept = 0
        if self._store is not None:
            kept = min(self._store.shape[0], capacity)
            store[:kept] = self._store[:kept]
            if steps is not None:
                steps[:kept] = self._steps[:kept]
        self._store, self._steps = store, steps
        self._fill_fresh(kept)
        self._scratch = np.zeros(capacity, dtype=np.int64)  # one int per row: push's grouping of repeated ids

    @property
    def _values(self):
        return self._store[:, :self.spec.dim]

    @property
    def _state(self):
        """The rule's per-row arrays: views into the store (computed, so copies of the table stay whole)."""
        dim = self.spec.dim
        state = {key: self._store[:, i * dim:(i + 1) * dim] for i, key in enumerate(self._float_keys, start=1)}
        if self._steps is not None:
            state["step"] = self._steps
        return state

    def _ids(self, ids):
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise ValueError(f"SparseTable {self.spec.name!r}: ids must be integers, got dtype {ids.dtype}")
        return np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)

    def _present_rows(self, ids, rows_in, what):
        """(distinct table rows, their summed input rows) of the ids present in the table. Repeats are grouped
        through a scratch array over the table's rows (no sort): each row records the last position naming it."""
        rows_in = self._rows_like(ids, rows_in, what)
        rows = self._rows_of(self._ids(ids))
        present = rows >= 0
        if not present.all():
            rows, rows_in = rows[present], rows_in[present]
        positions = np.arange(rows.size)
        self._scratch[rows] = positions
        last = self._scratch[rows] == positions
        if last.all():
            return rows, rows_in
        distinct = rows[last]
        self._scratch[distinct] = np.arange(distinct.size)
        dim = self.spec.dim
        cells = (self._scratch[rows][:, None] * dim + np.arange(dim)).reshape(-1)
        sums = np.bincount(cells, weights=rows_in.reshape(-1), minlength=distinct.size * dim)
        return distinct, sums.reshape(distinct.size, dim).astype(rows_in.dtype)

    def _rows_like(self, ids, rows, what):
        rows = np.asarray(rows, dtype=self._values.dtype)
        want = (np.asarray(ids).size, self.spec.dim)
        if rows.shape != want:
            raise ValueError(f"SparseTable {self.spec.name!r}: {what} shape {rows.shape} must be {want} "
                             "(one row of dim numbers per id)")
        return rows
