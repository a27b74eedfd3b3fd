"""A sparse table's row gradients of one run: each lookup's output gradient, summed per id once for the push."""
import numpy as np

from ... import _native

_ADD_ROWS = getattr(_native, "ps_add_rows", None)  # kernels/ps_rows.cpp: np.add.at's bits in one pass


class SparseGradSink:
    """A `grad` instruction: the lookup's output gradient joins the table's pending gradients (padding
    dropped): a fused lookup's rows by their positions in the run's unique ids, another's summed per id."""

    def __init__(self, lookup):
        self.lookup = lookup

    def __call__(self, grad):
        t, (uniq, inv, at, every) = self.lookup.table, self.lookup.last
        if inv is None:  # a fused lookup: its rows kept by position in the run's unique ids (summed once)
            grad = np.array(grad, copy=True).reshape(-1, t.dim)
            if t.padding_idx is not None:
                keep = uniq != t.padding_idx
                at, grad = at[keep], grad[keep]
            t.pending.append((every, at, grad))
            return
        grad = np.asarray(grad).reshape(-1, t.dim)
        sums = np.zeros((len(uniq), t.dim), grad.dtype)
        if len(uniq) == len(inv):  # no id repeats (a large vocabulary): inv is a permutation
            sums[inv] = grad
        else:
            np.add.at(sums, inv, grad)
        keep = uniq != t.padding_idx if t.padding_idx is not None else slice(None)
        t.pending.append((uniq[keep], sums[keep]))


def summed(found, dim, dtype):
    """(unique ids sorted, their summed gradients) of a run's pending parts: the fused lookups' parts (every,
    positions, rows) of one unique array summed by position in one pass (no sort), any other by sum_rows_by_id."""
    from ...ps.tables import sum_rows_by_id
    if not found:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.dtype(dtype))
    if all(len(f) == 3 for f in found) and all(f[0] is found[0][0] for f in found):
        every = found[0][0]
        sums = np.zeros((len(every), dim), np.dtype(dtype))
        touched = np.zeros(len(every), bool)
        for _, at, rows in found:
            rows = np.ascontiguousarray(rows, dtype=sums.dtype)
            if _ADD_ROWS is not None and sums.dtype == np.float32:
                _ADD_ROWS(sums, np.ascontiguousarray(at, dtype=np.int64), rows)
            else:
                np.add.at(sums, at, rows)
            touched[at] = True
        return (every, sums) if touched.all() else (every[touched], sums[touched])
    parts = [(f[0][f[1]], f[2]) if len(f) == 3 else f for f in found]
    if len(parts) == 1:
        return sum_rows_by_id(*parts[0])  # (a fused lookup's ids may repeat)
    return sum_rows_by_id(np.concatenate([i for i, _ in parts]), np.concatenate([g for _, g in parts]))
