"""Collectives on cuda pieces, with the signatures of collectives.py: the CUDA IPC all-reduce for
ranks on one node (GPUs shared or not), the host's shared-memory collectives for the rest.

Which way an all_reduce goes: GLOBALTENSOR_CUDA_ALLREDUCE = "auto" (IPC when every rank of the
group is on this node and _C has CUDA, else through the host), "ipc" or "host". The other
collectives copy the piece to the host, run the shared-memory collective and copy the result
back: correct for any number of processes per GPU, which NCCL refuses. Counting
(gt.debug.count_collectives) and the checks on arguments are those of collectives.py.
"""
import os

from ..backends.devices import device
from . import collectives as host
from .group import Group, world_group

_ipc = {}  # ranks -> IpcAllReduce


def _cuda():
    return device("cuda")


def _ranks(group):
    if group is None:
        return tuple(world_group().ranks)
    return tuple(group.ranks if isinstance(group, Group) else group)


def _ipc_for(ranks):
    """The group's IpcAllReduce, or None when the all_reduce goes through the host."""
    mode = os.environ.get("GLOBALTENSOR_CUDA_ALLREDUCE", "auto")
    if mode not in ("auto", "ipc", "host"):
        raise ValueError(f"GLOBALTENSOR_CUDA_ALLREDUCE must be auto, ipc or host, got {mode!r}")
    if mode == "host" or _cuda().simulated or len(ranks) == 1:
        return None
    from .. import _C
    from .world import world
    keys = world().host_keys
    one_node = len(keys) > max(ranks) and len({keys[r] for r in ranks}) == 1
    if mode == "auto" and not (one_node and getattr(_C, "with_cuda", False)):
        return None
    found = _ipc.get(ranks)
    if found is None:
        from .ipc_allreduce import IpcAllReduce
        found = _ipc[ranks] = IpcAllReduce(ranks)
    return found


def all_reduce(x, op="sum", group=None, out=None):
    """x reduced over the group, in place (or into `out`); sums of one-node groups go by IPC."""
    ipc = _ipc_for(_ranks(group)) if op == "sum" else None
    if ipc is not None:
        if host._observers:
            host._observe("all_reduce", x.nbytes)
        src = x if x.flags.c_contiguous else _cuda().xp.ascontiguousarray(x)
        dest = out if out is not None else x
        if dest.flags.c_contiguous:
            return ipc(src, dest)
        dest[...] = ipc(src)  # src is a private copy here: dest is x, not contiguous
        return dest
    result = host.all_reduce(_cuda().to_host(x), op=op, group=group)
    return _back(out if out is not None else x, result)


def _back(dest, host_value):
    """Copy a host result into the device array `dest`; returns dest."""
    dest[...] = _cuda().from_host(host_value)
    return dest


def broadcast(x, src=0, group=None):
    return _back(x, host.broadcast(_cuda().to_host(x), src=src, group=group))


def all_gather(x, group=None, sizes=None):
    return _cuda().from_host(host.all_gather(_cuda().to_host(x), group=group, sizes=sizes))


def reduce_scatter(x, op="sum", group=None, sizes=None):
    return _cuda().from_host(host.reduce_scatter(_cuda().to_host(x), op=op, group=group, sizes=sizes))


def all_to_all(x, send_sizes, group=None, recv_sizes=None):
    return _cuda().from_host(host.all_to_all(_cuda().to_host(x), send_sizes, group=group, recv_sizes=recv_sizes))


def barrier(group=None):
    host.barrier(group)
