"""flow._oneflow_internal: the few names of OneFlow's C++ binding module that its test support reaches for (Tensor, cpu_broadcast, flags)."""
from .backends import cuda as _cuda
from .serialization.directory import broadcast_bytes
from .tensor import Tensor  # the class of every tensor, as OneFlow's binding class is

__all__ = ["Tensor", "cpu_broadcast", "flags"]


def cpu_broadcast(data, src):
    """Rank src's bytes (None on the other ranks) on every rank: the length, then the bytes."""
    return broadcast_bytes(data, src)


class flags:  # noqa: N801 - OneFlow's name: flow._oneflow_internal.flags.cuda_version()
    """OneFlow's build flags, answered for this process: CUDA is there when a GPU and its driver are."""

    @staticmethod
    def with_cuda() -> bool:
        return _cuda.is_available()

    @staticmethod
    def cuda_version() -> int:
        """The CUDA runtime's version as OneFlow writes it (11080 for 11.8); 0 without a GPU."""
        if not _cuda.is_available():
            return 0
        try:
            import cupy
            return int(cupy.cuda.runtime.runtimeGetVersion())
        except Exception:  # noqa: BLE001 - a GPU reached through our own binding only: version unknown
            return 0

    @staticmethod
    def use_cxx11_abi() -> bool:
        return True

    @staticmethod
    def with_rdma() -> bool:
        return False
