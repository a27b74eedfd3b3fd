"""paddle.distributed: the job (init_parallel_env, spawn, ranks), the auto-parallel API
(ProcessMesh, Shard / Replicate / Partial, shard_tensor, reshard, shard_dataloader, to_static ->
DistModel) and collectives on local tensors."""
from ...distributed.launcher_mode import surface_package as _surface_package


def _load_surface():
    """Every name of paddle.distributed (its _surface.py)."""
    from . import _surface
    return _surface


__getattr__ = _surface_package(globals(), _load_surface)
