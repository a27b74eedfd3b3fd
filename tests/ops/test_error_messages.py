"""Bad arguments raise OneFlow's exception classes with OneFlow's (PyTorch's) words first (issue 28).

Written from OneFlow's documented behaviour (its exception tests assert these substrings and
classes); the values of the ops these checks guard are compared with torch."""
import numpy as np
import pytest
import torch

import globaltensor as gt

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _ones(*shape, dtype=None):
    return gt.ones(shape, dtype=dtype or gt.float32)


# (call, class OneFlow raises, substring of OneFlow's message)
CASES = {
    # matmul family (linalg.py's _PRODUCT_CHECKS)
    "mm_rank": (lambda: gt.mm(gt.randn(2, 3, 3), gt.randn(3, 3)), RuntimeError, "self must be a matrix"),
    "mm_rank2": (lambda: gt.mm(gt.randn(2, 3), gt.randn(3, 3, 2)), RuntimeError, "mat2 must be a matrix"),
    "mm_sizes": (lambda: gt.mm(gt.randn(2, 3), gt.randn(4, 3)), RuntimeError,
                 "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x3)"),
    "mv_rank": (lambda: gt.mv(gt.randn(2, 3, 3), gt.randn(3)), RuntimeError,
                "vector + matrix @ vector expected, got 1, 3, 1"),
    "mv_sizes": (lambda: gt.mv(gt.randn(2, 3), gt.randn(4)), RuntimeError, "size mismatch"),
    "dot_rank": (lambda: gt.dot(gt.tensor([[2, 3], [3, 4]]), gt.tensor([[2, 3], [3, 4]])), RuntimeError,
                 "1D tensors expected"),
    "dot_sizes": (lambda: gt.dot(gt.tensor([2, 3]), gt.tensor([2, 3, 4])), RuntimeError, "inconsistent tensor size"),
    "dot_dtype": (lambda: gt.dot(gt.tensor([2, 3]), gt.tensor([2.0, 3.0])), RuntimeError,
                  "expected both vectors to have same dtype"),
    "bmm_rank": (lambda: gt.bmm(gt.tensor((2, 2)), gt.tensor((2, 2))), RuntimeError,
                 "Expected 3-dimensional tensor, but got 1-dimensional tensor for argument #1"),
    "matmul_0d": (lambda: gt.matmul(_ones(), _ones(4, 4)), RuntimeError, "Tensor a's dim should >= 1"),
    "inv_rank": (lambda: gt.linalg.inv(gt.tensor((2.0, 2.0))), RuntimeError,
                 "linalg.inv: The input tensor must be at least 2 dimensions."),
    "inv_square": (lambda: gt.linalg.inv(gt.randn(2, 3, 2)), RuntimeError,
                   "linalg.inv: A must be batches of square matrices, but they are 3 by 2 matrices"),
    "cross_no_3": (lambda: gt.cross(gt.randn(4, 2), gt.randn(4, 2)), RuntimeError, "no dimension of size 3 in input"),
    "linalg_cross": (lambda: gt.linalg.cross(gt.randn(4, 2), gt.randn(4, 2)), RuntimeError,
                     "the size of the specified dimension(which is 1) is not 3."),
    "tensordot_neg": (lambda: gt.tensordot(gt.randn(1, 2, 3), gt.randn(1, 2, 3), dims=-1), RuntimeError,
                      "tensordot expects dims >= 0, but got dims=-1"),
    "tensordot_sizes": (lambda: gt.tensordot(gt.randn(1, 2, 3), gt.randn(1, 2, 3), dims=[[1], [2]]), RuntimeError,
                        "contracted dimensions need to match, but first has size 2 in dim 1 and second has size 3 "
                        "in dim 2"),
    "tensordot_twice": (lambda: gt.tensordot(gt.randn(1, 2, 3), gt.randn(1, 2, 3), dims=[[1, 1], [1, 1]]),
                        RuntimeError, "dim 1 appears multiple times in the list of dims"),
    "tensordot_lengths": (lambda: gt.tensordot(gt.randn(1, 2, 3), gt.randn(1, 2, 3), dims=[[1], [1, 2]]),
                          RuntimeError, "both dimension lists should have same length"),
    # joining and cutting
    "concat_dim": (lambda: gt.concat([_ones(2, 2), _ones(2, 2)], dim=3), IndexError, "Dimension out of range"),
    "concat_ndim": (lambda: gt.concat([_ones(2, 2), _ones(2, 2, 2)]), RuntimeError,
                    "Tensors must have same number of dimensions"),
    "concat_sizes": (lambda: gt.concat([_ones(2, 2), _ones(2, 3)]), RuntimeError,
                     "Sizes of tensors must match except in dimension 0"),
    "stack_sizes": (lambda: gt.stack([_ones(2, 1), _ones(2, 2)]), RuntimeError,
                    "stack expects each tensor to be equal size"),
    "split_negative": (lambda: gt.split(_ones(1, 2, 3), -1), RuntimeError,
                       "split expects split_size be non-negative, but got split_size"),
    "split_dim": (lambda: gt.split(_ones(1, 2, 3), 0, dim=4), IndexError, "Dimension out of range"),
    "split_sizes": (lambda: gt.split(_ones(5, 2), [1, 3]), RuntimeError,
                    "split_with_sizes expects split_sizes to sum exactly to 5"),
    "narrow_0d": (lambda: gt.narrow(gt.tensor(1.0), 0, 0, 0), RuntimeError,
                  "narrow() cannot be applied to a 0-dim tensor."),
    "narrow_start": (lambda: gt.narrow(_ones(3, 3), 0, 4, 0), IndexError, "Dimension out of range"),
    "narrow_length": (lambda: gt.narrow(_ones(3, 3), 0, 2, 2), RuntimeError, "exceeds dimension size"),
    "diagonal_same": (lambda: gt.diagonal(_ones(1, 2, 3), 1, 2, 2), RuntimeError,
                      "diagonal dimensions cannot be identical"),
    "diagonal_dim": (lambda: gt.diagonal(_ones(1, 2, 3), 1, 3, 2), IndexError, "Dimension out of range"),
    # shapes
    "roll": (lambda: gt.roll(_ones(2, 2), [0, 1], [0]), RuntimeError, "shifts and dimensions must align"),
    "tile": (lambda: gt.tensor([[1], [1]]).tile(-1), RuntimeError, "Trying to create tensor with negative dimension"),
    "repeat": (lambda: gt.tensor([[1], [1]]).repeat(1), RuntimeError,
               "Number of dimensions of repeat dims can not be"),
    "t": (lambda: gt.tensor([[[1]]]).t(), RuntimeError, "t() expects a tensor with <= 2 dimensions"),
    "randperm": (lambda: gt.randperm(-1), RuntimeError, "Trying to create tensor with negative dimension"),
    "view": (lambda: gt.view(_ones(2, 3, 4).permute(1, 0, 2), (4, 6)), RuntimeError,
             "view size is not compatible with input tensor's size"),
    "broadcast_like": (lambda: gt.broadcast_like(_ones(1, 0), _ones(2, 2, 2)), RuntimeError,
                       "The expanded size of the tensor"),
    "broadcast_like_ndim": (lambda: gt.broadcast_like(_ones(2, 2, 2), _ones(2, 2)), RuntimeError,
                            "The number of sizes provided"),
    "layer_norm": (lambda: gt.nn.LayerNorm(2)(gt.randn(2, 3)), RuntimeError,
                   "Given normalized_shape=(2,), expected input with shape [*, 2,], but got input of size"),
    "median_empty": (lambda: gt.median(gt.randn(2, 0, 2), 1), IndexError,
                     "Expected reduction dim 1 to have non-zero size."),
    # indices
    "gather_dtype": (lambda: gt.gather(_ones(2, 2), 1, _ones(2, 2)), RuntimeError,
                     "gather(): Expected dtype int32 or int64 for index"),
    "gather_ndim": (lambda: gt.gather(_ones(2, 2), 1, _ones(2, 2, 2, dtype=gt.int64)), RuntimeError,
                    "Index tensor must have the same number of dimensions as input tensor"),
    "gather_size": (lambda: gt.gather(_ones(2, 2), 1, _ones(4, 2, dtype=gt.int64)), RuntimeError,
                    "Size does not match at dimension"),
    "index_select_dtype": (lambda: gt.index_select(_ones(2, 3), 1, gt.tensor([0.0, 1.0])), RuntimeError,
                           "Expected dtype int32 or int64 for index"),
    "index_select_vector": (lambda: gt.index_select(_ones(2, 3), 1, gt.tensor([[0]])), IndexError,
                            "Index is supposed to be a vector"),
    "getitem_too_many": (lambda: gt.ones(2, 2)[gt.tensor(1), gt.tensor(1), gt.tensor(1)], IndexError,
                         "Too many indices for tensor of dimension"),
    "getitem_range": (lambda: gt.ones(2, 3)[3], IndexError, "Index out of range (expected to be in range of"),
    "getitem_0d": (lambda: gt.tensor(5)[0], RuntimeError, "select() cannot be applied to a 0-dim tensor."),
    "repeat_interleave_2d": (lambda: gt.repeat_interleave(gt.tensor([[1, 2], [3, 4]]), gt.tensor([[1, 2], [3, 4]]),
                                                          dim=1), RuntimeError,
                             "repeat_interleave only accept 1D vector as repeat"),
    "repeat_interleave_dtype": (lambda: gt.repeat_interleave(gt.tensor([[1, 2], [3, 4]]), gt.tensor([1.0, 2.0]),
                                                             dim=1), RuntimeError, "repeats has to be Long tensor"),
    "repeat_interleave_negative": (lambda: gt.repeat_interleave(gt.tensor([[1, 2]]), gt.tensor([1, -2]), dim=1),
                                   RuntimeError, "repeats can not be negative"),
    "in_top_k_num": (lambda: gt.in_top_k(gt.tensor([[3, 1]]), gt.randn(2, 4), 1), RuntimeError,
                     "The num of targets must equal the num of predictions"),
    "in_top_k_targets": (lambda: gt.in_top_k(gt.tensor([[3, 1], [1, 3]]), gt.randn(2, 4), 1), RuntimeError,
                         "The dimension of targets must be 1"),
    "in_top_k_predictions": (lambda: gt.in_top_k(gt.tensor([3, 1]), gt.randn(2, 1, 4), 1), RuntimeError,
                             "The dimension of predictions must be 2"),
    # meshgrid
    "meshgrid_empty": (lambda: gt.meshgrid([]), RuntimeError, "meshgrid expects a non-empty TensorList"),
    "meshgrid_dtype": (lambda: gt.meshgrid(_ones(2), _ones(2, dtype=gt.float16)), RuntimeError,
                       "meshgrid expects all tensors to have the same dtype"),
    "meshgrid_ndim": (lambda: gt.meshgrid(gt.tensor([]), _ones(1, 2, 3)), RuntimeError,
                      "Expected scalar or 1D tensor in the tensor list"),
    "meshgrid_indexing": (lambda: gt.meshgrid(_ones(2), _ones(2), indexing="ab"), ValueError,
                          "meshgrid: indexing must be one of"),
    # elementwise, in place, activations
    "add_n_sizes": (lambda: gt.add(gt.tensor([1, 2]), gt.tensor([3, 4]), gt.tensor([[2, 2], [2, 2]])), RuntimeError,
                    "inconsistent tensor size, expected all tensor to have the same number of elements, but got"),
    "add_n_dtype": (lambda: gt.add(gt.tensor([1, 2]), gt.tensor([3, 4]), gt.tensor([2.0, 2.0], dtype=gt.float64)),
                    RuntimeError, "expected all tenser to have same type, but found"),
    "inplace_broadcast": (lambda: _ones(2, 3).add_(_ones(2, 4)), RuntimeError,
                          "Tensor with shape (2,3) doesn't match the broadcast shape in an inplace operation"),
    "inplace_expand": (lambda: _ones(3, 3).div_(_ones(2, 3, 3)), RuntimeError,
                       "Can not expand origin shape (2,3,3) to (3,3)"),
    "glu_dim": (lambda: gt.nn.GLU(dim=3)(gt.randn(2, 4)), IndexError,
                "Dimension out of range (expected to be in range of [-2, 1], but got 3)"),
    "prelu": (lambda: gt.nn.PReLU(5)(_ones(4, 4)), RuntimeError, "num_parameters in prelu must be 1 or 4"),
    "softshrink": (lambda: gt.nn.Softshrink(-0.1)(gt.randn(2)), RuntimeError,
                   "alpha must be greater or equal to 0, but found to be -0.1."),
    "cosine_similarity_ints": (lambda: gt.nn.functional.cosine_similarity(_ones(2, 5, dtype=gt.int32),
                                                                          _ones(2, 5, dtype=gt.int32)),
                               RuntimeError, "expected common dtype to be floating point, yet common dtype is"),
    "reduction": (lambda: gt.nn.functional.mse_loss(_ones(2), _ones(2), reduction="just_test"), RuntimeError,
                  "Reduction should be none, sum or mean."),
    "reduction_ce": (lambda: gt.nn.functional.cross_entropy(_ones(2, 3), gt.tensor([0, 1]), reduction="x"),
                     RuntimeError, "Reduction should be none, sum or mean."),
    # devices, conversions, autograd
    "device": (lambda: gt.device("xpu"), RuntimeError, "device type at start of device string: xpu"),
    "to_string": (lambda: _ones(2).to("cpp"), RuntimeError, "device type at start of device string: cpp"),
    "backward_no_grad": (lambda: _ones(4, 4).backward(), RuntimeError,
                         "element 0 of tensors does not require grad and does not have a grad_fn"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_oneflow_class_and_words(name):
    call, cls, words = CASES[name]
    with pytest.raises(cls) as info:
        call()
    assert words in str(info.value), str(info.value)


def test_checks_keep_the_spec_classes():
    """Shape and argument errors stay ValueError too (SPEC §7), index dtypes IndexError too."""
    for name in ("mm_sizes", "concat_sizes", "split_sizes", "tensordot_sizes", "reduction", "device"):
        with pytest.raises(ValueError):
            CASES[name][0]()
    with pytest.raises(IndexError):
        CASES["gather_dtype"][0]()


@pytest.mark.parametrize("leaf_layer", [lambda: gt.nn.CELU(alpha=1.0, inplace=True),
                                        lambda: gt.nn.Hardsigmoid(inplace=True),
                                        lambda: gt.nn.Hardshrink(inplace=True),
                                        lambda: gt.nn.Softshrink(inplace=True)])
def test_inplace_activation_refuses_a_leaf_and_writes_into_its_input(leaf_layer):
    x = gt.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Tensor that requires grad is being used in an in-place"):
        leaf_layer()(x)
    a = np.array([-1.5, -0.2, 0.3, 2.0], np.float32)
    y = gt.tensor(a)
    out = leaf_layer()(y)
    layer = leaf_layer()
    ref = {"CELU": torch.nn.CELU(), "Hardsigmoid": torch.nn.Hardsigmoid(), "Hardshrink": torch.nn.Hardshrink(),
           "Softshrink": torch.nn.Softshrink()}[type(layer).__name__](torch.tensor(a)).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (1, 0, 2), (-1, 2, 0), (2, 1, 2), (0, -1, 0)])
def test_diagonal_of_any_two_dims_as_torch(offset, dim1, dim2):
    x = gt.tensor(X, requires_grad=True)
    xt = torch.tensor(X, requires_grad=True)
    out, ref = gt.diagonal(x, offset, dim1, dim2), torch.diagonal(xt, offset, dim1, dim2)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    (out * out).sum().backward()
    (ref * ref).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_add_of_n_tensors_and_in_top_k_and_broadcast_like_values():
    a, b, c = (np.random.default_rng(i).standard_normal((2, 3)).astype(np.float32) for i in range(3))
    np.testing.assert_allclose(gt.add(gt.tensor(a), gt.tensor(b), gt.tensor(c)).numpy(), a + b + c, rtol=1e-6)
    pred = np.array([[0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.5]], np.float32)
    target = np.array([3, 1, 1])
    for k in (1, 2, 3):
        ours = gt.in_top_k(gt.tensor(target), gt.tensor(pred), k).numpy()
        score = pred[np.arange(3), target][:, None]
        np.testing.assert_array_equal(ours, (pred > score).sum(1) < k)  # ties count in (OneFlow's kernel)
    like = torch.ones(2, 3, 4)
    np.testing.assert_array_equal(gt.broadcast_like(gt.tensor(a[:1, :, None]), gt.tensor(like.numpy())).numpy(),
                                  torch.tensor(a[:1, :, None]).expand_as(like).numpy())


def test_tensordot_and_narrow_values_still_as_torch():
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((4, 3, 5)).astype(np.float32)
    ours = gt.tensordot(gt.tensor(a), gt.tensor(b), dims=([1, 2], [1, 0])).numpy()
    ref = torch.tensordot(torch.tensor(a), torch.tensor(b), dims=([1, 2], [1, 0])).numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
    for start, length in ((-2, 2), (0, 3), (3, 0)):
        np.testing.assert_array_equal(gt.narrow(gt.tensor(a), 1, start, length).numpy(),
                                      torch.narrow(torch.tensor(a), 1, start, length).numpy())


def test_add_param_group_as_torch():
    w1, w2 = gt.ones(3, 3, requires_grad=True), gt.ones(3, 3, requires_grad=True)
    opt = gt.optim.SGD([w1], lr=0.5, momentum=0.9)
    opt.add_param_group({"params": w2, "lr": 0.1})
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1] and opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": w2})


def test_load_refuses_what_is_no_checkpoint(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"invalid file")
    with pytest.raises(ValueError, match="Cannot load file"):
        gt.load(str(bad))
    pt = tmp_path / "conv.pt"
    torch.save(torch.nn.Conv2d(3, 3, 3).state_dict(), str(pt))
    with pytest.raises(ValueError, match="Cannot load file"):
        gt.load(str(pt), support_pytorch_format=False)
    assert set(gt.load(str(pt))) == {"weight", "bias"}



def test_scatter_nd_update_refuses_mixed_dtypes_as_oneflow():
    with pytest.raises(RuntimeError, match="The dtype of tensor and updates must be same"):
        gt.tensor_scatter_nd_update(gt.arange(8, dtype=gt.float32), gt.tensor([[1], [3]]),
                                    gt.tensor([-1.0, -2.0], dtype=gt.float64))
    got = gt.tensor_scatter_nd_update(gt.arange(4, dtype=gt.float32), gt.tensor([[1], [3]]), gt.tensor([-1.0, -2.0]))
    np.testing.assert_array_equal(got.numpy(), [0, -1, 2, -2])
