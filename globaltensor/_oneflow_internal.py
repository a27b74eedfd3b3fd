"""flow._oneflow_internal: the few names of OneFlow's C++ binding module that its test support reaches for (Tensor, cpu_broadcast)."""
import numpy as np

from .distributed import collectives
from .tensor import Tensor  # the class of every tensor, as OneFlow's binding class is

__all__ = ["Tensor", "cpu_broadcast"]


def cpu_broadcast(data, src):
    """Rank src's bytes (None on the other ranks) on every rank: the length, then the bytes."""
    length = np.array([0 if data is None else len(data)], np.int64)
    collectives.broadcast(length, src=src)
    buf = np.frombuffer(data, np.uint8).copy() if data is not None else np.empty(int(length[0]), np.uint8)
    collectives.broadcast(buf, src=src)
    return buf.tobytes()
