"""Each table once: the dtype, reduction-op and random-kind codes are kernels/types.h's (read from _native),
nothing in globaltensor/ numbers them again."""
import pathlib
import re
import types

import numpy as np
import pytest

import globaltensor as gt
from globaltensor import _native
from globaltensor import dtype as _dtype
from globaltensor import random as _random
from globaltensor.distributed import collectives

PACKAGE = pathlib.Path(gt.__file__).parent


def test_every_dtype_code_is_the_kernels_enum():
    assert {d.name for d in _dtype.ALL} == set(_native.DType.__members__)
    for d in _dtype.ALL:
        assert d.code is _native.DType.__members__[d.name]
        assert _dtype.from_code(int(d.code)) is d and _dtype.from_code(d.code) is d
        assert _native.dtype_of(np.zeros(2, d.np)) == d.code  # C++ reads a numpy array's dtype the same way
        assert d.code.itemsize == d.itemsize
    assert _native.dtype_of(np.zeros(2, np.int16)) is None
    with pytest.raises(ValueError, match="no dtype has the code 99"):
        _dtype.from_code(99)


def test_reduction_ops_and_random_kinds_are_the_kernels_enums():
    assert set(_native.RedOp.__members__) == {"sum", "max", "min", "avg"}  # avg: all_reduce_mean's only
    assert collectives._REDOPS == {k: _native.RedOp.__members__[k] for k in ("sum", "max", "min")}
    assert (_random.UNIFORM, _random.NORMAL, _random.RANDINT, _random.BERNOULLI) == tuple(
        _native.RandomKind.__members__[k] for k in ("uniform", "normal", "randint", "bernoulli"))
    reducible = {d.name for d in _dtype.ALL if d.code.arithmetic}
    assert reducible == {"float32", "float64", "float16", "bfloat16", "int32", "int64"}
    complex_ = {d.name for d in _dtype.ALL if d.code.complex}
    assert complex_ == {"complex64", "complex128"}  # summed as float pairs; max/min refused
    assert collectives._REDUCIBLE == {np.dtype(gt.dtype.to_dtype(n).np) for n in reducible | complex_}


# NAME": <int> for a dtype or reduction name: a numbering of our own. pynccl.py maps to NCCL's.
_NUMBERED = re.compile(r"""["'](float32|float64|float16|bfloat16|int32|int64|bool|int8|uint8|complex64|complex128|sum|max|min)"""
                       r"""["']\s*:\s*\d""")
_FOREIGN = {"distributed/pynccl.py": "NCCL's numbering (ncclDataType_t, ncclRedOp_t), the ABI of libnccl"}


def test_nothing_in_the_package_numbers_dtypes_or_ops_again():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text()
        hits = _NUMBERED.findall(text) + re.findall(r"ALL\.index|KERNEL_CODES", text)
        if hits and rel not in _FOREIGN:
            found[rel] = hits
    assert not found, f"numeric dtype / op tables outside _native: {found}; read _native.DType / _native.RedOp instead"
    for rel in _FOREIGN:
        assert _NUMBERED.search((PACKAGE / rel).read_text()), f"{rel} no longer needs its exemption"


def test_reducing_bindings_take_the_dtype_from_the_arrays():
    out = np.zeros(3, np.float32)
    _native.reduce_into(out, [np.ones(3, np.float32), np.full(3, 2, np.float32)], _native.RedOp.max)
    assert (out == 2).all()
    with pytest.raises(TypeError, match="philox_fill: cannot draw random values of dtype bool"):
        _native.philox_fill(np.zeros(3, np.bool_), _native.RandomKind.uniform, [3], [0], 1, 0, 0.0, 1.0)
    with pytest.raises(TypeError, match="random values of dtype bool are not supported"):
        gt.creation._random_tensor((3,), gt.bool, None, None, _random.UNIFORM, 0.0, 1.0)


def test_all_reduce_refuses_a_dtype_it_cannot_reduce_before_joining():
    with pytest.raises(TypeError, match="all_reduce: cannot reduce dtype int16; supported: float32, float64, "
                                        "float16, bfloat16, int32, int64, bool, int8, uint8"):
        collectives.all_reduce(np.zeros(3, np.int16))  # bool, int8, uint8: reduced as int32 (OneFlow's bools)
    with pytest.raises(ValueError, match="op must be one of"):
        collectives.all_reduce(np.zeros(3, np.float32), op="mean")


def _pieces_of_many_dims():
    """Twenty dims through each use of the one metadata exchange (from_local allowed 17 before, the
    data-dependent outputs 16), with rank 2 outside the placement learning the shapes too."""
    r = gt.env.get_rank()
    pl = gt.placement("cpu", [0, 1])
    ones = (1,) * 19
    x = gt.tensor(np.full((2,) + ones, r + 1.0, np.float32)).to_global(pl, gt.sbp.split(0))
    whole = x.to_global(sbp=gt.sbp.broadcast)
    mask = gt.tensor(np.array([True, False, True, False]), placement=pl, sbp=gt.sbp.broadcast)
    picked = whole[mask, ...]  # getitem: its output shape is read from the result (data-dependent)
    same = gt.tensor(np.arange(24.0).reshape((2, 3, 4) + (1,) * 17), placement=pl, sbp=gt.sbp.broadcast)
    return x.shape, picked.shape, picked.dtype.name, same.shape, \
        picked.to_local().numpy().ravel().tolist() if r in pl else None


def test_one_metadata_exchange_describes_pieces_of_many_dims():
    from conftest import run_ranks
    for r, (x_shape, picked_shape, dtype, same_shape, values) in enumerate(run_ranks(_pieces_of_many_dims, 3)):
        assert x_shape == (4,) + (1,) * 19 and picked_shape == (2,) + (1,) * 19 and dtype == "float32"
        assert same_shape == (2, 3, 4) + (1,) * 17
        assert values == ([1.0, 2.0] if r < 2 else None)


def test_the_metadata_exchange_is_one_function():
    from globaltensor import creation, dispatch
    from globaltensor.boxing import from_pieces, metadata
    for module, call in ((creation, "check_same_data("), (dispatch, "gather_pieces("), (from_pieces, "gather_pieces(")):
        text = pathlib.Path(module.__file__).read_text()  # gt.tensor's check is metadata's check_same_data
        assert call in text and "collectives.all_gather(" not in text, module.__name__
    assert "gather_pieces(" in pathlib.Path(metadata.__file__).read_text().split("def check_same_data")[1]
    alone = types.SimpleNamespace(ranks=(0,))  # a group of one exchanges nothing
    deepest = np.zeros((1,) * 64, np.int8)  # numpy's own limit is the exchange's
    assert metadata.gather_pieces([deepest], "cpu", alone, tag=-5) == {0: (-5, (((1,) * 64, gt.int8),))}
    assert metadata.gather_pieces(None, "cpu", alone, slots=4) == {}
    with pytest.raises(ValueError, match=r"nonzero: at most 1 piece\(s\) of at most 64 dims can be described"):
        metadata.gather_pieces([deepest, deepest], "cpu", alone, what="nonzero")


# --- boxing step kinds: one table read by planning, running and printing --------------------------

def _sweep_plans(monkeypatch):
    """Plans between every pair of SBPs on 1-D and 2-D meshes and across placements (no process:
    planning is pure); {kind name: number of steps of that kind}."""
    import itertools
    from globaltensor.boxing import plan
    monkeypatch.setenv("WORLD_SIZE", "4")
    S = gt.sbp
    one = [S.split(0), S.split(1), S.broadcast, S.partial_sum]
    pls = [gt.placement("cpu", [0, 1, 2, 3]), gt.placement("cpu", [[0, 1], [2, 3]]), gt.placement("cpu", [2, 3, 1])]
    seen = {}
    for src_pl, dst_pl in itertools.product(pls, pls):
        for src in itertools.product(one, repeat=src_pl.ndim):
            for dst in itertools.product(one, repeat=dst_pl.ndim):
                moved_s_to_p = src_pl.ndim == dst_pl.ndim == 1 and src[0] != S.broadcast and src[0] != S.partial_sum
                if S.partial_sum in dst and src_pl != dst_pl and not moved_s_to_p:
                    continue
                for step in plan(src_pl, src, dst_pl, dst, (8, 6), 4).steps:
                    seen[step.kind.name] = seen.get(step.kind.name, 0) + 1
                    assert step.kind is KINDS[step.kind.name]
    return seen


from globaltensor.boxing.steps import KINDS, along_axis  # noqa: E402


def test_the_step_table_covers_every_change_along_a_mesh_axis():
    S = gt.sbp
    sbps = [S.split(0), S.split(1), S.broadcast, S.partial_sum]
    for s in sbps:
        for t in sbps:
            if s == t:
                continue
            kind = along_axis(s, t)
            assert kind.transition == (str(s)[0], str(t)[0]) and callable(kind.run) and callable(kind.bytes)
    assert {k.transition for k in KINDS.values() if k.transition} == \
        {("S", "S"), ("S", "B"), ("S", "P"), ("B", "S"), ("B", "P"), ("P", "S"), ("P", "B")}


def test_the_planner_emits_every_kind_of_the_table_and_no_other(monkeypatch):
    seen = _sweep_plans(monkeypatch)
    assert set(seen) == set(KINDS), f"kinds never planned: {set(KINDS) - set(seen)}"
    local = {name for name, k in KINDS.items() if k.collective is None}
    assert local == {"slice", "broadcast_to_partial", "split_to_partial"}
    assert all(KINDS[name].bytes(*[None] * 7) == 0 for name in local)


def test_step_kinds_are_spelled_only_in_the_table():
    every = set(KINDS)
    not_collectives = every - {k.collective for k in KINDS.values()}  # a program's "all_reduce" is a collective
    for rel, names in (("boxing/planning.py", every), ("boxing/execution.py", every),
                       ("graph/program.py", not_collectives), ("debug.py", not_collectives)):
        text = (PACKAGE / rel).read_text()
        found = re.findall(rf"[\"']({'|'.join(names)})[\"']", text)
        assert not found, f"{rel} spells step kinds {found}; read boxing.steps.KINDS"


def _moved_in_a_graph():
    S0 = gt.sbp.split(0)
    x = gt.tensor(np.arange(12.0).reshape(6, 2), placement=gt.placement("cpu", [0, 1]), sbp=S0)
    other = gt.placement("cpu", [1, 0])

    @gt.jit.trace
    def move(t):
        return t.to_global(placement=other, sbp=S0) * 2  # the overlap route: one all_to_all

    move(x)
    with gt.debug.count_collectives() as counted:
        y = move(x)
    program = move._cache()["last"]
    return program.collectives(), dict(counted), program.text(), y.numpy().tolist()


def test_a_program_names_the_collective_each_step_kind_issues():
    from conftest import run_ranks
    for collectives_, counted, text, value in run_ranks(_moved_in_a_graph, 2):
        assert collectives_ == ["all_to_all"] and counted == {"all_to_all": 1}
        assert "[redistribute]" in text
        assert value == (np.arange(12.0).reshape(6, 2) * 2).tolist()
