"""Errors as OneFlow's own exception tests (python/oneflow/test/exceptions/) expect them: the class and
the words they check, with our detail kept, and the SPEC's face (ValueError) still catching them."""
import numpy as np
import pytest

import globaltensor as flow
from conftest import run_ranks
from globaltensor.errors import DimError, PlacementError, ShapeError


def _raises(cls, words, fn):
    with pytest.raises(cls) as err:
        fn()
    assert words in str(err.value), str(err.value)
    return err.value


def test_reshape_words_and_classes():  # exceptions/test_reshape.py
    x = flow.tensor((2, 2))
    e = _raises(RuntimeError, "Invalid shape dimension -2", lambda: x.reshape((-2, 4)))
    assert isinstance(e, ValueError)  # the SPEC's face of a bad argument
    _raises(RuntimeError, "is invalid for input of size 24", lambda: flow.arange(24).reshape(2, 3, 4).reshape((2, 3, 5)))
    _raises(RuntimeError, "only one dimension can be inferred", lambda: x.reshape((-1, -1)))


def test_view_words():  # exceptions/test_view.py
    t = flow.tensor(np.arange(15.0).reshape(3, 5)).t()
    _raises(RuntimeError, "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead.", lambda: t.view(15))


@pytest.mark.parametrize("op", [flow.add, flow.sub, flow.mul, flow.div, flow.maximum, flow.minimum, flow.fmod,
                                flow.pow, flow.eq, flow.ne, flow.gt, flow.le, flow.logical_and, flow.logical_xor])
def test_binary_ops_that_do_not_broadcast(op):  # exceptions/test_broadcast_ops.py
    e = _raises(RuntimeError, "The size of tensor a (10) must match the size of tensor b (8) at non-singleton "
                "dimension 1", lambda: op(flow.Tensor(8, 10), flow.Tensor(8)))
    assert "(8, 10)" in str(e) and isinstance(e, ShapeError)


def test_broadcast_shapes_and_tensors():
    _raises(RuntimeError, "input and other can't be broadcasted to a single shape.",
            lambda: flow.broadcast_shapes((2,), (3, 3), (1, 1, 1)))
    _raises(RuntimeError, "shapes should not be empty.", lambda: flow.broadcast_shapes())
    _raises(RuntimeError, "input and other can't be broadcasted to a single shape.",
            lambda: flow.broadcast_tensors(flow.ones(2, 3), flow.ones(4, 3)))
    _raises(RuntimeError, "tensors should not be empty.", lambda: flow.broadcast_tensors())
    assert flow.broadcast_shapes((2, 1), (3,)) == (2, 3)


def test_dims_out_of_range_are_index_errors():  # exceptions/test_chunk.py, test_reduce_ops.py, ...
    x = flow.tensor([[1, 2, 3], [4, 5, 6]])
    e = _raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got -3)",
                lambda: flow.chunk(x, chunks=2, dim=-3))
    assert isinstance(e, DimError)
    _raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 2)", lambda: x.sum(dim=2))
    _raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 3)",
            lambda: flow.softmax(x.float(), dim=3))
    _raises(IndexError, "Dimension out of range", lambda: flow.unsqueeze(x, 4))
    _raises(IndexError, "Dimension out of range", lambda: flow.transpose(x, 0, 2))
    _raises(RuntimeError, "chunk expects at least a 1-dimensional tensor", lambda: flow.chunk(flow.tensor(3.14), 1, 0))
    _raises(RuntimeError, "chunk expects `chunks` to be greater than 0, got: ", lambda: flow.chunk(x, chunks=0))


def test_expand_words():  # exceptions/test_array_functor.py
    x = flow.ones(2, 2)
    _raises(RuntimeError, "The expanded size of the tensor", lambda: x.expand(2, 4))
    _raises(RuntimeError, "be greater or equal to the number of dimensions in the tensor", lambda: x.expand(2))


def test_split_axis_words():  # exceptions/test_local_global_convert_error.py
    _raises(RuntimeError, "Split axis must not be negative, but got -1!", lambda: flow.sbp.split(-1))
    x = flow.tensor([1, 2, 3, 4])
    e = _raises(RuntimeError, "Split axis out of range (expected to be in range of [0, 1), but got 1!",
                lambda: x.to_global(placement=flow.placement.all("cpu"), sbp=flow.sbp.split(1)))
    assert isinstance(e, PlacementError) and isinstance(e, ValueError) and "S(1) on a 1-D tensor" in str(e)
    g = flow.tensor([1, 2, 3, 4], placement=flow.placement.all("cpu"), sbp=flow.sbp.broadcast)
    _raises(RuntimeError, "Split axis out of range (expected to be in range of [0, 1), but got 1!",
            lambda: g.to_global(sbp=flow.sbp.split(1)))


def test_inplace_on_a_leaf():  # exceptions/test_binary_functor_exception.py, test_activation.py
    x = flow.ones(2, 3, requires_grad=True)
    _raises(RuntimeError, "a leaf Tensor that requires grad is being used in an in-place operation",
            lambda: x.add_(flow.ones(2, 3)))


def _inconsistent_placement():  # exceptions/test_placement.py, on 2 ranks
    x = flow.randn(2, 3)
    placement = flow.placement("cpu", [0, 1]) if flow.env.get_rank() == 0 else flow.placement("cpu", [0])
    with pytest.raises(RuntimeError) as err:
        x.to_global(placement=placement, sbp=flow.sbp.split(1))
    return isinstance(err.value, ValueError), str(err.value)


def _different_placements():  # exceptions/test_multi_input_with_diff_device_or_placement.py, on cpu
    x = flow.tensor([1, 2, 3, 4], placement=flow.placement("cpu", [0]), sbp=flow.sbp.broadcast)
    y = flow.tensor([2, 4, 6, 8], placement=flow.placement("cpu", [1]), sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError) as err:
        flow.add(x, y)
    return str(err.value)


def test_inconsistent_placements_between_ranks_and_between_tensors():
    for both, text in run_ranks(_inconsistent_placement, 2):
        assert both and "Inconsistent parallel description" in text and "different placements or sbp" in text
    for text in run_ranks(_different_placements, 2):
        assert "Expected all tensors to be on the same placement, but found at least two placements" in text
        assert "ranks=[0]" in text and "ranks=[1]" in text
