"""The all_gather side of a group spanning hosts (InterHostGroup's base): MPI over every member straight into the output.

interhost.py's docstring says which call each case makes; here too are the limits both sides
share (blocking calls, point to point). gather_rows, the public all_gather given the sizes, keeps a
checked plan per layout (shape, dtype, sizes) so that a layout seen before goes straight to MPI.
"""
import functools
import math
import os
import sys
import types

import numpy as np

from .. import _native
from . import mpi_direct
from .interhost_pairs import all_gather_pairs
from .mpi_wait import poll

# all_gathers whose largest share reaches this many bytes go point to point whatever the group's size:
# 1.09x-1.12x mpi4py's Allgather at 1 MiB shares on the quiet machine (about 2x loaded), 0.62x at 64 KiB
PAIRS_SHARE_BYTES = 1 << 20
# all_gathers that check the sizes, with even shares under this many bytes, send them beside the data
PACKED_BYTES = 64 << 10
# all_gathers (and all_reduces under PAIRS_BYTES) on groups of at most this many members go point to
# point at every size (interhost_pairs.py). Off by default (0): faster on a loaded machine, slower on
# a quiet one than MPI's own collectives (RESULTS.md "Issue 32 (s5)")
PAIRS_MEMBERS = int(os.environ.get("GLOBALTENSOR_INTERHOST_PAIRS_MEMBERS", "0"))
# all_reduces and all_gathers (by the whole output) under this many bytes are blocking MPI calls, watched
# by mpi_wait's thread (faster than a non-blocking call and our polling; see docs/multinode.md); 0: none
BLOCKING_BYTES = int(os.environ.get("GLOBALTENSOR_INTERHOST_BLOCKING_BYTES", str(16 << 20)))

# all_gathers from this many bytes of output on two hosts holding equal blocks of the group's members go in
# two steps: all_gather inside each host through shared memory, then one Sendrecv of the host's block with the
# same local index on the other host (blocking under BLOCKING_BYTES, else polled; MPI's Allgather sends a
# host's share over loopback TCP first); 0: never. From 1 MiB: 1.23x mpi4py at 1 MiB on a calmer run, but
# 0.2x-0.5x at 1 KiB-256 KiB (the shared-memory step waits ~200 us for a peer that spins in MPI on the same
# core), though 1.3x-1.5x there under heavy load (RESULTS.md "Issue 32 (s7)"); at 16 MiB 1.29x where MPI's
# Allgather and point to point were 0.97-1.02x (s9: before, it stopped at 16 MiB and 1 MiB shares). From 16 MiB
# since s10: with outputs kept and the Allgather called from C++, the other paths beat it at 1 and 4 MiB in three
# alternated pairs of bench_multinode runs (0.90-0.94x / 0.97-1.11x mpi4py against 0.75-0.87x / 0.81-0.89x)
HOSTS_BYTES = int(os.environ.get("GLOBALTENSOR_INTERHOST_GATHER_HOSTS_BYTES", str(16 << 20)))
TAG = 7  # the tag of that Sendrecv (on the all_gather communicator)

# outputs under this many bytes are made with np.empty, skipping world.empty_shared's checks (which put
# those under world.SHARED_MIN_BYTES, this value, on the heap too; importing it would close a cycle)
_HEAP_BYTES = 1 << 15
_DIRECT, _ALLGATHER = "one blocking Allgather from C++", "one blocking Allgather"  # gather_rows' ways
_HOSTS = "inside the hosts, then between them"
_PLANS_KEPT = 64  # gather_rows' plans kept per group (a model's layouts; cleared when full)
# gather_rows' outputs under this many bytes are kept by their plan and written again by the next call of
# that layout once nothing else holds them (no view, no name): across hosts a fresh output per call (any
# allocation beside the MPI call) cost 0.78x-0.84x mpi4py's Allgather at 1 KiB (RESULTS.md "End of stop (s8)"),
# and a fresh 1 MiB output on the host path 70 us of 610 (s10; why so much was not traced); the
# outputs kept by one group's plans add up to KEEP_TOTAL_BYTES at most (a plan past it keeps none)
KEEP_BYTES = 16 << 20
KEEP_TOTAL_BYTES = 64 << 20
# MpiGatherRows takes outputs under this, shares under PAIRS_SHARE_BYTES (it keeps one output per layout, 16
# layouts at most: 64 MiB). 4 MiB since s11: at 1 MiB the Python method's frame cost 0.95-0.96x mpi4py's
# Allgather against 0.98-1.06x from C++ (profile_multinode.py, three alternated pairs of runs)
CPP_BYTES = 4 << 20


class GatherSide:
    """InterHostGroup's all_gathers; it sets ranks, size, index, rank, MPI, _world, _jc, _in_flight, armed,
    _gather_comm and _gather_direct (None until first used) and _rows_plans ({})."""

    def gather_rows(self, x, rows):
        """collectives.all_gather given the sizes, in one step: every member's x (rows[i] long along axis 0,
        the same list on every member) concatenated into a new array (in shared memory when large).
        A rank whose x disagrees with its entry raises ValueError before it communicates. A layout
        seen before (shape, dtype, sizes) finds its checked plan in _rows_plans and goes straight to MPI."""
        if self._in_flight:
            self.drain()
        if type(rows) is not list and type(rows) is not tuple:
            rows = list(rows)
        plan = self._rows_plans.get((x.shape, x.dtype, tuple(rows)))
        if plan is None:
            plan = self._rows_plan(x, rows)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        shape, how, counts, kept = plan
        out = kept[0] if kept else None
        if out is None or sys.getrefcount(out) > kept[1]:  # more than kept, out and the call: held elsewhere
            out = self._new_output(shape, x.dtype)
            if kept:
                kept[0] = out
                kept[1] = sys.getrefcount(out)  # the same references, counted as this Python counts them
        if how is _DIRECT:  # _gather's usual case: even shares, one blocking Allgather (from C++: mpi_direct.py)
            self.armed = ["all_gather", self.ranks]  # mpi_wait's thread ends the process after the timeout
            try:
                rc = self._gather_direct(x, out)
            finally:
                self.armed = None
            if rc:
                mpi_direct.check(self.MPI, rc)
        elif how is _ALLGATHER:  # the same through mpi4py, where mpi_direct found no functions
            byte = self.MPI.BYTE
            self.armed = ["all_gather", self.ranks]
            try:
                self._gather_comm.Allgather([x, byte], [out, byte])
            finally:
                self.armed = None
        elif how is _HOSTS:
            self._gather_hosts(x, out)
        else:
            self._gather(self._gather_comm, x, out, counts)
        return out

    def _gather_hosts(self, x, out):
        """The HOSTS_BYTES path: x's bytes into out (both C-contiguous) on two hosts of equal blocks; the
        exchange between the hosts is a blocking Sendrecv under BLOCKING_BYTES of output, else polled."""
        blocks = _bytes(out).reshape(2, -1)
        here, peer, comm = self.host_index, self._host_peer, self._gather_comm
        self._local().all_gather(_bytes(x), blocks[here])
        if out.nbytes >= BLOCKING_BYTES:
            reqs = [comm.Irecv(blocks[1 - here], peer, TAG), comm.Isend(blocks[here], peer, TAG)]
            return poll(self, self.MPI.Request, "all_gather", self.ranks, reqs)
        self.armed = ["all_gather", self.ranks]  # mpi_wait's thread ends the process after the timeout
        try:
            comm.Sendrecv(blocks[here], peer, TAG, blocks[1 - here], peer, TAG)
        finally:
            self.armed = None

    def _hosts_fit(self):
        """Whether the group is two hosts' equal blocks of members, k > 1 each (then _host_peer is set):
        the same answer on every member (it depends on the group only)."""
        hosts = self.host_members
        if len(hosts) != 2 or len(hosts[0]) != len(hosts[1]) or len(hosts[0]) < 2 or \
                self.ranks != hosts[0] + hosts[1]:
            return False
        other = hosts[1 - self.host_index]
        self._host_peer = self.ranks.index(other[self.local.index(self.rank)])
        return True

    def _rows_plan(self, x, rows):
        """gather_rows' checked plan for x's layout and these sizes: (output shape, how
        (_DIRECT / _ALLGATHER: one Allgather from C++ / through mpi4py, _HOSTS: _gather_hosts, None: _gather),
        the members' bytes or None when even, [the last
        output, its reference count] under KEEP_BYTES else None); kept in _rows_plans (bounded: at most
        _PLANS_KEPT outputs under KEEP_BYTES per group)."""
        k = self.size
        if len(rows) != k:
            raise ValueError(f"all_gather: sizes needs one entry per member ({k}), got {len(rows)}")
        row_bytes = x.itemsize if x.ndim < 2 else x.itemsize * math.prod(x.shape[1:])
        mine, total = rows[self.index], sum(rows)
        if x.nbytes != mine * row_bytes:
            raise ValueError(f"all_gather: rank {self.rank} passes {x.nbytes} bytes and an output of "
                             f"{total * row_bytes}, but the members' sizes say {mine * row_bytes} of "
                             f"{total * row_bytes} (the other members will time out)")
        if self._gather_comm is None:
            self._gather_comm_first()
        even, nbytes = rows.count(mine) == k, total * row_bytes
        how = None
        if even and k > PAIRS_MEMBERS:
            if 0 < HOSTS_BYTES <= nbytes and self._host_peer is not None:
                how = _HOSTS
            elif nbytes < BLOCKING_BYTES and x.nbytes < PAIRS_SHARE_BYTES:
                how = _ALLGATHER if self._gather_direct is None else _DIRECT
        if len(self._rows_plans) >= _PLANS_KEPT:
            self._rows_plans.clear()
        held = sum(math.prod(p[0]) * key[1].itemsize for key, p in self._rows_plans.items() if p[3] is not None)
        plan = ((total,) + x.shape[1:], how, None if even else [int(r) * row_bytes for r in rows],
                [None, 0] if nbytes < KEEP_BYTES and held + nbytes <= KEEP_TOTAL_BYTES else None)
        self._rows_plans[(x.shape, x.dtype, tuple(rows))] = plan
        return plan

    def all_gather(self, x, out, counts=None):
        """Every member's bytes straight into `out` with MPI over all members, in group order.

        counts: every member's byte count, the same list on every member (collectives.py passes it:
        the lengths come from its own exchange of the rows). Then one collective, no sizes exchange:
        a rank whose x differs from its count raises ValueError before it communicates (the
        others then time out: GLOBALTENSOR_TIMEOUT). Without counts (callers of the group itself)
        the sizes are checked: see _gather_sizes.
        """
        if self._in_flight:
            self.drain()
        comm = self._gather_comm or self._gather_comm_first()
        if counts is None:
            mine, dst = _bytes(x), _bytes(out)
            counts = self._gather_sizes(comm, mine, dst)
            if counts is None:
                return out
        elif counts[self.index] != x.nbytes or sum(counts) != out.nbytes:
            raise ValueError(f"all_gather: rank {self._world.rank} passes {x.nbytes} bytes and an output of "
                             f"{out.nbytes}, but the members' sizes say {counts[self.index]} of {sum(counts)} "
                             f"(the other members will time out)")
        self._gather(comm, x, out, None if counts.count(counts[0]) == self.size else counts)
        return out

    def _gather(self, comm, x, out, counts):
        """x into out (C-contiguous) on every member; counts: the members' bytes, None when even. Up to
        PAIRS_MEMBERS members or from PAIRS_SHARE_BYTES a share: point to point; else one Allgather
        (Allgatherv if uneven), blocking under BLOCKING_BYTES of output, else non-blocking."""
        nbytes = out.nbytes
        if self.size <= PAIRS_MEMBERS or max(counts or [x.nbytes]) >= PAIRS_SHARE_BYTES:
            return all_gather_pairs(self, comm, _bytes(x), _bytes(out), counts or [x.nbytes] * self.size)
        byte = self.MPI.BYTE
        if nbytes < BLOCKING_BYTES:
            self.armed = ["all_gather", self.ranks]  # mpi_wait's thread ends the process after the timeout
            try:
                if counts is None and comm is self._gather_comm and self._gather_direct is not None:
                    mpi_direct.check(self.MPI, self._gather_direct(x, out))
                elif counts is None:  # the usual case: arrays as they are, as MPI bytes
                    comm.Allgather([x, byte], [out, byte])
                else:
                    comm.Allgatherv(_bytes(x), [_bytes(out), counts])
            finally:
                self.armed = None
        elif counts is None:
            poll(self, comm.Iallgather([x, byte], [out, byte]), "all_gather", self.ranks)
        else:
            poll(self, comm.Iallgatherv(_bytes(x), [_bytes(out), counts]), "all_gather", self.ranks)

    def _gather_comm_first(self):
        """Make the all_gather communicator and its C++ Allgather; where that exists, the instance's
        gather_rows becomes _native.MpiGatherRows: the small even case in one C++ call (no Python frame:
        across hosts every us before a rank enters MPI delays its peers too), else this class's method."""
        self._gather_comm = self._jc.sub(self.ranks, "all_gather")
        self._gather_direct = mpi_direct.allgather(self.MPI, self._gather_comm)
        if self._gather_direct is not None and self.size > PAIRS_MEMBERS:
            hosts = HOSTS_BYTES if HOSTS_BYTES > 0 and self._host_peer is not None else CPP_BYTES
            self.gather_rows = _native.MpiGatherRows(
                self._gather_direct, self, self.ranks, max(0, min(CPP_BYTES, BLOCKING_BYTES, hosts)), self._new_output,
                types.MethodType(GatherSide.gather_rows, self), functools.partial(mpi_direct.check, self.MPI),
                PAIRS_SHARE_BYTES)
        return self._gather_comm

    def _new_output(self, shape, dtype):
        """A new output of gather_rows: on the heap when small, else in shared memory."""
        if math.prod(shape) * dtype.itemsize < _HEAP_BYTES:
            return np.empty(shape, dtype)
        return self._world.empty_shared(shape, dtype)

    def _gather_sizes(self, comm, mine, dst):
        """Every member's byte count, checked (ValueError on every member when they do not fill the
        output). Small even guesses: the sizes and an Allgather of the even share (out's bytes /
        members; a member whose share differs sends zeros, so both stay well formed) at once;
        None when every size matched (`dst` then holds the answer)."""
        k = self.size
        slot = dst.size // k
        sizes, size_here = np.empty(k, np.int64), np.array([mine.size], np.int64)
        if slot < PACKED_BYTES and slot * k == dst.size:
            send = mine if mine.size == slot else np.zeros(slot, np.uint8)
            reqs = [comm.Iallgather(size_here, sizes), comm.Iallgather(send, dst)]
            poll(self, self.MPI.Request, "all_gather", self.ranks, reqs)
            if sizes.tolist() == [slot] * k:
                return None
        else:
            poll(self, comm.Iallgather(size_here, sizes), "all_gather (sizes)", self.ranks)
        return _counts(sizes, dst.size)


def _bytes(a):
    """A C-contiguous array's memory as a flat uint8 array (0-d arrays included)."""
    return a.reshape(-1).view(np.uint8)


def _counts(sizes, total):
    """The members' byte counts; ValueError when they do not fill the output (every member sees the
    same sizes, so all raise alike)."""
    counts = sizes.tolist()
    if sum(counts) != total:
        raise ValueError(f"all_gather: the members' sizes {counts} (bytes) do not add up to the output's "
                         f"{total} bytes")
    return counts
