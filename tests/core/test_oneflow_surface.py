"""OneFlow/PyTorch surface the fidelity run asked for: dtype-conversion methods (differentiable for
floating casts), data_ptr, nn.parallel as a package, flow.framework, all_reduce of bool tensors."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt
from conftest import run_ranks

CASTS = ["bfloat16", "half", "float", "double", "long", "int", "char", "byte", "bool"]


@pytest.mark.parametrize("method", CASTS)
def test_dtype_methods_match_torch(method):
    a = np.array([[-1.5, 0.0, 2.25], [3.0, -0.5, 7.75]], np.float32)
    ours, theirs = getattr(gt.tensor(a), method)(), getattr(torch.tensor(a), method)()
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.float().numpy() if method == "bfloat16" else ours.numpy(),
                                  theirs.float().numpy() if method == "bfloat16" else theirs.numpy())


@pytest.mark.parametrize("method", ["bfloat16", "half", "double", "float"])
def test_floating_casts_are_differentiable(method):
    x = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (getattr(x, method)().float() * gt.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.dtype == gt.float32 and x.grad.numpy().tolist() == [1.0, 2.0, 3.0]


def test_short_is_a_clear_type_error():
    with pytest.raises(TypeError, match="int16"):
        gt.ones(2).short()


def test_data_ptr_is_the_local_piece_address():
    x = gt.arange(6, dtype=gt.float32)
    assert x.data_ptr() == x.numpy().__array_interface__["data"][0]
    assert isinstance(x.data_ptr(), int) and gt.ones(6).data_ptr() != x.data_ptr()
    pl = gt.placement("cpu", [0])
    g = x.to_global(placement=pl, sbp=gt.sbp.broadcast)
    assert g.data_ptr() == g.to_local().numpy().__array_interface__["data"][0]  # a global tensor: its local piece


def test_nn_parallel_is_a_package():
    import globaltensor.nn.parallel.distributed as distributed
    from globaltensor.nn.parallel import DistributedDataParallel
    assert DistributedDataParallel is distributed.DistributedDataParallel is gt.nn.parallel.DistributedDataParallel


def test_framework_args_tree_and_balanced_splitter():
    from globaltensor.framework.args_tree import ArgsTree
    from globaltensor.framework import balanced_splitter
    t = gt.ones(2)
    nest = [None, 1, t, (t, {"k": [t]})]
    nodes = list(ArgsTree(nest).iter_nodes())
    assert sum(isinstance(n, gt.Tensor) for n in nodes) == 3 and nodes[0] is nest
    assert ArgsTree(nest).map_leaf(lambda v: "T" if isinstance(v, gt.Tensor) else v) == [None, 1, "T", ("T", {"k": ["T"]})]
    assert balanced_splitter.BalancedRanges(5, 2) == [(0, 3), (3, 5)]
    assert gt.framework.balanced_splitter.BalancedPartNums(7, 3) == [3, 2, 2]


def _bool_reductions():
    r = gt.env.get_rank()
    x = np.array([r == 0, r == 1, False, True])
    y = x.copy()
    gt.distributed.all_reduce(x)             # sum: logical or, as OneFlow
    gt.distributed.all_reduce(y, op="min")   # min: logical and
    pl = gt.placement("cpu", [0, 1])
    b = gt.tensor(np.array([[True, False], [False, True]]), placement=pl, sbp=gt.sbp.broadcast)
    back = b.to_global(sbp=gt.sbp.partial_sum).to_global(sbp=gt.sbp.broadcast)  # P -> B: an all_reduce of bools
    scattered = b.to_global(sbp=gt.sbp.partial_sum).to_global(sbp=gt.sbp.split(0))  # P -> S: a reduce_scatter
    return x.tolist(), y.tolist(), back.numpy().tolist(), scattered.numpy().tolist()


def test_all_reduce_of_bools_on_two_ranks():
    want = ([True, True, False, True], [False, False, False, True], [[True, False], [False, True]],
            [[True, False], [False, True]])
    assert run_ranks(_bool_reductions, 2) == [want, want]
