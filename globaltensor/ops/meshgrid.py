"""meshgrid: coordinate grids from scalars and 1-D tensors, after OneFlow's checks of its arguments."""
from . import _front
from .shape import expand, reshape
from ..errors import DTypeError, PlacementError, ShapeError


def _check_meshgrid(tensors, indexing):
    """OneFlow's checks of meshgrid's tensors, in its order; the first that fails raises."""
    if not tensors:
        raise ShapeError("meshgrid expects a non-empty TensorList")
    for a, b in zip(tensors, tensors[1:]):
        if a.dtype != b.dtype:
            raise DTypeError(f"meshgrid expects all tensors to have the same dtype (got {a.dtype} and {b.dtype})")
        if a.is_global != b.is_global:
            raise PlacementError(f"meshgrid expects all tensors are {'global' if a.is_global else 'local'} tensor")
        if a.is_global and a.placement != b.placement:
            raise PlacementError(f"meshgrid expects all tensors to have the same placement ({a.placement} and "
                                 f"{b.placement})")
    if indexing not in ("ij", "xy"):
        raise ValueError(f'meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for x in tensors:
        if x.ndim > 1:
            raise ShapeError(f"Expected scalar or 1D tensor in the tensor list but got {x.ndim} "
                             f"(shape {tuple(x.shape)})")


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors (indexing "ij" or "xy"), as numpy's meshgrid."""
    tensors = _front.tensors(*(tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors))
    _check_meshgrid(tensors, indexing)
    tensors = [reshape(x, (1,)) if x.ndim == 0 else x for x in tensors]
    shape = [x.shape[0] for x in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    grids = []
    for i, x in enumerate(tensors):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and len(tensors) >= 2 else i
        view = [1] * len(tensors)
        view[axis] = x.shape[0]
        grids.append(expand(reshape(x, view), shape))
    return tuple(grids)  # as PyTorch (Paddle's face gives a list)
