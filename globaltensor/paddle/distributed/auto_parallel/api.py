"""Paddle's auto-parallel API over placements and SBPs: ProcessMesh is a placement, a list of
Paddle placements (one per mesh dim) is an SBP signature."""
import weakref

from ....nn.module import Parameter
from ....placement import placement as _placement
from ....sbp import broadcast
from ....tensor import Tensor
from ...framework import device_type
from .grad_rule import follows_paddles_grad_rule
from .placement_type import Partial, Placement, Replicate, Shard

_meshes = weakref.WeakValueDictionary()  # placement -> the newest ProcessMesh on it (its dim names)


class ProcessMesh:
    """paddle.distributed.ProcessMesh(mesh, dim_names=None): ranks as an N-D array, with names."""

    def __init__(self, mesh, dim_names=None, shape=None, process_ids=None):
        if mesh is None:
            import numpy as np
            mesh = np.asarray(process_ids).reshape(shape).tolist()
        self.placement = _placement(device_type(), mesh)
        self.shape = list(self.placement.hierarchy)
        self.process_ids = [int(r) for r in self.placement.rank_list()]
        self.dim_names = list(dim_names) if dim_names is not None else [f"d{i}" for i in range(len(self.shape))]
        if len(self.dim_names) != len(self.shape):
            raise ValueError(f"ProcessMesh: {len(self.dim_names)} dim_names for a mesh of {len(self.shape)} dims")
        _meshes[self.placement] = self

    @classmethod
    def of(cls, placement):
        """The ProcessMesh of a placement: the newest one made on it (its dim names), else a new one."""
        found = _meshes.get(placement)
        return found if found is not None else cls(placement.ranks.tolist())

    ndim = property(lambda self: len(self.shape))

    def get_dim_size(self, dim):
        return self.shape[self.dim_names.index(dim) if isinstance(dim, str) else dim]

    def __eq__(self, other):
        return isinstance(other, ProcessMesh) and self.placement == other.placement

    def __hash__(self):
        return hash(self.placement)

    def __repr__(self):
        return f"ProcessMesh(shape={self.shape}, process_ids={self.process_ids}, dim_names={self.dim_names})"

    def __str__(self):  # as Paddle prints it
        return f"shape {self.shape}, process_ids {self.process_ids}, dim_names {self.dim_names}"


def _sbp(mesh, placements):
    if len(placements) != mesh.ndim:
        raise ValueError(f"{len(placements)} placements for a mesh of {mesh.ndim} dims: Paddle lists one per mesh dim")
    return tuple(p.sbp() for p in placements)


def shard_tensor(data, mesh, placements, dtype=None, place=None, stop_gradient=None):
    """A global tensor on `mesh` laid out as `placements`, from the full value on every rank
    (rank 0's copy is the one taken). A Parameter stays a Parameter (so a layer keeps it)."""
    if not isinstance(data, Tensor):
        from ... import to_tensor
        data = to_tensor(data, dtype=dtype)
    sbp = _sbp(mesh, placements)
    whole = data.to_global(placement=mesh.placement, sbp=(broadcast,) * mesh.ndim) if data.is_local else data
    out = whole.to_global(placement=mesh.placement, sbp=sbp).detach()
    if isinstance(data, Parameter):  # the same kind (a Paddle parameter keeps its name and learning rate)
        out, attrs = type(data)(out), getattr(data, "__dict__", None)
        if attrs:
            out.__dict__.update(attrs)
    requires = data.requires_grad if stop_gradient is None else not stop_gradient
    out.requires_grad = requires
    return follows_paddles_grad_rule(out)


def replicate_in_place(t, placement):
    """A local tensor becomes, in place (the same object: layers and optimizers keep it), the
    global tensor replicated on `placement` with rank 0's values. Paddle's rule for a dense
    parameter next to distributed ones: it is replicated on their mesh."""
    if t.is_global:
        return t
    whole = t.detach().to_global(placement=placement, sbp=(broadcast,) * placement.ndim)
    t._local, t._placement, t._sbp, t._layout = whole._local, placement, whole.sbp, None
    return follows_paddles_grad_rule(t)


def replicate_dense_parameters(layer, placement):
    """Every local parameter and buffer of the layer replicated on `placement`, in place."""
    for p in layer.parameters():
        replicate_in_place(p, placement)
    for b in layer.buffers():
        if isinstance(b, Tensor):
            replicate_in_place(b, placement)


def reshard(dist_tensor, mesh, placements):
    """The tensor moved to `mesh` laid out as `placements` (differentiable)."""
    return dist_tensor.to_global(placement=mesh.placement, sbp=_sbp(mesh, placements))


class ShardDataloader:
    """A dataloader whose batches come as global tensors: inputs on meshes[0], a last field (the
    label) on meshes[-1]; split along dim 0 over the mesh dims named by shard_dims, else
    replicated. Every rank reads the same batches (is_dataset_splitted=False, Paddle's default)."""

    def __init__(self, dataloader, meshes, input_keys=None, shard_dims=None, is_dataset_splitted=False):
        if is_dataset_splitted:
            raise NotImplementedError("shard_dataloader(is_dataset_splitted=True) is not supported: every rank reads "
                                      "the whole batch")
        self.dataloader = dataloader
        self.meshes = list(meshes) if isinstance(meshes, (list, tuple)) else [meshes]
        self.input_keys, self.shard_dims = input_keys, shard_dims

    def _placements(self, mesh):
        dims = self.shard_dims
        if isinstance(dims, (list, tuple)):
            dims = dims[self.meshes.index(mesh)] if len(dims) == len(self.meshes) else dims[0]
        if dims is None:
            return [Replicate()] * mesh.ndim
        at = mesh.dim_names.index(dims) if isinstance(dims, str) else int(dims)
        return [Shard(0) if i == at else Replicate() for i in range(mesh.ndim)]

    def _convert(self, value, mesh):
        if isinstance(value, Tensor):
            return shard_tensor(value, mesh, self._placements(mesh), stop_gradient=True)
        return value

    def __iter__(self):
        for batch in self.dataloader:
            if isinstance(batch, dict):
                yield {k: self._convert(v, self.meshes[0]) for k, v in batch.items()}
                continue
            fields = list(batch) if isinstance(batch, (list, tuple)) else [batch]
            last = len(fields) - 1
            out = [self._convert(v, self.meshes[-1] if i == last and i > 0 else self.meshes[0])
                   for i, v in enumerate(fields)]
            yield out if isinstance(batch, (list, tuple)) else out[0]

    def __call__(self):
        return iter(self)

    def __len__(self):
        return len(self.dataloader)


def shard_dataloader(dataloader, meshes, input_keys=None, shard_dims=None, is_dataset_splitted=False):
    return ShardDataloader(dataloader, meshes, input_keys, shard_dims, is_dataset_splitted)


__all__ = ["ProcessMesh", "Placement", "Shard", "Replicate", "Partial", "shard_tensor", "reshard",
           "shard_dataloader", "ShardDataloader", "replicate_in_place", "replicate_dense_parameters"]
