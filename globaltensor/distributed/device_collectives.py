"""Collectives on cuda pieces, with the signatures of collectives.py: NCCL among distinct GPUs,
the CUDA IPC all-reduce among ranks of one machine, the host's shared memory otherwise.

The transport of a group (GLOBALTENSOR_CUDA_TRANSPORT, default "auto"):

* "nccl" when every rank of the group has a GPU of its own (the ranks publish their GPU, host
  key + PCI bus id, to the rendezvous store) and libnccl loads: every collective by NCCL, also
  across machines, except all_reduce of at most GLOBALTENSOR_IPC_MAX_BYTES on one machine, which
  goes by IPC (its host-synchronised kernels start faster, but reading a peer GPU's buffer needs
  peer access: default 0, i.e. off, until the crossover is measured on a machine with P2P);
* "ipc" when ranks share a GPU (NCCL refuses that) on one machine: all_reduce by IPC, the other
  collectives through the host (copy to the host, shared-memory collective, copy back);
* "host": everything through the host (also what simulated cuda pieces use).

Counting (gt.debug.count_collectives) and the checks on arguments are those of collectives.py.
"""
import atexit
import math
import os
import warnings

import numpy as np

from ..backends.devices import device, took
from . import collectives as host
from .group import Group, world_group

_ipc = {}  # ranks -> IpcAllReduce
_transports = {}  # ranks -> "nccl" | "ipc" | "host"
_published = []  # this rank's GPU id, once it is in the store
_release_registered = []  # [True] once release() is registered to run at this process's exit
_MODES = ("auto", "nccl", "ipc", "host")


def _cuda():
    return device("cuda")


def _ranks(group):
    if group is None:
        return tuple(world_group().ranks)
    return tuple(int(r) for r in (group.ranks if isinstance(group, Group) else group))


def _gpu_ids(ranks):
    """Each rank's (GPU as 'host key/PCI bus id', whether libnccl loads there), through the store
    (published once per process): every rank decides the transport from the same facts."""
    from .world import world
    w = world()
    w.join()
    if not _published:
        import cupy
        try:
            from . import pynccl
            pynccl.library()
            nccl = "nccl"
        except (RuntimeError, OSError):
            nccl = "-"
        _published.append(f"{w.host_keys[w.rank]}/{cupy.cuda.Device().pci_bus_id}|{nccl}")
        w.store.set(f"gpu/{w.rank}", _published[0].encode())
    return [tuple(w.store.get(f"gpu/{r}").decode().rsplit("|", 1)) for r in ranks]


def transport(ranks):
    """How the group's collectives travel (see the module's docstring); decided once per group."""
    found = _transports.get(ranks)
    if found is not None:
        return found
    mode = os.environ.get("GLOBALTENSOR_CUDA_TRANSPORT", "auto")
    if mode not in _MODES:
        raise ValueError(f"GLOBALTENSOR_CUDA_TRANSPORT must be one of {_MODES}, got {mode!r}")
    if mode == "auto":
        mode = _automatic(ranks)
    _transports[ranks] = mode
    return mode


def _automatic(ranks):
    if _cuda().simulated or len(ranks) == 1:
        return "host"
    found = _gpu_ids(ranks)
    gpus = [gpu for gpu, _ in found]
    hosts = {gpu.rsplit("/", 1)[0] for gpu in gpus}
    if len(set(gpus)) == len(gpus):
        if all(nccl == "nccl" for _, nccl in found):
            return "nccl"
        missing = [r for r, (_, nccl) in zip(ranks, found) if nccl != "nccl"]
        _warn(f"ranks {list(ranks)} have GPUs of their own, but libnccl did not load on rank(s) {missing} "
              "(pip install nvidia-nccl-cu13, or set GLOBALTENSOR_NCCL_LIBRARY): their collectives go through "
              "the host")
        return "host"
    from .. import _native
    if len(hosts) == 1 and getattr(_native, "with_cuda", False):
        return "ipc"
    _warn(f"ranks {list(ranks)} share a GPU, but " + ("they are on several machines" if len(hosts) > 1 else
          "globaltensor._native was built without CUDA (reinstall with GLOBALTENSOR_BUILD_CUDA=1)") +
          ": their collectives go through the host")
    return "host"


def _warn(text):
    warnings.warn(f"globaltensor cuda transport: {text}", RuntimeWarning, stacklevel=4)


def _ipc_for(ranks, nbytes):
    """The group's IpcAllReduce when this all_reduce goes by IPC, else None."""
    how = transport(ranks)
    if how == "host" or (how == "nccl" and (nbytes > int(os.environ.get("GLOBALTENSOR_IPC_MAX_BYTES", 0))
                                            or not _one_machine(ranks))):
        return None
    found = _ipc.get(ranks)
    if found is None:
        from .ipc_allreduce import IpcAllReduce
        _release_at_exit()
        with host.unobserved():
            found = _ipc[ranks] = IpcAllReduce(ranks)
    return found


def _release_at_exit():
    """release() at this process's exit, registered once, when it first makes a device transport."""
    if not _release_registered:
        _release_registered.append(True)
        atexit.register(lambda pid=os.getpid(): release() if os.getpid() == pid else None)  # not in a forked child


def release():
    """Free this process's device transports: every group's IPC buffers (a call that returned
    left no peer reading them) and NCCL communicators. Runs at exit; a collective after it on
    every member of a group makes the group's transport anew."""
    for ranks in sorted(_ipc):
        _ipc.pop(ranks).close()
    from . import pynccl
    pynccl.release()


def _one_machine(ranks):
    from .world import world
    keys = world().host_keys
    return len({keys[r] for r in ranks}) == 1


def _nccl(ranks):
    from . import pynccl
    if transport(ranks) != "nccl":
        return None
    _release_at_exit()
    return pynccl.communicator(ranks)


def _nccl_for(ranks, x):
    """_nccl(ranks), or None for complex pieces: NCCL has no complex type (and the IPC sum none), so
    they go through the host's collectives, which sum complex values as float pairs."""
    return None if x.dtype.kind == "c" else _nccl(ranks)


def _contiguous(x):
    return x if x.flags.c_contiguous else x.copy()


def all_reduce(x, op="sum", group=None, out=None):
    """x reduced over the group, in place (or into `out`); returns it."""
    ranks = _ranks(group)
    dest = out if out is not None else x
    if len(ranks) == 1 or x.size == 0:  # alone, or nothing to reduce: x is the result, no transfer
        host._redop(x, op, "all_reduce")
        if host._observers:
            host._observe("all_reduce", x.nbytes, group)
        took("none.all_reduce")
        if dest is not x:
            dest[...] = x
        return dest
    ipc = _ipc_for(ranks, x.nbytes) if op == "sum" and x.dtype.kind != "c" else None
    comm = None if ipc is not None else _nccl_for(ranks, x)
    if ipc is None and comm is None:
        took("host.all_reduce")
        return _back(dest, host.all_reduce(_cuda().to_host(x), op=op, group=group))
    if host._observers:
        host._observe("all_reduce", x.nbytes, group)
    src = _contiguous(x)
    target = dest if dest.flags.c_contiguous else src  # src is then a private copy
    if ipc is not None:
        took("ipc.all_reduce")
        with host.unobserved():
            ipc(src, target)
    else:
        took("nccl.all_reduce")
        comm.all_reduce(src, target, op=op, dtype=_wire(x.dtype))
    if target is not dest:
        dest[...] = target
    return dest


class Done:
    """A collective that finished when it was started (see all_reduce_async)."""

    def wait(self):
        pass

    def is_completed(self):
        return True


def all_reduce_async(x, op="sum", group=None):
    """all_reduce(x) in place, with collectives.all_reduce_async's signature: it runs at once (the
    IPC all-reduce and NCCL are driven from the host here) and returns a finished Work."""
    all_reduce(x, op=op, group=group)
    return Done()


def _back(dest, host_value):
    """Copy a host result into the device array `dest`; returns dest."""
    dest[...] = _cuda().from_host(host_value)
    return dest


def broadcast(x, src=0, group=None):
    comm = _nccl_for(_ranks(group), x)
    took(f"{'host' if comm is None else 'nccl'}.broadcast")
    if comm is None:
        return _back(x, host.broadcast(_cuda().to_host(x), src=src, group=group))
    if host._observers:
        host._observe("broadcast", x.nbytes, group)
    buf = _contiguous(x)
    comm.broadcast(buf, src, dtype=_wire(x.dtype))
    if buf is not x:
        x[...] = buf
    return x


def _row(x):
    """Elements per row along axis 0 (the unit of the sizes arguments, as in collectives.py)."""
    return x.size // x.shape[0] if x.ndim and x.shape[0] else max(1, math.prod(x.shape[1:]))


def all_gather(x, group=None, sizes=None):
    """Every member's x concatenated along axis 0 (sizes: their lengths there). A host (numpy) x,
    such as the metadata rows of boxing, gives a host result and stays on the host unless NCCL
    carries the group: each move between host and GPU would wait for the stream."""
    ranks = _ranks(group)
    comm = _nccl_for(ranks, x)
    took(f"{'host' if comm is None else 'nccl'}.all_gather")
    on_host = isinstance(x, np.ndarray)
    if comm is None:
        gathered = host.all_gather(x if on_host else _cuda().to_host(x), group=group, sizes=sizes)
        return gathered if on_host else _cuda().from_host(gathered)
    if on_host:
        return _cuda().to_host(all_gather(_cuda().from_host(x), group, sizes))
    if sizes is None:
        raise ValueError("all_gather over NCCL needs sizes")
    x, row = _contiguous(x), _row(x)
    if host._observers:
        host._observe("all_gather", x.nbytes, group)
    if len(set(sizes)) == 1:
        out = _cuda().empty((sum(sizes),) + x.shape[1:], x.dtype)
        comm.all_gather(x, out, dtype=_wire(x.dtype))
        return out
    flat = x.reshape(-1)
    out = _exchange(comm, [flat] * len(ranks), [n * row for n in sizes], x.dtype)
    return out.reshape((sum(sizes),) + x.shape[1:])


def reduce_scatter(x, op="sum", group=None, sizes=None):
    """x reduced over the group; this member keeps its piece along axis 0 (sizes: the pieces' lengths)."""
    ranks = _ranks(group)
    comm = _nccl_for(ranks, x)
    took(f"{'host' if comm is None else 'nccl'}.reduce_scatter")
    if comm is None:
        return _cuda().from_host(host.reduce_scatter(_cuda().to_host(x), op=op, group=group, sizes=sizes))
    k, me = len(ranks), ranks.index(_rank())
    sizes = list(sizes) if sizes is not None else [x.shape[0] // k + (1 if i < x.shape[0] % k else 0)
                                                   for i in range(k)]
    x = _contiguous(x)
    if host._observers:
        host._observe("reduce_scatter", x.nbytes, group)
    if len(set(sizes)) == 1:
        out = _cuda().empty((sizes[0],) + x.shape[1:], x.dtype)
        comm.reduce_scatter(x, out, op=op, dtype=_wire(x.dtype))
        return out
    whole = _cuda().empty(x.shape, x.dtype)  # uneven pieces: NCCL has no such reduce_scatter
    comm.all_reduce(x, whole, op=op, dtype=_wire(x.dtype))
    start = sum(sizes[:me])
    return whole[start:start + sizes[me]].copy()


def all_to_all(x, send_sizes, group=None, recv_sizes=None):
    """Rows [sum(send_sizes[:j]), ...) of x go to member j; what arrives, in member order."""
    ranks = _ranks(group)
    comm = _nccl_for(ranks, x)
    took(f"{'host' if comm is None else 'nccl'}.all_to_all")
    if comm is None:
        return _cuda().from_host(host.all_to_all(_cuda().to_host(x), send_sizes, group=group,
                                                 recv_sizes=recv_sizes))
    if recv_sizes is None:
        raise ValueError("all_to_all over NCCL needs recv_sizes")
    x, row = _contiguous(x), _row(x)
    if host._observers:
        host._observe("all_to_all", x.nbytes, group)
    flat, sends, at = x.reshape(-1), [], 0
    for n in send_sizes:
        sends.append(flat[at * row:(at + n) * row])
        at += n
    out = _exchange(comm, sends, [n * row for n in recv_sizes], x.dtype)
    return out.reshape((sum(recv_sizes),) + x.shape[1:])


def _exchange(comm, sends, recv_counts, dtype):
    """Grouped NCCL sends and receives: sends[j] to member j, member j's recv_counts[j] elements
    into the output, one after another."""
    out = _cuda().empty((sum(recv_counts),), dtype)
    name, at = _wire(dtype), 0
    with comm.group():
        for j, peer in enumerate(comm.ranks):
            if sends[j].size:
                comm.send(sends[j], peer, sync=False, dtype=name)
            if recv_counts[j]:
                comm.recv(out[at:at + recv_counts[j]], peer, sync=False, dtype=name)
            at += recv_counts[j]
    comm.wait(what="exchange")
    return out


def _wire(dtype):
    """The NCCL type that carries `dtype` (bool travels as its bytes)."""
    return "uint8" if dtype.name == "bool" else dtype.name


def _rank():
    from ..env import get_rank
    return get_rank()


def barrier(group=None):
    host.barrier(group)
