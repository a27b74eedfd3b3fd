"""Paddle's ShardingStage1/2/3 (shard_optimizer's shard_fn): ZeRO stages over a mesh dim, as layouts (globaltensor.zero)."""
from .... import zero as _zero
from .api import ProcessMesh, replicate_in_place


class _ShardingStage:
    """paddle.distributed.ShardingStage1/2/3(sharding_mesh_dim, mesh=None): ZeRO's sharding of the
    optimizer's states (1), also gradients (2), also parameters (3) along a mesh dim (an index or
    one of the mesh's dim_names). shard_optimizer(opt, stage) turns it on (globaltensor.zero)."""

    stage = 0

    def __init__(self, sharding_mesh_dim, mesh=None):
        if isinstance(sharding_mesh_dim, bool) or not isinstance(sharding_mesh_dim, (int, str)):
            raise TypeError(f"{type(self).__name__}: sharding_mesh_dim must be an int or a dim name, got "
                            f"{sharding_mesh_dim!r}")
        self._sharding_mesh_dim, self._mesh = sharding_mesh_dim, mesh
        self.enable_tensor_fusion = False

    sharding_mesh_dim = property(lambda self: self._sharding_mesh_dim)
    mesh = property(lambda self: self._mesh)

    def mesh_dim(self, params):
        """The mesh axis index: a name looked up in the mesh's dim_names (the stage's mesh, else the
        parameters' own ProcessMesh)."""
        dim = self._sharding_mesh_dim
        if isinstance(dim, int):
            return dim
        mesh = self._mesh or next((ProcessMesh.of(p.placement) for p in params if p.is_global), None)
        if mesh is None or dim not in mesh.dim_names:
            raise ValueError(f"{type(self).__name__}: sharding_mesh_dim {dim!r} is not a dim name of "
                             f"{mesh.dim_names if mesh is not None else 'any mesh (the parameters are local)'}")
        return mesh.dim_names.index(dim)

    def apply(self, optimizer):
        """Dense parameters go onto the stage's mesh (Replicate), then ZeRO `stage` on the mesh dim."""
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if self._mesh is not None:
            for p in params:
                if p.is_local:
                    replicate_in_place(p, self._mesh.placement)
        return _zero.attach(optimizer, self.stage, self.mesh_dim(params))

    def __call__(self, key, param, accumulator):
        """Paddle's shard_fn call: the accumulator laid out as this stage keeps optimizer states."""
        if not param.is_global:
            return accumulator
        zero = _zero.Zero(self.stage, self.mesh_dim([param]))
        return accumulator.to_global(placement=param.placement, sbp=zero.state_sbp(param))


class ShardingStage1(_ShardingStage):
    """Optimizer states Shard(0) on the mesh dim; the update on the shard, parameters gathered after."""
    stage = 1


class ShardingStage2(_ShardingStage):
    """Stage 1, and each gradient reduce-scattered into its shard (no full gradient kept)."""
    stage = 2


class ShardingStage3(_ShardingStage):
    """Stage 2, and the parameters themselves Shard(0) on the mesh dim (gathered where an op needs them)."""
    stage = 3


def shard_optimizer(optimizer, shard_fn=None, gradient_accumulation_steps=1):
    """Paddle's shard_optimizer. Without shard_fn the optimizer itself: each state (momentum, Adam's
    moments) is made with its parameter's placement and SBP, as Paddle's default passes the
    parameters' dist attrs down. With ShardingStage1/2/3(mesh_dim, mesh): ZeRO along that mesh dim
    (globaltensor.zero: states, gradients, parameters Shard(0) there), turned on in place; the same
    optimizer comes back (Paddle wraps it; every method is the optimizer's own here)."""
    if isinstance(shard_fn, _ShardingStage):
        return shard_fn.apply(optimizer)
    if shard_fn is not None:
        raise NotImplementedError("shard_optimizer: a shard_fn other than ShardingStage1/2/3 (placing the "
                                  "optimizer's states its own way) is not supported; pass a ShardingStage or none")
    return optimizer


__all__ = ["shard_optimizer", "ShardingStage1", "ShardingStage2", "ShardingStage3"]


_STAGES = {1: ShardingStage1, 2: ShardingStage2, 3: ShardingStage3}


def apply_strategy_sharding(optimizer, sharding):
    """dist.Strategy.sharding for to_static: with enable, ZeRO `stage` on the mesh dim named "dp"
    of the parameters' ProcessMesh (else dim 0); `degree` must be that dim's size (Paddle's
    default 8 reads as unset). Raises before anything is sharded."""
    if not sharding.enable or optimizer is None:
        return optimizer
    if sharding.stage not in _STAGES:
        raise ValueError(f"Strategy.sharding.stage must be 1, 2 or 3, got {sharding.stage!r}")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    held = next((p for p in params if p.is_global), None)
    if held is None:
        raise ValueError("Strategy.sharding: the parameters are not distributed (shard_tensor or a ProcessMesh "
                         "first); ZeRO shards along a mesh dim")
    mesh = ProcessMesh.of(held.placement)
    dim = mesh.dim_names.index("dp") if "dp" in mesh.dim_names else 0
    if sharding.degree not in (8, mesh.shape[dim]):
        raise ValueError(f"Strategy.sharding.degree {sharding.degree} differs from the size {mesh.shape[dim]} of "
                         f"mesh dim {mesh.dim_names[dim]!r} it shards along (mesh {mesh})")
    return shard_optimizer(optimizer, _STAGES[sharding.stage](dim))
