"""Shape inference on global tensors.

The dispatcher finds output shapes as each op declares (registry/__init__.py): a meta from shapes
alone, stand-ins only where declared safe, or, for output sizes that depend on the data, the
results of every call. Here: every name of ops-target.txt on global tensors whose dims have
sizes 0, 1 and 2, on 2 and 3 ranks, with several input SBPs (splits of size-0 and size-1 dims
included), against numpy on the full values; the index_select failure that stand-ins caused;
data-dependent shapes that change between calls with the same layouts; the registry's rule.
"""
import os
import warnings

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks
from globaltensor import dispatch
from globaltensor import registry
from globaltensor.registry import rules
from sized_ops import CASES, Random, inputs
from test_every_op import Global, Local
from targets import OPS_TARGET

B, P, S = gt.sbp.broadcast, gt.sbp.partial_sum, gt.sbp.split
SIZES = (0, 1, 2)


def _target_names():
    path = OPS_TARGET
    if not os.path.exists(path):
        return sorted(CASES)
    return [w for line in open(path) if not line.startswith("#") for w in line.split()]


def test_every_target_name_has_a_sized_case():
    missing = [n for n in _target_names() if n not in CASES]
    assert not missing, missing


# --- every op on dims of size 0, 1 and 2 ------------------------------------------------------

def _combos(arrays, n):
    """Input SBPs: all broadcast; all split on dim 0 (the size-n dim, mostly); a mix of splits on
    other dims (sizes 1 and 2 over 3 ranks leave empty pieces) and partial sums."""
    combos = [tuple(B for _ in arrays), tuple(S(0) if a.ndim else B for a in arrays)]
    mixed = []
    for i, a in enumerate(arrays):
        options = [S(d) for d in range(a.ndim)] + ([P] if a.dtype.kind == "f" else []) + [B]
        mixed.append(options[(i + n + 1) % len(options)])
    combos.append(tuple(mixed))
    return list(dict.fromkeys(combos))


def _outputs(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _values(outs):
    return [o.numpy() if isinstance(o, gt.Tensor) else np.asarray(o) for o in outs]


def _compare(got, want, exact=False):
    want = _outputs(want)
    assert len(got) == len(want), f"{len(got)} outputs, numpy has {len(want)}"
    for j, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape, f"output {j}: shape {g.shape}, numpy's {w.shape}"
        if not exact and (g.dtype.kind in "fc" or w.dtype.kind in "fc"):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-6, atol=1e-9,
                                       equal_nan=True, err_msg=f"output {j}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {j}")


def run_case(name, n, placement, combo):
    """Run CASES[name] at size n on `placement` with input SBPs `combo` (a factory's SBP when it
    has no inputs) and compare with numpy; returns each output's (global shape, sbp)."""
    make, call, reference = CASES[name]
    arrays = inputs(name, n)
    if arrays:
        args = [gt.tensor(a, placement=placement, sbp=s) for a, s in zip(arrays, combo)]
        factory = Global(placement, (B,) * placement.ndim)
    else:
        args, factory = [n], Global(placement, combo)
    gt.manual_seed(11)
    outs = _outputs(call(factory, *args))
    got = _values(outs)
    for o, v in zip(outs, got):
        if isinstance(o, gt.Tensor):
            assert tuple(o.shape) == v.shape, f"global shape {tuple(o.shape)}, but its value has shape {v.shape}"
    if isinstance(reference, Random):
        gt.manual_seed(11)
        local = _values(_outputs(call(Local(), *([gt.tensor(a) for a in arrays] if arrays else [n]))))
        _compare(got, local, exact=True)  # the same values whatever the placement (SPEC §3)
        reference.check(got, arrays)
    else:
        _compare(got, reference(*(arrays if arrays else [n])))
    return [(tuple(o.shape), o.sbp) if isinstance(o, gt.Tensor) else None for o in outs]


def _sweep():
    """Every case, size and SBP combination on this job's ranks; (failures, layouts)."""
    k = gt.env.get_world_size()
    placement = gt.placement("cpu", list(range(k)))
    failures, layouts = [], {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for name in sorted(CASES):
            for n in SIZES:
                arrays = inputs(name, n)
                combos = _combos(arrays, n) if arrays else [(B,), (S(0),)]
                for combo in combos:
                    try:
                        layouts[(name, n, str(combo))] = run_case(name, n, placement, combo)
                    except Exception as exc:  # noqa: BLE001 - every failure is reported below
                        failures.append(f"{name} n={n} sbp={combo}: {type(exc).__name__}: {exc}")
    return failures, layouts


@pytest.mark.parametrize("nprocs", [2, 3])
def test_every_op_on_dims_of_size_0_1_2(nprocs):
    results = run_ranks(_sweep, nprocs, timeout=300)
    failures, layouts = results[0]
    assert not failures, f"{len(failures)} failures on rank 0:\n" + "\n".join(failures)
    for r, (other_failures, other_layouts) in enumerate(results[1:], 1):
        assert not other_failures, f"rank {r}:\n" + "\n".join(other_failures)
        assert other_layouts == layouts, f"rank {r} reached other global shapes or SBPs than rank 0"


# --- the failure stand-ins caused ---------------------------------------------------------------

def _index_select_on_a_size_one_dim():
    placement = gt.placement("cpu", [0, 1])
    x = gt.tensor(np.arange(6.0).reshape(1, 6), placement=placement, sbp=S(1))
    index = gt.tensor(np.array([0, 0, 0]), placement=placement, sbp=B)
    y = gt.index_select(x, index=index, axis=0)  # stand-ins of ones: "index 1 is out of bounds"
    return tuple(y.shape), y.numpy()


def test_index_select_on_a_size_one_dim():
    for shape, value in run_ranks(_index_select_on_a_size_one_dim, 2):
        assert shape == (3, 6)
        np.testing.assert_array_equal(value, np.arange(6.0).reshape(1, 6)[[0, 0, 0]])


# --- data-dependent output sizes ----------------------------------------------------------------

def _data_dependent_twice():
    """nonzero, masked_select, unique and a bool-mask getitem, twice each with the same layouts
    but other values; on every rank of the job, on a placement of all ranks and on one that
    leaves rank 2 out (which must still learn the shapes)."""
    found = []
    for ranks in ([0, 1, 2], [0, 1]):
        placement = gt.placement("cpu", ranks)
        for data in (np.array([[0, 1, 0], [0, 0, 0]]), np.array([[1, 1, 0], [2, 0, 3]])):
            x = gt.tensor(data, placement=placement, sbp=S(0))
            mask = gt.tensor(data > 0, placement=placement, sbp=S(1))
            f = gt.tensor(data.astype(np.float64), placement=placement, sbp=P)
            outs = [gt.nonzero(x), gt.masked_select(f, mask), gt.unique(x), f[mask], f[:, mask[0]]]
            found.append([(tuple(o.shape), o.sbp, o.numpy()) for o in outs])
    return found


def test_data_dependent_shapes_are_read_every_call():
    results = run_ranks(_data_dependent_twice, 3)
    for ranks_case in range(2):
        for d, data in enumerate((np.array([[0, 1, 0], [0, 0, 0]]), np.array([[1, 1, 0], [2, 0, 3]]))):
            f, mask = data.astype(np.float64), data > 0
            want = [np.stack(np.nonzero(data), 1), f[mask], np.unique(data), f[mask], f[:, mask[0]]]
            for rank, found in enumerate(results):
                for (shape, sbp, value), w in zip(found[2 * ranks_case + d], want):
                    assert shape == w.shape, (rank, ranks_case, d, shape, w.shape)
                    assert sbp == (B,)
                    np.testing.assert_array_equal(value, w)
    first, second = results[0][0], results[0][1]
    assert [s for s, _, _ in first] != [s for s, _, _ in second]  # the shapes did change


def test_no_data_dependent_shape_in_the_decision_cache():
    placement = gt.placement("cpu", [0])
    shapes = []
    for data in ([0, 3, 0, 4], [1, 1, 1, 0]):
        shapes.append(tuple(gt.nonzero(gt.tensor(np.array(data), placement=placement, sbp=S(0))).shape))
    assert shapes == [(2, 1), (3, 1)]
    nonzero = registry.REGISTRY["nonzero"]
    decisions = [d for key, d in dispatch._cache.items() if key[0] is nonzero]
    assert decisions and all(d.out_layouts is None and d.out_shapes is None for d in decisions)


# --- metas ----------------------------------------------------------------------------------------

def test_every_meta_agrees_with_its_kernel():
    """Each op's declared shapes and dtypes against its kernel on the soundness samples (local
    arrays; on the sized inputs above, the dispatcher checks every piece against its layout)."""
    try:
        from test_soundness import samples
    except Exception as exc:  # noqa: BLE001 - its own run reports why
        pytest.skip(f"test_soundness (the samples) does not import: {type(exc).__name__}: {exc}")
    checked = 0
    for name, opdef in sorted(registry.REGISTRY.items()):
        if not callable(opdef.meta):
            continue
        try:
            cases = samples(name)
        except KeyError:  # an op without soundness samples: test_soundness reports it
            continue
        for arrays, static in cases:
            out = opdef.kernel(*arrays, **static)
            outs = out if isinstance(out, tuple) else (out,)
            shapes, dtypes = opdef.meta([a.shape for a in arrays], [gt.dtype.of_array(a) for a in arrays], static)
            assert [tuple(s) for s in shapes] == [np.shape(o) for o in outs], name
            assert [np.dtype(getattr(d, "np", d)) for d in dtypes] == [np.asarray(o).dtype for o in outs], name
            checked += 1
    assert checked > 60


def test_getitem_shapes_follow_numpy():
    from globaltensor.ops.indexing import index_shape
    x = np.zeros((3, 4, 5, 6))
    i, j = np.zeros((2, 7), np.int64), np.zeros((7,), np.int64)
    keys = [(i, None, i), (i, 1, i), (slice(None), i, 1), (slice(None), i, slice(None), 1), (1, slice(None), i),
            (Ellipsis, i), (i, Ellipsis, j), (None, i, j), (slice(None), i, None), (i, slice(None), None, j),
            (np.zeros((), np.int64),), (slice(1, None, 2), j, j, slice(None, None, -1)), (-1, Ellipsis, None),
            (slice(None), slice(None), slice(None), slice(None), None), (j[:0],), (Ellipsis,), ()]
    for key in keys:
        encoded, shapes = [], []
        for k in key:
            if isinstance(k, np.ndarray):
                encoded.append("tensor")
                shapes.append(k.shape)
            elif isinstance(k, slice):
                encoded.append(("slice", k.start, k.stop, k.step))
            else:
                encoded.append("ellipsis" if k is Ellipsis else k)
        assert index_shape(x.shape, encoded, shapes) == x[key].shape, key
    with pytest.raises(IndexError, match="out of bounds"):
        index_shape((3,), [3])
    with pytest.raises(IndexError, match="(?i)too many indices"):
        index_shape((3,), [0, 0])


def test_wrong_bool_index_raises():
    placement = gt.placement("cpu", [0])
    x = gt.tensor(np.arange(6.0).reshape(2, 3), placement=placement, sbp=B)
    with pytest.raises(IndexError, match="does not match"):
        x[gt.tensor(np.array([True, False, True]), placement=placement, sbp=B), :]
    y = x[:, gt.tensor(np.array([True, False, True]), placement=placement, sbp=B)]
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0).reshape(2, 3)[:, [0, 2]])


# --- the registry's rule --------------------------------------------------------------------------

class _Temporary:
    """Register ops for one test; removed (with their cached decisions) afterwards."""

    def __init__(self):
        self.names = []

    def op(self, name, *args, **kwargs):
        self.names.append(name)
        return registry.op(name, *args, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for name in self.names:
            opdef = registry.REGISTRY.pop(name, None)
            for key in [k for k in dispatch._cache if k[0] is opdef]:
                del dispatch._cache[key]


def _own_rows(s, o, st):
    return [((B,) * len(s), (B,) * len(o))]


def test_an_undeclared_op_gets_no_stand_ins_for_integer_inputs():
    placement = gt.placement("cpu", [0])
    with _Temporary() as tmp:
        tmp.op("tmp_take", _own_rows)(lambda x, i: x[i])
        tmp.op("tmp_take_meta", _own_rows, meta=lambda s, dt, st: ([tuple(s[1])], [dt[0]]))(lambda x, i: x[i])
        tmp.op("tmp_double", _own_rows)(lambda x: x * 2)
        x = gt.tensor(np.arange(4.0), placement=placement, sbp=B)
        i = gt.tensor(np.array([3, 3]), placement=placement, sbp=B)
        with pytest.raises(TypeError, match="tmp_take: cannot infer its output shapes .* declares no meta"):
            dispatch.apply("tmp_take", [x, i])
        np.testing.assert_array_equal(dispatch.apply("tmp_take_meta", [x, i]).numpy(), [3.0, 3.0])
        np.testing.assert_array_equal(dispatch.apply("tmp_double", [x]).numpy(), np.arange(4.0) * 2)
        with pytest.raises(ValueError, match="data-dependent op has no meta"):
            tmp.op("tmp_bad", _own_rows, meta=registry.STANDIN, data_dependent=True)
        with pytest.raises(TypeError, match="meta must be a function"):
            tmp.op("tmp_bad", _own_rows, meta="yes")


def test_every_op_of_the_package_declares_its_shapes():
    """No op of globaltensor.ops relies on stand-in values: each has a meta (its own or its rules
    generator's), or reads its shapes from its results (data-dependent)."""
    standing_in = [name for name, opdef in sorted(registry.REGISTRY.items())
                   if opdef.meta in (None, registry.STANDIN) and not opdef.data_dependent
                   and opdef.kernel.__module__.startswith("globaltensor.ops")]
    assert not standing_in, standing_in


def test_family_rules_give_metas():
    """Ops with rules.elementwise/rules.reduction rows need no meta: shapes from the generator."""
    for name in ("add", "where", "sum", "argmax", "shard_index"):
        assert registry.REGISTRY[name].meta is not None, name
    assert rules.broadcast_shape([(2, 1), (3,)]) == (2, 3)
    assert rules.reduced_shape([(2, 0, 3)], {"dims": (1,), "keepdim": True}) == (2, 1, 3)


def test_a_wrong_meta_fails_on_its_first_call():
    placement = gt.placement("cpu", [0])
    with _Temporary() as tmp:
        tmp.op("tmp_wrong", _own_rows, meta=lambda s, dt, st: ([(5,)], [dt[0]]))(lambda x: x[:2])
        x = gt.tensor(np.arange(4.0), placement=placement, sbp=B)
        with pytest.raises(RuntimeError, match=r"tmp_wrong: .* piece of shape \(2,\).* says \(5,\)"):
            dispatch.apply("tmp_wrong", [x])


def test_stand_in_failures_name_the_op():
    placement = gt.placement("cpu", [0])

    def picky(x):
        if x.strides == (0,):
            raise KeyError("stand-ins are not welcome")
        return x * 1

    with _Temporary() as tmp:
        tmp.op("tmp_picky", _own_rows, meta=registry.STANDIN)(picky)
        x = gt.tensor(np.arange(4.0), placement=placement, sbp=B)
        with pytest.raises(RuntimeError, match="tmp_picky: cannot find its output shapes: KeyError.*stand-in"):
            dispatch.apply("tmp_picky", [x])
    with _Temporary() as tmp:  # stand-ins with a 0 dim: the kernel's own error, named
        tmp.op("tmp_first", _own_rows, meta=registry.STANDIN)(lambda x: x[0])
        empty = gt.tensor(np.zeros((0, 3)), placement=placement, sbp=S(0))
        with pytest.raises(IndexError, match=r"tmp_first: index 0 is out of bounds .*input shapes \(0, 3\).*stand-in"):
            dispatch.apply("tmp_first", [empty])
