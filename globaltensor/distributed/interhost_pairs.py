"""The point-to-point paths between hosts: every member sends its array to every other at once (one round of messages).

Used by all_gathers from interhost.PAIRS_SHARE_BYTES a share, and by every all_gather (and
all_reduce under PAIRS_BYTES) on groups of up to interhost.PAIRS_MEMBERS members (0 by default: on a
loaded machine faster than MPI's collectives, on a quiet one slower; benchmarks/RESULTS.md, issue 32).
Both wait with mpi_wait.poll (CollectiveError after the timeout).
"""
import itertools

import numpy as np

from .mpi_wait import poll

TAG = 1  # the tag of these messages (on the all_reduce or all_gather communicator)
NP_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def all_reduce_pairs(group, comm, x, out, redop, widened):
    """Every member sends x to every other at once, then each reduces the k copies in member order
    (the same bits on every member); widened: x's dtype travels as float32."""
    k, me = group.size, group.index
    src = x.astype(np.float32) if widened else x
    stage = np.empty((k,) + src.shape, src.dtype)
    rows = stage.reshape(k, -1)  # arrays even for 0-d x (stage[i] is then a read-only scalar)
    reqs = []
    for step in range(1, k):
        frm, to = (me - step) % k, (me + step) % k
        reqs.append(comm.Irecv(rows[frm], source=frm, tag=TAG))
        reqs.append(comm.Isend(src, dest=to, tag=TAG))
    stage[me] = src
    poll(group, group.MPI.Request, "all_reduce", group.ranks, reqs)
    reduce = NP_REDUCE[redop.name].reduce
    if widened:
        out[...] = reduce(stage, axis=0)
    else:  # an overflow gives inf as MPI's sum does (numpy warns, once: np.errstate costs ~2 us a call)
        reduce(stage, axis=0, out=out)
    return out


def all_gather_pairs(group, comm, mine, dst, counts):
    """Every member sends its bytes (`mine`, uint8) to every other at once, straight into `dst` (uint8)
    at the offsets of `counts` (bytes, in member order)."""
    at = list(itertools.accumulate(counts, initial=0))  # np.cumsum costs microseconds on a short list
    k, me = group.size, group.index
    reqs = []
    for step in range(1, k):
        src, to = (me - step) % k, (me + step) % k
        reqs.append(comm.Irecv(dst[at[src]:at[src + 1]], source=src, tag=TAG))
        reqs.append(comm.Isend(mine, dest=to, tag=TAG))
    dst[at[me]:at[me + 1]] = mine
    poll(group, group.MPI.Request, "all_gather", group.ranks, reqs)
