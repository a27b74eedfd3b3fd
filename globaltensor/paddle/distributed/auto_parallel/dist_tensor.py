"""Paddle's DistTensor accessors and helpers: _local_value, placements, process_mesh, dist_attr, shard_layer."""
from ....sbp import broadcast
from ....tensor import Tensor
from .api import ProcessMesh, _sbp, replicate_dense_parameters
from .grad_rule import follows_paddles_grad_rule
from .placement_type import of_sbp, to_dim_map


class DistAttr:
    """paddle.distributed.DistAttr(mesh, sharding_specs): per tensor dim the mesh dim name it is
    sharded over (None: not sharded); .process_mesh, .sharding_specs, .dims_mapping."""

    def __init__(self, mesh, sharding_specs):
        if not isinstance(mesh, ProcessMesh):
            raise TypeError(f"DistAttr: mesh must be a ProcessMesh, got {type(mesh).__name__}")
        self.process_mesh, self.sharding_specs = mesh, list(sharding_specs)
        unknown = [s for s in self.sharding_specs if s is not None and s not in mesh.dim_names]
        if unknown:
            raise ValueError(f"DistAttr: {unknown} are not dim names of the mesh ({mesh.dim_names})")
        self.dims_mapping = [-1 if s is None else mesh.dim_names.index(s) for s in self.sharding_specs]
        self.partial_dims = []

    def __repr__(self):
        return f"DistAttr(process_mesh={self.process_mesh}, dims_mapping={self.dims_mapping}, partial={self.partial_dims})"


def _dist_attr(t):
    mesh = ProcessMesh.of(t.placement)
    dims, partial = to_dim_map(of_sbp(t.sbp), t.ndim)
    attr = DistAttr(mesh, [None if d < 0 else mesh.dim_names[d] for d in dims])
    attr.partial_dims = sorted(partial)
    return attr


def _need_dist(t, what):
    if not t.is_global:
        raise RuntimeError(f"{what}: the tensor is not a distributed tensor (shard_tensor / dtensor_from_local makes one)")
    return t


def dtensor_from_local(local_tensor, mesh, placements):
    """A distributed tensor whose piece on this rank is `local_tensor` (Shard: the pieces
    concatenate; Replicate: rank 0's along that mesh dim; Partial: the pieces add up)."""
    out = local_tensor.to_global(placement=mesh.placement, sbp=_sbp(mesh, placements))
    return follows_paddles_grad_rule(out)


def unshard_dtensor(dist_tensor):
    """The whole value as a dense (local) tensor on every rank (differentiable)."""
    t = _need_dist(dist_tensor, "unshard_dtensor")
    return t.to_global(sbp=(broadcast,) * t.placement.ndim).to_local()


def shard_layer(layer, process_mesh, shard_fn=None, input_fn=None, output_fn=None):
    """Paddle's shard_layer: shard_fn(name, sublayer, process_mesh) for every sublayer (it shards
    the parameters it chooses, e.g. with shard_tensor); every parameter left dense is replicated on
    the mesh; input_fn(inputs, mesh) / output_fn(outputs, mesh) wrap forward. Returns the layer."""
    if not isinstance(process_mesh, ProcessMesh):
        raise TypeError(f"shard_layer: process_mesh must be a ProcessMesh, got {type(process_mesh).__name__}")
    if shard_fn is not None:
        for name, sub in layer.named_modules():
            shard_fn(name, sub, process_mesh)
    replicate_dense_parameters(layer, process_mesh.placement)
    if input_fn is not None:
        layer.register_forward_pre_hook(lambda module, inputs: input_fn(inputs, process_mesh))
    if output_fn is not None:
        layer.register_forward_hook(lambda module, inputs, outputs: output_fn(outputs, process_mesh))
    return layer


# Paddle's accessors of a distributed tensor, on every tensor (names gt code does not use)
Tensor._local_value = lambda self: Tensor(self._local) if self.is_global else self
Tensor._local_shape = property(lambda self: list(self._local.shape))
Tensor.placements = property(lambda self: of_sbp(self.sbp) if self.is_global else None)
Tensor.process_mesh = property(lambda self: ProcessMesh.of(self.placement) if self.is_global else None)
Tensor.dist_attr = property(lambda self: _dist_attr(self) if self.is_global else None)
Tensor.is_dist = lambda self: self.is_global
