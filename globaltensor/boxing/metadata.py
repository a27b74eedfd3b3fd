"""What every rank holds, in one small all_gather: the shapes and dtypes of its pieces.

The one metadata exchange: from_local learns every rank's piece, gt.tensor checks that ranks
passed the same data, and an op whose output shapes depend on values learns every rank's results.
"""
import numpy as np

from .. import dtype as _dtype
from ..backends.devices import device

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
    """Every member's `row`, stacked in member order, on the host."""
    dev = device(device_type)
    return dev.to_host(dev.collectives.all_gather(dev.from_host(row[None, :]), group=group,
                                                  sizes=[1] * len(group.ranks)))


def _read(row):
    pieces = []
    for j in range(int(row[2])):
        at = _HEAD + j * (2 + MAX_DIMS)
        shape = tuple(int(n) for n in row[at + 2:at + 2 + int(row[at + 1])])
        pieces.append((shape, _dtype.from_code(row[at])))
    return int(row[1]), tuple(pieces)
