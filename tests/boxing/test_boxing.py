"""Global tensors on real processes: every SBP pair, 2-D meshes, moves between placements,
the collectives each conversion issues, sharding-invariant random numbers, errors."""
import itertools

import numpy as np
import pytest

import globaltensor as gt
from globaltensor import layout
from conftest import run_ranks

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
SBPS = [S0, S1, B, P]
SHAPES = [(8, 6), (7, 5), (1, 1), (2, 3)]  # even, uneven, size one, fewer rows than ranks


def value(shape):
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 1.5 - 3).astype(np.float32)


def check_piece(t, full):
    """The local piece is exactly the layout's slice of the full value (for S and B)."""
    coord = t.placement.mesh_coord(gt.env.get_rank())
    if coord is None or P in t.sbp:
        return
    box = layout.local_box(full.shape, t.placement.hierarchy, t.sbp, coord)
    np.testing.assert_array_equal(t.to_local().numpy(), full[layout.box_slices(box)])


def _every_1d_pair():
    k = gt.env.get_world_size()
    pl = gt.placement("cpu", list(range(k)))
    checked = 0
    for shape in SHAPES:
        full = value(shape)
        for src, dst in itertools.product(SBPS, SBPS):
            x = gt.tensor(full, placement=pl, sbp=src)
            check_piece(x, full)
            y = x.to_global(sbp=dst)
            assert y.sbp == (dst,) and y.placement == pl and y.shape == shape
            check_piece(y, full)
            np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{shape} {src}->{dst}")
            checked += 1
    return checked


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_every_1d_sbp_pair(nprocs):
    assert run_ranks(_every_1d_pair, nprocs) == [len(SHAPES) * 16] * nprocs


def _every_2d_pair():
    pl = gt.placement("cpu", [[0, 1], [2, 3]])
    full = value((5, 7))
    pairs = list(itertools.product(itertools.product(SBPS, repeat=2), repeat=2))
    for src, dst in pairs:
        y = gt.tensor(full, placement=pl, sbp=src).to_global(sbp=dst)
        check_piece(y, full)
        np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{src}->{dst}")
    return len(pairs)


def test_every_2x2_mesh_pair():
    assert run_ranks(_every_2d_pair, 4, timeout=300) == [256] * 4


def _cross_placement():
    full = value((6, 5))
    cases = [
        (gt.placement("cpu", [0, 1]), gt.placement("cpu", [1, 2, 3])),
        (gt.placement("cpu", [0, 1]), gt.placement("cpu", [2, 3])),           # disjoint
        (gt.placement("cpu", [0, 1, 2, 3]), gt.placement("cpu", [[0, 1], [2, 3]])),
        (gt.placement("cpu", [[0, 1], [2, 3]]), gt.placement("cpu", [3, 1])),  # reordered subset
        (gt.placement("cpu", [2]), gt.placement("cpu", [[3, 2], [1, 0]])),
    ]
    count = 0
    for src_pl, dst_pl in cases:
        for src in itertools.product(SBPS, repeat=src_pl.ndim):
            for dst in itertools.product(SBPS, repeat=dst_pl.ndim):
                x = gt.tensor(full, placement=src_pl, sbp=src)
                y = x.to_global(placement=dst_pl, sbp=dst)
                assert y.placement == dst_pl and y.sbp == dst
                if gt.env.get_rank() not in dst_pl:
                    assert y.to_local().numpy().size == 0
                check_piece(y, full)
                np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{src_pl}{src} -> {dst_pl}{dst}")
                count += 1
    return count


def test_moves_between_placements():
    counts = run_ranks(_cross_placement, 4, timeout=300)
    assert counts[0] == 16 + 16 + 4 * 16 + 16 * 4 + 4 * 16


def _collective_counts():
    k = gt.env.get_world_size()
    pl = gt.placement("cpu", list(range(k)))
    expected = {
        (S0, B): {"all_gather": 1}, (P, B): {"all_reduce": 1}, (P, S0): {"reduce_scatter": 1},
        (P, S1): {"reduce_scatter": 1}, (S0, S1): {"all_to_all": 1}, (S1, S0): {"all_to_all": 1},
        (B, S0): {}, (B, S1): {}, (B, P): {}, (S0, P): {}, (S0, S0): {}, (P, P): {},
    }
    seen = {}
    for (src, dst), want in expected.items():
        x = gt.tensor(value((6, 4)), placement=pl, sbp=src)
        with gt.debug.count_collectives() as c:
            x.to_global(sbp=dst)
        seen[f"{src}->{dst}"] = dict(c)
        assert dict(c) == want, (src, dst, dict(c))
    x = gt.tensor(value((6, 4)), placement=pl, sbp=S0)
    with gt.debug.count_collectives() as c:
        local = x.to_local()
    assert dict(c) == {} and np.shares_memory(local.numpy(), x._local)
    b = gt.tensor(value((6, 4)), placement=pl, sbp=B)
    s = b.to_global(sbp=S0)
    # B -> S needs no collective; a user's to_global gives the slice its own memory (OneFlow's: in-place
    # ops write into pieces, and a write into a view would change the B tensor on one rank only)
    assert not np.shares_memory(s._local, b._local)
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    x = gt.tensor(value((6, 4)), placement=mesh, sbp=(S0, S1))
    with gt.debug.count_collectives() as c:
        x.to_global(sbp=(S0, B))  # one all_gather along mesh axis 1 only
    assert dict(c) == {"all_gather": 1}
    with gt.debug.count_collectives() as c:
        x.to_global(sbp=(B, B))
    assert dict(c) == {"all_gather": 2}
    return seen


def test_each_conversion_issues_the_expected_collectives():
    seen = run_ranks(_collective_counts, 4)  # each rank also asserts its own counts
    for counts in seen:
        assert counts["S(0)->B"] == {"all_gather": 1} and counts["P->B"] == {"all_reduce": 1}
        assert counts["S(0)->S(1)"] == {"all_to_all": 1} and counts["B->S(0)"] == {} and counts["B->P"] == {}


def test_split_to_split_moves_at_most_k_minus_1_over_k_of_the_bytes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    from globaltensor.boxing import plan
    pl = gt.placement("cpu", [0, 1, 2, 3])
    nbytes = 16 << 20
    p = plan(pl, (S0,), pl, (S1,), (2048, 2048), 4)
    assert [s.kind.name for s in p.steps] == ["all_to_all"] and p.bytes <= 3 / 4 * nbytes
    assert plan(pl, (B,), pl, (S0,), (64, 64), 4).bytes == 0 and plan(pl, (B,), pl, (P,), (64, 64), 4).bytes == 0
    text = plan(pl, (S0,), pl, (B,), (64, 64), 4).explain()
    assert "all_gather on mesh axis 0" in text and "(S(0)) -> (B)" in text


def _random_values():
    shape = (6, 5)
    k = gt.env.get_world_size()
    layouts = [(gt.placement("cpu", list(range(k))), s) for s in (S0, S1, B)]
    if k == 4:
        layouts.append((gt.placement("cpu", [[0, 1], [2, 3]]), (S0, S1)))
    out = []
    for pl, sbp in layouts:
        gt.manual_seed(1234)
        got = [f(*shape, placement=pl, sbp=sbp).numpy() for f in (gt.rand, gt.randn)]
        got.append(gt.randint(0, 100, shape, placement=pl, sbp=sbp).numpy())
        got.append(gt.normal(2.0, 3.0, shape, placement=pl, sbp=sbp).numpy())
        out.append(got)
    return out


def test_random_values_do_not_depend_on_layout_or_rank_count():
    gt.manual_seed(1234)
    reference = [gt.rand(6, 5).numpy(), gt.randn(6, 5).numpy(), gt.randint(0, 100, (6, 5)).numpy(),
                 gt.normal(2.0, 3.0, (6, 5)).numpy()]
    for k in (1, 2, 3, 4):
        for layout_values in run_ranks(_random_values, k)[0]:
            for got, want in zip(layout_values, reference):
                np.testing.assert_array_equal(got, want)


def _local_to_global():
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    pl = gt.placement("cpu", list(range(k)))
    lengths = [3, 0, 5, 1][:k]  # not the even split: rebalanced
    piece = np.full((lengths[r], 2), r, np.float32)
    x = gt.tensor(piece).to_global(pl, S0)
    want = np.concatenate([np.full((n, 2), p, np.float32) for p, n in enumerate(lengths)])
    np.testing.assert_array_equal(x.numpy(), want)
    check_piece(x, want)
    b = gt.tensor(np.full(3, 10.0 * r)).to_global(pl, B)  # the first rank's data wins
    np.testing.assert_array_equal(b.numpy(), np.zeros(3))
    p = gt.tensor(np.full(3, r + 1.0)).to_global(pl, P)
    np.testing.assert_array_equal(p.numpy(), np.full(3, k * (k + 1) / 2))
    return x.shape


def test_local_to_global():
    assert run_ranks(_local_to_global, 4) == [(9, 2)] * 4


def _bad_input_then_recover():
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    pl = gt.placement("cpu", list(range(k)))
    errors = []
    for bad in (lambda: gt.tensor(np.zeros((2, 3 + r), np.float32)).to_global(pl, S0),
                lambda: gt.tensor(np.zeros(3, np.float32 if r == 0 else np.float64)).to_global(pl, S0),
                lambda: gt.tensor(np.zeros(3)).to_global(pl, gt.sbp.split(1)),
                lambda: gt.zeros(4, 4, placement=pl, sbp="S(0)"),
                lambda: gt.zeros(4, 4, placement=pl, sbp=(S0, S1)),
                lambda: gt.zeros(4, placement=pl, sbp=S0).to_global(sbp=gt.sbp.split(2))):
        try:
            bad()
        except (ValueError, TypeError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    x = gt.ones(5, placement=pl, sbp=S0).to_global(sbp=B)  # the world still works
    assert x.numpy().tolist() == [1.0] * 5
    return errors


def test_bad_input_raises_the_same_error_everywhere_and_the_world_keeps_working():
    results = run_ranks(_bad_input_then_recover, 3)
    assert results[0] == results[1] == results[2] and len(results[0]) == 6
    text = "\n".join(results[0])
    assert "dim 1 is not split" in text and "same number of dims and dtype" in text
    assert "S(1) on a 1-D tensor: dim must be in [0, 1)" in text and "one SBP per mesh axis" in text
    assert "TypeError: sbp must be" in text


def _print_and_visualize():
    pl = gt.placement("cpu", [0, 1, 2])
    x = gt.arange(4, placement=pl, sbp=S0)
    text = repr(x)
    grid = gt.debug.layout_text(gt.zeros(2, 3, placement=pl, sbp=S0))
    return text, grid


def test_print_and_visualize():
    text, grid = run_ranks(_print_and_visualize, 3)[0]
    assert text == ('tensor([0, 1, 2, 3], placement=gt.placement(type="cpu", ranks=[0, 1, 2]), '
                    'sbp=(gt.sbp.split(dim=0),), dtype=gt.int64)')
    assert "rank 0" in grid and "rank 1" in grid and "empty pieces: rank(s) [2]" in grid


def _data_that_differs_between_ranks():
    """gt.tensor's data is the whole value: a rank that passes other data is named on every rank;
    check_meta=False takes each rank's data on trust."""
    r = gt.env.get_rank()
    line, mesh = gt.placement("cpu", [0, 1, 2]), gt.placement("cpu", [[0, 1, 2]])
    errors = []
    for bad in (lambda: gt.tensor([1.0, 2.0, 3.0 + (r == 2)], placement=line, sbp=B),   # values
                lambda: gt.tensor([1.0, 2.0, 3.0 + (r == 1)], placement=mesh, sbp=(S0, S0)),
                lambda: gt.tensor(np.zeros((2, 2 + (r == 0))), placement=line, sbp=S0),  # shapes
                lambda: gt.tensor(np.zeros(3, np.float32 if r else np.float64), placement=line, sbp=B),
                lambda: gt.ones(3, placement=line, sbp=S0) + np.arange(3.0) * (r == 1),  # an array operand
                lambda: gt.tensor(np.zeros(2 + r)).to_global(line, B)):                  # pieces' shapes
        try:
            bad()
            errors.append(None)
        except ValueError as exc:
            errors.append(str(exc))
    same = gt.tensor([[1, 2], [3, 4]], placement=line, sbp=S1).numpy().tolist()
    trusted = gt.tensor([float(r)], placement=line, sbp=B, check_meta=False).to_local().numpy().tolist()
    return errors, same, trusted


def test_tensor_data_that_differs_between_ranks_raises_on_every_rank():
    results = run_ranks(_data_that_differs_between_ranks, 3)
    errors, same, _ = results[0]
    assert all(result[0] == errors for result in results)
    assert "rank(s) [2] passed other values than rank(s) [0, 1]" in errors[0]
    assert "rank(s) [1] passed other values than rank(s) [0, 2]" in errors[1]
    assert "rank(s) [0] passed other shapes or dtypes than rank(s) [1, 2]" in errors[2]
    assert "rank(s) [0] passed other shapes or dtypes than rank(s) [1, 2]" in errors[3]
    assert "rank(s) [1] passed other values" in errors[4]
    assert "broadcast mesh axis" in errors[5] and "rank 2: (4,)" in errors[5]
    assert all("check_meta=False" in e for e in errors[:5])
    assert same == [[1, 2], [3, 4]]
    assert [result[2] for result in results] == [[0.0], [1.0], [2.0]]
