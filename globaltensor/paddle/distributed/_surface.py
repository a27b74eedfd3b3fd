"""paddle.distributed's names: its __init__ takes them from here (at import; in a launcher, on first use)."""
from ...distributed import barrier as _barrier
from ...distributed import collectives as _collectives
from ...distributed import spawn as _spawn
from ...env import get_local_rank, get_rank, get_world_size
from .auto_parallel import (DistAttr, Partial, Placement, ProcessMesh, Replicate, Shard, ShardingStage1, ShardingStage2,
                            ShardingStage3, dtensor_from_local, reshard, shard_dataloader, shard_layer, shard_optimizer,
                            shard_tensor, unshard_dtensor)
from .dist_model import DistModel, Strategy, to_static
from .entry_attr import CountFilterEntry, ProbabilityEntry, ShowClickEntry

__all__ = ["init_parallel_env", "spawn", "get_rank", "get_world_size", "barrier", "all_reduce", "ReduceOp",
           "ParallelEnv", "ProcessMesh", "Placement", "Shard", "Replicate", "Partial", "shard_tensor", "reshard",
           "shard_dataloader", "to_static", "DistModel", "Strategy", "DistAttr", "dtensor_from_local", "unshard_dtensor",
           "shard_layer", "shard_optimizer", "ShardingStage1", "ShardingStage2", "ShardingStage3",
           "ProbabilityEntry", "CountFilterEntry", "ShowClickEntry"]


class ReduceOp:
    SUM, MAX, MIN, PROD, AVG = "sum", "max", "min", "prod", "avg"


class ParallelEnv:
    """The rank and world size of this process, as Paddle names them."""

    rank = property(lambda self: get_rank())
    world_size = property(lambda self: get_world_size())
    local_rank = property(lambda self: get_local_rank())
    nranks = world_size


def init_parallel_env():
    """Join the job (the launcher or spawn set its variables): the shared-memory collectives
    start here, as Paddle's process group does. Idempotent; nothing to do on one process."""
    if get_world_size() > 1:
        from ...distributed import world
        world.world()
    return ParallelEnv()


def spawn(func, args=(), nprocs=-1, join=True, daemon=False, **options):
    """Run func(*args) in nprocs new processes (-1: 2 on this machine's CPUs); returns their
    results in rank order (a failing rank's traceback is raised here)."""
    return _spawn(func, args=tuple(args), nprocs=2 if nprocs in (-1, None) else nprocs,
                  timeout=options.get("timeout"))


def barrier(group=None):
    _barrier()


def all_reduce(tensor, op=ReduceOp.SUM, group=None, sync_op=True):
    """Sum (or max/min/avg) a local tensor over the ranks, in place."""
    if op not in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.AVG):
        raise NotImplementedError(f"all_reduce: op {op!r}; SUM, MAX, MIN and AVG are supported")
    _collectives.all_reduce(tensor._local, "sum" if op == ReduceOp.AVG else op)
    if op == ReduceOp.AVG:
        tensor._local /= get_world_size()
    return tensor
