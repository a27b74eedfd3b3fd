"""paddle.distributed.fleet, collective training in dygraph mode: init, DistributedStrategy,
distributed_model (DataParallel), distributed_optimizer, role makers, worker_index / worker_num."""
from ....env import get_rank, get_world_size
from .. import init_parallel_env
from . import utils  # noqa: F401
from .base.role_maker import PaddleCloudRoleMaker, Role, UserDefinedRoleMaker

__all__ = ["init", "DistributedStrategy", "distributed_model", "distributed_optimizer", "worker_index", "worker_num",
           "is_worker", "is_first_worker", "worker_endpoints", "barrier_worker", "PaddleCloudRoleMaker",
           "UserDefinedRoleMaker", "Role", "utils"]

_state = {"strategy": None, "role_maker": None, "initialized": False}


class DistributedStrategy:
    """The fields that mean something here: fuse_grad_size_in_MB (the gradient bucket size of
    distributed_model), fuse_all_reduce_ops; amp, recompute, sharding, pipeline and tensor
    parallel configs are refused when switched on (use globaltensor's own layouts for those)."""

    _REFUSED = ("amp", "recompute", "sharding", "pipeline", "tensor_parallel", "gradient_merge", "lars", "lamb",
                "dgc", "localsgd", "a_sync")

    def __init__(self):
        object.__setattr__(self, "_fields", {"fuse_grad_size_in_MB": 32, "fuse_all_reduce_ops": True,
                                             "last_comm_group_size_MB": 1, "find_unused_parameters": False,
                                             "hybrid_configs": {}, "nccl_comm_num": 1})

    def __getattr__(self, name):
        fields = self.__dict__["_fields"]
        if name in fields:
            return fields[name]
        if name in self._REFUSED:
            return False
        raise AttributeError(f"DistributedStrategy has no field {name!r} here")

    def __setattr__(self, name, value):
        if name in self._REFUSED and value:
            raise NotImplementedError(f"DistributedStrategy.{name} = {value!r} is not supported by globaltensor's "
                                      f"Fleet (its collective mode is data parallelism); lay the model out with "
                                      f"placements instead")
        self._fields[name] = value


def init(role_maker=None, is_collective=False, strategy=None, log_level="INFO"):
    """Join the job (collective mode: one process per rank under the launcher)."""
    if role_maker is not None and not getattr(role_maker, "is_collective", True):
        raise NotImplementedError("fleet.init: only collective training is supported (no parameter server yet)")
    init_parallel_env()
    _state.update(strategy=strategy or DistributedStrategy(), role_maker=role_maker, initialized=True)


def _strategy():
    return _state["strategy"] or DistributedStrategy()


def distributed_model(model):
    """The model data-parallel over the ranks (paddle.DataParallel with the strategy's bucket sizes)."""
    from ...framework import DataParallel
    s = _strategy()
    return DataParallel(model, comm_buffer_size=s.fuse_grad_size_in_MB, last_comm_buffer_size=s.last_comm_group_size_MB,
                        find_unused_parameters=s.find_unused_parameters)


def distributed_optimizer(optimizer, strategy=None):
    """The optimizer itself: distributed_model's backward already averaged the gradients."""
    if strategy is not None:
        _state["strategy"] = strategy
    return optimizer


def worker_index():
    return get_rank()


def worker_num():
    return get_world_size()


def is_worker():
    return True


def is_first_worker():
    return get_rank() == 0


def worker_endpoints(to_string=False):
    import os
    found = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:0").split(",")
    return ",".join(found) if to_string else found


def barrier_worker():
    from .. import barrier
    barrier()
