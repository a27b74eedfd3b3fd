"""paddle.distributed.fleet: utils.hybrid_parallel_util.fused_allreduce_gradients."""
from . import utils  # noqa: F401
