"""torch 2.13 FSDP2's policy classes and FSDPModule methods for fully_shard units (their meaning here, checked before any collective)."""
from dataclasses import dataclass
from typing import Optional

from .dtype import DType


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """torch's MixedPrecisionPolicy: `param_dtype` the dtype of the gathered parameters (cast on the
    shard, all-gathered in it; forward and backward compute in it; the shards, the optimizer and its
    states stay in their own dtype); `reduce_dtype` the dtype gradients are reduce-scattered in (None:
    param_dtype), the result cast to the shard's dtype; `output_dtype` the dtype the unit's floating
    outputs are cast to; `cast_forward_inputs` casts the unit's floating inputs to param_dtype."""

    param_dtype: Optional[DType] = None
    reduce_dtype: Optional[DType] = None
    output_dtype: Optional[DType] = None
    cast_forward_inputs: bool = True


class OffloadPolicy:
    """torch's OffloadPolicy: no offloading (fully_shard's default)."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """torch's CPUOffloadPolicy: shards, gradients and optimizer states in host memory, the update on
    the CPU. On cpu placements that is where they already are: accepted, nothing changes (pin_memory
    has no meaning there). On cuda placements it raises NotImplementedError."""

    pin_memory: bool = True


def check_policies(mp_policy, offload_policy, params):
    """The policies' values, checked (every rank alike, before any collective); returns mp_policy."""
    mp_policy = MixedPrecisionPolicy() if mp_policy is None else mp_policy
    if not isinstance(mp_policy, MixedPrecisionPolicy):
        raise TypeError(f"fully_shard: mp_policy must be a MixedPrecisionPolicy, got {mp_policy!r}")
    for field in ("param_dtype", "reduce_dtype", "output_dtype"):
        dtype = getattr(mp_policy, field)
        if dtype is not None and not (isinstance(dtype, DType) and dtype.is_floating):
            raise TypeError(f"fully_shard: MixedPrecisionPolicy.{field} must be None or a floating gt dtype "
                            f"(gt.bfloat16, gt.float16, gt.float32), got {dtype!r}")
    if not isinstance(mp_policy.cast_forward_inputs, bool):
        raise TypeError(f"fully_shard: cast_forward_inputs must be a bool, got {mp_policy.cast_forward_inputs!r}")
    if offload_policy is not None and not isinstance(offload_policy, OffloadPolicy):
        raise TypeError(f"fully_shard: offload_policy must be an OffloadPolicy, got {offload_policy!r}")
    if isinstance(offload_policy, CPUOffloadPolicy):
        on_device = [p for p in params if not p.is_local and p.placement.type != "cpu"]
        if on_device:
            raise NotImplementedError(f"fully_shard: CPUOffloadPolicy for parameters on {on_device[0].placement} "
                                      f"is not supported (on cpu placements it is accepted and changes nothing)")
    return mp_policy


class UnshardHandle:
    """What unshard(async_op=True) returns: the gather already ran (collectives here are synchronous)."""

    def wait(self):
        return None


class FSDPModule:
    """The methods torch's fully_shard adds to a module (its class becomes FSDP<Class>, as torch's)."""

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except BaseException:  # the forward hook did not run: the unit's per-forward state undone
            self._fsdp_unit.forward_failed()
            raise

    def reshard(self):
        """Free the parameters unshard() (or set_reshard_after_backward(False)) kept gathered. Not recursive."""
        self._fsdp_unit.ready = None

    def unshard(self, async_op=False):
        """All-gather the unit's parameters now (in param_dtype); the next forward uses them without
        gathering, unless the shards changed meanwhile. Not recursive. async_op: returns a handle."""
        self._fsdp_unit.unshard()
        return UnshardHandle() if async_op else None

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        """False: backward keeps each unit's full gradients on this rank, summed over backward calls,
        no collective; the next backward with True reduce-scatters them with its own (torch's no_sync)."""
        for unit in _units(self, recurse):
            unit.set_sync(_flag("requires_gradient_sync", requires_gradient_sync))

    def set_reshard_after_backward(self, reshard_after_backward, *, recurse=True):
        """False: the gathered parameters stay after backward, so the next forward gathers nothing
        (while the shards are unchanged: an optimizer step in between makes it gather again)."""
        for unit in _units(self, recurse):
            unit.reshard_after_backward = _flag("reshard_after_backward", reshard_after_backward)

    def set_reshard_after_forward(self, reshard_after_forward, *, recurse=True):
        """As fully_shard's reshard_after_forward (a bool), for this unit (and those under it)."""
        for unit in _units(self, recurse):
            unit.reshard_rule = unit.reshard = _flag("reshard_after_forward", reshard_after_forward)

    def set_modules_to_forward_prefetch(self, modules):
        """These units' gathers start while this one's forward runs (default: the unit that ran next in the last forward)."""
        self._fsdp_unit.forward_prefetch = _fsdp_modules(modules)

    def set_modules_to_backward_prefetch(self, modules):
        """These units' gathers start while this one's backward runs (default: none, see docs/big_models.md)."""
        self._fsdp_unit.backward_prefetch = _fsdp_modules(modules)

    def set_is_last_backward(self, is_last_backward):
        """Accepted: every reduce-scatter here ends within the backward that starts it."""
        self._fsdp_unit.is_last_backward = _flag("is_last_backward", is_last_backward)


def _flag(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def _units(module, recurse):
    mods = module.modules() if recurse else [module]
    return [m._fsdp_unit for m in mods if getattr(m, "_fsdp_unit", None) is not None]


def _fsdp_modules(modules):
    modules = list(modules)
    bad = [m for m in modules if not isinstance(m, FSDPModule)]
    if bad:
        raise ValueError(f"expected FSDPModules (modules fully_shard was applied to), got {type(bad[0]).__name__}")
    return modules


_classes = {}  # a module class -> its FSDP class; as many entries as classes fully_shard was applied to


def become_fsdp_module(module):
    """module's class becomes FSDP<Class>(FSDPModule, Class), made once per class."""
    cls = type(module)
    if isinstance(module, FSDPModule):
        return
    if cls not in _classes:
        _classes[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    module.__class__ = _classes[cls]
