"""Each table once: the dtype, reduction-op and random-kind codes are kernels/types.h's (read from _C),
nothing in globaltensor/ numbers them again."""
import pathlib
import re
import types

import numpy as np
import pytest

import globaltensor as gt
from globaltensor import _C
from globaltensor import dtype as _dtype
from globaltensor import random as _random
from globaltensor.distributed import collectives

PACKAGE = pathlib.Path(gt.__file__).parent


def test_every_dtype_code_is_the_kernels_enum():
    assert {d.name for d in _dtype.ALL} == set(_C.DType.__members__)
    for d in _dtype.ALL:
        assert d.code is _C.DType.__members__[d.name]
        assert _dtype.from_code(int(d.code)) is d and _dtype.from_code(d.code) is d
        assert _C.dtype_of(np.zeros(2, d.np)) == d.code  # C++ reads a numpy array's dtype the same way
        assert d.code.itemsize == d.itemsize
    assert _C.dtype_of(np.zeros(2, np.int16)) is None
    with pytest.raises(ValueError, match="no dtype has the code 99"):
        _dtype.from_code(99)


def test_reduction_ops_and_random_kinds_are_the_kernels_enums():
    assert collectives._REDOPS == dict(_C.RedOp.__members__) and set(collectives._REDOPS) == {"sum", "max", "min"}
    assert (_random.UNIFORM, _random.NORMAL, _random.RANDINT, _random.BERNOULLI) == tuple(
        _C.RandomKind.__members__[k] for k in ("uniform", "normal", "randint", "bernoulli"))
    reducible = {d.name for d in _dtype.ALL if d.code.arithmetic}
    assert reducible == {"float32", "float64", "float16", "bfloat16", "int32", "int64"}
    assert collectives._REDUCIBLE == {np.dtype(gt.dtype.to_dtype(n).np) for n in reducible}


# NAME": <int> for a dtype or reduction name: a numbering of our own. pynccl.py maps to NCCL's.
_NUMBERED = re.compile(r"""["'](float32|float64|float16|bfloat16|int32|int64|bool|int8|uint8|sum|max|min)["']\s*:\s*\d""")
_FOREIGN = {"distributed/pynccl.py": "NCCL's numbering (ncclDataType_t, ncclRedOp_t), the ABI of libnccl"}


def test_nothing_in_the_package_numbers_dtypes_or_ops_again():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text()
        hits = _NUMBERED.findall(text) + re.findall(r"ALL\.index|KERNEL_CODES", text)
        if hits and rel not in _FOREIGN:
            found[rel] = hits
    assert not found, f"numeric dtype / op tables outside _C: {found}; read _C.DType / _C.RedOp instead"
    for rel in _FOREIGN:
        assert _NUMBERED.search((PACKAGE / rel).read_text()), f"{rel} no longer needs its exemption"


def test_reducing_bindings_take_the_dtype_from_the_arrays():
    out = np.zeros(3, np.float32)
    _C.reduce_into(out, [np.ones(3, np.float32), np.full(3, 2, np.float32)], _C.RedOp.max)
    assert (out == 2).all()
    with pytest.raises(TypeError, match="philox_fill: cannot draw random values of dtype bool"):
        _C.philox_fill(np.zeros(3, np.bool_), _C.RandomKind.uniform, [3], [0], 1, 0, 0.0, 1.0)
    with pytest.raises(TypeError, match="random values of dtype bool are not supported"):
        gt.creation._random_tensor((3,), gt.bool, None, None, _random.UNIFORM, 0.0, 1.0)


def test_all_reduce_refuses_a_dtype_it_cannot_reduce_before_joining():
    with pytest.raises(TypeError, match="all_reduce: cannot reduce dtype int8; supported: float32, float64, "
                                        "float16, bfloat16, int32, int64"):
        collectives.all_reduce(np.zeros(3, np.int8))
    with pytest.raises(ValueError, match="op must be one of"):
        collectives.all_reduce(np.zeros(3, np.float32), op="mean")


def _pieces_of_many_dims():
    """Twenty dims through each use of the one metadata exchange (from_local allowed 17 before, the
    data-dependent outputs 16), with rank 2 outside the placement learning the shapes too."""
    r = gt.env.get_rank()
    pl = gt.placement("cpu", [0, 1])
    ones = (1,) * 19
    x = gt.Tensor(np.full((2,) + ones, r + 1.0, np.float32)).to_global(pl, gt.sbp.split(0))
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
    for module in (creation, dispatch, from_pieces):
        text = pathlib.Path(module.__file__).read_text()
        assert "gather_pieces(" in text and "collectives.all_gather(" not in text, module.__name__
    alone = types.SimpleNamespace(ranks=(0,))  # a group of one exchanges nothing
    deepest = np.zeros((1,) * 64, np.int8)  # numpy's own limit is the exchange's
    assert metadata.gather_pieces([deepest], "cpu", alone, tag=-5) == {0: (-5, (((1,) * 64, gt.int8),))}
    assert metadata.gather_pieces(None, "cpu", alone, slots=4) == {}
    with pytest.raises(ValueError, match=r"nonzero: at most 1 piece\(s\) of at most 64 dims can be described"):
        metadata.gather_pieces([deepest, deepest], "cpu", alone, what="nonzero")
