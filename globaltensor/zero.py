"""ZeRO as layouts: optimizer state (stage 1), gradients (2) and parameters (3) split along a data-parallel mesh axis."""
import math
import weakref

import numpy as np

from . import layout, zero_buckets  # noqa: F401 - registers stage 2's gradient buckets
from .autograd import no_grad
from .boxing.execution import _group
from .creation import zeros
from .distributed import collectives
from .env import get_rank
from .sbp import broadcast, split
from .scope import recorder
from .tensor import Layout, Tensor

STAGES = (1, 2, 3)


def shard_sbp(p, mesh_dim, min_size=1, dim=0):
    """p's SBP with split(dim) on mesh_dim where p is broadcast there, or None where p keeps its own
    layout there (a local or 0-d tensor, or one already split or partial on mesh_dim). Along another
    mesh axis p keeps its SBP (a tensor-parallel split stays: split(0) twice cuts dim 0 nested).
    A parameter of fewer than min_size elements stays whole (OneFlow's zero_shard_min_size)."""
    if p.is_local or p.ndim == 0 or math.prod(p.shape) < min_size:
        return None
    sbp = tuple(p.sbp)
    if sbp[mesh_dim] != broadcast:
        return None
    return sbp[:mesh_dim] + (split(dim),) + sbp[mesh_dim + 1:]


def check_mesh_dim(where, params, mesh_dim):
    """Every parameter global on one mesh of enough axes; raises (every rank alike) before any collective."""
    if isinstance(mesh_dim, bool) or not isinstance(mesh_dim, int):
        raise TypeError(f"{where}: mesh_dim must be an int, got {mesh_dim!r}")
    for p in params:
        if p.is_local:
            raise ValueError(f"{where}: ZeRO shards global parameters over a mesh axis; parameter "
                             f"{tuple(p.shape)} is local (call module.to_global(placement, broadcast) first)")
        if not 0 <= mesh_dim < p.placement.ndim:
            raise ValueError(f"{where}: mesh_dim {mesh_dim} is outside [0, {p.placement.ndim}) for parameter "
                             f"{tuple(p.shape)} on {p.placement}")


class Zero:
    """The ZeRO plan of one optimizer (optimizer._zero): the stage and the data-parallel mesh axis.
    Stage 1: each state S(0) on that axis, the update on the shard, the parameter all-gathered after.
    Stage 2: also each broadcast parameter's gradient reduce-scattered into its shard (grad_sbp).
    Stage 3: the parameters themselves S(0) there (fully_shard gathers them around each forward)."""

    def __init__(self, stage, mesh_dim=0, min_size=1):
        if stage not in STAGES:
            raise ValueError(f"ZeRO stage must be 1, 2 or 3, got {stage!r}")
        self.stage, self.mesh_dim, self.min_size = stage, mesh_dim, min_size
        self.gathers = FlatGathers()  # an eager step's updated shards, all-gathered in buckets

    def state_sbp(self, p):
        """The SBP of p's optimizer states: p's shard on the axis, or p's own."""
        return shard_sbp(p, self.mesh_dim, self.min_size) or (None if p.is_local else tuple(p.sbp))

    def new_state(self, p):
        """A zero state tensor for p, laid out by state_sbp."""
        if p.is_local:
            return zeros(tuple(p.shape), dtype=p.dtype)
        return zeros(tuple(p.shape), dtype=p.dtype, placement=p.placement, sbp=self.state_sbp(p))

    def update(self, opdef, p, states, lr, step, static):
        """One eager update of a broadcast-on-axis parameter on its shard: the op's kernel on the
        pieces of shards(p) and the states, then w all-gathered back into p (gather_into); on a 1-D
        cpu placement the shard is rows of p's own piece (updated in place) and the gathers are
        bucketed (FlatGathers)."""
        whole = self.whole(p)
        rows = self.row_pieces(whole, p) if recorder() is None else None
        w = None
        if rows is None:
            w, g = self.shards(p)
            rows = (w._local, g._local)
        pieces = list(rows) + [t._local for t in states]
        if step is None:
            opdef.kernel(*pieces, lr, **static)
        else:
            opdef.kernel(*pieces, lr, step, **static)
        if w is not None:
            self.gather_into(p, w)
        else:
            self.gathers.add(whole, rows[0])  # finish() (after the optimizer's step) lands it

    def row_pieces(self, whole, p):
        """(this rank's rows of p's piece, a view; its gradient's rows) where the shard is rows of a
        1-D cpu placement (FlatGathers.takes) and the gradient broadcast or that shard; else None."""
        if not self.gathers.takes(whole) or shard_sbp(whole, self.mesh_dim, self.min_size) != (split(0),):
            return None
        g = self.whole_grad(p)
        pl = whole.placement
        lo, hi = layout.split_range(whole.shape[0], pl.hierarchy[0], pl.mesh_coord(get_rank())[0])
        if g.placement != pl or type(g._local) is not np.ndarray:
            return None
        if tuple(g.sbp) == (split(0),):
            return whole._local[lo:hi], g._local
        return (whole._local[lo:hi], g._local[lo:hi]) if tuple(g.sbp) == (broadcast,) else None

    def whole_grad(self, p):
        return p.grad

    def whole(self, p):
        """The global tensor whose piece the gathered value goes into (p itself)."""
        return p

    def finish(self):
        """After an eager optimizer step: the buckets of updated shards gathered into the parameters."""
        self.gathers.finish()

    def shards(self, p):
        """(p's shard, its gradient's shard): local slices (B -> S, no collective); a stage-2
        gradient is the shard already."""
        sbp = shard_sbp(p, self.mesh_dim, self.min_size)
        with no_grad():
            w = p.detach().to_global(placement=p.placement, sbp=sbp)
            g = p.grad
            if g.placement != p.placement or tuple(g.sbp) != sbp:
                g = g.to_global(placement=p.placement, sbp=sbp)
        return w, g

    def gather_into(self, p, w):
        """p's value = the updated shard w all-gathered (one all_gather); inside a graph's capture
        an in-place copy the program records."""
        with no_grad():
            full = w.to_global(placement=p.placement, sbp=p.sbp)
            if recorder() is not None:
                p.copy_(full)
            else:
                p._local[...] = full._local


def attach(optimizer, stage, mesh_dim=0, min_size=1):
    """Turn ZeRO `stage` on for optimizer along mesh_dim: states made (or moved) to the shard layout,
    stage 2 gradients marked for reduce-scatter, stage 3 parameters resharded in place (each keeps
    its identity: modules and the optimizer hold the same objects). Returns the optimizer."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    check_mesh_dim(f"ZeRO stage {stage}", params, mesh_dim)
    zero = Zero(stage, mesh_dim, min_size)
    for p in params:
        sbp = shard_sbp(p, mesh_dim, min_size)
        if sbp is None:
            continue
        if stage == 3:
            reshard_parameter(p, sbp)
        elif stage == 2:
            p._grad_sbp = sbp
            if p.grad is not None:
                p.grad = p.grad.to_global(placement=p.placement, sbp=sbp)
    for key, st in optimizer.state.items():
        p = next((q for q in params if id(q) == key), None)
        for name, value in list(st.items()):
            if p is not None and hasattr(value, "to_global") and value.is_global:
                with no_grad():
                    st[name] = value.to_global(placement=p.placement, sbp=zero.state_sbp(p))
    optimizer._zero = zero
    _finish_after_steps(optimizer)
    return optimizer


def _finish_after_steps(optimizer):
    """optimizer's eager step followed by its ZeRO plan's finish() (an instance attribute: the
    optimizer's class is left as it is)."""
    if not isinstance(optimizer.__dict__.get("_step_now"), _StepThenGather):
        optimizer._step_now = _StepThenGather(optimizer)


class _StepThenGather:
    """The optimizer's own eager step, then the pending all_gathers of its updated shards landed."""

    def __init__(self, optimizer):
        self.optimizer = weakref.ref(optimizer)  # the optimizer holds this: no cycle

    def __call__(self):
        optimizer = self.optimizer()
        try:
            type(optimizer)._step_now(optimizer)
        finally:
            optimizer._zero.finish()


class ReplicaZero(Zero):
    """Stage 1 for local parameters every rank holds alike (a DataParallel wrapper's: gradients
    all-reduced, the same update everywhere): each is read as broadcast on `placement` (its own
    piece, no copy), so its states are S(0) there, the update runs on the shard and the shard is
    all-gathered back into the parameter."""

    def __init__(self, placement, min_size=1):
        super().__init__(1, 0, min_size)
        self.placement = placement

    def _view(self, t):
        return Tensor._wrap(t._local, Layout.of(tuple(t.shape), t.dtype, self.placement,
                                                (broadcast,) * self.placement.ndim))

    def state_sbp(self, p):
        return super().state_sbp(self._view(p) if p.is_local else p)

    def new_state(self, p):
        return super().new_state(self._view(p) if p.is_local else p)

    def shards(self, p):
        if not p.is_local:
            return super().shards(p)
        view = self._view(p)
        view.grad = self._view(p.grad)
        return super().shards(view)

    def whole(self, p):
        return self._view(p) if p.is_local else p

    def whole_grad(self, p):
        return self._view(p.grad) if p.is_local else p.grad

    def gather_into(self, p, w):
        if recorder() is not None:
            raise RuntimeError("ZeRO stage 1 of local data-parallel parameters runs eagerly; inside a graph lay the "
                               "model out as global tensors (module.to_global) and use zero.attach")
        super().gather_into(self._view(p) if p.is_local else p, w)


def attach_replicas(optimizer, placement, min_size=1):
    """ZeRO stage 1 for an optimizer of local data-parallel parameters (ReplicaZero) over placement."""
    if placement.ndim != 1:
        raise ValueError(f"ZeRO over local data-parallel parameters takes a 1-D placement, got {placement}")
    optimizer._zero = ReplicaZero(placement, min_size)
    _finish_after_steps(optimizer)
    return optimizer


GATHER_BUCKET_BYTES = 4 << 20  # whole bytes one all_gather of updated shards carries (more: its own)


class FlatGathers:
    """Stages 1-2, eagerly: the updated shards of S(0) parameters on a 1-D cpu placement packed in
    buckets (by placement and dtype, in update order, alike on every rank), one all_gather each
    (uneven lengths allowed), started on the group's worker thread as a bucket fills while later
    parameters update; finish() starts the rest on this thread, waits, and writes each gathered
    value into its parameter's piece. Replaces one all_gather and one copy per parameter."""

    def __init__(self):
        self.filling, self.started = {}, []

    @staticmethod
    def takes(p):
        """Whether p (broadcast, its shard split(0)) is on a 1-D cpu placement holding this rank, with
        a C-contiguous writable numpy piece (alike on every rank of the placement)."""
        pl = p.placement
        piece = p._local
        return (pl.type == "cpu" and pl.ndim == 1 and tuple(p.sbp) == (broadcast,) and p.ndim > 0
                and type(piece) is np.ndarray and piece.flags.c_contiguous and piece.flags.writeable
                and pl.mesh_coord(get_rank()) is not None)

    def add(self, p, w):
        """File p's updated shard w (a view of this rank's rows of p's piece, updated in place)."""
        key = (p.placement, p._local.dtype.str)
        bucket = self.filling.setdefault(key, [[], 0])
        bucket[0].append((p, w))
        bucket[1] += p._local.nbytes
        if bucket[1] >= GATHER_BUCKET_BYTES:
            del self.filling[key]
            self.started.append(_start_gather(bucket[0], now=False))
            while len(self.started) > 1:  # at most two buckets' gathered values alive: land the older
                _land(*self.started.pop(0))

    def finish(self):
        rest, self.filling = list(self.filling.values()), {}
        started, self.started = self.started, []
        started += [_start_gather(items, now=True) for items, _ in rest]
        for done in started:
            _land(*done)


def _start_gather(items, now):
    """(work or None, the gathered flat buffer (filled once work is waited), items, each parameter's
    length on each rank): the shards' one all_gather, started on the worker thread unless `now`."""
    pl = items[0][0].placement
    k = pl.hierarchy[0]
    per = [[n * math.prod(p.shape[1:]) for n in layout.split_sizes(p.shape[0], k)] for p, _ in items]
    sizes = [sum(c[i] for c in per) for i in range(k)]
    flat = np.concatenate([w.reshape(-1) for _, w in items])
    group = _group(pl.axis_ranks(0, pl.mesh_coord(get_rank())))
    started = None if now else collectives.all_gather_async(flat, sizes, group=group)
    if started is None:
        return None, collectives.all_gather(flat, group=group, sizes=sizes), items, per
    return started[0], started[1], items, per


def _land(work, whole, items, per):
    """Once work is done: each parameter's piece = its rows of every other rank, out of the flat
    buffer laid out rank by rank (this rank's rows were updated in place: add takes views of them)."""
    if work is not None:
        work.wait()
    at, pl = 0, items[0][0].placement
    mine = pl.mesh_coord(get_rank())[0]
    for i in range(len(per[0])):
        for (p, _), lengths in zip(items, per):
            n, start = lengths[i], sum(lengths[:i])
            if i != mine:
                p._local.reshape(-1)[start:start + n] = whole[at:at + n]
            at += n


def reshard_parameter(p, sbp):
    """p's layout becomes sbp in place (p.data =), its gradient too; identity and requires_grad kept."""
    with no_grad():
        p.data = p.detach().to_global(placement=p.placement, sbp=sbp)
        if p.grad is not None:
            p.grad = p.grad.to_global(placement=p.placement, sbp=sbp)
    piece = p._local
    if isinstance(piece, np.ndarray) and piece.base is not None and piece.base.nbytes > piece.nbytes:
        p._local = piece.copy()  # a slice of the whole value would keep all of it alive: the shard owns its memory
    p._grad_sbp = None
