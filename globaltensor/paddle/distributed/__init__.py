"""paddle.distributed: the job (init_parallel_env, spawn, ranks), the auto-parallel API
(ProcessMesh, Shard / Replicate / Partial, shard_tensor, reshard, shard_dataloader, to_static ->
DistModel) and collectives on local tensors."""
from ...distributed.launcher_mode import adopt as _adopt, load_deferred as _load_deferred, \
    load_or_defer as _load_or_defer


def _load_surface():
    """Every name of paddle.distributed (its _surface.py): at import, or in a launcher process on first use."""
    from . import _surface
    _adopt(globals(), _surface)


def __getattr__(name):
    """In a launcher process (distributed/launcher_mode.py) the first name used loads the deferred packages."""
    if _load_deferred(__file__, name) and name in globals():
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_load_or_defer(_load_surface)
