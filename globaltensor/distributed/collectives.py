"""Collectives on numpy arrays for ranks on one node, through the shared-memory kernels of _native.

Arrays made by `empty_shared` live in this rank's arena and are read by peers in place
(zero copy); other arrays pass through bounded staging buffers. Arguments are checked on
every rank before any rank communicates.
"""
from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Literal, Optional, Sequence

import numpy as np

from .. import _native
from .. import dtype as _dtype
from . import call_plans
from .group import Group, world_group
from .world import SHARED_MIN_BYTES, world

ReduceOp = Literal["sum", "max", "min"]

# The reduction ops, from _native (kernels/types.h numbers them): {"sum": _native.RedOp.sum, ...};
# avg is private (all_reduce_mean): a hierarchical reduction (interhost.py) would average averages.
_REDOPS = {name: op for name, op in _native.RedOp.__members__.items() if name != "avg"}
_MEAN_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
# The dtypes reductions take, by numpy dtype (a dict lookup on the dtype costs tens of ns). The
# kernels read the dtype from the array itself; this only lets every rank raise before joining.
# Complex dtypes are summed as their float pairs; max and min refuse them (not ordered).
_REDUCIBLE = {d.np for d in _dtype.ALL if d.code.arithmetic or d.code.complex}
_COMPLEX = {d.np for d in _dtype.ALL if d.code.complex}
# op -> {dtype: _native.RedOp} for every pair that reduces: the small call's two lookups (issue 34).
_REDOP_OF = {op: {dt: redop for dt in _REDUCIBLE if op == "sum" or dt not in _COMPLEX} for op, redop in _REDOPS.items()}
_NO_REDOP: dict = {}


def _contiguous(x):
    """x as a C-contiguous array, keeping 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)

_observers = []


def _observe(kind, nbytes, group=None):
    """Tell every active gt.debug.count_collectives() / trace_collectives() about one collective
    (group: None, a Group or a list of ranks, as the collective was given it)."""
    for counter in _observers:
        counter.add(kind, nbytes, group)


@contextlib.contextmanager
def unobserved():
    """Collectives inside are not counted: the steps of a protocol that counts as one collective
    (the IPC all-reduce's exchanges and barriers)."""
    saved = list(_observers)
    _observers.clear()
    try:
        yield
    finally:
        _observers[:] = saved


def _group(group):
    if group is None:
        return world_group()
    if isinstance(group, Group):
        return group
    return Group(group)


def _native_of(group, name):
    """The native group of `group` (None: the world's): the member's cached one on the small path."""
    global _world_native, _world_across_hosts, _world_rows, _world_to_all, _world_scatter, _world_reduce, _world_bcast
    if group is None and _world_native is not None:
        return _world_native
    g = world_group() if group is None else group if isinstance(group, Group) else Group(group)
    native = g._native
    native = native if native is not None else g.native(name)
    if group is None:
        _world_native = native  # the world and its group are made once and never replaced
        _world_across_hosts = getattr(native, "spans_hosts", False)
        if isinstance(native, _native.Group):
            _world_rows = _native.GatherRows(native, SHARED_MIN_BYTES, functools.partial(_gather, native))
            _world_to_all = _native.AllToAllRows(native, SHARED_MIN_BYTES, functools.partial(_to_all, native))
            _world_scatter = _native.ScatterRows(native, SHARED_MIN_BYTES, reduce_scatter, world_group(), _REDOPS)
            _world_reduce = _native.AllReduceCall(native, all_reduce, world_group(), _REDOPS)
            _world_bcast = _native.BroadcastCall(native, broadcast, world_group())
    return native


# the world's native group, and on one host its small calls in C++ (_native.GatherRows, AllReduceCall, ...)
_world_native = _world_rows = _world_to_all = _world_scatter = _world_reduce = _world_bcast = None
_world_across_hosts = False  # whether _world_native spans hosts (all_gather's shortest path)

_NARROW = frozenset({np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.uint8)})  # no native reduction: int32's


def _redop(array, op, name):
    """The _native.RedOp of `op`, once array's dtype is known to reduce; TypeError or ValueError."""
    if array.dtype not in _REDUCIBLE:
        raise TypeError(f"{name}: cannot reduce dtype {array.dtype.name}; supported: "
                        f"{', '.join(d.name for d in _dtype.ALL if d.np in _REDUCIBLE or d.np in _NARROW)}")
    redop = _REDOPS.get(op)
    if redop is not None and op != "sum" and array.dtype in _COMPLEX:
        raise TypeError(f"{name}: cannot reduce dtype {array.dtype.name} with {op}: complex numbers are not "
                        f"ordered (only sum reduces them)")
    if redop is None:
        raise ValueError(f"{name}: op must be one of {sorted(_REDOPS)}, got {op!r}")
    return redop


def _check_array(x, name):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} takes a numpy array, got {type(x).__name__}")


def empty_shared(shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """An uninitialised array in shared memory: collectives read it from peers without a copy."""
    return world().empty_shared(shape, dtype)


def _empty_out(shape, dtype):
    """A collective's output: on the heap when small (no world lookup), else in shared memory."""
    if math.prod(shape) * dtype.itemsize < SHARED_MIN_BYTES:
        return np.empty(shape, dtype)
    return world().empty_shared(shape, dtype)


def barrier(group: Optional[Group] = None) -> None:
    """Wait until every member of the group (default: every rank) arrives."""
    native = _group(group).native("barrier")
    if _observers:
        _observe("barrier", 0, group)
    native.barrier()


def all_reduce(x: np.ndarray, op: ReduceOp = "sum", group: Optional[Group] = None,
               out: Optional[np.ndarray] = None) -> np.ndarray:
    """Reduce x element-wise over the group's members, in place (or into `out`); returns it.

    op: "sum", "max" or "min". float16 and bfloat16 sums accumulate in float32. Every rank
    gets the same bits.

    Examples:
        >>> x = np.full(4, float(gt.env.get_rank()), np.float32)
        >>> gt.distributed.all_reduce(x)        # on 2 ranks: [1., 1., 1., 1.] on both
    """
    if _world_reduce is not None and group is None and out is None and not _observers:
        return _world_reduce(x, op)  # the world on one host, in place: one C++ call (else this with group=world)
    redop = _REDOP_OF.get(op, _NO_REDOP).get(x.dtype) if type(x) is np.ndarray else None
    if redop is None:  # not an ndarray, a narrow dtype, or an error to raise
        _check_array(x, "all_reduce")
        if x.dtype in _NARROW:  # as OneFlow: reduced in a wider type, then narrowed (bool: sum is logical or)
            target = x if out is None else out
            target[...] = all_reduce(x.astype(np.int32), op, group).astype(x.dtype)
            return target
        redop = _redop(x, op, "all_reduce")
    native = _world_native if group is None and _world_native is not None else _native_of(group, "all_reduce")
    if _observers:
        _observe("all_reduce", x.nbytes, group)
    if out is not None:
        if out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous:
            raise ValueError(f"all_reduce: out must be a C-contiguous {x.dtype} array of shape {x.shape}")
        native.all_reduce(_contiguous(x), out, redop)
        return out
    if x.flags.c_contiguous:
        native.all_reduce(x, x, redop)
    else:
        tmp = _contiguous(x)
        native.all_reduce(tmp, tmp, redop)
        x[...] = tmp
    return x


class Work:
    """A collective running on the group's worker thread; wait() blocks until it is done and
    raises its error. It holds the arrays, so they live until then."""

    __slots__ = ("_native", "_arrays")

    def __init__(self, native, arrays):
        self._native, self._arrays = native, arrays

    def wait(self):
        if self._native is not None:  # None: it ran on the caller's thread
            self._native.wait()
        self._arrays = None

    def is_completed(self):
        return self._native is None or self._native.done()


def all_reduce_async(x: np.ndarray, op: ReduceOp = "sum", group: Optional[Group] = None) -> Any:
    """Start all_reduce(x, op, group) in place on the group's worker thread and return a Work.

    The caller goes on computing meanwhile (the gradient buckets of backward use it); x must be
    C-contiguous and left untouched until wait(). Later collectives on the group wait for it,
    so every rank still sees one order of collectives.
    """
    _check_array(x, "all_reduce_async")
    if not x.flags.c_contiguous or not x.flags.writeable:
        raise ValueError("all_reduce_async: x must be a writable C-contiguous array")
    redop = _redop(x, op, "all_reduce_async")
    native = _group(group).native("all_reduce_async")
    if _observers:
        _observe("all_reduce", x.nbytes, group)
    return Work(native.all_reduce_async(x, x, redop), (x,))


def all_gather_async(x: np.ndarray, sizes: Sequence[int], group: Optional[Group] = None) -> Any:
    """Start all_gather(x, group, sizes) on the group's worker thread: (a Work, the output it fills),
    or None, with nothing started, where the group has no worker (a group spanning hosts): the
    caller gathers when it needs the value. sizes: every member's length along axis 0, the same
    on every rank. As all_reduce_async: x is left untouched until wait(), later collectives on the
    group wait for it."""
    _check_array(x, "all_gather_async")
    native = _native_of(group, "all_gather")
    if not isinstance(native, _native.Group):
        return None
    rows = list(sizes)
    if len(rows) != native.size:
        raise ValueError(f"all_gather_async: sizes needs one entry per member ({native.size}), got {len(rows)}")
    if _observers:
        _observe("all_gather", x.nbytes, group)
    x = _contiguous(x)
    out = _empty_out((sum(rows),) + x.shape[1:], x.dtype)
    return Work(native.all_gather_async(x, out), (x, out)), out


def all_reduce_mean(x: np.ndarray, group: Optional[Group] = None, now: bool = True) -> Any:
    """x replaced in place by its mean over the group in one pass (the sum divided by the group's
    size in the reduction kernel: the bits of a sum then `x /= size`): done on return (now), else
    started on the group's worker thread (a Work). None, with nothing started, where that kernel
    does not apply (x not a writable C-contiguous float32/float64 array, a group spanning hosts):
    the caller sums and divides. Every rank decides alike (the same dtype, the same group)."""
    _check_array(x, "all_reduce_mean")
    if x.dtype not in _MEAN_DTYPES or not x.flags.c_contiguous or not x.flags.writeable:
        return None
    native = _group(group).native("all_reduce")
    if not isinstance(native, _native.Group):
        return None
    if _observers:
        _observe("all_reduce", x.nbytes, group)
    if now:
        native.all_reduce(x, x, _native.RedOp.avg)
        return Work(None, ())
    return Work(native.all_reduce_async(x, x, _native.RedOp.avg), (x,))


def broadcast(x: np.ndarray, src: int = 0, group: Optional[Group] = None) -> np.ndarray:
    """Copy the array of global rank `src` into x on every member, in place; returns x. Up to 16 KiB
    on one host src returns once its message is posted, before the others read it (Open MPI's eager)."""
    if _world_bcast is not None and group is None and not _observers:
        return _world_bcast(x, src)  # the world on one host: one C++ call (else this with group=world)
    _check_array(x, "broadcast")
    g = _group(group)
    try:
        root = g.ranks.index(src)
    except ValueError:
        raise ValueError(f"broadcast: src rank {src} is not in the group of ranks {list(g.ranks)}") from None
    native = _native_of(None if group is None else g, "broadcast")
    if _observers:
        _observe("broadcast", x.nbytes, group)
    tmp = x if x.flags.c_contiguous else _contiguous(x)
    native.broadcast(tmp, root)
    if tmp is not x:
        x[...] = tmp
    return x


def all_gather(x: np.ndarray, group: Optional[Group] = None, sizes: Optional[Sequence[int]] = None) -> np.ndarray:
    """Concatenate every member's x along axis 0 (lengths may differ) into a new array.

    sizes: each member's length along axis 0, when known (saves one small exchange); the same list
        on every rank (as MPI's Allgatherv counts): across hosts it is trusted, and a rank whose x
        disagrees with its entry raises ValueError while the others time out.
    The result is placed in shared memory when large, so later collectives need no copy; a small
    one may be the memory of an earlier call's result that nothing holds any more (call_plans.py).
    """
    if group is None and sizes is not None and type(x) is np.ndarray and not _observers:
        if _world_rows is not None:  # the world on one host: sizes, kept output, the native call in one C++ call
            return _world_rows(x, sizes)
        if _world_across_hosts:  # across hosts: checks, output, MPI in one C++ call (mpi_direct.py)
            return _world_native.gather_rows(x, sizes)
    if type(x) is not np.ndarray:
        _check_array(x, "all_gather")
    native = _world_native if group is None and _world_native is not None else _native_of(group, "all_gather")
    if _observers:
        _observe("all_gather", x.nbytes, group)
    return _gather(native, x, sizes)


def _gather(native, x, sizes):
    """all_gather after its checks (and _native.GatherRows' way for what it does not take)."""
    if sizes is not None and getattr(native, "spans_hosts", False):  # across hosts: checked, allocated, sent in one step
        return native.gather_rows(x, sizes)
    if not x.flags.c_contiguous:
        x = _contiguous(x)
    rows = tuple(call_plans.exchange_rows(native, x, "all_gather") if sizes is None else sizes)
    plan = call_plans.GATHER.get((native, x.shape, x.dtype, rows)) or call_plans.gather(native, x.shape, x.dtype, rows)
    out_shape, on_heap, counts, kept = plan
    out = call_plans.output(kept, out_shape, x.dtype)
    if counts is None:
        native.all_gather(x, out)
    else:
        native.all_gather(x, out, counts)
    return out


def reduce_scatter(x: np.ndarray, op: ReduceOp = "sum", group: Optional[Group] = None,
                   sizes: Optional[Sequence[int]] = None) -> np.ndarray:
    """Reduce x over the members, then give member i the i-th piece along axis 0.

    sizes: the pieces' lengths; default the balanced split (the first L % k get one more).
    """
    if _world_scatter is not None and group is None and type(x) is np.ndarray and not _observers:
        return _world_scatter(x, op, sizes)  # the world on one host: one C++ call (else this with group=world)
    redop = _REDOP_OF.get(op, _NO_REDOP).get(x.dtype) if type(x) is np.ndarray else None
    if redop is None:  # not an ndarray, a narrow dtype, or an error to raise
        _check_array(x, "reduce_scatter")
        if x.dtype in _NARROW:
            return reduce_scatter(x.astype(np.int32), op, group, sizes).astype(x.dtype)
        redop = _redop(x, op, "reduce_scatter")
    native = _world_native if group is None and _world_native is not None else _native_of(group, "reduce_scatter")
    if _observers:
        _observe("reduce_scatter", x.nbytes, group)
    if not x.flags.c_contiguous:
        x = _contiguous(x)
    rows = None if sizes is None else tuple(sizes)
    plan = call_plans.SCATTER.get((native, x.shape, x.dtype, rows)) or call_plans.scatter(native, x.shape, x.dtype, rows)
    out_shape, on_heap, counts, kept = plan
    out = call_plans.output(kept, out_shape, x.dtype)
    if counts is None:
        native.reduce_scatter(x, out, redop)
    else:  # across hosts: every piece's length, alike on every rank, so no exchange
        native.reduce_scatter(x, out, redop, counts)
    return out


def all_to_all(x: np.ndarray, send_sizes: Sequence[int], group: Optional[Group] = None,
               recv_sizes: Optional[Sequence[int]] = None) -> np.ndarray:
    """Member i sends rows [sum(send_sizes[:j]), ...) of x to member j; returns what it receives.

    The result concatenates, along axis 0, the pieces from members 0, 1, ... in order.
    recv_sizes: what each member sends here, when known (saves one small exchange).
    """
    if _world_to_all is not None and group is None and recv_sizes is not None and type(x) is np.ndarray and not _observers:
        return _world_to_all(x, send_sizes, recv_sizes)  # the world on one host: one C++ call
    if type(x) is not np.ndarray:
        _check_array(x, "all_to_all")
    native = _world_native if group is None and _world_native is not None else _native_of(group, "all_to_all")
    if _observers:
        _observe("all_to_all", x.nbytes, group)
    return _to_all(native, x, send_sizes, recv_sizes)


def _to_all(native, x, send_sizes, recv_sizes):
    """all_to_all after its checks (and _native.AllToAllRows' way for what it does not take)."""
    if not x.flags.c_contiguous:
        x = _contiguous(x)
    send_sizes = tuple(send_sizes)  # any iterable, read once
    if recv_sizes is None:
        send = call_plans.check_send(native, x.shape, send_sizes)
        table = np.empty((native.size, native.size), dtype=np.int64)
        call_plans.gather_into(native, np.array(send, dtype=np.int64), table, [1] * native.size, 8 * native.size)
        recv_sizes = table[:, native.index].tolist()
    key = (native, x.shape, x.dtype, send_sizes, tuple(recv_sizes))
    out_shape, on_heap, send_bytes, recv_bytes, kept = call_plans.TO_ALL.get(key) or call_plans.to_all(*key)
    out = call_plans.output(kept, out_shape, x.dtype)
    native.all_to_all(x, send_bytes, out, recv_bytes)
    return out


def _pair(peer, name):
    me = world().rank
    if peer == me:
        raise ValueError(f"{name}: a rank cannot {name} to or from itself (rank {me})")
    return Group((min(me, peer), max(me, peer)))


def send(x: np.ndarray, dst: int) -> None:
    """Send x to global rank dst, which must call recv with an array of the same size."""
    _check_array(x, "send")
    g = _pair(dst, "send")
    if _observers:
        _observe("send", x.nbytes, g)
    g.native("send").transfer(_contiguous(x), g.ranks.index(world().rank))


def recv(x: np.ndarray, src: int) -> np.ndarray:
    """Receive into x, in place, what global rank src sends; returns x."""
    _check_array(x, "recv")
    g = _pair(src, "recv")
    tmp = x if x.flags.c_contiguous else _contiguous(x)
    g.native("recv").transfer(tmp, g.ranks.index(src))
    if tmp is not x:
        x[...] = tmp
    return x
