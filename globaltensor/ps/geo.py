"""GeoCommunicator: GEO mode's bookkeeping; every k_steps push local - last pulled, then pull the servers' values."""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .client import Client


class _Rows:
    """The last pulled rows of one sparse table: sorted unique ids and their rows (vectorised merge)."""

    def __init__(self, dim: int, dtype: str):
        self.ids = np.zeros(0, np.int64)
        self.rows = np.zeros((0, dim), dtype)

    def record(self, ids: np.ndarray, rows: np.ndarray) -> None:
        pos = np.searchsorted(self.ids, ids)
        found = pos < len(self.ids)
        found[found] = self.ids[pos[found]] == ids[found]
        self.rows[pos[found]] = rows[found]
        if not found.all():
            all_ids = np.concatenate([self.ids, ids[~found]])
            all_rows = np.concatenate([self.rows, rows[~found]])
            order = np.argsort(all_ids)
            self.ids, self.rows = all_ids[order], all_rows[order]

    def of(self, ids: np.ndarray, table: str) -> np.ndarray:
        pos = np.searchsorted(self.ids, ids)
        ok = pos < len(self.ids)
        ok[ok] = self.ids[pos[ok]] == ids[ok]
        if not ok.all():
            missing = ids[~ok][:5].tolist()
            raise ValueError(f"GEO delta of {table!r}: ids {missing}... were never pulled, so they have no base")
        return self.rows[pos]


class GeoCommunicator:
    """Wraps a GEO-mode Client: pulls remember what they returned; step() counts the trainer's local steps and,
    every job.k_steps, pushes local - last pulled (the servers add delta / trainers) and returns fresh values."""

    def __init__(self, client: Client):
        if client.job.mode != "geo":
            raise ValueError(f"GeoCommunicator needs a job in geo mode, this one is {client.job.mode!r}")
        self.client = client
        self.k_steps = client.job.k_steps
        self.steps = 0
        self._dense: dict[str, np.ndarray] = {}
        self._sparse = {s.name: _Rows(s.dim, s.dtype) for s in client.job.sparse}

    def pull_dense(self, names: list[str] | None = None) -> dict[str, np.ndarray]:
        values = self.client.pull_dense(names)
        self._dense.update({n: v.copy() for n, v in values.items()})
        return values

    def pull_sparse(self, table: str, ids: ArrayLike) -> np.ndarray:
        ids = np.asarray(ids)
        rows = self.client.pull_sparse(table, ids)
        flat = ids.reshape(-1).astype(np.int64)
        uniq, first = np.unique(flat, return_index=True)
        self._sparse[table].record(uniq, rows.reshape(len(flat), -1)[first])
        return rows

    def step(self, dense: dict[str, np.ndarray], sparse: dict[str, tuple] | None = None) -> tuple | None:
        """After a local step: None, or every k_steps (dense values, {table: rows of the given ids}) fresh from
        the servers, which the trainer takes as its new local values. sparse: {table: (ids, local rows)}."""
        self.steps += 1
        if self.steps % self.k_steps:
            return None
        return self.sync(dense, sparse)

    def sync(self, dense: dict[str, np.ndarray], sparse: dict[str, tuple] | None = None) -> tuple:
        """Push the deltas now and pull the servers' values (step() calls it every k_steps; call it at the end)."""
        sparse = sparse or {}
        self.client.push_dense_delta({n: np.asarray(v) - self._dense[n] for n, v in dense.items()})
        keyed = {}
        for table, (ids, rows) in sparse.items():
            flat = np.asarray(ids).reshape(-1).astype(np.int64)
            uniq, first = np.unique(flat, return_index=True)
            local = np.asarray(rows).reshape(len(flat), -1)[first]
            self.client.push_sparse_delta(table, uniq, local - self._sparse[table].of(uniq, table))
            keyed[table] = (flat, uniq)
        fresh_dense = self.pull_dense(list(dense))
        fresh_sparse = {}
        for table, (flat, uniq) in keyed.items():
            rows = self.pull_sparse(table, uniq)
            fresh_sparse[table] = rows[np.searchsorted(uniq, flat)]
        return fresh_dense, fresh_sparse
