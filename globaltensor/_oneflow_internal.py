"""flow._oneflow_internal: the few names of OneFlow's C++ binding module that its test support reaches for (Tensor, cpu_broadcast)."""
from .serialization.directory import broadcast_bytes
from .tensor import Tensor  # the class of every tensor, as OneFlow's binding class is

__all__ = ["Tensor", "cpu_broadcast"]


def cpu_broadcast(data, src):
    """Rank src's bytes (None on the other ranks) on every rank: the length, then the bytes."""
    return broadcast_bytes(data, src)
