"""Placement, SBP and layout arithmetic, exhaustively on small cases; no processes."""
import itertools
import pickle

import numpy as np
import pytest

import globaltensor as gt
from globaltensor.backends import cuda
from globaltensor import _native, layout
from globaltensor.sbp import normalize

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum


@pytest.mark.parametrize("length", range(0, 13))
@pytest.mark.parametrize("k", range(1, 6))
def test_split_sizes_and_ranges(length, k):
    sizes = layout.split_sizes(length, k)
    assert sum(sizes) == length and max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the first length % k are the longer ones
    starts = [layout.split_range(length, k, i)[0] for i in range(k)]
    assert starts == list(np.cumsum([0] + sizes[:-1]))
    assert [layout.split_range(length, k, i)[1] - starts[i] for i in range(k)] == sizes


SBPS = [S0, S1, B, P]


@pytest.mark.parametrize("hierarchy", [(3,), (2, 2), (2, 3), (3, 2)])
@pytest.mark.parametrize("shape", [(5, 7), (1, 4), (2, 2), (0, 3)])
def test_split_pieces_tile_the_tensor_exactly(hierarchy, shape):
    """For every nd-sbp, the pieces of ranks holding distinct data tile the value once."""
    for sbp in itertools.product(SBPS, repeat=len(hierarchy)):
        cover = np.zeros(shape, np.int64)
        for coord in itertools.product(*(range(h) for h in hierarchy)):
            if any(c != 0 for s, c in zip(sbp, coord) if s in (B, P)):
                continue  # replicas and partial summands
            box = layout.local_box(shape, hierarchy, sbp, coord)
            cover[layout.box_slices(box)] += 1
            assert layout.local_shape(shape, hierarchy, sbp, coord) == tuple(b - a for a, b in box)
        assert (cover == 1).all(), (sbp, hierarchy, shape)


def test_nested_splits_follow_mesh_axis_order():
    # (S0, S0) on a 2x2 mesh over 5 rows: axis 0 cuts 3 | 2, axis 1 cuts each of those
    boxes = {c: layout.local_box((5,), (2, 2), (S0, S0), c)[0] for c in itertools.product(range(2), range(2))}
    assert boxes == {(0, 0): (0, 2), (0, 1): (2, 3), (1, 0): (3, 4), (1, 1): (4, 5)}


def test_placement_value_semantics():
    a, b = gt.placement("cpu", [0]), gt.placement(type="cpu", ranks=np.array([0]))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    if cuda.is_available():
        assert a != gt.placement("cuda", [0])
    else:  # a cuda placement on a machine without a GPU: a clear error at creation
        with pytest.raises(RuntimeError, match=r'placement\("cuda", \[0\]\) needs a CUDA GPU, but '):
            gt.placement("cuda", [0])
        with pytest.raises(ValueError, match="distinct"):  # bad ranks first, whatever the machine
            gt.placement("cuda", [0, 0])
    assert a.type == "cpu" and a.ranks.tolist() == [0] and a.hierarchy == (1,)
    assert repr(a) == 'gt.placement(type="cpu", ranks=[0])'
    assert eval(repr(a), {"gt": gt}) == a and pickle.loads(pickle.dumps(a)) == a
    assert gt.placement.all("cpu") == a  # a world of one
    with pytest.raises(AttributeError):
        a.type = "cuda"
    with pytest.raises(ValueError):
        a.ranks[0] = 3


@pytest.mark.parametrize("ranks, message", [
    ([0, 0], "distinct"), ([], "empty"), ([[0], [0, 1]], "mesh"),
])
def test_placement_errors(ranks, message, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError, match=message):
        gt.placement("cpu", ranks)


def test_a_placement_beyond_the_job_builds_and_raises_when_used():
    """As OneFlow: gt.placement("cpu", [0, 5]) in a job of one rank is a value; a tensor placed
    on it raises, naming the ranks and how to start enough processes."""
    p = gt.placement("cpu", [0, 5])
    assert p.rank_list() == [0, 5] and p == gt.placement("cpu", [0, 5])
    for make in (lambda: gt.zeros(2, placement=p, sbp=gt.sbp.broadcast),
                 lambda: gt.ones(2).to_global(p, gt.sbp.broadcast),
                 lambda: gt.ones(2).to_global(gt.placement("cpu", [0]), gt.sbp.broadcast).to_global(placement=p)):
        with pytest.raises(ValueError, match=r"outside \[0, 1\).*--nproc_per_node 6"):
            make()


def test_placement_type_and_mesh(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ValueError, match="type must be one of"):
        gt.placement("tpu", [0])
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    assert mesh.hierarchy == (2, 2) and mesh.ndim == 2 and mesh.mesh_coord(2) == (1, 0)
    assert mesh.axis_ranks(0, (0, 1)) == (1, 3) and mesh.axis_ranks(1, (1, 0)) == (2, 3)
    assert mesh.mesh_coord(7) is None and 3 in mesh and 7 not in mesh


def test_sbp_values():
    assert [repr(s) for s in (S0, B, P)] == ["gt.sbp.split(dim=0)", "gt.sbp.broadcast", "gt.sbp.partial_sum"]
    assert [str(s) for s in (S1, B, P)] == ["S(1)", "B", "P"]
    assert gt.sbp.split(0) == S0 and hash(gt.sbp.split(0)) == hash(S0) and S0 != S1 and S0 != B
    assert eval(repr(S1), {"gt": gt}) == S1
    assert all(pickle.loads(pickle.dumps(s)) == s for s in (S0, B, P))
    with pytest.raises(TypeError):
        gt.sbp.split("0")
    with pytest.raises(ValueError):
        gt.sbp.split(-1)


def test_normalize_sbp():
    assert normalize(S0, 1) == (S0,) and normalize([S0, B], 2) == (S0, B)
    with pytest.raises(TypeError, match="gt.sbp.split"):
        normalize("S(0)", 1)
    with pytest.raises(ValueError, match="one SBP per mesh axis"):
        normalize(S0, 2)
    with pytest.raises(ValueError, match=r"S\(3\) on a 2-D tensor: dim must be in \[0, 2\)"):
        normalize(gt.sbp.split(3), 1, 2)


@pytest.mark.parametrize("kind, dtype", [("uniform", gt.float32), ("uniform", gt.float64), ("normal", gt.float32),
                                         ("normal", gt.float64), ("randint", gt.int64), ("randint", gt.int32),
                                         ("bernoulli", gt.float32), ("uniform", gt.float16), ("uniform", gt.bfloat16)])
def test_random_piece_equals_slice_of_whole(kind, dtype):
    """Generating only a piece gives exactly the slice of the whole: no full temporary needed."""
    shape = (9, 7)
    a, b = (0.0, 10.0) if kind == "randint" else ((0.3, 0.0) if kind == "bernoulli" else (0.0, 1.0))
    kind = _native.RandomKind.__members__[kind]
    whole = np.empty(shape, dtype.np)
    _native.philox_fill(whole, kind, list(shape), [0, 0], 5, 11, a, b)
    piece = np.empty((4, 3), dtype.np)
    _native.philox_fill(piece, kind, list(shape), [2, 3], 5, 11, a, b)
    np.testing.assert_array_equal(piece, whole[2:6, 3:6])
    other = np.empty(shape, dtype.np)
    _native.philox_fill(other, kind, list(shape), [0, 0], 5, 12, a, b)
    assert not np.array_equal(other, whole)  # the next call differs


def test_random_distributions_look_right():
    gt.manual_seed(3)
    u = gt.rand(200_000).numpy()
    n = gt.randn(200_000, dtype=gt.float64).numpy()
    i = gt.randint(-3, 4, (200_000,)).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    assert set(np.unique(i).tolist()) == set(range(-3, 4)) and i.dtype == np.int64
    gt.manual_seed(3)
    np.testing.assert_array_equal(gt.rand(200_000).numpy(), u)  # reseeding replays
