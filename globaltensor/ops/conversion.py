"""to_global, differentiable: boxing's conversion forward, the reverse conversion backward."""
from .. import autograd, layout
from ..backends.devices import of_array
from ..boxing import convert
from ..placement import placement as Placement
from ..sbp import broadcast, normalize
from ..tensor import Tensor


def to_global(x, placement=None, sbp=None, grad_sbp=None):
    """x.to_global(...): from a local tensor, or between layouts of a global one. The gradient
    goes back by the reverse conversion (through grad_sbp first, when given)."""
    where = placement if placement is not None else x.placement
    if grad_sbp is not None and isinstance(where, Placement):  # checked before any collective
        grad_sbp = normalize(grad_sbp, where.ndim, x.ndim)
    out = convert(x, placement, sbp)
    if out is not x and x.requires_grad and autograd.is_grad_enabled():
        autograd.record("to_global", _to_global_backward, [x], [out], {"grad_sbp": grad_sbp})
    return out


def _to_global_backward(ctx, g):
    """d out / d x: the gradient converted back to x's layout; for a local x, the part of the
    whole gradient where x's piece lay (zero where the conversion ignored it)."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    if ctx.static["grad_sbp"] is not None:
        g = g.to_global(sbp=ctx.static["grad_sbp"])
    if x.is_local:
        box, counts = out._source
        whole = g.to_global(placement=out.placement, sbp=(broadcast,) * out.placement.ndim)._local
        if box is None or not counts:
            return Tensor(of_array(whole).xp.zeros(x.shape, x.dtype.np))
        return Tensor(whole[layout.box_slices(box)].copy())
    return g.to_global(placement=x.placement, sbp=x.sbp)
