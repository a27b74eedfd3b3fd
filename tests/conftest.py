"""Shared test helpers: a multi-process runner with a hard timeout, and the CUDA marker."""
import os
import shutil
import sys

import numpy as np
import pytest

from globaltensor.distributed import spawn

TESTS = os.path.dirname(os.path.abspath(__file__))  # the shared helpers (scripts/, numpy_refs, ...) live here
REPO = os.path.dirname(TESTS)
# A few tests reuse another subsystem's test module (test_every_op's specs on cuda placements):
# every subsystem folder is importable, whichever test pytest collects first.
SUBSYSTEMS = ("core", "ops", "boxing", "distributed", "parallel", "graph", "faces", "usage", "ps", "amp",
              "multinode")
sys.path[1:1] = [os.path.join(TESTS, d) for d in SUBSYSTEMS]


def run_ranks(fn, nprocs, *args, timeout=120, env=None):
    """Run fn(*args) on nprocs ranks; a failing rank's traceback is raised here; never hangs. The ranks
    are forked from a server that has imported torch too (the references), once per test session."""
    env = {"GLOBALTENSOR_SPAWN_PRELOAD": "torch", **(env or {})}
    return spawn(fn, args=args, nprocs=nprocs, timeout=timeout, env=env)


def rank_data(seed, rank, shape, dtype):
    """Deterministic per-rank data that every rank can recompute for any other rank."""
    rng = np.random.default_rng([seed, rank])
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def heap_array(shape, dtype=np.float32):
    """An array whose memory numpy's allocator did not give (a bytearray's): never in the arena, so
    collectives stage it, attach it or push it."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    return np.frombuffer(bytearray(n * dtype.itemsize), dtype, count=n).reshape(shape)


def placed(data, where):
    """A copy of the 1-d array data in a heap array (where == "heap") or in the arena (empty_shared)."""
    from globaltensor import distributed as dist
    out = heap_array(data.size, data.dtype) if where == "heap" else dist.empty_shared((data.size,), data.dtype)
    out[...] = data
    return out


def _has_gpu():
    return shutil.which("nvidia-smi") is not None and os.path.exists("/dev/nvidia0")


def pytest_collection_modifyitems(config, items):
    has_gpu = _has_gpu()
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords and not has_gpu:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _complete_gpu_build(request):
    """On a GPU machine a cuda test fails, rather than skips or quietly takes another path, when
    _native lacks the CUDA kernels (IPC) or cuBLASLt: a green GPU run means the GPU code ran.
    GLOBALTENSOR_ALLOW_PARTIAL_CUDA=1 says the partial build is meant."""
    if "cuda" not in request.keywords or not _has_gpu() or os.environ.get("GLOBALTENSOR_ALLOW_PARTIAL_CUDA") == "1":
        return
    from globaltensor import _native
    missing = [name for name, have in (("CUDA (IPC)", _native.with_cuda), ("cuBLASLt", _native.with_cublaslt)) if not have]
    if missing:
        pytest.fail(f"this machine has a GPU but globaltensor._native was built without {' and '.join(missing)}: "
                    "reinstall with GLOBALTENSOR_BUILD_CUDA=1 (GLOBALTENSOR_CUBLAS_INCLUDE if cublasLt.h is "
                    "elsewhere), or set GLOBALTENSOR_ALLOW_PARTIAL_CUDA=1")
