"""paddle.autograd: PyLayer (a custom forward and backward) and backward/grad."""
from ... import autograd as _autograd
from ...autograd import no_grad

__all__ = ["PyLayer", "PyLayerContext", "backward", "grad", "no_grad"]


class PyLayerContext(_autograd.FunctionCtx):
    """What forward hands to backward: save_for_backward(*tensors), saved_tensor()."""

    def saved_tensor(self):
        return self.saved_tensors


class PyLayer(_autograd.Function):
    """Subclass with static forward(ctx, *args) and backward(ctx, *output_grads); call
    Cls.apply(*args). Backward returns one gradient per tensor input (None for none)."""

    context = PyLayerContext


def backward(tensors, grad_tensors=None, retain_graph=False):
    for i, t in enumerate(tensors):
        t.backward(None if grad_tensors is None else grad_tensors[i])


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=False, no_grad_vars=None):
    """paddle.grad / paddle.autograd.grad: d outputs / d inputs as a list, without touching .grad."""
    return list(_autograd.grad(outputs, inputs, grad_outputs, allow_unused=allow_unused))
