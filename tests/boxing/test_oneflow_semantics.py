"""Where OneFlow's documented behaviour decides: ranks that pass different layouts to to_global
are named on every rank; the removed "consistent" names raise, naming their replacement."""
import pytest

import globaltensor as flow
from conftest import run_ranks


def _mismatched_layouts():
    r = flow.env.get_rank()
    placement = flow.placement("cpu", [0, 1, 2]) if r != 1 else flow.placement("cpu", [0, 1])
    with pytest.raises(ValueError) as err:
        flow.ones(2).to_global(placement, flow.sbp.broadcast)
    return str(err.value)


def test_ranks_that_pass_different_placements_are_named_on_every_rank():
    texts = run_ranks(_mismatched_layouts, 3)
    assert "ranks [0, 2] passed" in texts[0] and "ranks [1]" in texts[0]
    assert "ranks [1] passed" in texts[1] and "ranks [0, 2]" in texts[1]
    assert all("different placements or sbp" in t for t in texts)


def _mismatched_sbp():
    sbp = flow.sbp.split(0) if flow.env.get_rank() == 0 else flow.sbp.broadcast
    with pytest.raises(ValueError, match="different placements or sbp"):
        flow.ones(2).to_global(flow.placement("cpu", [0, 1]), sbp)
    return True


def test_ranks_that_pass_different_sbp_fail_alike():
    assert run_ranks(_mismatched_sbp, 2) == [True, True]


def test_consistent_names_say_what_replaced_them():
    x = flow.ones(2)
    with pytest.raises(RuntimeError, match=r"\.to_consistent has been removed, please use \.to_global instead"):
        x.to_consistent(flow.placement("cpu", [0]), flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match=r"\.is_consistent has been removed, please use \.is_global instead"):
        x.is_consistent()
    with pytest.raises(RuntimeError, match=r"\.to_consistent has been removed, please use \.to_global instead"):
        flow.nn.Linear(2, 2).to_consistent()


# --- S -> P onto another placement keeps each rank's piece (OneFlow's naive S -> P) -------------------

def _s_to_p_moved(src_ranks, dst_ranks, sbp_dim, shape):
    import numpy as np
    r = flow.env.get_rank()
    full = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    x = flow.tensor(full, placement=flow.placement("cpu", src_ranks), sbp=flow.sbp.split(sbp_dim))
    with flow.debug.count_collectives() as c:
        z = x.to_global(flow.placement("cpu", dst_ranks), flow.sbp.partial_sum)
    local = z.to_local().numpy() if r in dst_ranks else None
    whole = z.to_global(flow.placement("cpu", dst_ranks), flow.sbp.broadcast).numpy()
    return local, whole, dict(c), full


def _expected_s_to_p(src_ranks, dst_ranks, sbp_dim, full):
    """What OneFlow's eager_s_to_p kernel leaves on each target rank, from its documented rule."""
    import numpy as np
    out = {d: np.zeros_like(full) for d in dst_ranks}
    bounds = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(full.shape[sbp_dim]), len(src_ranks))])
    for i, s in enumerate(src_ranks):
        receiver = s if s in dst_ranks else dst_ranks[i % len(dst_ranks)]
        index = [slice(None)] * full.ndim
        index[sbp_dim] = slice(bounds[i], bounds[i + 1])
        out[receiver][tuple(index)] = full[tuple(index)]
    return out


@pytest.mark.parametrize("src_ranks, dst_ranks, sbp_dim, shape", [
    ([0, 1], [2, 3], 1, (8, 4)),        # OneFlow's non-overlapping placements case
    ([0, 1, 2, 3], [1, 3], 1, (4, 4)),  # OneFlow's "in placement contains out placement" case
    ([0, 1, 2], [3, 1], 0, (7, 3)),     # uneven pieces, targets in another order
    ([0, 1], [1, 2, 3], 0, (5, 2)),     # more targets than pieces: a target holds only zeros
])
def test_split_to_partial_onto_another_placement_keeps_each_piece(src_ranks, dst_ranks, sbp_dim, shape):
    import numpy as np
    results = run_ranks(_s_to_p_moved, 4, src_ranks, dst_ranks, sbp_dim, shape)
    full = results[0][3]
    expected = _expected_s_to_p(src_ranks, dst_ranks, sbp_dim, full)
    for r, (local, whole, counts, _) in enumerate(results):
        np.testing.assert_array_equal(whole, full)
        if r in dst_ranks:
            np.testing.assert_array_equal(local, expected[r])
        if r in set(src_ranks) | set(dst_ranks):
            assert counts == {"all_to_all": 1}, (r, counts)


def _oneflow_contains_case():
    import numpy as np
    a = np.array([[4, 6, 5, 20], [6, 8, 9, 0], [3, 7, 5, 0], [6, 8, 9, 0]], dtype=np.float32)
    y = flow.tensor(a, placement=flow.placement("cpu", [0, 1, 2, 3]), sbp=flow.sbp.split(1))
    z = y.to_global(flow.placement("cpu", [1, 3]), flow.sbp.partial_sum)
    return z.to_local().numpy()


def test_oneflow_in_placement_contains_out_placement_s1_to_p_literal():
    import numpy as np
    locals_ = run_ranks(_oneflow_contains_case, 4)  # OneFlow's test_eager_boxing expectations, verbatim
    np.testing.assert_array_equal(locals_[1], [[4, 6, 5, 0], [6, 8, 9, 0], [3, 7, 5, 0], [6, 8, 9, 0]])
    np.testing.assert_array_equal(locals_[3], [[0, 0, 0, 20], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])


def _s_to_p_two_ranks():
    import numpy as np
    full = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = flow.tensor(full, placement=flow.placement("cpu", [0, 1]), sbp=flow.sbp.split(0))
    z = x.to_global(flow.placement("cpu", [1]), flow.sbp.partial_sum)
    local = z.to_local().numpy() if flow.env.get_rank() == 1 else None
    y = x.to_global(flow.placement("cpu", [1, 0]), flow.sbp.partial_sum)
    return local, y.to_local().numpy(), y.to_global(sbp=flow.sbp.broadcast).numpy()


def test_split_to_partial_two_ranks_fewer_and_reordered_targets():
    import numpy as np
    full = np.arange(12, dtype=np.float32).reshape(4, 3)
    (_, y0, w0), (one, y1, w1) = run_ranks(_s_to_p_two_ranks, 2)
    np.testing.assert_array_equal(one, full)  # rank 0's rows went to rank 1, rank 1 kept its own
    top, bottom = full.copy(), full.copy()
    top[2:], bottom[:2] = 0, 0
    np.testing.assert_array_equal(y0, top)  # each rank keeps its rows although the order changed
    np.testing.assert_array_equal(y1, bottom)
    np.testing.assert_array_equal(w0, full)
    np.testing.assert_array_equal(w1, full)
