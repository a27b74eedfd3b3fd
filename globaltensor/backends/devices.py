"""Devices: where a placement type's local pieces live (array module, allocation, host moves, collectives)."""
import collections
import os

import numpy as np

from ..env import get_world_size


class CpuDevice:
    """Pieces are numpy arrays; those of 32 KiB or more in shared memory when ranks share a node."""

    type = "cpu"
    xp = np
    is_host = True

    def empty(self, shape, np_dtype):
        if get_world_size() > 1:
            return self.collectives.empty_shared(shape, np_dtype)
        return np.empty(shape, np_dtype)

    def zeros(self, shape, np_dtype):
        out = self.empty(shape, np_dtype)
        out[...] = 0
        return out

    def from_host(self, host):
        return host

    def to_host(self, piece):
        return piece

    def asarray(self, value):
        """A kernel's result as a piece (numpy turns 0-d results into scalars)."""
        return value if type(value) is np.ndarray else np.asarray(value)

    @property
    def collectives(self):
        """globaltensor.distributed.collectives (registered when globaltensor.distributed loads)."""
        return collectives_of("cpu")


class CudaDevice:
    """Pieces are cupy arrays on this rank's GPU (LOCAL_RANK, after CUDA_VISIBLE_DEVICES), or
    simulated_cupy's host-backed ones with GLOBALTENSOR_CUDA_SIMULATE=1."""

    type = "cuda"
    is_host = False

    def __init__(self):
        self._xp = None

    @property
    def simulated(self):
        return simulated()

    @property
    def xp(self):
        if self._xp is None:
            self._xp = self._start()
        return self._xp

    def _start(self):
        if self.simulated:
            from . import simulated_cupy
            return simulated_cupy
        from . import cuda
        require_cuda("a cuda placement's local piece")
        import cupy
        cupy.cuda.Device(cuda.local_device()).use()
        return cupy

    def empty(self, shape, np_dtype):
        return self.xp.empty(shape, np_dtype)

    def zeros(self, shape, np_dtype):
        return self.xp.zeros(shape, np_dtype)

    def full(self, shape, value, np_dtype):
        """A piece of one value, filled on the device (a Python number: nothing is uploaded)."""
        return self.xp.full(shape, value, np_dtype)

    def from_host(self, host):
        return self.xp.asarray(host)

    def to_host(self, piece):
        return self.xp.asnumpy(piece)

    def asarray(self, value):
        return self.xp.asarray(value)

    @property
    def collectives(self):
        """globaltensor.distributed.device_collectives (registered when globaltensor.distributed loads)."""
        return collectives_of("cuda")


def require_cuda(what):
    """Raise RuntimeError saying why `what` cannot run here: no GPU, or no cupy (unless simulated)."""
    if simulated():
        return
    from . import cuda
    cuda.require(what)
    if "cupy" not in _found:
        import importlib.util
        if importlib.util.find_spec("cupy") is None:
            raise RuntimeError(f"{what} keeps its pieces in cupy arrays, and cupy is not installed: "
                               "pip install \"globaltensor[cuda13]\" (or the cupy package of your CUDA version)")
        _found.add("cupy")


_found = set()
_COLLECTIVES = {}  # placement type -> the module of its collectives


def register_collectives(placement_type, module):
    """Make `module` (all_reduce, all_gather, ... with the signatures of distributed/collectives.py)
    the collectives of `placement_type`'s pieces. The distributed package registers its modules
    as it loads (it sits above this module and imports it; this module never imports it)."""
    _COLLECTIVES[placement_type] = module


def collectives_of(placement_type):
    """The collectives registered for `placement_type` ("cpu" or "cuda")."""
    found = _COLLECTIVES.get(placement_type)
    if found is None:
        raise RuntimeError(f"no collectives are registered for {placement_type} pieces: globaltensor.distributed "
                           "registers them when it loads (import globaltensor, whose __init__ loads it)")
    return found


def simulated():
    """Whether cuda placements run on simulated_cupy (no GPU needed): GLOBALTENSOR_CUDA_SIMULATE=1."""
    return os.environ.get("GLOBALTENSOR_CUDA_SIMULATE", "0") not in ("", "0")


_DEVICES = {"cpu": CpuDevice(), "cuda": CudaDevice()}


def device(placement_type):
    """The device of a placement type ("cpu" or "cuda")."""
    return _DEVICES[placement_type]


def of_array(piece):
    """The device holding `piece`: cpu for numpy arrays, cuda for anything else (cupy)."""
    return _DEVICES["cpu"] if isinstance(piece, (np.ndarray, np.generic)) else _DEVICES["cuda"]


def move(piece, dev):
    """`piece` on device `dev` (itself when it is there already, else a copy through the host)."""
    here = of_array(piece)
    return piece if here is dev else dev.from_host(here.to_host(piece))


def array_module(piece):
    """numpy for a numpy array, else the cuda device's module (cupy): for kernels that make arrays."""
    return np if isinstance(piece, (np.ndarray, np.generic)) else _DEVICES["cuda"].xp


def add_at(out, index, values):
    """np.add.at(out, index, values) (repeated positions add up) on a numpy or device piece:
    cupy's arrays take no ufunc.at from numpy, so device pieces go through cupyx.scatter_add."""
    if isinstance(out, np.ndarray):
        np.add.at(out, index, values)
    elif simulated():
        from . import simulated_cupy
        simulated_cupy.scatter_add(out, index, values)
    else:
        import cupyx
        cupyx.scatter_add(out, index, values)


PATHS = collections.Counter()  # "cublaslt.linear", "ipc.all_reduce", ...: a few dozen keys at most


def took(path):
    """Count one use of a device path (a kernel or a transport); gt.debug.device_paths() reads them."""
    PATHS[path] += 1
