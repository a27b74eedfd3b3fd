"""Boxing: move a global tensor to another (placement, sbp) without changing its value."""
from ..backends.devices import device, move
from ..scope import recorder as _recorder
from ..sbp import broadcast, normalize
from ..tensor import Tensor
from .execution import _group, run
from .from_pieces import from_local
from .metadata import gather_pieces
from .planning import Plan, Step, plan

# What other modules take from globaltensor.boxing (dispatch, autograd, ops.conversion, creation,
# grad_buckets, debug, the tests and benchmarks); each name has one home in a submodule.
__all__ = ["Plan", "Step", "plan", "run", "convert", "from_local", "full_value", "gather_pieces", "_group"]


def convert(x, placement, sbp):
    """x in (placement, sbp) (None: keep): from a local tensor, or between layouts of a global one.
    Not differentiable (ops/conversion.py's to_global is); returns x itself when nothing changes."""
    from ..placement import placement as Placement
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f"placement must be a gt.placement, got {placement!r}")
    if placement is not None:
        placement.check_in_job("to_global")
    if x.is_local:
        if placement is None or sbp is None:
            raise ValueError("to_global on a local tensor needs both placement and sbp")
        if (rec := _recorder()) is not None:  # a graph keeps a local constant's conversion as a constant
            return rec.from_local(x, lambda: from_local(move(x._local, device(placement.type)), placement,
                                                                  sbp))
        return from_local(move(x._local, device(placement.type)), placement, sbp)
    placement = placement or x.placement
    if sbp is None:
        if placement.ndim != x.placement.ndim:
            raise ValueError(f"sbp is needed: the new placement has {placement.ndim} mesh axes, the tensor's "
                             f"{x.placement.ndim}")
        sbp = x.sbp
    sbp = normalize(sbp, placement.ndim, x.ndim)
    if placement == x.placement and sbp == x.sbp:
        return x
    if placement.type != x.placement.type:
        if (rec := _recorder()) is not None:
            raise RuntimeError(f"a graph cannot capture a move between devices ({x.placement.type} -> "
                               f"{placement.type}); move the tensors before calling it")
        return _across_devices(x, placement, sbp)
    p = plan(x.placement, x.sbp, placement, sbp, x.shape, x.dtype.itemsize)
    if (rec := _recorder()) is not None:
        return rec.convert(x, p)
    return Tensor(run(p, x._local, x.dtype), x.shape, x.dtype, placement, sbp)


def _across_devices(x, placement, sbp):
    """cpu <-> cuda: the boxing runs on the cpu side (before an upload, after a download), so
    each rank only moves its own piece between host and device."""
    from ..placement import placement as Placement
    if placement.type == "cpu":
        on_host = Placement("cpu", x.placement.ranks)
        x = Tensor(device(x.placement.type).to_host(x._local), x.shape, x.dtype, on_host, x.sbp)
        return convert(x, placement, sbp)
    boxed = convert(x, Placement("cpu", placement.ranks), sbp)
    return Tensor(device(placement.type).from_host(boxed._local), x.shape, x.dtype, placement, sbp)


def full_value(x):
    """The whole value on every rank, as a new numpy array (collective)."""
    from ..placement import placement as Placement
    everyone = Placement(x.placement.type, list(range(_world_size())))
    p = plan(x.placement, x.sbp, everyone, (broadcast,), x.shape, x.dtype.itemsize)
    value = run(p, x._local, x.dtype)
    dev = device(x.placement.type)
    return value.copy() if dev.is_host else dev.to_host(value)


def _world_size():
    from ..env import get_world_size
    return get_world_size()
