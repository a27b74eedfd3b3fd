"""What every rank holds, in one small all_gather: the shapes and dtypes of its pieces.

The one metadata exchange: from_local learns every rank's piece, gt.tensor checks that ranks
passed the same data, and an op whose output shapes depend on values learns every rank's results.
"""
import hashlib

import numpy as np

from .. import dtype as _dtype
from ..backends.devices import device
from ..env import get_rank

MAX_DIMS = 64  # the dims of one piece a row describes: numpy's own limit (32 before numpy 2)
_HEAD = 3  # a row: has pieces, tag, number of pieces; then per piece: dtype code, ndim, MAX_DIMS dims


def gather_pieces(arrays, device_type, group, slots=1, tag=0, what="the metadata exchange", everyone=False):
    """{global rank: (tag, ((shape, DType), ...))} for each member of `group` that passed arrays
    (None: this rank has nothing to describe; with everyone=True it is listed too, with no
    pieces), in member order.

    One all_gather of fixed-size int64 rows through the device's collectives (so a cuda job
    spanning machines goes through NCCL); a group of one exchanges nothing. Every member passes the
    same `slots`: the most arrays one member describes. `tag` is one more int64 each member sends
    (gt.tensor's digest of its data)."""
    row = np.zeros(_HEAD + slots * (2 + MAX_DIMS), np.int64)
    row[1] = tag
    if arrays is not None:
        if len(arrays) > slots or any(a.ndim > MAX_DIMS for a in arrays):
            raise ValueError(f"{what}: at most {slots} piece(s) of at most {MAX_DIMS} dims can be described, got "
                             f"{len(arrays)} of {[a.ndim for a in arrays]} dims")
        row[0], row[2] = 1, len(arrays)
        for j, a in enumerate(arrays):
            at = _HEAD + j * (2 + MAX_DIMS)
            row[at], row[at + 1] = int(_dtype.of_array(a).code), a.ndim
            row[at + 2:at + 2 + a.ndim] = a.shape
    table = row[None, :] if len(group.ranks) == 1 else _all_gather(row, device_type, group)
    return {rank: _read(r) for rank, r in zip(group.ranks, table) if r[0] or everyone}


def _all_gather(row, device_type, group):
    """Every member's `row`, stacked in member order, on the host (the device's collectives take
    host rows: cuda's keep them on the host unless NCCL carries the group)."""
    return device(device_type).collectives.all_gather(row[None, :], group=group, sizes=[1] * len(group.ranks))


def _read(row):
    pieces = []
    for j in range(int(row[2])):
        at = _HEAD + j * (2 + MAX_DIMS)
        shape = tuple(int(n) for n in row[at + 2:at + 2 + int(row[at + 1])])
        pieces.append((shape, _dtype.from_code(row[at])))
    return int(row[1]), tuple(pieces)


def check_same_data(array, placement, what="gt.tensor"):
    """ValueError on every rank of the placement when ranks passed different data (one small
    all_gather of each rank's (shape, dtype, digest of the bytes)); `what` names the caller."""
    from .execution import _group
    if get_rank() not in placement:
        return
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)  # the bytes, without a copy
    digest = int.from_bytes(hashlib.blake2b(memoryview(data), digest_size=8).digest(), "little", signed=True)
    ranks = placement.rank_list()
    rows = gather_pieces([array], placement.type, _group(tuple(sorted(ranks))), tag=digest, what=what)
    if len(set(rows.values())) == 1:
        return
    votes = [sum(rows[r] == rows[q] for q in rows) for r in ranks]  # the odd ones out are named
    usual = rows[ranks[votes.index(max(votes))]]
    differ = sorted(r for r in rows if rows[r] != usual)
    same = sorted(r for r in rows if rows[r] == usual)
    kind = "shapes or dtypes" if any(rows[r][1] != usual[1] for r in differ) else "values"
    raise ValueError(f"{what}: the data must be the same on every rank of the placement (it is the whole "
                     f"global value), but rank(s) {differ} passed other {kind} than rank(s) {same}. Seed the "
                     f"data alike on every rank, build the tensor from local pieces with "
                     f"Tensor.to_global(placement, sbp), or pass check_meta=False to skip this check")
