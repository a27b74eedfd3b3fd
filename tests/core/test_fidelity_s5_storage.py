"""Storage sharing as PyTorch's: .data, detach() and in-place writes share a piece; data_ptr() stays (issue 28)."""
import numpy as np
import pytest

import globaltensor as gt

torch = pytest.importorskip("torch")


def _program(lib):
    """In-place writes through aliases; the values every tensor ends with (lib: gt or torch)."""
    x = lib.ones(2, 3)
    ptr = x.data_ptr()
    x[:] = 2
    same_ptr = ptr == x.data_ptr() == x.data.data_ptr()
    p = lib.nn.Parameter(lib.ones(2, 3))
    p.data.mul_(2)  # changes p
    d = p.detach()
    d[0] = 5  # changes p too
    d.add_(1)
    return same_ptr, x.numpy().copy(), p.detach().numpy().copy(), d.numpy().copy(), d.requires_grad


def test_aliases_share_the_piece_as_pytorch():
    ours, ref = _program(gt), _program(torch)
    assert ours[0] and ref[0]
    for a, b in zip(ours[1:4], ref[1:4]):
        np.testing.assert_array_equal(a, b)
    assert ours[4] is ref[4] is False


def _backward_after_alias_write(lib):
    """A constant saved for backward, changed through detach() before backward; a parameter
    changed through .data between forward and backward (PyTorch: .data is not tracked)."""
    w = lib.ones(3, requires_grad=True)
    p = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0]))
    z = (w * p).sum()
    p.data.mul_(10)  # as torch: backward sees the new values
    z.backward()
    return w.grad.numpy().copy(), p.grad.numpy().copy()


def test_data_write_before_backward_matches_pytorch():
    for a, b in zip(_backward_after_alias_write(gt), _backward_after_alias_write(torch)):
        np.testing.assert_array_equal(a, b)


def test_detach_write_keeps_the_value_backward_saw():
    """PyTorch raises at backward ("modified by an inplace operation"); we give the gradient of
    the values forward used: w.grad = x before the write."""
    w = gt.ones(3, requires_grad=True)
    x = gt.tensor([1.0, 2.0, 3.0])
    z = (w * x).sum()
    x.detach().mul_(10)
    assert x.tolist() == [10.0, 20.0, 30.0]
    z.backward()
    assert w.grad.tolist() == [1.0, 2.0, 3.0]


def test_tensor_copies_and_from_numpy_shares_as_pytorch():
    a = np.ones(3, np.float32)
    gt.tensor(a).add_(1)
    assert (a == 1).all()
    gt.from_numpy(a).add_(1)
    b = np.ones(3, np.float32)
    torch.from_numpy(b).add_(1)
    np.testing.assert_array_equal(a, b)


def test_global_data_shares_each_ranks_piece():
    p = gt.placement("cpu", [0])
    x = gt.ones(4, placement=p, sbp=gt.sbp.broadcast)
    ptr = x.data_ptr()
    x.data.mul_(3)
    x[1:] = 7
    assert x.data_ptr() == ptr == x.to_local().data_ptr()
    assert x.tolist() == [3.0, 7.0, 7.0, 7.0]


def test_to_global_gives_a_tensor_of_its_own():
    """A B -> S conversion slices a view of the source piece: the converted tensor copies it, so an
    in-place write to either leaves the other alone (OneFlow's to_global makes a new tensor)."""
    p = gt.placement("cpu", [0])
    x = gt.arange(8.0).to_global(p, gt.sbp.broadcast)
    y = x.to_global(sbp=gt.sbp.split(0))
    x.add_(1)
    y.mul_(2)
    assert x.tolist() == [float(i + 1) for i in range(8)] and y.tolist() == [2.0 * i for i in range(8)]
    assert x.to_local().data_ptr() == x.data_ptr()  # to_local shares, as OneFlow's


def test_write_through_an_alias_of_an_alias_keeps_what_backward_saw():
    w = gt.ones(3, requires_grad=True)
    x = gt.tensor([1.0, 2.0, 3.0])
    y = x.detach()
    z = (w * x).sum() + (w * y).sum()
    y.detach()[:] = 0  # x and y both change; both keep the version their ops read
    assert x.tolist() == y.tolist() == [0.0, 0.0, 0.0]
    z.backward()
    assert w.grad.tolist() == [2.0, 4.0, 6.0]
