"""nn.parallel as OneFlow's package: DistributedDataParallel, defined in nn.parallel.distributed."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
