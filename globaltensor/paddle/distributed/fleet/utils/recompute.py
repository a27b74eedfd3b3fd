"""paddle.distributed.fleet.utils.recompute: Paddle's spelling of activation recompute (gt.utils.checkpoint)."""
import logging

from .....autograd import is_grad_enabled, no_grad
from .....tensor import Tensor
from .....utils.checkpoint import _recompute

__all__ = ["recompute", "recompute_sequential"]
_log = logging.getLogger("globaltensor.paddle.recompute")


def recompute(function, *args, **kwargs):
    """Run function(*args) keeping only its inputs; backward runs it again, with the RNG state of
    forward when preserve_rng_state=True (dropout draws the same mask). As Paddle: both options come
    in kwargs; use_reentrant=True (the default) takes no other kwargs and, when no input needs a
    gradient, warns and gives none (the parameters inside too); use_reentrant=False does."""
    preserve = kwargs.pop("preserve_rng_state", True)
    use_reentrant = kwargs.pop("use_reentrant", True)
    if use_reentrant and kwargs:
        raise ValueError("Error, if you want to send kwargs(dict parameter) to function, please set "
                         "use_reentrant=False.")
    if not is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        _log.warning("[Recompute]: None of the inputs to current recompute block need grad, therefore there is "
                     "NO need to recompute this block in backward !")
        with no_grad():
            return function(*args)
    return _recompute(function, args, kwargs, preserve)


def recompute_sequential(ctx, functions, *args, **kwargs):
    """Paddle's recompute_sequential(ctx={"segments": n, "preserve_rng_state": b}, functions, *args):
    the layers in `segments` chunks, each recomputed."""
    segments = ctx.get("segments", 1)
    preserve = ctx.get("preserve_rng_state", True)
    layers = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = (len(layers) + segments - 1) // segments

    def run(chunk):
        def forward(*xs):
            for layer in chunk:
                xs = layer(*xs) if isinstance(xs, tuple) else layer(xs)
            return xs
        return forward

    for start in range(0, len(layers), size):
        args = recompute(run(layers[start:start + size]), *args, preserve_rng_state=preserve, **kwargs)
        args = args if isinstance(args, tuple) else (args,)
    return args[0] if len(args) == 1 else args
