"""Shared test helpers: a multi-process runner with a hard timeout, and the CUDA marker."""
import os
import shutil

import numpy as np
import pytest

from globaltensor.distributed import spawn


def run_ranks(fn, nprocs, *args, timeout=120, env=None):
    """Run fn(*args) on nprocs ranks; a failing rank's traceback is raised here; never hangs."""
    return spawn(fn, args=args, nprocs=nprocs, timeout=timeout, env=env)


def rank_data(seed, rank, shape, dtype):
    """Deterministic per-rank data that every rank can recompute for any other rank."""
    rng = np.random.default_rng([seed, rank])
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def pytest_collection_modifyitems(config, items):
    has_gpu = shutil.which("nvidia-smi") is not None and os.path.exists("/dev/nvidia0")
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords and not has_gpu:
            item.add_marker(skip)
