"""Paddle's placements (Shard, Replicate, Partial) as values, and dim maps <-> placements."""
from ....sbp import broadcast, partial_sum, split


class Placement:
    """One mesh dim's layout; placements compare by value and hash, as Paddle's."""

    def is_shard(self, dim=None):
        return False

    def is_replicated(self):
        return False

    def is_partial(self):
        return False

    def __eq__(self, other):
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self).__name__,) + self._key())

    def _key(self):
        return ()

    def __str__(self):
        return repr(self)


class Shard(Placement):
    def __init__(self, dim):
        self.dim = int(dim)

    def get_dim(self):
        return self.dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def sbp(self):
        return split(self.dim)

    def _key(self):
        return (self.dim,)

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class Replicate(Placement):
    def is_replicated(self):
        return True

    def sbp(self):
        return broadcast

    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    def __init__(self, reduce_type=None):
        if reduce_type not in (None, "sum", 0) and getattr(reduce_type, "name", None) not in ("kRedSum", "SUM"):
            raise NotImplementedError("Partial: only a sum of the pieces (the default) is supported")

    def is_partial(self):
        return True

    def sbp(self):
        return partial_sum

    def __repr__(self):
        return "Partial(reduce_type=SUM)"


def to_placements(dim_map, mesh, partial_idx=()):
    """Paddle's dims mapping (tensor dim -> mesh dim, -1: none) and partial mesh dims -> one
    placement per mesh dim."""
    placements = [Replicate() for _ in range(len(mesh.shape))]
    for i in partial_idx:
        placements[i] = Partial()
    for tensor_dim, mesh_dim in enumerate(dim_map):
        if mesh_dim >= 0:
            placements[mesh_dim] = Shard(tensor_dim)
    return placements


def to_dim_map(placements, tensor_dims):
    """(dims mapping, {mesh dim: reduce type} of the partial ones) of a placement list."""
    dim_map, partial = [-1] * tensor_dims, {}
    for mesh_dim, p in enumerate(placements):
        if p.is_shard():
            dim_map[p.get_dim()] = mesh_dim
        elif p.is_partial():
            partial[mesh_dim] = "SUM"
    return dim_map, partial


def of_sbp(sbp):
    """The Paddle placements of a gt SBP signature (one per mesh axis)."""
    return [Shard(s.dim) if isinstance(s, split) else Partial() if s is partial_sum else Replicate() for s in sbp]
