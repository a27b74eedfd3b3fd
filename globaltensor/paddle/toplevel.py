"""Paddle's top-level utilities of the 2.0 API index: build facts, places, ParamAttr, assign,
shape/rank, the generator's state, summary, flags, device_guard and complex numbers' spellings."""
import contextlib
import os

import numpy as np

from .. import _native
from .. import ops as _ops
from .. import random as _random
from ..autograd import no_grad
from ..creation import tensor as _tensor
from ..tensor import Tensor


def is_compiled_with_cuda():
    """Whether globaltensor's extension was built with CUDA (GLOBALTENSOR_BUILD_CUDA)."""
    return bool(_native.with_cuda)


def is_compiled_with_xpu():
    return False


def get_cudnn_version():
    """None: globaltensor uses no cuDNN (its GPU kernels are cuBLASLt's and its own)."""
    return None


class CUDAPinnedPlace:
    """paddle.CUDAPinnedPlace(): host memory (pieces of cpu placements live in shared memory)."""

    type = "cpu"

    def __repr__(self):
        return "Place(gpu_pinned)"


class ParamAttr:
    """paddle.ParamAttr: how a layer makes a parameter: its name, initializer (a
    paddle.nn.initializer, or any callable filling the parameter in place), learning_rate (a factor
    on the optimizer's) and trainable flag; a regularizer is refused (use the optimizer's weight_decay)."""

    def __init__(self, name=None, initializer=None, learning_rate=1.0, regularizer=None, trainable=True,
                 do_model_average=False, need_clip=True):
        if regularizer is not None:
            raise NotImplementedError("ParamAttr: regularizer is not supported; use the optimizer's weight_decay")
        self.name, self.initializer, self.trainable = name, initializer, trainable
        self.learning_rate, self.regularizer, self.need_clip = float(learning_rate), regularizer, need_clip

    @staticmethod
    def _to_attr(arg):
        """Paddle's reading of a weight_attr / bias_attr: None a default ParamAttr, a string its name,
        an initializer its initializer, False no parameter (returned as False)."""
        if arg is None:
            return ParamAttr()
        if arg is False or isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if callable(arg):
            return ParamAttr(initializer=arg)
        raise TypeError(f"a ParamAttr, a name, an initializer, None or False, got {type(arg).__name__}")


def assign(x, output=None):
    """A copy of x (a tensor, an array, a list or a number); with output, copied into it in place."""
    value = x.clone().detach() if isinstance(x, Tensor) else _tensor(np.asarray(x))
    if output is None:
        return value
    with no_grad():
        output.copy_(value)
    return output


def shape(input):
    """The shape of input as an int32 tensor."""
    return _tensor(np.asarray(input.shape, np.int32))


def rank(input):
    """The number of dims of input as an int32 tensor."""
    return _tensor(np.asarray(input.ndim, np.int32))


def is_empty(x):
    """Whether x has no element (a bool tensor)."""
    return _tensor(np.asarray(x.numel() == 0))


def tanh_(x):
    """tanh in place."""
    return x.tanh_()


def get_cuda_rng_state():
    """The generator's state, in a list as Paddle's one per GPU: globaltensor has one generator, the
    same on every device and layout."""
    return [_random.get_rng_state()]


def set_cuda_rng_state(state_list):
    _random.set_rng_state(state_list[0])


def get_flags(flags):
    """{flag: value} of FLAGS_* environment variables (Paddle reads its flags from there too);
    None for a flag that is not set."""
    names = [flags] if isinstance(flags, str) else list(flags)
    return {n: os.environ.get(n) for n in names}


@contextlib.contextmanager
def device_guard(device=None):
    """Static mode's device_guard: a placement says where each piece lives, so the ops inside run
    where their inputs are; the device name is checked."""
    if device is not None and str(device).split(":")[0] not in ("cpu", "gpu"):
        raise ValueError(f"device_guard: unknown device {device!r}; use 'cpu' or 'gpu'")
    yield


def summary(net, input_size=None, dtypes=None, input=None):
    """Print each sublayer with its output shape (when input_size or input is given: one forward
    pass on zeros or on input) and its parameter count; returns {'total_params',
    'trainable_params'}, as paddle.summary."""
    shapes, hooks = {}, []
    leaves = [(name, m) for name, m in net.named_modules() if name and not list(m.children())]
    def seen(name):
        def hook(module, args, out):  # returns None: the output stays
            shapes.setdefault(name, list(getattr(out, "shape", [])))
        return hook

    for name, m in leaves:
        hooks.append(m.register_forward_hook(seen(name)))
    try:
        if input is None and input_size is not None:
            sizes = [input_size] if isinstance(input_size[0], (int, type(None))) else list(input_size)
            kinds = dtypes if isinstance(dtypes, (list, tuple)) else [dtypes] * len(sizes)
            input = [_ops.zeros(*[1 if s in (None, -1) else s for s in size], dtype=d or "float32")
                     for size, d in zip(sizes, kinds)]
        if input is not None:
            with no_grad():
                net(*(input if isinstance(input, (list, tuple)) else [input]))
    finally:
        for h in hooks:
            h.remove()
    rows, total, trainable = [], 0, 0
    for name, m in leaves:
        count = sum(int(p.numel()) for p in m.parameters())
        rows.append((f"{name} ({type(m).__name__})", str(shapes.get(name, "-")), f"{count:,}"))
    for p in net.parameters():
        total += int(p.numel())
        trainable += int(p.numel()) if p.requires_grad else 0
    widths = [max(len(r[i]) for r in rows + [("Layer (type)", "Output Shape", "Param #")]) for i in range(3)]
    line = "-" * (sum(widths) + 6)
    text = [line, "  ".join(h.ljust(w) for h, w in zip(("Layer (type)", "Output Shape", "Param #"), widths)), line]
    text += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    text += [line, f"Total params: {total:,}", f"Trainable params: {trainable:,}",
             f"Non-trainable params: {total - trainable:,}", line]
    print("\n".join(text))
    return {"total_params": total, "trainable_params": trainable}


def as_complex(x, name=None):
    """paddle.as_complex: a float tensor of shape [..., 2] as complex numbers of shape [...]."""
    return _ops.view_as_complex(x)


def as_real(x, name=None):
    """paddle.as_real: a complex tensor as float pairs, shape [..., 2]."""
    return _ops.view_as_real(x)
