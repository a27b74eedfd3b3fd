"""OneFlow's own top-level ops that PyTorch lacks (broadcast_like, in_top_k, view), as composites."""
from ._front import tensors
from .gather_scatter import gather
from .reduction import sum  # noqa: A004
from .shape import expand, unsqueeze
from ..errors import IndexRuntimeError, ShapeError


def view(input, *shape):
    """flow.view(x, shape): x.view(shape) (the same piece in another shape, never a copy)."""
    return input.view(*shape)


def broadcast_like(input, like, broadcast_axes=None):
    """input expanded to like's shape (like's values unused): its dims align with like's last ones,
    or, with broadcast_axes, input lacks exactly those dims of like (they are inserted, size 1)."""
    input, like = tensors(input, like)
    x, target = tuple(input.shape), tuple(like.shape)
    if x == target:
        return input
    if len(target) < len(x):
        raise ShapeError(f"The number of sizes provided ({len(target)}) must be greater or equal to the number of "
                         f"dimensions in the tensor ({len(x)}). Target sizes: {target}. Tensor sizes: {x}")
    if broadcast_axes and len(x) < len(target):
        for axis in sorted(a % len(target) for a in broadcast_axes):
            input = unsqueeze(input, axis)
    aligned = (1,) * (len(target) - input.ndim) + tuple(input.shape)
    for d, (have, want) in enumerate(zip(aligned, target)):
        if have not in (1, want):
            raise ShapeError(f"The expanded size of the tensor ({want}) must match the existing size ({have}) at "
                             f"non-singleton dimension {d}. Target sizes: {target}. Tensor sizes: {x}")
    return expand(input, target)


def in_top_k(targets, predictions, k):
    """Whether each row's target class is among the row's k largest predictions (bool, one per
    row): fewer than k classes score strictly higher than the target (ties count in)."""
    targets, predictions = tensors(targets, predictions)
    if targets.ndim == 0 or predictions.ndim == 0 or targets.shape[0] != predictions.shape[0]:
        raise ShapeError(f"The num of targets must equal the num of predictions (shapes {tuple(targets.shape)} "
                         f"and {tuple(predictions.shape)})")
    if targets.ndim != 1:
        raise ShapeError(f"The dimension of targets must be 1 (shape {tuple(targets.shape)})")
    if predictions.ndim != 2:
        raise ShapeError(f"The dimension of predictions must be 2 (shape {tuple(predictions.shape)})")
    if targets.dtype.name not in ("int32", "int64"):
        raise IndexRuntimeError(f"targets data type must be index type (int32 or int64), got {targets.dtype}")
    score = gather(predictions, 1, unsqueeze(targets, 1))
    higher = sum((predictions > score).to(predictions.dtype), 1)
    return higher < k
