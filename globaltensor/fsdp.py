"""fully_shard (PyTorch FSDP2's face, ZeRO-3): a module's parameters S(0) on a mesh axis, gathered around each use."""
import threading
import weakref

import numpy as np

from .autograd import Function, is_grad_enabled, no_grad
from .autograd.tape import drop_piece
from .sbp import broadcast
from .scope import recorder
from .fsdp_api import become_fsdp_module, check_policies
from .fsdp_group import Ahead, GatherGroup, gather_arrays, groupable
from .tensor import Layout, Tensor
from .zero import check_mesh_dim, reshard_parameter, shard_sbp


def fully_shard(module, *, mesh=None, reshard_after_forward=None, mesh_dim=0, ignored_params=None,
                shard_placement_fn=None, mp_policy=None, offload_policy=None):
    """Shard `module`'s parameters (those not already in a nested fully_shard unit) along mesh axis
    `mesh_dim`: each becomes split(0) there (or the dim shard_placement_fn picks), in place (the same
    Parameter objects), keeping its SBP on the other axes (tensor parallelism). Around each forward of
    the module they are all-gathered (one all_gather a parameter), used, and the gathered pieces freed
    after forward when reshard_after_forward is True; backward gathers them again just before the
    module's backward and reduce-scatters each gradient into its shard. None (PyTorch's default): True
    for every unit but the root (the one whose forward no other unit's encloses), which keeps its
    gathered parameters for its backward, as FSDP2. Call it on inner modules first, then on the root,
    and build the optimizer afterwards (its states are then sharded too), as FSDP2.
    `mesh`: a placement for local parameters (put there broadcast first); None: they must be global.
    `ignored_params` (as PyTorch's): parameters left as they are (not sharded, not gathered); a
    replicated one's gradient is reduced as under data parallelism. `shard_placement_fn(param)` (as
    PyTorch's): the dim to shard that parameter along, as `gt.sbp.split(d)`, PyTorch's `Shard(d)` or
    Paddle's `Shard(d)`; None: dim 0. `mp_policy` (torch's MixedPrecisionPolicy: param_dtype,
    reduce_dtype, output_dtype, cast_forward_inputs) and `offload_policy` (OffloadPolicy, or
    CPUOffloadPolicy: on cpu placements the shards are in host memory already) as fsdp_api.py says.
    The module's class becomes FSDP<Class> with FSDPModule's methods (reshard, unshard,
    set_requires_gradient_sync, set_reshard_after_backward, ...), as torch's.
    Inside a graph's capture the parameters stay S(0) and each op boxes them as its rows need.
    Returns the module.

    Examples:
        >>> for block in model.blocks:
        ...     gt.distributed.fully_shard(block, mesh=gt.placement("cpu", [0, 1, 2, 3]))
        >>> gt.distributed.fully_shard(model, mesh=gt.placement("cpu", [0, 1, 2, 3]))
        >>> opt = gt.optim.AdamW(model.parameters(), lr=1e-3)
    """
    if isinstance(reshard_after_forward, int) and not isinstance(reshard_after_forward, bool):
        raise NotImplementedError("fully_shard: reshard_after_forward as an int (resharding to a smaller group "
                                  "after forward) is not supported; pass None, True or False")
    if reshard_after_forward is not None and not isinstance(reshard_after_forward, bool):
        raise TypeError(f"fully_shard: reshard_after_forward must be None or a bool, got {reshard_after_forward!r}")
    if getattr(module, "_fsdp_unit", None) is not None:
        raise ValueError(f"fully_shard: {type(module).__name__} is already fully sharded")
    ignored = {id(p) for p in (ignored_params or ())}
    owned = [entry for entry in _owned_parameters(module) if id(entry[2]) not in ignored]
    dims = [_shard_dim(shard_placement_fn, p) for _, _, p in owned]  # every refusal before any move
    mp = check_policies(mp_policy, offload_policy, [p for _, _, p in owned])
    if mesh is not None:
        for owner, name, p in owned:
            if p.is_local:
                with no_grad():
                    p.data = p.detach().to_global(placement=mesh, sbp=(broadcast,) * mesh.ndim)
    check_mesh_dim("fully_shard", [p for _, _, p in owned], mesh_dim)
    for (_, _, p), dim in zip(owned, dims):
        sbp = shard_sbp(p, mesh_dim, dim=dim)
        if sbp is not None:
            reshard_parameter(p, sbp)
    unit = _Unit(owned, mesh_dim, reshard_after_forward, mp)
    object.__setattr__(module, "_fsdp_unit", unit)
    become_fsdp_module(module)
    module.register_forward_pre_hook(unit.before_forward)
    module.register_forward_hook(unit.after_forward)
    return module


def _shard_dim(shard_placement_fn, p):
    """The dim shard_placement_fn picks for p (0 without one, or where it returns None)."""
    placement = shard_placement_fn(p) if shard_placement_fn is not None else None
    if placement is None:
        return 0
    dim = placement.get_dim() if hasattr(placement, "get_dim") else getattr(placement, "dim", None)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"fully_shard: shard_placement_fn must return a Shard(dim) or None, got {placement!r}")
    if not -p.ndim <= dim < p.ndim:
        raise ValueError(f"fully_shard: shard_placement_fn's Shard({dim}) is out of range for a parameter of "
                         f"shape {tuple(p.shape)}")
    return dim % p.ndim


def _owned_parameters(module):
    """(owner module, name, parameter) of module's tree, leaving out nested fully_shard units."""
    stack, seen = [module], set()
    while stack:
        m = stack.pop()
        for name, p in m._parameters.items():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield m, name, p
        stack.extend(c for c in reversed(list(m._modules.values()))
                     if c is not None and getattr(c, "_fsdp_unit", None) is None)


_forwards = threading.local()  # .depth: fully_shard forwards running on this thread (the root's is the outermost);
# .serial: the number of the root forward (a pass); .seq: the units that gathered in it, in order


class _Unit:
    """One fully_shard module: its parameters and, during a forward, their gathered copies; the
    FSDPModule switches (gradient sync, reshard after backward) and what they keep."""

    def __init__(self, owned, mesh_dim, reshard_after_forward, mp):
        self.owned, self.mesh_dim, self.reshard_rule = owned, mesh_dim, reshard_after_forward
        self.reshard = reshard_after_forward is not False
        self.mp, self.param_dtype, self.reduce_dtype = mp, mp.param_dtype, mp.reduce_dtype
        self.gathered = []  # per forward call: [(gathered tensor, shard)]
        self.sync, self.unsynced, self.reshard_after_backward = True, None, True
        self.ready = None  # (copies of the shards, their gathered arrays): unshard()'s, for the next forward
        self.forward_prefetch = self.backward_prefetch = ()
        self.next_fwd = self.prev_fwd = None  # the units before and after this one in the last pass
        self.ahead = self.ahead_back = None  # an Ahead gather started for this unit's forward / backward
        self.is_last_backward = True
        self.entered = []  # the forward depth at each of this unit's forwards now running (nested calls)

    def split_params(self):
        return [p for _, _, p in self.owned if tuple(p.sbp)[self.mesh_dim] != broadcast]

    def before_forward(self, module, args):
        if recorder() is not None:  # inside a graph's capture: the parameters stay S(0), ops box them
            return None
        depth = getattr(_forwards, "depth", 0)
        if depth == 0:
            _forwards.serial, _forwards.seq = getattr(_forwards, "serial", 0) + 1, []
        if self.reshard_rule is None:  # PyTorch's None: every unit but the outermost reshards
            self.reshard = depth > 0
        _forwards.depth = depth + 1
        self.entered.append(depth)
        self._restore()  # a forward that raised left its gathered copies in place
        args = self._cast_inputs(args)
        split_here = [(owner, name, p) for owner, name, p in self.owned if tuple(p.sbp)[self.mesh_dim] != broadcast]
        params = [p for _, _, p in split_here]
        differentiable = is_grad_enabled() and any(p.requires_grad for p in params)
        at = [i for i, a in enumerate(args) if differentiable and isinstance(a, Tensor) and a.requires_grad]
        fulls, through = _gather_all(params, self, differentiable, [args[i] for i in at])
        for (owner, name, p), full in zip(split_here, fulls):
            owner._parameters[name] = full
        self.gathered = list(zip(fulls, params))
        if params:
            _forwards.seq.append(self)
            self._prefetch(self.forward_prefetch, self.next_fwd, "ahead", _forwards.serial)
        args = list(args)
        for i, t in zip(at, through):
            args[i] = t
        return tuple(args)

    def _cast_inputs(self, args):
        dtype = self.param_dtype
        if dtype is None or not self.mp.cast_forward_inputs:
            return args
        return tuple(a.to(dtype) if isinstance(a, Tensor) and a.dtype.is_floating and a.dtype != dtype else a
                     for a in args)

    def after_forward(self, module, args, out):
        if recorder() is not None:
            return None
        _forwards.depth = self.entered.pop() if self.entered else max(getattr(_forwards, "depth", 1) - 1, 0)
        if _forwards.depth == 0:
            _link(_forwards.seq)
        gathered = self._restore()
        out = _cast_outputs(out, self.mp.output_dtype)
        if not self.reshard:
            return out
        for full, _ in gathered:
            _free(full)
        pending = [(full, p) for full, p in gathered if full._node is not None]
        if not pending:
            return out
        return _wrap_outputs(out, pending, self)

    def forward_failed(self):
        """A forward of this unit raised (FSDPModule.__call__): the shards back, the thread's forward
        depth as before it, and a root pass's order forgotten (the next forward starts afresh)."""
        self._restore()
        if self.entered:
            depth = _forwards.depth = self.entered.pop()
            if depth == 0:
                _forwards.seq = []

    def _restore(self):
        """The shards back in their modules; returns the (gathered copy, shard) pairs of the last forward."""
        for owner, name, p in self.owned:
            owner._parameters[name] = p
        gathered, self.gathered = self.gathered, []
        return gathered

    def _prefetch(self, modules, implicit, slot, key):
        """Start the gathers of the units that come next (the modules set_modules_to_*_prefetch named,
        else `implicit`: in forward the unit that came next in the last pass) on the group's worker
        thread, while this unit computes: one all_gather each, at the same point on every rank (the
        order is the model's, the same on every rank)."""
        for unit in [m._fsdp_unit for m in modules] if modules else [implicit] if implicit is not None else []:
            params, old = unit.split_params(), getattr(unit, slot)
            if old is not None:
                if old.key == key:
                    continue
                old.take((), None)  # started for a pass that did not use it: waited for, dropped
            if params and groupable(params) and unit.ready is None:
                setattr(unit, slot, Ahead(params, unit.param_dtype and unit.param_dtype.np, key))
            else:
                setattr(unit, slot, None)

    def take_ahead(self, params, slot="ahead", key=None):
        """The arrays a prefetch gathered for params in this pass, or None (then the caller gathers)."""
        ahead = getattr(self, slot)
        if ahead is None:
            return None
        setattr(self, slot, None)
        return ahead.take(params, getattr(_forwards, "serial", 0) if key is None else key)

    def unshard(self):
        """Gather the split parameters now, kept for the next forward (FSDPModule.unshard)."""
        params = self.split_params()
        if params:
            with no_grad():
                arrays = (gather_arrays(params, self.param_dtype and self.param_dtype.np) if groupable(params) else
                          [_gather(p, self.mesh_dim, self.param_dtype)._local for p in params])
            self.ready = ([p._local.copy() for p in params], arrays)

    def take_ready(self, params):
        """The gathered arrays unshard() (or a backward that kept them) left, while the shards are
        the same values; else None (then the caller gathers)."""
        ready, self.ready = self.ready, None
        if ready is None or len(ready[0]) != len(params):
            return None
        if all(a.shape == p._local.shape and np.array_equal(a, p._local) for a, p in zip(ready[0], params)):
            return ready[1]
        return None

    def after_backward(self, params, fulls):
        """The gathered copies freed, or kept for the next forward (reshard_after_backward False)."""
        if not self.reshard_after_backward and all(f is not None and f._local is not _FREED for f in fulls):
            self.ready = ([p._local.copy() for p in params], [f._local for f in fulls])
        for full in fulls:
            if full is not None:
                _free(full)

    def set_sync(self, flag):
        if not flag and not groupable(self.split_params()) and self.split_params():
            raise NotImplementedError("set_requires_gradient_sync(False) is supported for units whose parameters "
                                      "are split(0) on one 1-D cpu placement")
        self.sync = flag

    def with_unsynced(self, grads):
        """grads with those kept while sync was off added in; None (they are kept) while it is off."""
        held = self.unsynced
        if not self.sync:
            self.unsynced = list(grads) if held is None else [
                g if h is None else h if g is None else h + g for h, g in zip(held, grads)]
            return None
        self.unsynced = None
        if held is None:
            return grads
        return [g if h is None else h if g is None else h + g for h, g in zip(held, grads)]


def _link(seq):
    """The units of a finished pass learn their neighbours: the next pass prefetches along them."""
    for unit in seq:
        unit.next_fwd = unit.prev_fwd = None
    for a, b in zip(seq, seq[1:]):
        a.next_fwd, b.prev_fwd = b, a


def _cast_outputs(out, dtype):
    """out's floating tensors (a tensor, or a tuple/list of them) cast to dtype (None: out)."""
    def cast(o):
        return o.to(dtype) if isinstance(o, Tensor) and o.dtype.is_floating and o.dtype != dtype else o
    if dtype is None:
        return out
    if isinstance(out, (tuple, list)):
        return type(out)(cast(o) for o in out)
    return cast(out)


def _gather_all(params, unit, differentiable, through):
    """(The gathered copies of params in unit.param_dtype, the unit's inputs `through` passed through
    the gathers): one all_gather for all where they allow (fsdp_group), else one each;
    differentiable: backward reduce-scatters their gradients as soon as the unit's backward ends
    (the unit computes on the passed inputs, so the gathers' backward comes before that of whatever
    made them)."""
    if not params:
        return [], through
    dtype = unit.param_dtype
    if groupable(params):
        if differentiable:
            got = GatherGroup.apply(unit, len(through), *through, *params)
            return list(got[len(through):]), list(got[:len(through)])
        arrays = unit.take_ready(params) or unit.take_ahead(params) or gather_arrays(params, dtype and dtype.np)
        return [Tensor._wrap(a, Layout.of(tuple(p.shape), dtype or p.dtype, p.placement, (broadcast,)))
                for a, p in zip(arrays, params)], through
    fulls = []
    for p in params:
        if differentiable and p.requires_grad:
            got = _Gather.apply(p, unit.mesh_dim, *through)
            full = got[0] if through else got
            through = list(got[1:]) if through else through
            fulls.append(full if dtype is None or dtype == p.dtype else full.to(dtype))
        else:
            fulls.append(_gather(p, unit.mesh_dim, dtype))
    return fulls, through


def _gather(p, mesh_dim, dtype=None):
    """p with broadcast on mesh_dim (one all_gather), detached (in dtype where given)."""
    sbp = list(p.sbp)
    sbp[mesh_dim] = broadcast
    with no_grad():
        full = p.detach().to_global(placement=p.placement, sbp=tuple(sbp))
        return full if dtype is None or dtype == full.dtype else full.to(dtype)


_FREED = np.empty(0, np.float32)  # a freed gathered piece; reading it as the weight fails loudly


def _free(full):
    """Drop a gathered copy's piece (the autograd graph keeps the tensor, not its memory)."""
    full._local = _FREED
    drop_piece(full)


class _Gather(Function):
    """A parameter shard -> its gathered copy (and the unit's inputs passed through, as GatherGroup);
    backward: the copy's gradient reduce-scattered into the shard's layout, the copy's piece freed."""

    @staticmethod
    def forward(ctx, p, mesh_dim, *through):
        full = _gather(p, mesh_dim)
        ctx.sbp, ctx.placement, ctx.full = tuple(p.sbp), p.placement, weakref.ref(full)
        return (full,) + through if through else full

    @staticmethod
    def backward(ctx, g, *through):
        full = ctx.full()
        if full is not None:
            full._local = _FREED
        with no_grad():
            return (None if g is None else g.to_global(placement=ctx.placement, sbp=ctx.sbp), None) + through


class _Regather(Function):
    """Identity on a unit's outputs; its backward (reached before any op inside the unit) gathers
    the unit's freed parameter copies again, into the tensors the graph saved."""

    @staticmethod
    def forward(ctx, pending, unit, *outs):
        ctx.pending, ctx.unit, ctx.serial = pending, unit, getattr(_forwards, "serial", 0)
        return outs if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx, *grads):
        freed = [(full, p) for full, p in ctx.pending if full._local is _FREED]
        unit = ctx.unit
        params = [p for _, p in freed]
        if freed and groupable(params):
            dtype = unit.param_dtype and unit.param_dtype.np
            arrays = unit.take_ahead(params, "ahead_back", ctx.serial) or gather_arrays(params, dtype)
            for (full, _), array in zip(freed, arrays):
                full._local = array
            # only the units set_modules_to_backward_prefetch names: a gather ahead here would hold a third
            # layer (this unit's copies and full gradients, and the next one's copies) past the memory bound
            unit._prefetch(unit.backward_prefetch, None, "ahead_back", ctx.serial)
        else:
            for full, p in freed:  # in the copy's dtype (mixed precision: the cast after _Gather)
                full._local = _gather(p, unit.mesh_dim, full.dtype)._local
        return (None, None) + grads


def _wrap_outputs(out, pending, unit):
    """out (a tensor, or a tuple/list of them) through _Regather."""
    sources = pending
    if isinstance(out, Tensor):
        return _Regather.apply(sources, unit, out) if out.requires_grad else out
    if isinstance(out, (tuple, list)):
        picks = [i for i, o in enumerate(out) if isinstance(o, Tensor) and o.requires_grad]
        if not picks:
            return out
        got = _Regather.apply(sources, unit, *[out[i] for i in picks])
        got = got if len(picks) > 1 else (got,)
        items = list(out)
        for i, g in zip(picks, got):
            items[i] = g
        return type(out)(items)
    return out
