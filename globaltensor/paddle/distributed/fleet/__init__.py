"""paddle.distributed.fleet: collective training (init, distributed_model, distributed_optimizer) and a
parameter-server job's roles and lifecycle (is_server, init_server, run_server, init_worker, stop_worker)."""
import os

from ....env import get_rank, get_world_size
from .. import init_parallel_env
from . import ps_runtime as _ps
from . import utils  # noqa: F401
from .base.distributed_strategy import DistributedStrategy
from .base.role_maker import PaddleCloudRoleMaker, Role, UserDefinedRoleMaker
from .ps_runtime import init_server, init_worker, run_server, save_persistables, stop_worker

__all__ = ["init", "DistributedStrategy", "distributed_model", "distributed_optimizer", "distributed_scaler",
           "worker_index", "worker_num",
           "is_worker", "is_server", "is_first_worker", "worker_endpoints", "server_endpoints", "server_num",
           "server_index", "barrier_worker", "init_server", "run_server", "init_worker", "stop_worker",
           "save_persistables", "PaddleCloudRoleMaker", "UserDefinedRoleMaker", "Role", "utils"]

_state = {"strategy": None, "role_maker": None, "initialized": False}


def init(role_maker=None, is_collective=False, strategy=None, log_level="INFO"):
    """Join the job. A parameter-server job when role_maker is a PS one (is_collective=False), or when
    no role_maker is given, is_collective is False and the launcher set TRAINING_ROLE; else collective
    (one process per rank under the launcher)."""
    if role_maker is None and not is_collective and os.environ.get("TRAINING_ROLE"):
        role_maker = PaddleCloudRoleMaker(is_collective=False)
    strategy = strategy or DistributedStrategy()
    if role_maker is not None and not role_maker.is_collective:
        _ps.start(role_maker, strategy)
    else:
        _ps.start(None, strategy)
        init_parallel_env()
    _state.update(strategy=strategy, role_maker=role_maker, initialized=True)


def _strategy():
    return _state["strategy"] or DistributedStrategy()


def distributed_model(model):
    """The model data-parallel over the ranks (paddle.DataParallel with the strategy's bucket sizes).
    strategy.recompute: the sublayers named in recompute_configs["checkpoints"] (default: each
    direct sublayer) run through activation recompute."""
    from ...framework import DataParallel
    from ..strategy_run import recompute_sublayers
    s = _strategy()
    if s.pipeline:
        raise NotImplementedError("DistributedStrategy.pipeline with fleet.distributed_model: pipeline a model with "
                                  "dist.to_static (Strategy.pipeline) or gt.pipeline.Pipeline here")
    if s.recompute:
        recompute_sublayers(model, s.recompute_configs["checkpoints"], "DistributedStrategy.recompute_configs")
    return DataParallel(model, comm_buffer_size=s.fuse_grad_size_in_MB, last_comm_buffer_size=s.last_comm_group_size_MB,
                        find_unused_parameters=s.find_unused_parameters)


def distributed_optimizer(optimizer, strategy=None):
    """Collective: the optimizer itself (distributed_model's backward already averaged the
    gradients); with strategy.sharding its states split over the ranks (ZeRO stage 1: _sharded);
    with strategy.gradient_merge (k_steps > 1) a gt.optim.GradientMerge of it: one
    gradient reduction and one update per k_steps micro-batches. Parameter server: its minimize
    makes the job's spec; the servers run the update."""
    if strategy is not None:
        _state["strategy"] = strategy
    if _ps.active():
        return _ps.PSOptimizer(optimizer, _strategy())
    s = _strategy()
    if s.sharding:
        optimizer = _sharded(optimizer, s.sharding_configs)
    if s.gradient_merge and s.gradient_merge_configs["k_steps"] > 1:
        from ....optim import GradientMerge
        return GradientMerge(optimizer, s.gradient_merge_configs["k_steps"], s.gradient_merge_configs["avg"])
    return optimizer


def distributed_scaler(scaler):
    """Fleet's distributed_scaler: the paddle.amp.GradScaler itself, whose inf/nan check every rank
    of the parameters' placements already agrees on (one all_reduce); for DataParallel's local
    parameters the gradients, averaged by backward, are the same on every rank."""
    return scaler


def _sharded(optimizer, configs):
    """strategy.sharding (stage 1): each rank keeps and updates 1/N of every optimizer state (ZeRO
    stage 1 over all ranks, globaltensor.zero.ReplicaZero); the parameters stay whole. Stages 2-3
    need global parameters: dist.shard_optimizer or dist.to_static's Strategy.sharding."""
    from .... import zero
    from ....placement import placement
    from ...framework import device_type
    n = get_world_size()
    if configs["stage"] != 1:
        raise NotImplementedError(f"DistributedStrategy.sharding_configs['stage'] = {configs['stage']}: only stage 1 "
                                  f"with fleet.distributed_model's local parameters; for stages 2-3 lay the model "
                                  f"out with a ProcessMesh and use dist.shard_optimizer(opt, dist.ShardingStage2/3)")
    if configs["sharding_degree"] not in (8, n):
        raise ValueError(f"DistributedStrategy.sharding_configs['sharding_degree'] = {configs['sharding_degree']}: "
                         f"globaltensor shards over all {n} ranks (give {n})")
    return zero.attach_replicas(optimizer, placement(device_type(), list(range(n)))) if n > 1 else optimizer


def _role():
    return _ps.role() if _ps.active() else _state["role_maker"] or PaddleCloudRoleMaker(is_collective=True)


def worker_index():
    return _ps.role()._worker_index() if _ps.active() else get_rank()


def worker_num():
    return _ps.role()._worker_num() if _ps.active() else get_world_size()


def is_worker():
    return _ps.role()._is_worker() if _ps.active() else True


def is_server():
    return _ps.active() and _ps.role()._is_server()


def is_first_worker():
    return _ps.role()._is_first_worker() if _ps.active() else get_rank() == 0


def server_num():
    return _ps.role()._server_num() if _ps.active() else 0


def server_index():
    return _ps.role()._server_index() if _ps.active() else -1


def server_endpoints(to_string=False):
    found = _ps.role()._get_pserver_endpoints() if _ps.active() else []
    return ",".join(found) if to_string else found


def worker_endpoints(to_string=False):
    found = _role()._get_trainer_endpoints()
    return ",".join(found) if to_string else found


def barrier_worker():
    if _ps.active():
        return _ps.barrier_worker()
    from .. import barrier
    barrier()
