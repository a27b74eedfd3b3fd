"""nn.utils: gradient clipping over global gradients."""
from ..autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale the gradients in place so their total norm is at most max_norm; returns the norm
    before clipping (a Python float, the same on every rank)."""
    from .. import ops
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    with no_grad():
        if norm_type == float("inf"):
            total = max(ops.max(ops.abs(g)).item() for g in grads)
        else:
            total = sum(ops.sum(ops.abs(g) ** norm_type).item() for g in grads) ** (1.0 / norm_type)
        coef = max_norm / (total + 1e-6)
        if coef < 1:
            for g in grads:
                g._local[...] = g._local * coef
    return total
