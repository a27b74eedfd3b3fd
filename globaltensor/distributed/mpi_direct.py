"""Small blocking MPI calls made from C++ (bindings/mpi.cpp) with the functions of the library mpi4py loaded.

Across hosts a small all_gather or all_reduce is one blocking MPI call of a few tens of us, and
on a machine where the job's ranks share the CPUs every us of a rank's own work before it enters
the call delays its peers too (RESULTS.md "End of stop (s8)"). mpi4py's wrapping of one call
(message specs, buffer requests, datatype lookup) costs ~1 us; the same call from C++ ~0.3 us.
The functions are found through mpi4py's own extension module (dlsym searches its dependencies,
so they are those of the very library whose handles mpi4py hands out) and called with mpi4py's
handles as integers: no MPI header at build time, any MPI mpi4py runs on. Where they cannot be
found (an mpi4py that loads MPI some other way), or GLOBALTENSOR_MPI_DIRECT=0, callers keep
mpi4py's calls: `allgather` / `allreduce` then return None.
"""
import ctypes
import os

import numpy as np

from .. import _native

ENABLED = os.environ.get("GLOBALTENSOR_MPI_DIRECT", "1") not in ("0", "false", "no", "off")
# numpy types whose all_reduce goes through MpiAllreduce, and the MPI type of each (as mpi4py's name)
_MPI_TYPES = {np.dtype(np.float32): "FLOAT", np.dtype(np.float64): "DOUBLE",
              np.dtype(np.int32): "INT32_T", np.dtype(np.int64): "INT64_T"}
DTYPES = tuple(_MPI_TYPES)
_found = []  # [(Allgather's and Allreduce's addresses, the bytes of a handle) or None]: looked up once


def _functions(MPI):
    """(MPI_Allgather's address, MPI_Allreduce's, the bytes of a handle), or None where not found."""
    if not _found:
        _found.append(None)
        if ENABLED:
            try:
                lib = ctypes.CDLL(MPI.__file__)  # mpi4py's module, already loaded: its dependencies are searched
                addr = [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in ("MPI_Allgather", "MPI_Allreduce")]
                width = MPI._sizeof(MPI.Comm)
                if all(addr) and width in (4, ctypes.sizeof(ctypes.c_void_p)):
                    _found[0] = (addr[0], addr[1], width)
            except (OSError, AttributeError, TypeError):
                pass
    return _found[0]


def allgather(MPI, comm):
    """A callable (send, recv) -> MPI error code: a blocking Allgather of send's bytes on `comm` into recv
    (both C-contiguous; recv holds comm's size x send's bytes); None where the functions are not found."""
    found = _functions(MPI)
    if found is None:
        return None
    return _native.MpiAllgather(found[0], found[2], MPI.BYTE.handle, comm.handle, comm.Get_size())


def allreduce(MPI, comm, dtype, op):
    """A callable (send, recv) -> MPI error code: a blocking Allreduce with the mpi4py Op `op` of arrays
    of numpy `dtype` on `comm` (in place when send is recv); None for another dtype or where the functions
    are not found."""
    found, name = _functions(MPI), _MPI_TYPES.get(dtype)
    if found is None or name is None:
        return None
    in_place = int(MPI.IN_PLACE) & ((1 << 64) - 1)  # MPI_IN_PLACE's address: (void *) -1 in MPICH, 1 in Open MPI
    return _native.MpiAllreduce(found[1], found[2], getattr(MPI, name).handle, op.handle, comm.handle, in_place,
                                dtype.num)


def check(MPI, rc):
    """Raise mpi4py's MPI.Exception for a nonzero error code of these calls."""
    if rc:
        raise MPI.Exception(rc)
