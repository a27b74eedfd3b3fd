"""nn.utils: gradient clipping over global gradients."""
from .. import creation
from ..autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale the gradients in place so their total norm is at most max_norm; returns the total
    norm before clipping as a 0-d tensor, as PyTorch (global, broadcast, on the first gradient's
    placement when the gradients are global; no host synchronisation)."""
    from .. import ops
    from ..tensor import Tensor
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return creation.tensor(0.0)
    norm_type = float(norm_type)
    with no_grad():
        if norm_type == float("inf"):
            total = _together([ops.amax(ops.abs(g)) for g in grads], grads[0], ops.maximum)
        else:
            parts = [ops.sum(g * g) if norm_type == 2 else ops.sum(ops.abs(g) ** norm_type) for g in grads]
            total = _together(parts, grads[0], ops.add) ** (1.0 / norm_type)
        coef = ops.clip(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef if g.is_local or g.placement == coef.placement else _on(coef, g.placement))
    return total


def _on(t, placement):
    from ..sbp import broadcast
    return t.to_global(placement=placement, sbp=(broadcast,) * placement.ndim)


def _together(parts, first, combine):
    """The 0-d parts combined into one on the first gradient's placement (partial sums stay
    partial until the root: one all_reduce in all when every gradient has that placement)."""
    out = None
    for part in parts:
        if first.is_global and part.placement != first.placement:
            part = _on(part, first.placement)
        out = part if out is None else combine(out, part)
    return out
