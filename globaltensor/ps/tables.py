"""What a server holds: DenseBlock (rows of a dense parameter) and SparseTable (id-keyed rows), with the rule's state."""
import numpy as np

from . import optim
from ._idindex import IdIndex
from .entry import Admission
from .init import seeded_rows


class DenseBlock:
    """One block of a dense parameter on its server: `value` holds rows [row_start, row_end)."""

    def __init__(self, block, value, rule):
        value = np.asarray(value)
        if tuple(value.shape) != tuple(block.shape):
            raise ValueError(f"DenseBlock {block.block_name}: value shape {tuple(value.shape)} is not the block's "
                             f"{tuple(block.shape)} (rows {block.row_start}:{block.row_end} of {block.param_shape})")
        self.block, self.rule = block, rule
        dtype = value.dtype if value.dtype in (np.float32, np.float64) else np.float32
        self.value = np.array(value, dtype=dtype, copy=True)
        self._state = optim.new_state(rule, self.value.shape, self.value.dtype)

    def apply(self, grad):
        """The rule, in place."""
        optim.apply(self.rule, self.value, grad, self._state)

    def add(self, delta):
        """GEO: value += delta."""
        delta = np.asarray(delta, dtype=self.value.dtype)
        if delta.shape != self.value.shape:
            raise ValueError(f"DenseBlock {self.block.block_name}: delta shape {delta.shape} is not {self.value.shape}")
        self.value += delta

    def state(self):
        """{"value": ..., and the rule's arrays (velocity / moment / moment1, moment2, step)}: views."""
        return {"value": self.value, **self._state}

    def load_state(self, d):
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

    def __init__(self, spec, rule):
        self.spec, self.rule = spec, rule
        self._index = IdIndex()
        self._admission = Admission(spec)
        self._values = np.zeros((0, spec.dim), dtype=spec.dtype)
        self._state = optim.new_state(rule, (0, spec.dim), spec.dtype, steps=0)

    def __len__(self):
        return len(self._index)

    def pull(self, ids, is_test=False):
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
            return self._values[rows]
        out = np.zeros((ids.size, self.spec.dim), dtype=self._values.dtype)
        found = ~missing
        out[found] = self._values[rows[found]]
        return out

    def push(self, ids, grads):
        """The rule on the rows of `ids` (lazily: only they and their state move). Repeated ids have their grads
        summed first; ids not in the table (not admitted, the padding id) are skipped."""
        ids, grads = self._ids(ids), self._rows_like(ids, grads, "grads")
        ids, grads = _summed(ids, grads)
        rows = self._index.lookup(ids)
        present = rows >= 0
        optim.apply_rows(self.rule, self._values, rows[present], grads[present], self._state)

    def add(self, ids, deltas):
        """GEO: value += delta on the rows of `ids` (repeated ids' deltas summed; absent ids skipped)."""
        ids, deltas = self._ids(ids), self._rows_like(ids, deltas, "deltas")
        ids, deltas = _summed(ids, deltas)
        rows = self._index.lookup(ids)
        present = rows >= 0
        self._values[rows[present]] += deltas[present]

    def state(self):
        """{"ids", "values", the rule's per-row arrays, "entry_ids", "entry_sights"} (views; rows in insertion
        order; the entry's counts only for ids not admitted)."""
        n = len(self._index)
        out = {"ids": self._index.ids, "values": self._values[:n]}
        out.update({key: arr[:n] for key, arr in self._state.items()})
        counted, sights = self._admission.state()
        waiting = self._index.lookup(counted) < 0
        out["entry_ids"], out["entry_sights"] = counted[waiting], sights[waiting]
        return out

    def load_state(self, d):
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
        self._values = values.astype(self.spec.dtype, copy=True)
        self._state = optim.new_state(self.rule, values.shape, self.spec.dtype, steps=ids.size)
        for key, arr in self._state.items():
            if key in d:
                arr[...] = np.asarray(d[key]).reshape(arr.shape)
        self._admission = Admission(self.spec)
        if "entry_ids" in d and len(d["entry_ids"]):
            self._admission.load_state(d["entry_ids"], d["entry_sights"])

    def _create(self, ids, rows, missing):
        """Admit and insert the distinct unseen ids among ids[missing]; fills their rows in `rows`."""
        unseen, where = np.unique(ids[missing], return_inverse=True)
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
        rows[missing] = row_of_unseen[where]

    def _grow(self, n):
        """Make room for n rows (capacity doubles; new state rows fresh)."""
        capacity = self._values.shape[0]
        if n <= capacity:
            return
        capacity = max(n, 2 * capacity, 1024)
        self._values = _grown(self._values, capacity, 0)
        fresh = optim.new_state(self.rule, (1, self.spec.dim), self.spec.dtype)
        self._state = {key: _grown(arr, capacity, fresh[key].reshape(-1)[0]) for key, arr in self._state.items()}

    def _ids(self, ids):
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise ValueError(f"SparseTable {self.spec.name!r}: ids must be integers, got dtype {ids.dtype}")
        return np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)

    def _rows_like(self, ids, rows, what):
        rows = np.asarray(rows, dtype=self._values.dtype)
        want = (np.asarray(ids).size, self.spec.dim)
        if rows.shape != want:
            raise ValueError(f"SparseTable {self.spec.name!r}: {what} shape {rows.shape} must be {want} "
                             "(one row of dim numbers per id)")
        return rows


def _summed(ids, rows):
    """Distinct ids and the sum of their rows (the arrays themselves when ids are already distinct); the sums
    run in float64 through one bincount (numpy's add.at and reduceat are several times slower)."""
    order = np.argsort(ids)
    sorted_ids = ids[order]
    first = np.empty(ids.size, dtype=bool)
    first[:1] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=first[1:])
    n = int(np.count_nonzero(first))
    if n == ids.size:
        return ids, rows
    dim = rows.shape[1]
    cells = ((np.cumsum(first) - 1)[:, None] * dim + np.arange(dim)).reshape(-1)
    sums = np.bincount(cells, weights=rows[order].reshape(-1), minlength=n * dim)
    return sorted_ids[first], sums.reshape(n, dim).astype(rows.dtype)


def _grown(arr, capacity, fill):
    out = np.full((capacity,) + arr.shape[1:], fill, dtype=arr.dtype)
    out[:arr.shape[0]] = arr
    return out
