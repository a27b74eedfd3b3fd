"""placement: which ranks hold a tensor, arranged as a 1-D or N-D mesh. Frozen value type."""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from .backends import devices
from .env import get_world_size

_TYPES = ("cpu", "cuda")


class placement:  # noqa: N801 - the public name is gt.placement, as in OneFlow
    """Device type plus a mesh of ranks; compares by value, hashable, immutable.

    `ranks` is a list (1-D mesh) or a nested list / numpy array (N-D mesh). Mesh axes are
    ordered major to minor: axis 0 is the outermost list level, and rank `ranks[c0][c1]`
    has mesh coordinate (c0, c1).

    Examples:
        >>> gt.placement("cpu", [0, 1])              # a 1-D mesh of two ranks
        >>> mesh = gt.placement("cpu", [[0, 1], [2, 3]])
        >>> mesh.mesh_coord(2), mesh[1]             # (1, 0) and the row gt.placement("cpu", [2, 3])
    """

    __slots__ = ("_type", "_ranks", "_key", "_coords", "_hash", "_beyond")

    def __init__(self, type: str, ranks: Union[Sequence, np.ndarray]) -> None:  # noqa: A002 - OneFlow's keyword
        if type not in _TYPES:
            raise ValueError(f"placement type must be one of {_TYPES}, got {type!r}")
        try:
            array = np.array(ranks, dtype=np.int64)
        except (ValueError, TypeError):
            raise ValueError(f"placement ranks must be a (nested) list of ints forming a mesh, got {ranks!r}") from None
        if array.ndim == 0:
            array = array.reshape(1)
        if array.size == 0:
            raise ValueError("placement ranks must not be empty")
        flat = array.ravel().tolist()
        if len(set(flat)) != len(flat):
            dups = sorted({r for r in flat if flat.count(r) > 1})
            raise ValueError(f"placement ranks must be distinct; {dups} appear more than once in {array.tolist()}")
        size = get_world_size()
        outside = [r for r in flat if not 0 <= r < size]
        beyond = None  # built as OneFlow builds it; a tensor placed on it raises (check_in_job)
        if outside:
            need = max(flat) + 1
            beyond = (f"placement ranks {outside} are outside [0, {size}): this job has {size} process"
                      f"{'es' if size > 1 else ''} (WORLD_SIZE={size}) and the placement needs {need}; start "
                      f"one per rank: python -m globaltensor.distributed.launch --nproc_per_node {need} "
                      f"script.py, or gt.distributed.spawn(fn, nprocs={need})")
        if type == "cuda":  # after the checks of the ranks: bad arguments are a ValueError everywhere
            devices.require_cuda(f"placement(\"cuda\", {array.tolist()!r})")
        array.setflags(write=False)
        object.__setattr__(self, "_type", type)
        object.__setattr__(self, "_ranks", array)
        object.__setattr__(self, "_key", (type, array.shape, tuple(flat)))
        object.__setattr__(self, "_coords", {r: tuple(int(c) for c in np.argwhere(array == r)[0]) for r in flat})
        object.__setattr__(self, "_hash", hash(self._key))
        object.__setattr__(self, "_beyond", beyond)

    def check_in_job(self, what: str = "a tensor") -> None:
        """Raise ValueError when a rank of this placement is not in the job: a placement may name
        ranks beyond it (OneFlow builds one), but nothing can be placed on it."""
        if self._beyond is not None:
            raise ValueError(f"{what} on {self}: {self._beyond}")

    @classmethod
    def all(cls, type: str) -> placement:  # noqa: A002
        """Every rank of the job, as a 1-D mesh."""
        return cls(type, list(range(get_world_size())))

    def __setattr__(self, name, value):
        raise AttributeError("placement is immutable")

    type = property(lambda self: self._type, doc='"cpu" or "cuda"')
    ranks = property(lambda self: self._ranks, doc="the mesh of ranks (read-only numpy array)")
    hierarchy = property(lambda self: self._ranks.shape, doc="the mesh shape")
    ndim = property(lambda self: self._ranks.ndim, doc="number of mesh axes")
    size = property(lambda self: self._ranks.size, doc="number of ranks")

    def rank_list(self) -> list[int]:
        """The ranks in mesh order (row-major)."""
        return list(self._key[2])

    def __contains__(self, rank: int) -> bool:
        return rank in self._coords

    def mesh_coord(self, rank: int) -> Optional[tuple[int, ...]]:
        """The mesh coordinate of `rank`, or None when the rank is not in the placement."""
        return self._coords.get(rank)

    def axis_ranks(self, mesh_dim: int, mesh_coord: Sequence[int]) -> tuple[int, ...]:
        """The ranks along mesh axis `mesh_dim` through `mesh_coord` (the other coords fixed)."""
        return self.axes_ranks((mesh_dim,), mesh_coord)

    def axes_ranks(self, mesh_dims: Sequence[int], mesh_coord: Sequence[int]) -> tuple[int, ...]:
        """The ranks of the sub-mesh spanned by `mesh_dims` through `mesh_coord`, row-major."""
        index = list(mesh_coord)
        for d in mesh_dims:
            index[d] = slice(None)
        return tuple(int(r) for r in self._ranks[tuple(index)].reshape(-1))

    def __getitem__(self, index: Union[int, slice]) -> placement:
        """The sub-placement along mesh axis 0: an int drops that axis (row i of a 2-D mesh is
        a 1-D placement; a 1-D placement's element i is the 1-D placement of that one rank), a
        slice keeps it (rows i:j)."""
        if isinstance(index, slice):
            rows = self._ranks[index]
            if rows.shape[0] == 0:
                raise IndexError(f"{index} selects no row of {self}")
            return placement(self._type, rows.tolist())
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            n = self._ranks.shape[0]
            if not -n <= index < n:
                raise IndexError(f"placement index {index} is out of range for mesh axis 0 of size {n}")
            row = self._ranks[index]
            return placement(self._type, row.tolist() if row.ndim else [int(row)])
        raise TypeError(f"a placement is indexed by an int or a slice along mesh axis 0, got {index!r}")

    def __len__(self) -> int:
        return self._ranks.shape[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, placement) and other._key == self._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f'gt.placement(type="{self._type}", ranks={self._ranks.tolist()})'

    __str__ = __repr__

    def __reduce__(self):
        return (placement, (self._type, self._ranks.tolist()))
