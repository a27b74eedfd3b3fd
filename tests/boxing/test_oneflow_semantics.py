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
