"""A trainer's push messages: dense gradients cut into their servers' blocks, sparse rows summed and routed by id."""
from __future__ import annotations

import numpy as np

from .partition import server_of_ids
from .tables import sum_rows_by_id

CHUNK_ROWS = 65536  # sparse rows a push message carries at most (4 MB at dim 16)


def dense_messages(blocks: dict, spec_of, op: str, arrays: dict, scale) -> dict:
    """{server: (header, block arrays)}: each array checked (spec_of(name) -> DenseSpec), cut into its blocks
    (blocks: name -> [Block]), copied (or scaled: zmq sends them later)."""
    by_server: dict[int, tuple[list, list]] = {}
    for n, a in arrays.items():
        spec = spec_of(n)
        a = np.asarray(a)
        if a.shape != tuple(spec.shape):
            raise ValueError(f"{op}: {n} has shape {a.shape}, the job says {tuple(spec.shape)}")
        a = a.astype(spec.dtype, copy=False)
        for b in blocks[n]:
            piece = a[b.row_start:b.row_end].reshape(b.shape)
            piece = piece * piece.dtype.type(scale) if scale not in (None, 1.0) else piece.copy()
            names, parts = by_server.setdefault(b.server, ([], []))
            names.append(n)
            parts.append(piece)
    return {i: ({"op": op, "names": names}, parts) for i, (names, parts) in by_server.items()}


def route(ids: np.ndarray, servers: int) -> list[tuple[int, np.ndarray | None]]:
    """[(server, mask or None)] for sorted unique ids: which of `servers` servers holds each."""
    if servers == 1:
        return [(0, None)]
    owner = server_of_ids(ids, servers)
    return [(i, owner == i) for i in range(servers) if (owner == i).any()]


def sparse_messages(servers: int, op: str, table: str, flat, rows, scale: float, owned: bool = True) -> list:
    """[(server, header, [ids, rows])]: repeated ids summed (and scaled), each unique id to its server, at most
    CHUNK_ROWS rows a message (a GEO push of every held row stays a stream of small messages on both sides).
    owned=False: flat and rows are the caller's; what would still be them is copied (zmq sends it later)."""
    uniq, sums = sum_rows_by_id(flat, rows)
    if scale != 1.0:
        sums = sums * sums.dtype.type(scale)
    header = {"op": op, "table": table}
    out = []
    for i, m in route(uniq, servers):
        if m is not None:
            ids_i, rows_i = uniq[m], sums[m]
        else:
            ids_i = uniq if owned or uniq is not flat else uniq.copy()
            rows_i = sums if owned or sums is not rows else sums.copy()
        for start in range(0, max(len(ids_i), 1), CHUNK_ROWS):
            out.append((i, header, [ids_i[start:start + CHUNK_ROWS], rows_i[start:start + CHUNK_ROWS]]))
    return out
