"""Small all_gather / reduce_scatter / all_to_all outputs kept by their call plans (issue 34 s8): a dropped
output is written again by the next call of its layout, a held one (name, view, container) never."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import distributed as dist
from conftest import run_ranks


def _calls(k):
    rows = [2] * k
    return {"all_gather": lambda x: dist.all_gather(x, sizes=rows),
            "reduce_scatter": lambda x: dist.reduce_scatter(np.concatenate([x] * k)),
            "all_to_all": lambda x: dist.all_to_all(np.concatenate([x] * k), rows, recv_sizes=rows)}


def _want(name, salt, k):
    """Every piece of [x] * k is x: reduce_scatter gives the members' sum, all_to_all the all_gather."""
    x = [np.array([p + salt, p * 2 + salt], np.float32) for p in range(k)]
    return {"all_gather": np.concatenate(x), "reduce_scatter": sum(x),
            "all_to_all": np.concatenate(x)}[name]


def _kept_and_held():
    r, k = gt.env.get_rank(), gt.env.get_world_size()
    for name, call in _calls(k).items():
        def once(salt):
            return call(np.array([r + salt, r * 2 + salt], np.float32))
        first = once(0)
        second = once(1)
        assert second.ctypes.data != first.ctypes.data, name  # first held by its name
        view, held = second[1:], [once(2)]
        address = held[0].ctypes.data
        del second
        third = once(3)
        assert third.ctypes.data not in (first.ctypes.data, address), name
        address = third.ctypes.data
        del third
        fourth = once(4)
        assert fourth.ctypes.data == address, name  # nothing held the third: written again
        want = {salt: _want(name, salt, k) for salt in range(5)}
        np.testing.assert_array_equal(first, want[0], err_msg=name)
        np.testing.assert_array_equal(view, want[1][1:], err_msg=name)
        np.testing.assert_array_equal(held[0], want[2], err_msg=name)
        np.testing.assert_array_equal(fourth, want[4], err_msg=name)
    return True


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", [2, 3])
def test_a_dropped_output_is_written_again_and_a_held_one_never(k):
    assert run_ranks(_kept_and_held, k, timeout=100) == [True] * k
