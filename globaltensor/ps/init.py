"""Seeded sparse rows: each value a counter-based draw of (seed, table name, id, column), so any server count agrees."""
from __future__ import annotations

import numpy as np

from .. import _native
from ._mix import as_u64, name_hash, splitmix64, unit_floats32
from .spec import SparseSpec

_COLUMN_STEP = np.uint64(0xD1B54A32D192ED03)  # odd: distinct columns give distinct counters
_UNIFORM_ROWS = getattr(_native, "ps_uniform_rows", None)  # kernels/ps_rows.cpp: the same bits in one pass


def row_keys(spec: SparseSpec, ids: np.ndarray, purpose: str = "init") -> np.ndarray:
    """One uint64 key per id of a table: splitmix64(id ^ hash(seed, name, purpose)). `purpose` keeps the
    initializer's draws apart from the entry's."""
    table_key = name_hash(purpose, int(spec.seed), spec.name)
    return splitmix64(as_u64(ids) ^ table_key)


def column_bits(keys: np.ndarray, n_columns: int) -> np.ndarray:
    """(len(keys), n_columns) uint64 draws: splitmix64(key + column * step)."""
    columns = np.arange(n_columns, dtype=np.uint64) * _COLUMN_STEP
    return splitmix64(keys[:, None] + columns[None, :])


def seeded_rows(spec: SparseSpec, ids: np.ndarray) -> np.ndarray:
    """(len(ids), spec.dim) initial rows of table `spec` for int64 `ids`, in spec.dtype.

    Each 64-bit draw gives two 24-bit uniforms u. ("uniform", lo, hi): lo + (hi - lo) * u; ("normal", mean,
    std): Box-Muller of two uniforms per value; ("constant", v). The padding id's row is zeros. The values
    depend on nothing but (seed, name, id, column): not on the server count, the order ids arrive in, or
    which batch first saw them."""
    ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    kind, dim = spec.init[0], spec.dim
    if kind == "constant":
        rows = np.full((ids.size, dim), spec.init[1], dtype=spec.dtype)
    elif kind == "uniform":
        lo, hi = float(spec.init[1]), float(spec.init[2])
        if _UNIFORM_ROWS is not None:
            rows = np.empty((ids.size, dim), dtype=np.float32)
            _UNIFORM_ROWS(ids, int(name_hash("init", int(spec.seed), spec.name)), np.float32(hi - lo),
                          np.float32(lo), rows)
        else:
            rows = unit_floats32(column_bits(row_keys(spec, ids), (dim + 1) // 2), dim)
            rows *= np.float32(hi - lo)
            rows += np.float32(lo)
    elif kind == "normal":
        mean, std = float(spec.init[1]), float(spec.init[2])
        u = unit_floats32(column_bits(row_keys(spec, ids), dim), 2 * dim)
        radius = np.sqrt(np.float32(-2.0) * np.log1p(-u[:, :dim]))  # 1 - u in (0, 1]: the log is finite
        rows = np.cos(np.float32(2.0 * np.pi) * u[:, dim:])
        rows *= radius
        rows *= np.float32(std)
        rows += np.float32(mean)
    else:
        raise ValueError(f"SparseSpec {spec.name!r}: unknown init {spec.init!r}")
    rows = rows.astype(spec.dtype, copy=False)
    if spec.padding_idx is not None:
        rows[ids == spec.padding_idx] = 0
    return rows
