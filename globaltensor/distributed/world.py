"""The job as this process sees it: its rank, the store, its shared-memory node and groups.

Joining the job is collective and lazy: the first collective (or `gt.env.barrier()`) on any
rank connects to the store and maps the arenas of the other ranks on this node.
"""
import hashlib
import math
import os
import atexit
import socket
import sys
import threading

import numpy as np

from .. import _native
from . import mpi_backend
from .store import StoreClient, StoreServer, left_key, new_secret, secret_from_env

ARENA_BYTES = int(float(os.environ.get("GLOBALTENSOR_SHM_ARENA_GB", "256")) * (1 << 30))  # address space; pages on use
STAGE_BYTES = int(os.environ.get("GLOBALTENSOR_SHM_STAGE_BYTES", str(1 << 20)))
ONESHOT_BYTES = int(os.environ.get("GLOBALTENSOR_ONESHOT_BYTES", str(256 << 10)))


def _l3_bytes():
    """The size of the last-level cache (0 when the system does not say)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            text = f.read().strip().upper()
        return int(text.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(text[-1], 0)
    except (OSError, ValueError):
        return 0


# Outputs this large are written with streaming stores (they would evict the cache for nothing):
# a quarter of the L3. On a 32 MiB-L3 EPYC, all_gather to 16 MiB went 3.7 -> 2.3 ms; on a
# 260 MiB-L3 Xeon streaming lost at every size measured (RESULTS.md). Unknown L3: off.
NONTEMPORAL_BYTES = int(os.environ.get("GLOBALTENSOR_NONTEMPORAL_BYTES", str(_l3_bytes() // 4 or 1 << 62)))
SHARED_MIN_BYTES = 1 << 15  # smaller arrays stay on the heap: staging them costs less than a page
# numpy's own allocations of at least this many bytes come from the arena in a job of several
# ranks (GLOBALTENSOR_NUMPY_ALLOCATOR=0: never), so any large array is read by peers in place.
NUMPY_ALLOCATOR = os.environ.get("GLOBALTENSOR_NUMPY_ALLOCATOR", "1") not in ("0", "false", "no", "off")
NUMPY_MIN_BYTES = int(os.environ.get("GLOBALTENSOR_NUMPY_MIN_BYTES", str(256 << 10)))


def _env_int(name, default):
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def deadlock_seconds():
    """GLOBALTENSOR_DEADLOCK_SECONDS (default 2; 0: off): how long ranks must wait for each other
    in a cycle of collectives (one program thread each) before every one of them raises."""
    return float(os.environ.get("GLOBALTENSOR_DEADLOCK_SECONDS", "2"))


def timeout_seconds():
    """GLOBALTENSOR_TIMEOUT (seconds, default 300): how long a collective waits for peers."""
    return float(os.environ.get("GLOBALTENSOR_TIMEOUT", "300"))


def job_id():
    """The job's id: set by the launcher, else derived from what every rank shares."""
    if os.environ.get("GLOBALTENSOR_JOB_ID"):
        return os.environ["GLOBALTENSOR_JOB_ID"]
    if mpi_backend.mpirun_env() is not None:  # the ranks of one host share mpirun's per-host daemon
        return f"mpi{os.getppid()}{os.environ.get('SLURM_JOB_ID', '')}"
    if _env_int("WORLD_SIZE", 1) == 1:
        return f"solo{os.getpid()}"
    seed = "|".join([os.environ.get("GLOBALTENSOR_SECRET", ""), os.environ.get("MASTER_ADDR", ""),
                     os.environ.get("MASTER_PORT", "")])
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def host_key():
    """Ranks with equal keys share a machine, and so shared memory."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


class World:
    """Rank numbers, the store connection, this rank's shared-memory node and the groups."""

    def __init__(self):
        by_mpirun = mpi_backend.mpirun_env() or {}  # started by mpirun/srun rather than our launcher
        self.rank = _env_int("RANK", by_mpirun.get("rank", 0))
        self.world_size = _env_int("WORLD_SIZE", by_mpirun.get("world_size", 1))
        self.local_rank = _env_int("LOCAL_RANK", by_mpirun.get("local_rank", 0))
        self.prefix = f"/gt_{job_id()}_"
        self.node = _native.Node(self.prefix, self.rank, ARENA_BYTES)
        self.numpy_allocator = self.world_size > 1 and NUMPY_ALLOCATOR and \
            _native.install_numpy_allocator(self.node, NUMPY_MIN_BYTES)
        self.store = None
        self._server = None
        self._groups = {}
        self._joined = False
        self._lock = threading.RLock()
        self.host_keys = [host_key()]
        self._mpi = None  # the job's MPI communicator, made when a group first spans hosts

    def join(self):
        """Meet every other rank once: exchange host keys and map same-node arenas."""
        with self._lock:
            if self._joined:
                return
            if self.world_size > 1:
                self._connect_store()
                # the arena has no name in /dev/shm (nothing outlives a SIGKILL): peers on this
                # machine open its file as /proc/<pid>/fd/<fd>
                mpi = "mpi" if mpi_backend.can_join()[0] else "-"  # every rank must agree to join MPI
                me = f"{host_key()}\n/proc/{os.getpid()}/fd/{self.node.arena_fd}\n{mpi}"
                self.store.set(f"world/host/{self.rank}", me.encode())
                others = [r for r in range(self.world_size) if r != self.rank]
                joined = [self.store.get(f"world/host/{r}", watch=others,
                                         waiting_for=f"rank {r} to join the job").decode().split("\n")
                          for r in range(self.world_size)]
                self.host_keys = [host for host, _, _ in joined]
                self.store.barrier("world/arenas-created", self.rank, self.world_size)
                for r, (host, path, _) in enumerate(joined):
                    if host == self.host_keys[self.rank]:
                        self.node.map_peer(r, path)
                self.store.barrier("world/arenas-mapped", self.rank, self.world_size)  # then an owner may end
                if len(set(self.host_keys)) > 1 and all(m == "mpi" for _, _, m in joined):
                    self._mpi = mpi_backend.JobComm(self)  # collective over every rank, as joining is
            self._joined = True

    def join_states(self, op_name, ranks):
        """What each rank was doing when joining failed, one line each (for the error)."""
        everyone = range(self.world_size)
        left = self.store.check([left_key(r) for r in everyone])
        joined = self.store.check([f"world/host/{r}" for r in everyone])
        lines = []
        for r in everyone:
            if r == self.rank:
                state = f"in {op_name} on ranks {list(ranks)}, joining the job"
            elif left[r]:
                state = self.store.get(left_key(r), 1.0).decode(errors="replace")
            else:
                state = "joining the job" if joined[r] else "running, has not joined yet"
            lines.append(f"\n  rank {r}: {state}")
        return "".join(lines)

    def _connect_store(self):
        if mpi_backend.mpirun_env() is not None:  # mpirun started the job: rank 0 hosts the store
            self._server, addr, port, secret = mpi_backend.store_from_mpirun(StoreServer, new_secret)
            self.store = StoreClient(addr, port, secret, timeout=timeout_seconds(), timeout_setting="GLOBALTENSOR_TIMEOUT")
            return
        secret = secret_from_env()
        if secret is None:
            raise RuntimeError(
                f"WORLD_SIZE={self.world_size} but GLOBALTENSOR_SECRET is not set: start the job with "
                "`python -m globaltensor.distributed.launch` or gt.distributed.spawn, or give every rank "
                "the same GLOBALTENSOR_SECRET (hex)")
        addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
        port = _env_int("MASTER_PORT", 0)
        if port == 0:
            raise RuntimeError(f"WORLD_SIZE={self.world_size} but MASTER_PORT is not set")
        if self.rank == 0 and os.environ.get("GLOBALTENSOR_STORE_HOSTED") != "1":
            self._server = StoreServer(addr, port, secret)
        self.store = StoreClient(addr, port, secret, timeout=timeout_seconds(), timeout_setting="GLOBALTENSOR_TIMEOUT")

    def group(self, ranks):
        """The native group for `ranks` (a tuple of global ranks containing this rank)."""
        native = self._groups.get(ranks)
        if native is None:
            native = self._make_group(ranks)
        return native

    def _make_group(self, ranks):
        with self._lock:
            self.join()
            hosts = {self.host_keys[r] if r < len(self.host_keys) else None for r in ranks}
            if len(hosts) > 1:
                native = self._groups[ranks] = self._interhost_group(ranks)
                return native
            digest = hashlib.sha1(",".join(map(str, ranks)).encode()).hexdigest()[:16]
            native = _native.Group(self.node, f"{self.prefix}g{digest}", list(ranks), ranks.index(self.rank),
                              timeout_seconds(), STAGE_BYTES, ONESHOT_BYTES, NONTEMPORAL_BYTES, deadlock_seconds())
            self._groups[ranks] = native
            return native

    def _interhost_group(self, ranks):
        """A group spanning hosts: shared memory inside each, MPI between them (interhost.py)."""
        ok, why = mpi_backend.can_join()
        if ok and self._mpi is None:
            why = "some ranks of the job cannot join MPI (it is missing on their host, or they were not started " \
                  "by the launcher or mpirun)"
        if self._mpi is None:
            raise RuntimeError(f"ranks {list(ranks)} are on different machines and CPU collectives across "
                               f"machines need MPI: {why}")
        from .interhost import InterHostGroup
        return InterHostGroup(self, ranks, self._mpi, timeout_seconds())

    def empty_shared(self, shape, dtype):
        """An uninitialised array whose memory peers on this node can read without a copy."""
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize  # np.prod costs microseconds here
        if nbytes < SHARED_MIN_BYTES:
            return np.empty(shape, dtype)
        try:
            block = self.node.alloc(nbytes)
        except MemoryError:  # /dev/shm is full: collectives still work, through staging
            return np.empty(shape, dtype)
        return np.frombuffer(block, dtype=dtype, count=nbytes // dtype.itemsize).reshape(shape)


def _mark_end(w, pid):
    """At exit: tell peers that wait for this rank that it will not come, and how it ended."""
    if os.getpid() != pid:  # a forked child exiting: the rank goes on
        return
    for native in list(w._groups.values()):  # queued all_reduces still need this rank
        try:
            native.drain()
        except Exception:  # noqa: BLE001
            pass
    exc = _unhandled[0]
    how = "finished the script" if exc is None else f"ended on an error: {type(exc).__name__}: {exc}"[:120]
    try:
        w.node.mark_finished(how)
        if w.store is not None:
            w.store.set(left_key(w.rank), how.encode(), timeout=2.0)
    except Exception:  # noqa: BLE001 - the store may be gone already; peers then see the exit itself
        pass


_unhandled = [None]


def note_failure(exc):
    """Record the exception a rank ends on when something other than sys.excepthook reports it."""
    _unhandled[0] = exc


def _note_unhandled(hook):
    def note(kind, value, tb):
        _unhandled[0] = value
        hook(kind, value, tb)
    return note


_world = None
_world_lock = threading.Lock()
_hooks = []  # (ours, the sys.excepthook it wraps), while ours is installed


def world():
    """The process-wide World, created on first use (at import in a rank of a job)."""
    global _world
    if _world is None:
        with _world_lock:
            if _world is None:
                _world = World()
                _install(_world)
    return _world


def _install(w):
    """What the World changes process-wide besides numpy's allocator (World.__init__), each
    undone at exit (docs/architecture.md, "What a job installs")."""
    atexit.register(_uninstall, w)  # registered first, so it runs after _mark_end (atexit is LIFO)
    atexit.register(_mark_end, w, os.getpid())
    if w.world_size > 1:  # peers learn how a rank ended: only a job has them
        ours = _note_unhandled(sys.excepthook)
        _hooks.append((ours, sys.excepthook))
        sys.excepthook = ours


def _uninstall(w):
    """At exit, after _mark_end: numpy's previous allocator and sys.excepthook back (the hook only
    where nobody wrapped it since; arrays already made keep the allocator that made them)."""
    if w.numpy_allocator:
        _native.uninstall_numpy_allocator()
        w.numpy_allocator = False
    if _hooks:
        ours, previous = _hooks.pop()
        if sys.excepthook is ours:
            sys.excepthook = previous
