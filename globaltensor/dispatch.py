"""Dispatch: check -> choose a signature -> box the inputs -> run the kernel -> wrap (+ record).

Decisions are cached per (op, placement, input SBPs, shapes, dtypes, static arguments), so
a repeated op costs a dictionary lookup before its kernel. Output shapes come from what the op
declares (registry/__init__.py): a meta, stand-ins where that is declared safe, or, for an op whose
output size depends on the data, the results of each call (never the cache). Every piece a
kernel returns is checked against the shape its layout says.
"""
import functools
import itertools
import operator

import numpy as np

from . import autograd
from . import dtype as _dtype
from . import layout as layout_lib
from .backends.devices import device, of_array
from .boxing import gather_pieces, plan, run
from .boxing.planning import reduction_bytes
from .env import get_rank
from .errors import PlacementError, not_broadcast, same_placement_error
from .registry import REGISTRY
from .sbp import Signature, broadcast, partial_sum, split
from .scope import current as _scope
from .tensor import Layout, Tensor


class Decision:
    """The signature chosen for one cache key, with what it needs at run time. A data-dependent
    op's decision keeps only the input side (plans to broadcast): out_layouts is None and the
    output shapes are read from each call's results."""

    __slots__ = ("in_sbps", "out_sbps", "out_shapes", "out_dtypes", "plans", "out_layouts", "participates",
                 "single", "device", "pieces", "offsets")

    def __init__(self, in_sbps, out_sbps, out_shapes, out_dtypes, plans):
        self.in_sbps, self.out_sbps, self.out_shapes = in_sbps, out_sbps, out_shapes
        self.out_dtypes, self.plans = out_dtypes, plans
        self.out_layouts, self.participates = None, True
        self.single = out_shapes is not None and len(out_shapes) == 1
        self.device = None
        self.pieces = None  # this rank's piece shape of each output, as its layout says
        self.offsets = None  # for ops taking offsets: where each input's piece starts, per dim

    @property
    def signature(self):
        """The chosen signature (outputs empty for a data-dependent op: read from each call)."""
        return Signature(self.in_sbps, self.out_sbps or ())


_piece_of = operator.attrgetter("_local")
_cache = {}  # (op, statics, input layouts) -> Decision, at most CACHE_SIZE (the oldest half goes when full)
CACHE_SIZE = 8192


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _static_key(static):
    """The static arguments as a hashable key: their items when hashable (the common case)."""
    key = tuple(static.items())
    try:
        hash(key)
        return key
    except TypeError:
        return _freeze(static)


class ShapeInferenceError(TypeError):
    """An op whose output shapes cannot be found safely: it declares no meta and takes an integer
    or bool tensor, whose values a kernel may index or mask by."""


def _meta(opdef, tensors, static):
    """Output shapes and dtypes as the op declares them (registry.py): its meta, or its kernel on
    zero-stride stand-ins (declared STANDIN, or undeclared with floating inputs only)."""
    shapes = [tuple(t.shape) for t in tensors]
    dtypes = [t.dtype for t in tensors]
    meta = opdef.meta
    if callable(meta):
        out_shapes, out_dtypes = meta(shapes, dtypes, static)
    else:
        if meta is None:
            odd = [f"input {i} is {d!r}" for i, d in enumerate(dtypes) if not d.is_floating]
            if odd:
                raise ShapeInferenceError(
                    f"{opdef.name}: cannot infer its output shapes on global tensors: the op declares no meta "
                    f"and {', '.join(odd)}; stand-in values could index or mask wrongly. Register it with "
                    f"meta=fn(in_shapes, in_dtypes, static) -> (out_shapes, out_dtypes), with meta=registry.STANDIN "
                    f"if its output shapes never depend on values, or with data_dependent=True")
        out_shapes, out_dtypes = _standin(opdef.kernel, shapes, dtypes, static)
    out_shapes = [tuple(int(n) for n in s) for s in out_shapes]
    if len(out_shapes) != len(out_dtypes):
        raise ValueError(f"{opdef.name}: its meta gave {len(out_shapes)} shapes and {len(out_dtypes)} dtypes")
    return out_shapes, [_dtype.to_dtype(d) for d in out_dtypes]


def _standin(kernel, shapes, dtypes, static):
    """The kernel on read-only zero-stride arrays of ones with the global shapes (a 0 dim too)."""
    fakes = [np.lib.stride_tricks.as_strided(np.ones(1, d.np), s, (0,) * len(s), writeable=False)
             for s, d in zip(shapes, dtypes)]
    with np.errstate(all="ignore"):
        out = kernel(*fakes, **static)
    outs = out if isinstance(out, tuple) else (out,)
    return [np.shape(o) for o in outs], [np.asarray(o).dtype for o in outs]


_USER_ERRORS = (ValueError, IndexError, TypeError, np.exceptions.AxisError)


def _infer(opdef, tensors, static):
    """_meta, with errors that name the op, its input shapes and, for stand-ins, what ran."""
    try:
        return _meta(opdef, tensors, static)
    except ShapeInferenceError:
        raise
    except Exception as exc:
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
        how = "" if callable(opdef.meta) else (
            "; its kernel ran on stand-in values of ones to find its output shapes (an op whose kernel needs "
            "real values declares meta=)")
        said = str(exc)
        named = said if said.startswith(f"{opdef.name}:") else f"{opdef.name}: {said}"  # the op named once
        message = f"{named} (input shapes {shapes}{how})"
        if isinstance(exc, _USER_ERRORS):
            try:
                error = type(exc)(message)
            except Exception:
                error = None
            if error is not None:
                raise error from None
        raise RuntimeError(f"{opdef.name}: cannot find its output shapes: {type(exc).__name__}: {exc} "
                           f"(input shapes {shapes}{how})") from exc


def _decide(opdef, tensors, static):
    if opdef.real_only:
        opdef.refuse_complex(tensors)
    placement = tensors[0].placement
    if opdef.data_dependent:
        return _decide_data_dependent(opdef, tensors, placement)
    out_shapes, out_dtypes = _infer(opdef, tensors, static)
    rows = opdef.rules([t.shape for t in tensors], out_shapes, static)
    current = [t.sbp for t in tensors]
    best, best_key = None, None
    for order, combo in enumerate(itertools.product(rows, repeat=placement.ndim)):
        in_sbps = [tuple(row[0][i] for row in combo) for i in range(len(tensors))]
        out_sbps = [tuple(row[1][j] for row in combo) for j in range(len(out_shapes))]
        plans = [plan(placement, t.sbp, placement, s, t.shape, t.dtype.itemsize) if s != t.sbp else None
                 for t, s in zip(tensors, in_sbps)]
        cost = sum(p.bytes for p in plans if p is not None) + _deferral(placement, current, in_sbps, out_sbps,
                                                                        out_shapes, out_dtypes)
        moved = sum(1 for s, c in zip(in_sbps, current) if s != c)
        key = (cost, moved, order)  # fewest bytes (now and deferred), then keep inputs as they are, then row order
        if best_key is None or key < best_key:
            best, best_key = Decision(in_sbps, out_sbps, out_shapes, out_dtypes, plans), key
    best.out_layouts = [Layout.of(sh, dt, placement, sbp) for sh, dt, sbp in zip(out_shapes, out_dtypes, best.out_sbps)]
    coord = placement.mesh_coord(get_rank())
    best.participates = coord is not None
    if coord is not None:
        best.pieces = [layout_lib.local_shape(sh, placement.hierarchy, sbp, coord)
                       for sh, sbp in zip(out_shapes, best.out_sbps)]
        if opdef.takes_offsets:
            best.offsets = tuple(tuple(a for a, _ in layout_lib.local_box(t.shape, placement.hierarchy, s, coord))
                                 for t, s in zip(tensors, best.in_sbps))
    best.device = device(placement.type)
    if all(p is None for p in best.plans):
        best.plans = None
    return best


def _deferral(placement, current, in_sbps, out_sbps, out_shapes, out_dtypes):
    """The price of partial sums made by conversion (free to convert, B or S -> P, but the
    output's reduction is only put off, and a piece made P is a full-size array of zeros on
    every rank but one): on a mesh axis where an input is P already and another is made P, or
    where inputs are made P without a split input whose contraction makes the output partial
    anyway (a row-parallel layer's bias), the P output's reduction is charged here (plus a
    byte: putting off is never free). Reducing the P input now then wins unless the output is
    smaller: a residual stream stays whole where a row-parallel layer's sum meets it (Megatron's
    one all_reduce), and a split tensor is not turned P to run a linear op on zeros."""
    total = 0
    for axis in range(placement.ndim):
        pairs = [(c[axis], s[axis]) for c, s in zip(current, in_sbps)]
        made = any(c is not partial_sum and s is partial_sum for c, s in pairs)
        kept = any(c is partial_sum and s is partial_sum for c, s in pairs)
        contracted = any(isinstance(s, split) for _, s in pairs)  # S x S -> P: partial by the op itself
        if made and (kept or not contracted):
            total += sum(1 + reduction_bytes(placement, sbp, axis, shape, dt.itemsize)
                         for sbp, shape, dt in zip(out_sbps, out_shapes, out_dtypes) if sbp[axis] is partial_sum)
    return total


def _decide_data_dependent(opdef, tensors, placement):
    """Inputs boxed to broadcast on every mesh axis (each rank holds the whole value, so each
    computes the same result); no output shape: it is read from every call's results."""
    whole = (broadcast,) * placement.ndim
    plans = [plan(placement, t.sbp, placement, whole, t.shape, t.dtype.itemsize) if t.sbp != whole else None
             for t in tensors]
    decision = Decision([whole] * len(tensors), None, None, None, plans)
    decision.participates = placement.mesh_coord(get_rank()) is not None
    decision.device = device(placement.type)
    if all(p is None for p in plans):
        decision.plans = None
    return decision


def _check_placements(name, tensors):
    first = tensors[0]
    for t in tensors[1:]:
        if t._placement is first._placement:  # both local, or one placement object: nothing to check
            continue
        if t.is_global != first.is_global:
            g, loc = (first, t) if first.is_global else (t, first)
            raise RuntimeError(f"{name}: cannot mix a global tensor (placement {g.placement}) with a local tensor "
                               f"(placement: none); convert the local one with to_global(placement, sbp)")
        if t.is_global and t.placement != first.placement:
            raise PlacementError(f"{same_placement_error(first.placement, t.placement, name)}; move one with "
                                 f"to_global(placement=...)")


def apply(name, tensors, static=None, multi=False, out=None, order=None):
    """Run op `name` on tensor inputs (local or global) with static keyword arguments. `out` and
    `order` are this rank's hints to ops registered takes_hints (an array the kernel may write
    its piece into; "F" for a column-major piece): rank-local facts go there, never into the
    static arguments, so every rank still reaches the same decision."""
    opdef = REGISTRY[name]
    static = static or {}
    kernel = opdef.kernel
    if opdef.takes_hints and (out is not None or order is not None):
        kernel = functools.partial(kernel, out=out, order=order)
    state = _scope.get()
    if state.amp is not None and name in state.amp.ops:  # autocast: the op's inputs in its listed dtype
        tensors = state.amp.cast_inputs(name, tensors)
    if state.recorder is not None:  # a graph captures: it runs the op and records it (graph/capture.py)
        outs = state.recorder.apply(opdef, kernel, tensors, static)
    elif tensors[0]._placement is None:
        _check_placements(name, tensors)
        if opdef.real_only:
            opdef.refuse_complex(tensors)
        try:
            result = kernel(*[t._local for t in tensors], **static)
        except ValueError as exc:  # numpy's words for bad shapes -> the op's meta's, or PyTorch's (errors.py)
            if callable(opdef.meta):
                opdef.meta([tuple(t.shape) for t in tensors], [t.dtype for t in tensors], static)
            if "could not be broadcast" not in str(exc):
                raise
            raise not_broadcast(name, [t.shape for t in tensors]) from exc
        if type(result) is np.ndarray and type(tensors[0]._local) is np.ndarray:  # one numpy output: no device lookup, no generator frame
            outs = (Tensor(result),)
        else:
            dev = of_array(tensors[0]._local)
            outs = tuple(Tensor(dev.asarray(o)) for o in (result if isinstance(result, tuple) else (result,)))
    else:
        outs = _apply_global(opdef, kernel, tensors, static)
    if state.grad:
        for t in tensors:
            if t.requires_grad:
                autograd.record(name, opdef.backward, tensors, outs, static)
                break
    return outs if multi else outs[0]


def decision_for(opdef, tensors, static):
    """The cached decision for these inputs (made on a miss): one dict lookup keyed by interned layouts."""
    skey = _static_key(static) if static else ()
    if len(tensors) == 2:
        a, b = tensors
        key = (opdef, skey, a._layout or a.layout(), b._layout or b.layout() if b._placement is not None else None)
    elif len(tensors) == 1:
        key = (opdef, skey, tensors[0]._layout or tensors[0].layout())
    else:
        key = (opdef, skey, *[t.layout() if t._placement is not None else None for t in tensors])
    decision = _cache.get(key)
    if decision is None:
        _check_placements(opdef.name, tensors)
        if len(_cache) >= CACHE_SIZE:  # a decision is a pure function of its key: dropping one costs a re-decide
            for old in list(itertools.islice(_cache, len(_cache) // 2)):
                del _cache[old]
        decision = _cache[key] = _decide(opdef, tensors, static)
    return decision


def _apply_global(opdef, kernel, tensors, static):
    """The cached path: the decision, box, kernel, wrap."""
    decision = decision_for(opdef, tensors, static)
    plans = decision.plans
    if plans is None:
        pieces = list(map(_piece_of, tensors))  # no Python frame per op (a comprehension has one)
    else:
        pieces = [t._local if p is None else run(p, t._local, t._dtype) for t, p in zip(tensors, plans)]
    dev = decision.device
    if decision.out_layouts is None:
        return _data_dependent_outputs(opdef, decision, tensors[0].placement,
                                       kernel(*pieces, **static) if decision.participates else None)
    if not decision.participates:
        return tuple(Tensor._wrap(dev.empty((0,) * max(1, len(lay.shape)), lay.dtype.np), lay)
                     for lay in decision.out_layouts)
    if decision.offsets is None:
        out = kernel(*pieces, **static)
    else:  # an op taking offsets: where each input's piece starts
        out = kernel(*pieces, offsets=decision.offsets, **static)
    if decision.single:
        lay = decision.out_layouts[0]
        if type(out) is tuple:  # one output returned as a tuple (split into one piece)
            out = out[0]
        if type(out) is not np.ndarray:
            out = dev.asarray(out)
        if out.shape != decision.pieces[0]:
            _wrong_piece(opdef, decision, 0, out, tensors)
        if out.dtype != lay.dtype.np:
            out = out.astype(lay.dtype.np)
        return (Tensor._wrap(out, lay),)
    if not isinstance(out, (tuple, list)) or len(out) != len(decision.out_layouts):
        raise RuntimeError(f"{opdef.name}: the kernel returned {len(out) if isinstance(out, (tuple, list)) else 1} "
                           f"outputs where its shape inference found {len(decision.out_layouts)}")
    outs = []
    for j, (o, lay) in enumerate(zip(out, decision.out_layouts)):
        o = dev.asarray(o)
        if o.shape != decision.pieces[j]:
            _wrong_piece(opdef, decision, j, o, tensors)
        outs.append(Tensor._wrap(o if o.dtype == lay.dtype.np else o.astype(lay.dtype.np), lay))
    return tuple(outs)


def _wrong_piece(opdef, decision, j, piece, tensors):
    """A kernel's piece that its layout does not describe: the op's shape inference is wrong."""
    lay = decision.out_layouts[j]
    how = "its meta" if callable(opdef.meta) else "its kernel on stand-in values of ones"
    ins = ", ".join(f"{tuple(t.shape)} {t.sbp}" for t in tensors)
    raise RuntimeError(
        f"{opdef.name}: on rank {get_rank()} the kernel returned a piece of shape {tuple(piece.shape)} for output {j}, "
        f"but the output's layout (global shape {lay.shape}, sbp {lay.sbp}) says {decision.pieces[j]}: the output "
        f"shapes found by {how} are wrong for these inputs ({ins}); declare a correct meta= (or "
        f"data_dependent=True when the output size depends on the values)")


_MAX_OUTPUTS = 4  # the outputs of a data-dependent op whose shapes the ranks exchange


def _data_dependent_outputs(opdef, decision, placement, out):
    """Wrap a data-dependent op's results (None on a rank outside the placement) as broadcast
    tensors. Every rank, in the placement or not, learns the shapes from one small all_gather over
    all ranks (boxing's gather_pieces); ranks of the placement whose results differ in shape raise
    on every rank."""
    from .distributed.group import world_group
    dev = decision.device
    outs = None if out is None else [dev.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
    found = gather_pieces(outs, placement.type, world_group(), slots=_MAX_OUTPUTS, what=opdef.name)
    first = placement.rank_list()[0]
    if any(v != found[first] for v in found.values()):
        detail = "; ".join(f"rank {r}: {list(pieces)}" for r, (_, pieces) in sorted(found.items()))
        raise RuntimeError(f"{opdef.name}: the ranks of {placement} computed results of different shapes from the "
                           f"same broadcast inputs ({detail})")
    whole = (broadcast,) * placement.ndim
    result = []
    for j, (shape, dt) in enumerate(found[first][1]):
        lay = Layout.of(shape, dt, placement, whole)
        piece = outs[j] if outs is not None else dev.empty((0,) * max(1, len(shape)), dt.np)
        result.append(Tensor._wrap(piece, lay))
    return tuple(result)


AMP_ENTRIES = set()  # the names amp_entry decorated (tests check autocast's lists against them)


def amp_entry(name):
    """Decorator for a composite op on autocast's lists (cross_entropy, log_softmax, ...): under
    autocast its floating tensor arguments are cast per the list naming `name`, and its body runs
    with autocast off, as PyTorch's autocast treats one ATen op (globaltensor/amp/lists.py)."""
    AMP_ENTRIES.add(name)

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            policy = _scope.get().amp
            if policy is None or name not in policy.ops:
                return fn(*args, **kwargs)
            return policy.call(name, fn, args, kwargs)
        return run
    return wrap
