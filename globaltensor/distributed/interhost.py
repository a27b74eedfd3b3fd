"""A group whose ranks span hosts: shared memory inside each host, MPI between the hosts' leaders.

It offers the methods collectives.py calls on a native shared-memory group, so the public
collectives, boxing and the gradient buckets run unchanged across hosts:

* all_reduce: under PAIRS_BYTES on groups of up to PAIRS_MEMBERS, point to point: every member
  sends its array to every other, then reduces the copies in member order (one round of
  messages; the same bits on every member); else under DIRECT_BYTES, on two hosts holding equal
  blocks of the members from HOSTS_REDUCE_BYTES: all_reduce inside each host, one Sendrecv with the
  same local index on the other host, host 0's result op host 1's; else one MPI Allreduce over
  every member (as mpi4py: fewest hops);
  from there, where every host has k > 1 members: reduce-scatter inside each host, k
  all-reduces of 1/k between the members of equal local index, all-gather inside each host;
  else reduce inside each host, all-reduce between the hosts' leaders (the first member of
  each host), broadcast inside each host;
* broadcast: inside the root's host, then between leaders, then inside the other hosts;
* all_gather: MPI over every member straight into the output, no copies: point to point where a
  share reaches PAIRS_SHARE_BYTES (and at every size on groups of up to PAIRS_MEMBERS), else one
  Allgather (Allgatherv if uneven), blocking under BLOCKING_BYTES of output (given the sizes, on two
  hosts of equal blocks from interhost_gather.HOSTS_BYTES: inside each host, then one Sendrecv); the members' sizes
  come from the caller, alike on every member, so no collective exchanges them (only calls
  without them check the sizes over MPI); given the sizes, collectives.all_gather hands the
  whole call to gather_rows (checks, output, MPI: one Python frame);
* reduce_scatter, all_to_all, barrier (and send/recv, a broadcast on a pair): MPI over the
  group's members directly (one message per pair of ranks; no hierarchy to win there);
  reduce_scatter too is told the pieces' sizes (alike on every member), so it is one collective.

float16 and bfloat16 travel between hosts as float32 (MPI has no such types), so sums
accumulate in float32 as on one host. Every MPI call waits at most GLOBALTENSOR_TIMEOUT (mpi_wait.py):
all_reduce and all_gather under BLOCKING_BYTES are blocking MPI calls (MPI's own progress loop: faster),
watched by a thread that ends the process after the timeout (a blocking call cannot be interrupted);
every other call is non-blocking and raises CollectiveError after it. Between hosts the "ranks
called different collectives" detector of shared memory does not run, so a mismatch or a peer that
never comes surfaces as that timeout (the error says so).
"""
import functools
import math
import os
import types

import numpy as np

from .. import _native
from .. import dtype as _dtype
from . import mpi_direct, mpi_wait
from .interhost_gather import BLOCKING_BYTES, PAIRS_MEMBERS, GatherSide, _bytes
from .interhost_gather import TAG as HOSTS_TAG
from .interhost_pairs import NP_REDUCE, all_reduce_pairs
from .mpi_wait import Done, InFlight, poll
from .store import left_key

# all_reduces of at least this many bytes, on hosts with equal member counts, go sliced: each local
# rank carries 1/k of the message between hosts instead of the leader carrying all of it
SLICED_BYTES = int(os.environ.get("GLOBALTENSOR_INTERHOST_SLICED_BYTES", str(256 << 10)))
# all_reduces under this many bytes run as one MPI Allreduce over every member (no shared-memory steps)
DIRECT_BYTES = int(os.environ.get("GLOBALTENSOR_INTERHOST_DIRECT_BYTES", str(16 << 20)))
# all_reduces from this many bytes (under DIRECT_BYTES) on two hosts holding equal blocks of the group go
# through shared memory inside each host and one Sendrecv between them (_all_reduce_hosts); 0: never.
# 1.25x / 1.76x mpi4py at 1 / 4 MiB, 0.33x-0.69x at 1 KiB-256 KiB (RESULTS.md "Issue 32 (s7)")
HOSTS_REDUCE_BYTES = int(os.environ.get("GLOBALTENSOR_INTERHOST_REDUCE_HOSTS_BYTES", str(1 << 20)))
# all_reduces under this many bytes on groups of up to PAIRS_MEMBERS go point to point: every member
# sends its array to every other (one round of messages), then sums the copies in member order
PAIRS_BYTES = int(os.environ.get("GLOBALTENSOR_INTERHOST_PAIRS_BYTES", str(2 << 20)))
_MPI_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN"}
_WIDENED = {np.dtype(np.float16)} | {d.np for d in _dtype.ALL if d.name == "bfloat16"}


class InterHostGroup(GatherSide):
    """Members `ranks` (global ranks, in group order) on several hosts; host_keys[r] names r's host;
    every MPI call waits at most `timeout` seconds (GLOBALTENSOR_TIMEOUT, as the native groups)."""

    spans_hosts = True  # collectives.py passes all_gather every member's byte count

    def __init__(self, world, ranks, job_comm, timeout):
        self.ranks = tuple(ranks)
        self.size = len(ranks)
        self.index = self.ranks.index(world.rank)
        self._world, self._jc, self.MPI, self.timeout = world, job_comm, job_comm.MPI, timeout
        self.rank = world.rank
        hosts = [world.host_keys[r] for r in ranks]
        self.host_order = list(dict.fromkeys(hosts))  # hosts in order of first appearance
        self.host_members = [tuple(r for r, h in zip(ranks, hosts) if h == key) for key in self.host_order]
        self.host_index = self.host_order.index(hosts[self.index])
        self.local = self.host_members[self.host_index]  # this host's members, in group order
        self.leaders = tuple(m[0] for m in self.host_members)
        self.is_leader = world.rank == self.local[0]
        self._local_native = None
        self._direct = {}  # op name -> (all_reduce communicator, MPI op, {dtype: its C++ call}) of a direct all_reduce
        self._last = (None, None, None, None)  # (redop, communicator, MPI op, C++ calls) of the last direct all_reduce
        self._in_place = self.MPI.IN_PLACE
        self._gather_comm = self._gather_direct = None  # the all_gather communicator and its C++ call, once made
        self._rows_plans = {}  # (shape, dtype, sizes) -> gather_rows' checked plan (interhost_gather.py)
        self._in_flight = []  # all_reduce_async's handles not yet waited for, oldest first
        self.armed = None  # [collective, ranks] while a blocking MPI call runs: mpi_wait's thread reads it
        self._host_peer = None  # on two hosts of equal blocks: the same local index on the other host
        two = self._hosts_fit()
        self._hosts_from = HOSTS_REDUCE_BYTES if two and HOSTS_REDUCE_BYTES > 0 else math.inf  # _all_reduce_hosts
        mpi_wait.watch(self)

    # -- the parts ------------------------------------------------------------------------------
    def _local(self):
        """The shared-memory group of this host's members (None when this rank is alone here)."""
        if len(self.local) == 1:
            return None
        if self._local_native is None:
            self._local_native = self._world.group(self.local)
        return self._local_native

    def _leader_comm(self):
        return self._jc.sub(self.leaders)

    def _comm(self):
        return self._jc.sub(self.ranks)

    def ended(self, ranks):
        """[(rank, how)] for those of `ranks` the job's store knows to have ended (for mpi_wait's errors)."""
        store = self._world.store
        keys = [left_key(r) for r in ranks]
        return [(r, store.get(k, 1.0).decode(errors="replace")) for r, k, hit in zip(ranks, keys, store.check(keys)) if hit]

    def _op(self, redop):
        return getattr(self.MPI, _MPI_OPS[redop.name])

    # -- the methods collectives.py calls ---------------------------------------------------------
    def all_reduce(self, x, out, redop):
        if self._in_flight:
            self.drain()
        nbytes = x.nbytes
        if nbytes < DIRECT_BYTES:
            # one MPI Allreduce over every member (what mpi4py does): fewest hops for small messages,
            # and the fewest Python steps (attribute reads cost here: redop.name alone is ~1 us)
            last, comm, op, direct = self._last
            if redop is not last:
                comm, op, direct = self._direct_for(redop)
            if x.dtype in _WIDENED or (nbytes < PAIRS_BYTES and self.size <= PAIRS_MEMBERS):
                return self._all_reduce_other(comm, op, x, out, redop)
            if nbytes >= self._hosts_from:
                return self._all_reduce_hosts(comm, x, out, redop)
            send = self._in_place if out is x else x
            if nbytes < BLOCKING_BYTES:
                call, rc = direct.get(x.dtype), 0  # from C++ (mpi_direct.py) for the usual dtypes
                self.armed = ["all_reduce", self.ranks]  # mpi_wait's thread ends the process after the timeout
                try:
                    if call is not None:
                        rc = call(x, out)
                    else:
                        comm.Allreduce(send, out, op)
                finally:
                    self.armed = None
                if rc:
                    mpi_direct.check(self.MPI, rc)
                return out
            poll(self, comm.Iallreduce(send, out, op=op), "all_reduce", self.ranks)
            return out
        if self._sliced(x):
            return self._all_reduce_sliced(x, out, redop)
        local = self._local()
        if local is not None:
            local.all_reduce(x, out, redop)
        elif out is not x:
            out[...] = x
        if self.is_leader:
            wide = out.astype(np.float32) if out.dtype in _WIDENED else out
            req = self._leader_comm().Iallreduce(self.MPI.IN_PLACE, _flat(wide), op=self._op(redop))
            poll(self, req, "all_reduce", self.leaders)
            if wide is not out:
                out[...] = wide
        if local is not None:
            local.broadcast(out, 0)
        return out

    def _all_reduce_other(self, comm, op, x, out, redop):
        """The direct all_reduce of float16 / bfloat16 (as float32) or point to point (PAIRS_MEMBERS)."""
        wide = x.dtype in _WIDENED
        if x.nbytes < PAIRS_BYTES and self.size <= PAIRS_MEMBERS:
            return all_reduce_pairs(self, comm, x, out, redop, wide)
        wide = x.astype(np.float32)
        if x.nbytes < BLOCKING_BYTES:
            self.armed = ["all_reduce", self.ranks]
            try:
                comm.Allreduce(self._in_place, wide, op)
            finally:
                self.armed = None
        else:
            poll(self, comm.Iallreduce(self._in_place, wide, op=op), "all_reduce", self.ranks)
        out[...] = wide
        return out

    def _all_reduce_hosts(self, comm, x, out, redop):
        """Two hosts of equal blocks (HOSTS_REDUCE_BYTES): all_reduce inside each host (shared memory), one
        blocking Sendrecv of the host's result with the same local index on the other host, then host 0's
        result op host 1's, in that order on every member (the same bits everywhere, NaNs included)."""
        self._local().all_reduce(x, out, redop)
        other = np.empty_like(out)
        peer = self._host_peer
        self.armed = ["all_reduce", self.ranks]  # mpi_wait's thread ends the process after the timeout
        try:
            comm.Sendrecv(_bytes(out), peer, HOSTS_TAG, _bytes(other), peer, HOSTS_TAG)
        finally:
            self.armed = None
        first, second = (out, other) if self.host_index == 0 else (other, out)
        NP_REDUCE[redop.name](first, second, out=out)
        return out

    def _direct_for(self, redop):
        """(communicator, MPI op, {dtype: C++ call}) of a direct all_reduce with `redop`; remembered as the last one."""
        found = self._direct.get(redop.name)
        if found is None:
            comm, op = self._jc.sub(self.ranks, "all_reduce"), self._op(redop)
            calls = {d: mpi_direct.allreduce(self.MPI, comm, d, op) for d in mpi_direct.DTYPES}
            found = self._direct[redop.name] = (comm, op, {d: c for d, c in calls.items() if c is not None})
            self._fast_all_reduce(redop, found[2])
        self._last = (redop, *found)
        return found

    def _fast_all_reduce(self, redop, calls):
        """Where the C++ calls exist (mpi_direct.py), the instance's all_reduce becomes _native.MpiAllreduceFast
        (made once; this redop's dtypes added): the small direct case in one C++ call (no Python frame:
        across hosts every us before a rank enters MPI delays its peers too), else this class's method."""
        limit = min(DIRECT_BYTES, BLOCKING_BYTES, self._hosts_from, 1 << 62)
        if not calls or self.size <= PAIRS_MEMBERS or limit <= 0:
            return
        fast = self.__dict__.get("all_reduce")
        if fast is None:
            fast = self.all_reduce = _native.MpiAllreduceFast(self, self.ranks, int(limit),
                                                              types.MethodType(InterHostGroup.all_reduce, self),
                                                              functools.partial(mpi_direct.check, self.MPI))
        for dtype, call in calls.items():
            fast.add(redop, dtype, call)

    def _sliced(self, x):
        """The same answer on every member: it depends on the message size and the group only."""
        counts = {len(m) for m in self.host_members}
        k = len(self.local)
        return x.nbytes >= SLICED_BYTES and len(counts) == 1 and k > 1 and x.size >= k

    def _all_reduce_sliced(self, x, out, redop):
        local, k = self._local(), len(self.local)
        i = self.local.index(self.ranks[self.index])
        base, extra = divmod(x.size, k)
        piece = np.empty(base + (1 if i < extra else 0), x.dtype)
        local.reduce_scatter(_flat(x), piece, redop)
        peers = self._jc.sub(tuple(members[i] for members in self.host_members))
        wide = piece.astype(np.float32) if piece.dtype in _WIDENED else piece
        poll(self, peers.Iallreduce(self.MPI.IN_PLACE, wide, op=self._op(redop)), "all_reduce",
                   [members[i] for members in self.host_members])
        if wide is not piece:
            piece[...] = wide
        local.all_gather(piece, _flat(out))
        return out

    def all_reduce_async(self, x, out, redop):
        """Under DIRECT_BYTES, in place, of a type MPI has: the MPI Iallreduce is started and left in
        flight (the gradient buckets overlap it with backward); the handle's wait() waits for it at
        most GLOBALTENSOR_TIMEOUT. Else it runs at once. Every later call on this group first waits
        for those in flight, so the group keeps one order of collectives on every rank."""
        if x.nbytes >= DIRECT_BYTES or out is not x or x.dtype in _WIDENED:
            self.all_reduce(x, out, redop)
            return Done()
        comm, op, _ = self._direct_for(redop)
        handle = InFlight(self, comm.Iallreduce(self._in_place, x, op=op))
        self._in_flight.append(handle)
        return handle

    def drain(self):
        """Wait for every all_reduce_async still in flight on this group (oldest first)."""
        while self._in_flight:
            self._in_flight[0].wait()

    def broadcast(self, x, root_index):
        if self._in_flight:
            self.drain()
        root = self.ranks[root_index]
        root_host = next(h for h, members in enumerate(self.host_members) if root in members)
        local = self._local()
        if self.host_index == root_host and local is not None:
            local.broadcast(x, self.local.index(root))
        if self.is_leader:
            poll(self, self._leader_comm().Ibcast(_bytes(x), root=root_host), "broadcast", self.leaders)
        if self.host_index != root_host and local is not None:
            local.broadcast(x, 0)
        return x

    def transfer(self, x, root_index):
        """send/recv on a pair: the broadcast above (MPI's between hosts)."""
        return self.broadcast(x, root_index)

    def reduce_scatter(self, x, out, redop, counts=None):
        """counts: every member's piece in elements, alike on every member (collectives.py passes it);
        without it the pieces' sizes are exchanged first."""
        if self._in_flight:
            self.drain()
        comm = self._comm()
        if counts is None:
            sizes = np.empty(comm.size, np.int64)
            poll(self, comm.Iallgather(np.array([out.size], np.int64), sizes), "reduce_scatter (sizes)", self.ranks)
            counts = sizes.tolist()
        elif counts[self.index] != out.size or sum(counts) != x.size:
            raise ValueError(f"reduce_scatter: rank {self._world.rank}'s pieces {counts} (elements) do not match its "
                             f"input of {x.size} and output of {out.size}")
        wide = x.dtype in _WIDENED
        send = _flat(x.astype(np.float32) if wide else x)
        recv = np.empty(out.size, np.float32) if wide else _flat(out)
        poll(self, comm.Ireduce_scatter(send, recv, counts, op=self._op(redop)), "reduce_scatter",
                   self.ranks)
        if wide:
            _flat(out)[...] = recv
        return out

    def all_to_all(self, x, send_bytes, out, recv_bytes):
        if self._in_flight:
            self.drain()
        send_at = np.cumsum([0] + list(send_bytes[:-1])).tolist()
        recv_at = np.cumsum([0] + list(recv_bytes[:-1])).tolist()
        req = self._comm().Ialltoallv([_bytes(x), list(send_bytes), send_at, self.MPI.BYTE],
                                      [_bytes(out), list(recv_bytes), recv_at, self.MPI.BYTE])
        poll(self, req, "all_to_all", self.ranks)
        return out

    def barrier(self):
        if self._in_flight:
            self.drain()
        poll(self, self._comm().Ibarrier(), "barrier", self.ranks)



def _flat(a):
    return a.reshape(-1)
