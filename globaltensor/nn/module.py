"""Module and Parameter: parameters, buffers, children, state_dict, to_global."""
import collections
import functools
import itertools

from .. import hooks
from ..tensor import Tensor, device as _device


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter (requires_grad by default)."""

    __slots__ = ()

    def __init__(self, data, requires_grad=True):
        t = data if isinstance(data, Tensor) else None
        if t is None:
            from ..creation import tensor
            t = tensor(data)
        super().__init__(t._local, t._global_shape, t._dtype, t._placement, t._sbp)
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


_hook_keys = itertools.count()


class _HookHandle:
    """What register_forward_hook returns: remove() takes the hook off."""

    def __init__(self, table, key):
        self._table, self._key = table, key

    def remove(self):
        self._table.pop(self._key, None)


def _arguments(fn):
    """The names of fn's arguments (positional and keyword-only)."""
    code = fn.__code__
    return set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


class Module:
    """Base class of layers: assign Parameters, Modules and buffers as attributes."""

    def __init_subclass__(cls, **kwargs):
        """Our layers take PyTorch's factory arguments, device= and dtype= (nn.Linear(4, 4, dtype=...)):
        the floating parameters and buffers are made in that dtype (a user's own Module is left as
        written)."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or not cls.__module__.startswith("globaltensor.") or {"device", "dtype"} & _arguments(init):
            return

        @functools.wraps(init)
        def __init__(self, *args, device=None, dtype=None, **kw):
            init(self, *args, **kw)
            if device is not None and str(device).split(":")[0] != "cpu":
                raise NotImplementedError(f"{cls.__name__}(device={device!r}): layers are made on the host here; "
                                          "lay them out on a cuda placement with module.to_global(placement, sbp)")
            if dtype is not None:
                self.to(dtype=dtype)
        cls.__init__ = __init__

    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self._parameters and value is None:
            self._parameters[name] = None
        elif name in self._buffers:
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            found = self.__dict__.get(table)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def register_buffer(self, name, tensor):
        self._buffers[name] = tensor

    def register_parameter(self, name, param):
        self._parameters[name] = param

    def add_module(self, name, module):
        self._modules[name] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def __call__(self, *args, **kwargs):
        hooks_ = self.__dict__.get("_forward_hooks")
        if not hooks_:
            return self.forward(*args, **kwargs)
        for hook in list(hooks_["pre"].values()):
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        out = self.forward(*args, **kwargs)
        for hook in list(hooks_["post"].values()):
            changed = hook(self, args, out)
            if changed is not None:
                out = changed
        return out

    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a value it returns replaces the output
        (PyTorch's API). Returns a handle whose remove() takes the hook off. Layouts use it: a
        row-parallel layer's partial output reduced at once (Megatron's all_reduce)."""
        return self._add_hook("post", hook)

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a value it returns replaces the arguments."""
        return self._add_hook("pre", hook)

    def _add_hook(self, kind, hook):
        if "_forward_hooks" not in self.__dict__:
            object.__setattr__(self, "_forward_hooks", {"pre": {}, "post": {}})
        table = self._forward_hooks[kind]
        key = next(_hook_keys)  # never reused, so a removed handle cannot take off a later hook
        table[key] = hook
        return _HookHandle(table, key)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, p in module._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix=""):
        for mod_prefix, module in self.named_modules(prefix):
            for name, b in module._buffers.items():
                if b is not None:
                    yield (f"{mod_prefix}.{name}" if mod_prefix else name), b

    def buffers(self):
        return (b for _, b in self.named_buffers())

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def no_sync(self):
        """Accumulate gradients without communicating (data parallelism), as Paddle's no_sync."""
        from ..grad_buckets import no_sync
        return no_sync()

    def zero_grad(self, set_to_none=True):
        """Forget the parameters' gradients (set_to_none, the default), or zero them in place (each
        .grad keeps its placement and SBP), as PyTorch."""
        zero_grads(self.parameters(), set_to_none)

    def to(self, *args, dtype=None):
        """Module.to(dtype): every floating parameter and buffer cast in place (the same objects,
        so optimizers keep them); a device of "cpu" changes nothing. Module.to(nn.graph.GraphModule):
        the module's graph settings (OneFlow's; activation_checkpointing, set_stage)."""
        from .. import dtype as _dtype
        if len(args) == 1 and isinstance(args[0], type) and args[0].__name__ == "GraphModule":
            return args[0].of(self)  # OneFlow's module.to(nn.graph.GraphModule)
        for a in args:
            if not ((isinstance(a, str) and a.split(":")[0] == "cpu") or (isinstance(a, _device) and a.type == "cpu")):
                dtype = a
        if dtype is None:
            return self
        dt = _dtype.to_dtype(dtype)
        for t in list(self.parameters()) + [b for b in self.buffers() if isinstance(b, Tensor)]:
            if t.dtype.is_floating and t.dtype != dt:
                t._local, t._dtype, t._layout = t._local.astype(dt.np), dt, None
        return self

    def double(self):
        return self.to("float64")

    def float(self):
        return self.to("float32")

    def state_dict(self):
        """Name -> tensor for every parameter and buffer (global tensors stay global)."""
        out = collections.OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p.detach()
        for name, b in self.named_buffers():
            out[name] = b.detach() if isinstance(b, Tensor) else b
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy values in, each laid out by the parameter's own placement and SBP."""
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        # a checkpoint may lack BatchNorm's counter (PyTorch's before 0.4.1, ours before s15): it stays as it is
        missing = [k for k in own if k not in state_dict and k.rsplit(".", 1)[-1] != "num_batches_tracked"]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, value in state_dict.items():
            if name in own:
                _copy_into(own[name], value, name)
        return missing, unexpected

    def to_consistent(self, *args, **kwargs):
        """Removed in OneFlow ("consistent" is "global" now): raises, naming to_global."""
        raise RuntimeError(".to_consistent has been removed, please use .to_global instead")

    def to_global(self, placement=None, sbp=None):
        """Convert every parameter and buffer, by Tensor.to_global's rule (SPEC §3): a local
        tensor is this rank's component (split: the pieces concatenate; broadcast, or no sbp:
        the first rank's values; partial_sum: the pieces add up); a global one is boxed.

        Examples:
            >>> p = gt.placement("cpu", [0, 1])
            >>> model = gt.nn.Linear(8, 4).to_global(p, gt.sbp.broadcast)   # data parallel
            >>> model.weight.is_global, model.weight.sbp
            (True, (gt.sbp.broadcast,))
        """
        for module in self.modules():
            for name, p in list(module._parameters.items()):
                if p is not None:
                    module._parameters[name] = _param_to_global(p, placement, sbp)
            for name, b in list(module._buffers.items()):
                if isinstance(b, Tensor):
                    module._buffers[name] = _tensor_to_global(b, placement, sbp)
        return self

    def to_local(self):
        """Every global parameter and buffer becomes this rank's local piece (OneFlow's
        Module.to_local); a parameter stays a Parameter with its requires_grad, local ones stay."""
        for module in self.modules():
            for name, p in list(module._parameters.items()):
                if p is not None and p.is_global:
                    module._parameters[name] = Parameter(p.to_local().detach(), requires_grad=p.requires_grad)
            for name, b in list(module._buffers.items()):
                if isinstance(b, Tensor) and b.is_global:
                    module._buffers[name] = b.to_local().detach()
        return self

    def __repr__(self):
        lines = [f"{type(self).__name__}("]
        for name, child in self.named_children():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        return "\n".join(lines) + ")" if len(lines) > 1 else f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self):
        return ""


def zero_grads(params, set_to_none=True):
    """p.grad = None for each parameter, or p.grad zeroed in place (Module's and Optimizer's zero_grad;
    marked, so the next backward replaces it rather than adding into zeros: autograd.zero_in_place);
    inside a graph's capture, recorded whole and run at each replay."""
    params = list(params)
    data = {"clear_grads": params} if set_to_none else None  # as data: a saved program clears them
    hooks.effect("zero_grad", lambda: _zero_grads(params, set_to_none), data)


def _zero_grads(params, set_to_none):
    from ..autograd.engine import zero_in_place  # once per call, not per parameter
    with _no_grad():
        for p in params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad.requires_grad = False
                zero_in_place(p.grad)


def _tensor_to_global(t, placement, sbp):
    from ..sbp import broadcast
    if t.is_local and sbp is None:
        sbp = (broadcast,) * placement.ndim  # the first rank's values
    return t.to_global(placement=placement, sbp=sbp)


def _param_to_global(p, placement, sbp):
    with _no_grad():
        g = _tensor_to_global(p.detach(), placement, sbp)
    return Parameter(g, requires_grad=p.requires_grad)


def _no_grad():
    from ..autograd import no_grad
    return no_grad()


def _copy_into(target, value, name):
    """Replace target's piece by `value` laid out like target (value: tensor or array)."""
    import numpy as np
    from ..creation import tensor
    from ..serialization import ShardedTensor
    if isinstance(value, ShardedTensor):
        return _copy_from_shards(target, value, name)
    if not isinstance(value, Tensor):
        value = tensor(np.asarray(value))
    if tuple(value.shape) != tuple(target.shape):
        raise RuntimeError(f"load_state_dict: {name} has shape {tuple(value.shape)} in the checkpoint but "
                           f"{tuple(target.shape)} in the model")
    with _no_grad():
        if target.is_global:
            if value.is_local:
                value = tensor(value.numpy(), placement=target.placement, sbp=target.sbp)
            else:
                value = value.to_global(placement=target.placement, sbp=target.sbp)
        src = value._local.astype(target.dtype.np, copy=False)
    _fill(target, src)


def _fill(target, values):
    """target's piece = values (host data moves to the piece's device)."""
    from ..backends.devices import move, of_array
    target._local[...] = move(values, of_array(target._local))


def _copy_from_shards(target, value, name):
    """Fill target's piece from a sharded checkpoint, reading only the overlapping slices."""
    from .. import layout
    from ..env import get_rank
    if tuple(value.shape) != tuple(target.shape):
        raise RuntimeError(f"load_state_dict: {name} has shape {tuple(value.shape)} in the checkpoint but "
                           f"{tuple(target.shape)} in the model")
    if target.is_local:
        _fill(target, value.numpy())
        return
    coord = target.placement.mesh_coord(get_rank())
    if coord is None:
        return
    if not layout.holds_value(target.sbp, coord):
        target._local[...] = 0
        return
    box = layout.local_box(target.shape, target.placement.hierarchy, target.sbp, coord)
    _fill(target, value.read_box(box))
