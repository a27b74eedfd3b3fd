"""Our ctypes binding to NCCL (libnccl.so.2): one communicator per group of ranks, made lazily
from a unique id passed through the rendezvous store; collectives on CUDA streams that time
out, abort the communicator and name the ranks that did not arrive, instead of hanging.

Buffers are any objects with `__cuda_array_interface__` (cupy arrays, torch tensors, ...);
counts are 64-bit. Communicators are non-blocking, so init and every call can be polled."""
import contextlib
import ctypes
import sys
import threading
import time

import numpy as np

from .._native import CollectiveError, CollectiveTimeoutError

UNIQUE_ID_BYTES = 128
# NCCL's own numbering (nccl.h: ncclRedOp_t, ncclDataType_t), the ABI of libnccl, by our names: not _native's codes.
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5, "float16": 6,
          "float32": 7, "float64": 8, "bfloat16": 9}
_RESULTS = ("ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
            "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout")
_SUCCESS, _IN_PROGRESS = 0, 7
_PUBLISH_AFTER = 1.0  # seconds a rank waits before it tells the store how far it got


class NCCLError(CollectiveError):
    """An NCCL call failed; the message has NCCL's own words."""


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    """The first fields of ncclConfig_t (those of NCCL 2.14); NCCL reads `size` and `version`
    to know which fields a caller filled, so this prefix works with every later NCCL."""
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("blocking", ctypes.c_int), ("cgaClusterSize", ctypes.c_int), ("minCTAs", ctypes.c_int),
                ("maxCTAs", ctypes.c_int), ("netName", ctypes.c_char_p)]

    @classmethod
    def non_blocking(cls):
        undef = -2147483648  # NCCL_CONFIG_UNDEF_INT: NCCL's default
        return cls(ctypes.sizeof(cls), 0xCAFEBEEF, 21400, 0, undef, undef, undef, None)


_p, _i, _z = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
_SIGNATURES = {
    "ncclGetVersion": [ctypes.POINTER(_i)],
    "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
    "ncclCommInitRankConfig": [ctypes.POINTER(_p), _i, UniqueId, _i, ctypes.POINTER(Config)],
    "ncclCommGetAsyncError": [_p, ctypes.POINTER(_i)],
    "ncclCommAbort": [_p],
    "ncclCommDestroy": [_p],
    "ncclAllReduce": [_p, _p, _z, _i, _i, _p, _p],
    "ncclAllGather": [_p, _p, _z, _i, _p, _p],
    "ncclReduceScatter": [_p, _p, _z, _i, _i, _p, _p],
    "ncclBroadcast": [_p, _p, _z, _i, _i, _p, _p],
    "ncclSend": [_p, _z, _i, _i, _p, _p],
    "ncclRecv": [_p, _z, _i, _i, _p, _p],
    "ncclGroupStart": [],
    "ncclGroupEnd": [],
}


def library_path():
    """$GLOBALTENSOR_NCCL_LIBRARY, else libnccl.so.2 of an nvidia-nccl-cuXX wheel on sys.path,
    else the bare name (the dynamic loader's search path)."""
    from ..backends.cuda import find_library
    return find_library("GLOBALTENSOR_NCCL_LIBRARY", [("nvidia", "nccl", "lib")], "libnccl.so*", "libnccl.so.2")


class Library:
    """libnccl's functions with their C signatures; failing calls raise NCCLError."""

    def __init__(self, path):
        try:
            self._lib = ctypes.CDLL(path)
        except OSError as exc:
            raise RuntimeError(f"NCCL could not be loaded from {path!r} ({exc}); install nvidia-nccl-cu12 or "
                               f"-cu13 (pip install 'globaltensor[cuda13]') or set GLOBALTENSOR_NCCL_LIBRARY") from None
        self.path = path
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(self._lib, name)
            fn.restype, fn.argtypes = _i, argtypes
        self._lib.ncclGetErrorString.restype, self._lib.ncclGetErrorString.argtypes = ctypes.c_char_p, [_i]
        self._lib.ncclGetLastError.restype, self._lib.ncclGetLastError.argtypes = ctypes.c_char_p, [_p]

    def call(self, name, *args, comm=None):
        """Call an NCCL function; ncclSuccess and ncclInProgress pass, anything else raises."""
        code = getattr(self._lib, name)(*args)
        if code not in (_SUCCESS, _IN_PROGRESS):
            raise NCCLError(f"{name} failed: {self.explain(code, comm)}")
        return code

    def explain(self, code, comm=None):
        name = _RESULTS[code] if 0 <= code < len(_RESULTS) else f"result {code}"
        text = self._lib.ncclGetErrorString(code).decode()
        last = self._lib.ncclGetLastError(comm).decode() if comm is not None else ""
        return f"{name}: {text}" + (f" ({last})" if last else "")

    def version(self):
        """(major, minor, patch) of the loaded library."""
        code = ctypes.c_int()
        self.call("ncclGetVersion", ctypes.byref(code))
        return code.value // 10000, code.value // 100 % 100, code.value % 100

    def unique_id(self):
        """A fresh ncclUniqueId, as its 128 bytes."""
        uid = UniqueId()
        self.call("ncclGetUniqueId", ctypes.byref(uid))
        return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)  # .internal would stop at a NUL


def buffer(x, dtype=None):
    """(device pointer, element count, NCCL dtype code) of a C-contiguous CUDA array; `dtype`
    overrides the array's (e.g. "bfloat16" for a uint16 view)."""
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"expected a CUDA array (with __cuda_array_interface__), got {type(x).__name__}")
    shape = tuple(cai["shape"])
    item = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != _c_strides(shape, item.itemsize):
        raise ValueError(f"NCCL needs C-contiguous buffers; got shape {shape} with strides {tuple(strides)}")
    if dtype is None:
        name = item.name
    else:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in DTYPES:
        raise TypeError(f"NCCL has no {name} type; it takes {', '.join(DTYPES)}")
    return cai["data"][0], int(np.prod(shape, dtype=np.int64)), DTYPES[name]


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _stream_ptr(stream):
    """A cudaStream_t as an int: an int, an object with .ptr (cupy), or None (cupy's current
    stream when cupy is loaded, else the default stream)."""
    if stream is None:
        cupy = sys.modules.get("cupy")
        return cupy.cuda.get_current_stream().ptr if cupy is not None else 0
    return getattr(stream, "ptr", stream)


class Communicator:
    """An NCCL communicator over `ranks` (global ranks, this rank among them) on the current
    CUDA device. Every call waits, with the timeout, until NCCL accepted it; collectives also
    wait for their stream unless sync=False (then wait(stream) later). On a timeout or an
    asynchronous error the communicator is aborted and can no longer be used."""

    def __init__(self, lib, ranks, rank, unique_id, timeout, store=None, key=""):
        self.lib, self.ranks, self.index, self.timeout = lib, tuple(ranks), list(ranks).index(rank), timeout
        self._store, self._key, self._seq, self._broken = store, key, 0, None
        handle = ctypes.c_void_p()
        uid = UniqueId.from_buffer_copy(unique_id)
        lib.call("ncclCommInitRankConfig", ctypes.byref(handle), len(self.ranks), uid, self.index,
                 ctypes.byref(Config.non_blocking()))
        self._handle = handle
        self._poll("init", None)

    # --- collectives (buffers: CUDA arrays; stream: int, cupy Stream, or None) ---------------
    def all_reduce(self, x, out=None, op="sum", stream=None, sync=True, dtype=None):
        """out = reduction of x over the group (in place when out is None)."""
        send, count, code = buffer(x, dtype)
        recv = send if out is None else self._same(out, count, dtype, "all_reduce out")
        return self._collective("all_reduce", "ncclAllReduce", stream, sync, send, recv, count, code, OPS[op])

    def all_gather(self, x, out, stream=None, sync=True, dtype=None):
        """out (k times x's size) = every rank's x, in group order."""
        send, count, code = buffer(x, dtype)
        recv = self._same(out, count * len(self.ranks), dtype, "all_gather out")
        return self._collective("all_gather", "ncclAllGather", stream, sync, send, recv, count, code)

    def reduce_scatter(self, x, out, op="sum", stream=None, sync=True, dtype=None):
        """out = this rank's 1/k of the reduction of x (x has k times out's size)."""
        recv, count, code = buffer(out, dtype)
        send = self._same(x, count * len(self.ranks), dtype, "reduce_scatter input")
        return self._collective("reduce_scatter", "ncclReduceScatter", stream, sync, send, recv, count, code,
                                OPS[op])

    def broadcast(self, x, src, stream=None, sync=True, dtype=None):
        """x = the x of global rank src, in place."""
        ptr, count, code = buffer(x, dtype)
        return self._collective("broadcast", "ncclBroadcast", stream, sync, ptr, ptr, count, code,
                                self.ranks.index(src))

    def send(self, x, dst, stream=None, sync=True, dtype=None):
        ptr, count, code = buffer(x, dtype)
        return self._collective("send", "ncclSend", stream, sync, ptr, count, code, self.ranks.index(dst))

    def recv(self, x, src, stream=None, sync=True, dtype=None):
        ptr, count, code = buffer(x, dtype)
        return self._collective("recv", "ncclRecv", stream, sync, ptr, count, code, self.ranks.index(src))

    @contextlib.contextmanager
    def group(self):
        """Calls inside run as one (ncclGroupStart/End): pass sync=False to them, then wait()."""
        self.lib.call("ncclGroupStart")
        try:
            yield self
        finally:
            self.lib.call("ncclGroupEnd")
        self._poll("group", None)

    # --- waiting ------------------------------------------------------------------------------
    def wait(self, stream=None, what="collective"):
        """Block until `stream` finished, polling NCCL's state; on timeout abort and raise."""
        from ..backends import cuda
        ptr = _stream_ptr(stream)
        self._poll(what, lambda: cuda.stream_done(ptr))

    def abort(self, why="aborted"):
        """Stop the communicator's kernels and free it; later calls raise."""
        if self._handle is not None:
            self.lib._lib.ncclCommAbort(self._handle)
            self._handle, self._broken = None, why

    def close(self):
        if self._handle is not None:
            self.lib._lib.ncclCommDestroy(self._handle)
            self._handle, self._broken = None, "closed"

    def _collective(self, name, fn, stream, sync, *args):
        if self._handle is None:
            raise CollectiveError(f"NCCL communicator of ranks {list(self.ranks)} can no longer be used: {self._broken}")
        ptr = _stream_ptr(stream)
        self._seq += 1
        self.lib.call(fn, *args, self._handle, ctypes.c_void_p(ptr), comm=self._handle)
        self._poll(name, None)
        if sync:
            self.wait(ptr, name)

    def _same(self, x, count, dtype, what):
        ptr, n, _ = buffer(x, dtype)
        if n != count:
            raise ValueError(f"{what} has {n} elements; {count} expected")
        return ptr

    def _poll(self, what, done):
        """Wait until NCCL accepted the last call (non-blocking mode) and `done()`, if given, is
        true; an NCCL error or the timeout aborts the communicator and raises."""
        state, start, published = ctypes.c_int(_IN_PROGRESS), time.monotonic(), False
        while True:
            self.lib._lib.ncclCommGetAsyncError(self._handle, ctypes.byref(state))
            if state.value not in (_SUCCESS, _IN_PROGRESS):
                text = self.lib.explain(state.value, self._handle)
                self.abort(text)
                raise NCCLError(f"NCCL {what} on ranks {list(self.ranks)}: {text}")
            if state.value == _SUCCESS and (done is None or done()):
                return
            waited = time.monotonic() - start
            if waited > _PUBLISH_AFTER and not published:
                self._publish()
                published = True
            if waited > self.timeout:
                missing = self._missing()
                self.abort(f"{what} timed out")
                raise CollectiveTimeoutError(
                    f"NCCL {what} on ranks {list(self.ranks)}: timed out after {waited:.1f} s; rank(s) {missing} "
                    f"did not arrive (the timeout is {self.timeout} s, set by GLOBALTENSOR_TIMEOUT)")
            time.sleep(0 if waited < 1e-3 else 1e-4)

    def _publish(self):
        """Tell the store how far this rank got (only ranks that wait long pay for it)."""
        if self._store is not None:
            self._store.set(f"{self._key}/at/{self.index}", str(self._seq).encode())

    def _missing(self):
        """The ranks that did not publish that they reached this call."""
        if self._store is None:
            return "unknown"
        keys = [f"{self._key}/at/{i}" for i in range(len(self.ranks))]
        present = self._store.check(keys)
        return [r for r, key, ok in zip(self.ranks, keys, present)
                if not ok or int(self._store.get(key)) < self._seq]


_lock = threading.Lock()
_state = {"library": None, "comms": {}, "generation": {}}


def library():
    """The NCCL library (loaded once); RuntimeError saying where it looked when it is missing."""
    with _lock:
        if _state["library"] is None:
            _state["library"] = Library(library_path())
        return _state["library"]


def communicator(ranks):
    """The communicator of `ranks` (global ranks containing this rank), made on first use:
    collective over those ranks, which must all call it. The group's first rank draws the
    unique id and passes it through the rendezvous store. An aborted one is made anew."""
    from ..backends import cuda
    from .world import timeout_seconds, world
    ranks = tuple(int(r) for r in ranks)
    with _lock:
        comm = _state["comms"].get(ranks)
        if comm is not None and comm._handle is not None:
            return comm
        generation = _state["generation"][ranks] = _state["generation"].get(ranks, -1) + 1
    cuda.require(f"an NCCL communicator for ranks {list(ranks)}")
    key = f"nccl/{','.join(map(str, ranks))}/{generation}"
    unique_id, store = shared_unique_id(ranks, key)
    comm = Communicator(library(), ranks, world().rank, unique_id, timeout_seconds(), store, key)
    with _lock:
        _state["comms"][ranks] = comm
    return comm


def release():
    """Free every communicator of this process (at its exit: nothing is in flight, since every
    collective here waits for its stream; ncclCommAbort frees without waiting for the peers)."""
    with _lock:
        comms = list(_state["comms"].values())
        _state["comms"].clear()
    for comm in comms:
        comm.abort("released at exit")


def shared_unique_id(ranks, key):
    """(the group's unique id, the store or None): drawn by the group's first rank and read by
    the others from the store under `key`/id."""
    from .world import world
    lib, w = library(), world()
    if len(ranks) == 1:
        return lib.unique_id(), None
    w.join()
    if w.rank == ranks[0]:
        w.store.set(f"{key}/id", lib.unique_id())
    return w.store.get(f"{key}/id"), w.store
