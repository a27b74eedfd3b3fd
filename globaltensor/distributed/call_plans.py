"""Per-call plans of the collectives that allocate their output: its shape and the byte counts, by input layout and sizes (bounded cache), the last small output, and the rows exchange of calls without sizes."""
from __future__ import annotations

import math
import sys
import zlib

import numpy as np

from .world import SHARED_MIN_BYTES, world

# Per op, (native group, input shape, dtype, sizes...) -> plan. A plan's shapes and counts are a pure
# function of its key, so a small call looks it up (collectives.py, inline) and skips the checks and
# list-building of its first call (issue 34). Bounded: at MAX_PLANS a table is dropped and plans are
# made again. A plan whose output stays on the heap ends with [the last output, its reference count]
# (else None): `output` writes into it again once nothing else holds it, so a small call allocates
# nothing (s8).
MAX_PLANS = 512
GATHER: dict = {}
SCATTER: dict = {}
TO_ALL: dict = {}


def clear():
    """Forget every plan (gt.debug.clear_caches); results do not change."""
    for table in (GATHER, SCATTER, TO_ALL):
        table.clear()


def _keep(table, key, plan):
    if len(table) >= MAX_PLANS:
        table.clear()
    table[key] = plan
    return plan


def output(kept, shape, dtype):
    """A planned call's output: its plan's last one when nothing else holds it (no name, view or
    container: what the caller dropped is written again, as a caching allocator would), else a new
    array, kept (small, on the heap); kept None: a new array in shared memory."""
    if kept is None:
        return world().empty_shared(shape, dtype)
    out = kept[0]
    if out is None or sys.getrefcount(out) > kept[1]:  # more than kept[0], out and the argument: held
        out = kept[0] = np.empty(shape, dtype)
        kept[1] = sys.getrefcount(out)  # the same references, counted as this Python counts them
    return out


def _spans_hosts(native):
    return bool(getattr(native, "spans_hosts", False))


def gather(native, shape, dtype, sizes):
    """all_gather of an input of `shape` whose members' axis-0 lengths are `sizes` (a tuple):
    (the output's shape, whether it stays on the heap, every member's bytes when the group spans
    hosts else None, the kept output); made and kept on a miss of GATHER. ValueError when sizes has
    not one entry per member."""
    if len(sizes) != native.size:
        raise ValueError(f"all_gather: sizes needs one entry per member ({native.size}), got {len(sizes)}")
    tail = shape[1:]
    row_bytes = dtype.itemsize * math.prod(tail)
    out_shape = (sum(int(r) for r in sizes),) + tail
    counts = [int(r) * row_bytes for r in sizes] if _spans_hosts(native) else None
    on_heap = out_shape[0] * row_bytes < SHARED_MIN_BYTES
    return _keep(GATHER, (native, shape, dtype, sizes), (out_shape, on_heap, counts, [None, 0] if on_heap else None))


def scatter(native, shape, dtype, sizes):
    """reduce_scatter of an input of `shape` into pieces of `sizes` rows (None: the balanced
    split, the first L % k one longer): (this member's output shape, whether it stays on the heap,
    every piece's element count when the group spans hosts else None, the kept output). ValueError on
    bad sizes."""
    k = native.size
    if sizes is None:
        base, extra = divmod(shape[0], k)
        rows = [base + (1 if i < extra else 0) for i in range(k)]
    else:
        rows = [int(r) for r in sizes]
        if len(rows) != k or sum(rows) != shape[0] or min(rows) < 0:
            raise ValueError(f"reduce_scatter: sizes {rows} must be {k} non-negative lengths adding up "
                             f"to axis 0 of the input ({shape[0]})")
    tail = shape[1:]
    row = math.prod(tail)
    out_shape = (rows[native.index],) + tail
    counts = [r * row for r in rows] if _spans_hosts(native) else None
    on_heap = out_shape[0] * row * dtype.itemsize < SHARED_MIN_BYTES
    plan = (out_shape, on_heap, counts, [None, 0] if on_heap else None)
    return _keep(SCATTER, (native, shape, dtype, sizes), plan)


def to_all(native, shape, dtype, send_sizes, recv_sizes):
    """all_to_all of an input of `shape` sending `send_sizes` rows to each member and receiving
    `recv_sizes` (tuples): (the output's shape, whether it stays on the heap, the bytes sent to
    each member, the bytes received from each, the kept output). ValueError on bad send sizes."""
    send = check_send(native, shape, send_sizes)
    row_bytes = dtype.itemsize * math.prod(shape[1:])
    recv = [int(r) for r in recv_sizes]
    out_shape = (sum(recv),) + shape[1:]
    on_heap = out_shape[0] * row_bytes < SHARED_MIN_BYTES
    plan = (out_shape, on_heap, [s * row_bytes for s in send], [r * row_bytes for r in recv],
            [None, 0] if on_heap else None)
    return _keep(TO_ALL, (native, shape, dtype, send_sizes, recv_sizes), plan)


def check_send(native, shape, send_sizes):
    """send_sizes as ints, checked against the group and the input's axis 0; else ValueError."""
    send = [int(s) for s in send_sizes]
    if len(send) != native.size or sum(send) != shape[0] or min(send) < 0:
        raise ValueError(f"all_to_all: send_sizes {send} must be {native.size} non-negative lengths adding up to "
                         f"axis 0 of the input ({shape[0]})")
    return send


def exchange_rows(native, x, name):
    """Every member's length along axis 0, checking the other dims and dtype agree."""
    meta = np.array([x.shape[0] if x.ndim else 1, zlib.crc32(repr((x.shape[1:], x.dtype.str)).encode())],
                    dtype=np.int64)
    table = np.empty((native.size, 2), dtype=np.int64)
    gather_into(native, meta, table, [1] * native.size, meta.nbytes)
    if len(set(table[:, 1].tolist())) != 1:
        raise ValueError(f"{name}: the ranks passed arrays whose shapes beyond axis 0 or dtypes differ")
    return table[:, 0].tolist()


def gather_into(native, x, out, rows, row_bytes):
    """native.all_gather(x, out); a group across hosts is told every member's bytes (`rows` of
    `row_bytes`, alike on every rank), so it needs no collective to learn them (one host's shared
    memory reads them anyway)."""
    if getattr(native, "spans_hosts", False):
        native.all_gather(x, out, [int(r) * row_bytes for r in rows])
    else:
        native.all_gather(x, out)
