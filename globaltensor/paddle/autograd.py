"""paddle.autograd: PyLayer (a custom forward and backward) and backward/grad."""
from .. import autograd as _autograd
from ..autograd import no_grad
from ..tensor import Tensor

__all__ = ["PyLayer", "PyLayerContext", "backward", "grad", "no_grad"]


class PyLayerContext:
    """What forward hands to backward: save_for_backward(*tensors), saved_tensor()."""

    def __init__(self):
        self._saved = ()

    def save_for_backward(self, *tensors):
        self._saved = tensors

    def saved_tensor(self):
        return self._saved


class PyLayer:
    """Subclass with static forward(ctx, *args) and backward(ctx, *output_grads); call
    Cls.apply(*args). Backward returns one gradient per tensor input (None for none)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = PyLayerContext()
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        inputs = [a for a in args if isinstance(a, Tensor)]
        if _autograd.is_grad_enabled() and any(t.requires_grad for t in inputs):
            _autograd.record(f"PyLayer {cls.__name__}", _bridge(cls, ctx, len(inputs)), inputs,
                             [o for o in outs if isinstance(o, Tensor)], {})
        return out


def _bridge(cls, user_ctx, n_inputs):
    """autograd's backward(ctx, *grads) -> the user's backward(user_ctx, *grads)."""
    def backward(ctx, *grads):
        found = cls.backward(user_ctx, *grads)
        found = found if isinstance(found, (tuple, list)) else (found,)
        if len(found) != n_inputs:
            raise RuntimeError(f"{cls.__name__}.backward returned {len(found)} gradients for {n_inputs} tensor inputs")
        return tuple(found)
    return backward


def backward(tensors, grad_tensors=None, retain_graph=False):
    for i, t in enumerate(tensors):
        t.backward(None if grad_tensors is None else grad_tensors[i])


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=False, no_grad_vars=None):
    """paddle.grad / paddle.autograd.grad: d outputs / d inputs as a list, without touching .grad."""
    return list(_autograd.grad(outputs, inputs, grad_outputs, allow_unused=allow_unused))
