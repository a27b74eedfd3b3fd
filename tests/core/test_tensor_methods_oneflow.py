"""Tensor methods and small names OneFlow's and PyTorch's users reach for (issue 28), checked against torch."""
import tempfile

import numpy as np
import pytest
import torch

import globaltensor as gt
import globaltensor.paddle as paddle


def test_type_names_compare_equal_under_each_frameworks_prefix():
    x = gt.ones(2, 3)
    assert str(x.type()) == "globaltensor.FloatTensor"
    assert x.type() == "torch.FloatTensor" and x.type() == torch.ones(2, 3).type()
    assert x.type() == "oneflow.FloatTensor" and x.type() != "oneflow.DoubleTensor"
    for np_dtype, name in [(np.uint8, "ByteTensor"), (np.int8, "CharTensor"), (np.int32, "IntTensor"),
                           (np.int64, "LongTensor"), (np.float64, "DoubleTensor"), (np.bool_, "BoolTensor"),
                           (np.complex64, "ComplexFloatTensor"), (np.complex128, "ComplexDoubleTensor")]:
        a = np.zeros(3, np_dtype)
        ours = gt.from_numpy(a).type()
        assert ours == torch.from_numpy(a).type() and ours == "oneflow." + name


def test_type_with_an_argument_casts_as_torch():
    x, t = gt.tensor([1.5, 2.5]), torch.tensor([1.5, 2.5])
    for ours, theirs in [(gt.int8, torch.int8), ("torch.HalfTensor", "torch.HalfTensor"),
                         (gt.DoubleTensor, torch.DoubleTensor), ("oneflow.LongTensor", "torch.LongTensor")]:
        got, want = x.type(ours), t.type(theirs)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert x.type(gt.float32) is x
    with pytest.raises(ValueError, match="not a tensor type"):
        x.type("torch.NoSuchTensor")


def test_type_as_is_floating_point_is_contiguous():
    x, y = gt.ones(2, 3), gt.ones(2, 3, dtype=gt.int64)
    assert x.type_as(y).dtype == gt.int64 and y.type_as(x).dtype == gt.float32
    t = torch.ones(2, 3)
    for ours, theirs in [(x, t), (y, t.long()), (x.half(), t.half()), (x.bfloat16(), t.bfloat16())]:
        assert ours.is_floating_point() == theirs.is_floating_point()
    assert x.is_contiguous() == t.is_contiguous() and x.t().is_contiguous() == t.t().is_contiguous()
    assert x.reshape(3, 2).is_view() and not gt.tensor([1.0]).is_view()


def test_new_forms_as_torch():
    x, t = gt.ones(2, dtype=gt.float64), torch.ones(2, dtype=torch.float64)
    assert tuple(x.new().shape) == tuple(t.new().shape) == (0,)
    assert tuple(x.new(1, 2, 3).shape) == tuple(t.new(1, 2, 3).shape) and x.new(1, 2).dtype == gt.float64
    assert tuple(x.new(gt.Size([4])).shape) == (4,)
    np.testing.assert_array_equal(x.new([1, 2, 3]).numpy(), t.new([1, 2, 3]).numpy())
    assert x.new([1, 2, 3]).dtype == gt.float64


@pytest.mark.parametrize("shape,dim,size,step", [((8, 4), 0, 3, 2), ((2, 5, 3), 1, 2, 1), ((2, 5, 3), -1, 3, 3),
                                                 ((6,), 0, 6, 1), ((), 0, 1, 1)])
def test_unfold_values_and_gradient_as_torch(shape, dim, size, step):
    a = np.random.default_rng(0).random(shape)
    x, t = gt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, u = x.unfold(dim, size, step), t.unfold(dim, size, step)
    np.testing.assert_allclose(y.numpy(), u.detach().numpy())
    w = np.random.default_rng(1).random(tuple(u.shape))
    (y * gt.tensor(w)).sum().backward()
    (u * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_unfold_refuses_a_size_larger_than_the_dim():
    with pytest.raises(RuntimeError, match="maximum size"):
        gt.ones(4).unfold(0, 5, 1)


def test_grad_fn_conj_physical_exponential():
    x = gt.ones(2, 3).requires_grad_()
    assert x.grad_fn is None and (x + x).grad_fn is not None
    assert gt.nn.Parameter(x + x).grad_fn is None
    c = np.array([1 + 2j, 3 - 1j], np.complex64)
    np.testing.assert_array_equal(gt.tensor(c).conj_physical().numpy(), torch.tensor(c).conj_physical().numpy())
    np.testing.assert_array_equal(gt.conj_physical(gt.tensor([1.0, 2.0])).numpy(), [1.0, 2.0])
    gt.manual_seed(0)
    e = gt.zeros(200000, dtype=gt.float64).exponential_(lambd=4.0)
    assert e.dtype == gt.float64 and e.min().item() >= 0
    assert abs(e.mean().item() - 0.25) < 0.005 and abs(e.std().item() - 0.25) < 0.005
    with pytest.raises(RuntimeError, match="lambda > 0"):
        gt.zeros(2).exponential_(lambd=0.0)


def test_top_level_new_factories_as_oneflow():
    x = gt.ones(2, 3, dtype=gt.float64)
    z = gt.new_zeros(x)
    assert tuple(z.shape) == (2, 3) and z.dtype == gt.float64 and not z.numpy().any()
    assert tuple(gt.new_empty(x, size=(4,)).shape) == (4,) and gt.new_empty.__name__ == "new_empty_op"
    assert gt.new_ones(x, (1, 2), dtype=gt.int32).numpy().tolist() == [[1, 1]]


def test_slice_tup_list_as_oneflow_and_paddle_form():
    a = np.arange(48.0).reshape(6, 8)
    x, t = gt.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y = gt.slice(x, slice_tup_list=[[None, None, None], [0, 5, 2]])
    u = t[:, 0:5:2]
    np.testing.assert_array_equal(y.numpy(), u.detach().numpy())
    y.sum().backward()
    u.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    assert tuple(gt.slice(x, [[3, 3, 1]]).shape) == (0, 8)
    assert tuple(gt.slice(x, [0], [1], [3]).shape) == (2, 8)
    with pytest.raises(ValueError, match="at most 2"):
        gt.slice(x, slice_tup_list=[[0, 1, 1]] * 3)


def test_embedding_weight_tensor_pin_memory_and_oneflow_internals():
    w = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    e, te = gt.nn.Embedding(5, 3, _weight=gt.tensor(w)), torch.nn.Embedding(5, 3, _weight=torch.tensor(w))
    np.testing.assert_array_equal(e(gt.tensor([4, 0])).detach().numpy(), te(torch.tensor([4, 0])).detach().numpy())
    with pytest.raises(ValueError, match="_weight has shape"):
        gt.nn.Embedding(4, 3, _weight=gt.tensor(w))
    assert gt.tensor([1, 2], pin_memory=True).tolist() == [1, 2]
    assert gt._oneflow_internal.flags.cuda_version() >= 0 and isinstance(gt._oneflow_internal.flags.with_cuda(), bool)
    import globaltensor.framework.session_context as session_ctx
    assert session_ctx.GetDefaultSession().TryInit() is session_ctx.GetDefaultSession()


def test_split_chunk_unbind_meshgrid_give_tuples_as_torch_and_lists_under_paddle():
    x, t = gt.ones(4, 2), torch.ones(4, 2)
    for ours, theirs in [(gt.split(x, 2), torch.split(t, 2)), (gt.chunk(x, 2), torch.chunk(t, 2)),
                         (gt.unbind(x), torch.unbind(t)), (gt.meshgrid(x[0], x[1]), torch.meshgrid(t[0], t[1])),
                         (x.split(3), t.split(3))]:
        assert type(ours) is type(theirs) is tuple and len(ours) == len(theirs)
    p = paddle.ones([4, 2])
    assert type(paddle.split(p, 2)) is list and type(paddle.chunk(p, 2)) is list
    assert type(paddle.unbind(p)) is list and type(paddle.unstack(p)) is list


def test_load_refuses_foreign_files_with_oneflows_message():
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"invalid file")
        f.flush()
        with pytest.raises(ValueError, match="Cannot load file"):
            gt.load(f.name)
    with tempfile.NamedTemporaryFile() as f:
        torch.save(torch.nn.Conv2d(3, 3, 3).state_dict(), f.name)
        with pytest.raises(ValueError, match="Cannot load file"):
            gt.load(f.name, support_pytorch_format=False)
        assert sorted(gt.load(f.name)) == ["bias", "weight"]


def test_graph_state_dict_is_one_entry_a_module():
    class Model(gt.nn.Graph):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def build(self, x):
            return self.model(x)

    lin = gt.nn.Linear(3, 2)
    g = Model(lin)
    sd = g.state_dict()
    assert list(sd) == ["model"] and sorted(sd["model"]) == ["bias", "weight"]
    other = Model(gt.nn.Linear(3, 2))
    other.load_state_dict(sd)
    np.testing.assert_array_equal(other.model.weight.detach().numpy(), lin.weight.detach().numpy())
    with pytest.raises(KeyError, match="no module"):
        other.load_state_dict({"nope": {}})
