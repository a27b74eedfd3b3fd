"""All-reduce among the ranks of one node through CUDA IPC buffers, synchronised from the host.

Each rank copies its input into its own IPC buffer; after a host barrier every kernel reads
only buffers that were complete before it was launched, so no kernel waits on another
process: any interleaving is correct, and several processes may share one GPU (NCCL refuses
that). A call starts with an all_gather of (count, dtype), which checks the ranks agree. One-shot
(small messages): every rank sums all buffers into its output; one barrier more. Two-shot
(larger): each rank sums its slice into its own buffer, then copies every rank's slice to its
output; two barriers more. Larger messages go through in buffer-sized chunks, with a barrier
between chunks. A last barrier ends every call: when it returns on a rank, no peer reads that
rank's buffer any more, so a rank may free it (close, or its process's exit) at any time after.
"""
import ctypes
import mmap
import os
import uuid

import numpy as np

from .. import dtype as _dtype
from . import collectives
from .group import Group

ONESHOT_BYTES = 256 << 10
_SUMMABLE = {d.np for d in _dtype.ALL if d.code.arithmetic}  # what the CUDA sum takes (kernels/types.h)
_ALIGN_BYTES = 256  # two-shot slices start on this boundary (aligned, vectorisable loads)


class CudaDevice:
    """Device memory, IPC handles, copies and sums on one stream, through _native.cuda."""

    def __init__(self, stream=0):
        from .. import _native
        if not getattr(_native, "with_cuda", False):
            raise RuntimeError("globaltensor._native was built without CUDA: reinstall with GLOBALTENSOR_BUILD_CUDA=1")
        self.cu, self.stream = _native.cuda, stream

    def alloc(self, nbytes):
        ptr = self.cu.malloc(nbytes)
        return ptr, self.cu.ipc_handle(ptr)

    def open(self, handle):
        return self.cu.ipc_open(handle)

    def close(self, ptr, own):
        (self.cu.free if own else self.cu.ipc_close)(ptr)

    def copy(self, dst, src, nbytes):
        self.cu.copy_async(dst, src, nbytes, self.stream)

    def reduce(self, dst, srcs, count, dtype):
        self.cu.reduce_sum_async(dst, srcs, count, _dtype.to_dtype(dtype).code, self.stream)

    def sync(self):
        self.cu.synchronize(self.stream)

    @staticmethod
    def pointer(x):
        return x.__cuda_array_interface__["data"][0]


class HostDevice:
    """The same operations on host memory shared through /dev/shm, with numpy: the twin that
    tests the protocol (and its summation order) without a GPU. Handles are file names."""

    def __init__(self):
        self._maps = {}

    def alloc(self, nbytes):
        from .world import job_id
        # named after the job: when a rank dies before close(), the launcher's sweep removes it
        path = f"/dev/shm/gt_{job_id()}_ipc_twin_{uuid.uuid4().hex}"
        with open(path, "wb") as f:
            f.truncate(max(nbytes, 1))
        ptr = self._map(path)
        return ptr, path.encode().ljust(64, b"\0")

    def open(self, handle):
        return self._map(handle.rstrip(b"\0").decode())

    def _map(self, path):
        with open(path, "r+b") as f:
            m = mmap.mmap(f.fileno(), 0)
        ptr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        self._maps[ptr] = (m, path)
        return ptr

    def close(self, ptr, own):
        m, path = self._maps.pop(ptr)
        if own and os.path.exists(path):
            os.unlink(path)
        del m  # unmapped once numpy views made from it are gone

    def copy(self, dst, src, nbytes):
        ctypes.memmove(dst, src, nbytes)

    def reduce(self, dst, srcs, count, dtype):
        acc_dtype = np.float32 if dtype.itemsize == 2 else dtype  # half types accumulate in float32
        views = [_view(p, count, dtype) for p in srcs]
        acc = views[0].astype(acc_dtype)
        for v in views[1:]:
            acc += v
        _view(dst, count, dtype)[...] = acc.astype(dtype)

    def sync(self):
        pass

    @staticmethod
    def pointer(x):
        return x.ctypes.data


def _view(ptr, count, dtype):
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(ptr), dtype=dtype, count=count)


def split(count, k, i, align):
    """Element range [lo, hi) of rank i when count elements are cut in k slices on `align`."""
    units = -(-count // align)
    per, extra = divmod(units, k)
    start = i * per + min(i, extra)
    end = start + per + (1 if i < extra else 0)
    return min(count, start * align), min(count, end * align)


class IpcAllReduce:
    """A group's IPC buffers (capacity bytes each) and its all_reduce (sum). Collective:
    every rank of `ranks` (all on this node) builds it, with the same capacity."""

    def __init__(self, ranks, capacity=64 << 20, device=None, oneshot_bytes=ONESHOT_BYTES):
        from ..env import get_rank
        self.group, self.ranks = Group(list(ranks)), list(ranks)
        self.k, self.index = len(self.ranks), self.ranks.index(get_rank())
        self.device = device if device is not None else CudaDevice()
        self.capacity, self.oneshot_bytes = capacity, oneshot_bytes
        ptr, handle = self.device.alloc(capacity)
        handles = collectives.all_gather(np.frombuffer(handle, np.uint8)[None].copy(), group=self.group,
                                         sizes=[1] * self.k)
        self.buffers = [ptr if j == self.index else self.device.open(handles[j].tobytes()) for j in range(self.k)]
        collectives.barrier(self.group)  # every rank mapped every buffer: the creator may drop its name

    def __call__(self, x, out=None):
        """out = sum of x over the group (in place when out is None); x C-contiguous."""
        out = x if out is None else out
        if x.dtype not in _SUMMABLE or out.dtype != x.dtype or out.size != x.size:
            kinds = ", ".join(sorted(d.name for d in _SUMMABLE))
            raise ValueError(f"IPC all_reduce takes x and out of one dtype ({kinds}) and size; "
                             f"got {x.dtype}[{x.size}] and {out.dtype}[{out.size}]")
        self.all_reduce(self.device.pointer(x), self.device.pointer(out), x.size, x.dtype)
        return out

    def all_reduce(self, x_ptr, out_ptr, count, dtype):
        """The protocol on device pointers: chunks of at most `capacity` bytes."""
        dtype = np.dtype(dtype)
        self._agree(count, dtype)
        chunk = self.capacity // dtype.itemsize
        for c0 in range(0, count, chunk):
            m = min(chunk, count - c0)
            off = c0 * dtype.itemsize
            self._chunk(x_ptr + off, out_ptr + off, m, dtype, first=c0 == 0)
        if count:
            collectives.barrier(self.group)  # every peer has read this rank's buffer for the last time

    def _agree(self, count, dtype):
        """All ranks check one another's (count, dtype) before any data moves."""
        mine = np.array([count, int(_dtype.to_dtype(dtype).code)], np.int64)
        every = collectives.all_gather(mine[None], group=self.group, sizes=[1] * self.k)
        if not (every == mine).all():
            calls = ", ".join(f"rank {r}: {int(c)} x {_dtype.from_code(d).name}"
                              for r, (c, d) in zip(self.ranks, every))
            raise ValueError(f"IPC all_reduce on ranks {self.ranks}: the ranks passed different buffers ({calls})")

    def _chunk(self, x_ptr, out_ptr, m, dtype, first):
        """One chunk. Before it, peers may still read this rank's buffer for the previous chunk
        (a barrier waits for them; the previous call ended with one)."""
        dev, e, mine = self.device, dtype.itemsize, self.buffers[self.index]
        if not first:
            collectives.barrier(self.group)
        dev.copy(mine, x_ptr, m * e)
        dev.sync()
        collectives.barrier(self.group)  # every input is in its buffer
        if m * e <= self.oneshot_bytes:
            dev.reduce(out_ptr, self.buffers, m, dtype)
            dev.sync()
        else:
            lo, hi = split(m, self.k, self.index, max(1, _ALIGN_BYTES // e))
            dev.reduce(mine + lo * e, [b + lo * e for b in self.buffers], hi - lo, dtype)
            dev.sync()
            collectives.barrier(self.group)  # every slice is summed
            for j, b in enumerate(self.buffers):
                lo, hi = split(m, self.k, j, max(1, _ALIGN_BYTES // e))
                dev.copy(out_ptr + lo * e, b + lo * e, (hi - lo) * e)
            dev.sync()

    def close(self):
        """Free this rank's buffer and unmap the peers' (local: no call is under way, and a call
        that returned left no peer reading this rank's buffer)."""
        for j, ptr in enumerate(self.buffers):
            self.device.close(ptr, own=j == self.index)
        self.buffers = []

