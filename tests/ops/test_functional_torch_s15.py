"""nn.functional and nn layers where globaltensor answered otherwise than torch or refused PyTorch's
arguments: convolutions with padding='same' / 'valid' and padding_mode, embedding's padding_idx,
BatchNorm's num_batches_tracked (torch's state_dicts load; momentum=None), BatchNorm3d, LayerNorm
without bias, RMSNorm, group_norm, one_hot, Embedding.from_pretrained, cross_entropy with class
probabilities. Values and gradients against torch."""
import numpy as np
import pytest
from lazy_torch import torch

import globaltensor as gt

RNG = np.random.default_rng(0)


def _state_from(torch_module):
    return {k: gt.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}


def _both(fn_torch, fn_ours, *arrays):
    """(torch's output and input gradients, ours) of sum(out * w) for a fixed random w."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    gs = [gt.tensor(a, requires_grad=True) for a in arrays]
    t_out, g_out = fn_torch(*ts), fn_ours(*gs)
    w = RNG.standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(w)).sum().backward()
    (g_out * gt.tensor(w)).sum().backward()
    return [t_out.detach().numpy()] + [t.grad.numpy() for t in ts], [g_out.numpy()] + [g.grad.numpy() for g in gs]


def _close(want, got):
    for w, g in zip(want, got):
        assert w.shape == g.shape
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel,dilation", [(3, 1), (4, 1), (3, 2), (2, 3)])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_conv_string_padding(kernel, dilation, padding):
    x, w = RNG.standard_normal((2, 3, 7, 6)), RNG.standard_normal((4, 3, kernel, kernel))
    _close(*_both(lambda a, b: torch.nn.functional.conv2d(a, b, padding=padding, dilation=dilation),
                  lambda a, b: gt.nn.functional.conv2d(a, b, padding=padding, dilation=dilation), x, w))
    _close(*_both(lambda a, b: torch.nn.functional.conv1d(a, b, padding=padding, dilation=dilation),
                  lambda a, b: gt.nn.functional.conv1d(a, b, padding=padding, dilation=dilation), x[:, :, 0], w[:, :, 0]))


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, (1, 2), "same"])
def test_conv_padding_modes(mode, padding):
    ours = torch.nn.Conv2d(3, 4, (3, 4), padding=padding, padding_mode=mode).double()
    mine = gt.nn.Conv2d(3, 4, (3, 4), padding=padding, padding_mode=mode)
    mine.load_state_dict(_state_from(ours))
    _close(*_both(ours, mine, RNG.standard_normal((2, 3, 7, 6))))
    one, mine1 = torch.nn.Conv1d(3, 2, 3, padding=2, padding_mode=mode).double(), gt.nn.Conv1d(3, 2, 3, padding=2,
                                                                                               padding_mode=mode)
    mine1.load_state_dict(_state_from(one))
    _close(*_both(one, mine1, RNG.standard_normal((2, 3, 6))))


@pytest.mark.parametrize("padding_idx", [1, -1, None])
def test_embedding_padding_idx_looks_the_row_up_and_holds_its_gradient(padding_idx):
    table, index = RNG.standard_normal((5, 3)), torch.tensor([[1, 2, 1], [4, 0, 4]])
    _close(*_both(lambda w: torch.nn.functional.embedding(index, w, padding_idx=padding_idx),
                  lambda w: gt.nn.functional.embedding(gt.tensor(index.numpy()), w, padding_idx=padding_idx), table))


@pytest.mark.parametrize("cls,shape,momentum", [("BatchNorm2d", (4, 3, 5, 5), 0.1), ("BatchNorm2d", (4, 3, 5, 5), None),
                                                ("BatchNorm1d", (6, 3), None), ("BatchNorm3d", (2, 3, 2, 3, 4), 0.2)])
def test_batch_norm_state_dicts_and_statistics_as_torch(cls, shape, momentum):
    theirs, ours = getattr(torch.nn, cls)(3, momentum=momentum).double(), getattr(gt.nn, cls)(3, momentum=momentum)
    ours.load_state_dict(_state_from(theirs))  # num_batches_tracked included
    for _ in range(3):
        x = RNG.standard_normal(shape)
        np.testing.assert_allclose(ours(gt.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-9)
    want, got = theirs.state_dict(), ours.state_dict()
    assert sorted(want) == sorted(got)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-5, atol=1e-8, err_msg=k)  # float32 buffers
    del got["num_batches_tracked"]
    getattr(gt.nn, cls)(3).load_state_dict(got)  # a checkpoint from before the counter still loads


def test_norm_layers_as_torch():
    x = RNG.standard_normal((2, 4, 6))
    theirs, ours = torch.nn.LayerNorm(6, bias=False).double(), gt.nn.LayerNorm(6, bias=False)
    assert sorted(theirs.state_dict()) == sorted(ours.state_dict()) == ["weight"]
    _close(*_both(theirs, ours, x))
    theirs, ours = torch.nn.RMSNorm(6).double(), gt.nn.RMSNorm(6)
    _close(*_both(theirs, ours, x))
    w = RNG.standard_normal(6)
    _close(*_both(lambda a: torch.nn.functional.rms_norm(a, (6,), torch.tensor(w), 1e-3),
                  lambda a: gt.nn.functional.rms_norm(a, (6,), gt.tensor(w), 1e-3), x))
    _close(*_both(lambda a: torch.nn.functional.group_norm(a, 2, torch.tensor(w[:4]), torch.tensor(w[2:])),
                  lambda a: gt.nn.functional.group_norm(a, 2, gt.tensor(w[:4]), gt.tensor(w[2:])), x))


def test_one_hot_and_from_pretrained_as_torch():
    labels = np.array([0, 2, 1, 2])
    for classes in (-1, 5):
        want = torch.nn.functional.one_hot(torch.tensor(labels), classes)
        got = gt.nn.functional.one_hot(gt.tensor(labels), classes)
        assert got.dtype.name == "int64"
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    table = RNG.standard_normal((5, 3))
    layer = gt.nn.Embedding.from_pretrained(gt.tensor(table))
    np.testing.assert_array_equal(layer(gt.tensor([1, 4])).numpy(), table[[1, 4]])
    assert not layer.weight.requires_grad
    assert gt.nn.Embedding.from_pretrained(gt.tensor(table), freeze=False).weight.requires_grad


@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3, 2)])
@pytest.mark.parametrize("options", [{}, {"label_smoothing": 0.2}, {"reduction": "sum"}, {"reduction": "none"},
                                     {"weight": True}, {"weight": True, "label_smoothing": 0.1}])
def test_cross_entropy_with_class_probabilities(shape, options):
    x, p, w = RNG.standard_normal(shape), RNG.random(shape), RNG.random(5)
    p /= p.sum(1, keepdims=True)
    theirs = {k: (torch.tensor(w) if k == "weight" else v) for k, v in options.items()}
    ours = {k: (gt.tensor(w) if k == "weight" else v) for k, v in options.items()}
    _close(*_both(lambda a: torch.nn.functional.cross_entropy(a, torch.tensor(p), **theirs),
                  lambda a: gt.nn.functional.cross_entropy(a, gt.tensor(p), **ours), x))


@pytest.mark.parametrize("make", [lambda **kw: gt.nn.Linear(4, 3, bias=False, **kw),
                                  lambda **kw: gt.nn.Conv2d(3, 4, 3, padding="same", **kw),
                                  lambda **kw: gt.nn.LayerNorm(8, **kw), lambda **kw: gt.nn.BatchNorm2d(3, **kw),
                                  lambda **kw: gt.nn.Embedding(10, 4, **kw), lambda **kw: gt.nn.RMSNorm(8, **kw)])
def test_layers_take_pytorchs_factory_arguments(make):
    """nn.Linear(4, 3, device=device, dtype=dtype) as PyTorch code writes it: the floating
    parameters and buffers in that dtype, integer buffers (num_batches_tracked) as they were."""
    layer = make(device="cpu", dtype=gt.float64)
    tensors = list(layer.parameters()) + list(layer.buffers())
    assert tensors and all(t.dtype.name == ("int64" if t.dtype.name == "int64" else "float64") for t in tensors)
    if not isinstance(layer, gt.nn.RMSNorm):  # RMSNorm makes its weight where device= says (a GPU's too)
        with pytest.raises(NotImplementedError, match="to_global"):
            make(device="cuda")


def test_a_users_own_module_keeps_its_keyword_arguments():
    class Block(gt.nn.Module):
        def __init__(self, dim, **kw):
            super().__init__()
            self.kw = kw
            self.proj = gt.nn.Linear(dim, dim, **kw)

    block = Block(4, dtype=gt.float64)
    assert block.kw == {"dtype": gt.float64} and block.proj.weight.dtype.name == "float64"


@pytest.mark.parametrize("lq,lk", [(2, 3), (3, 3), (4, 2), (1, 5)])
def test_causal_attention_aligns_top_left_as_torch(lq, lk):
    """is_causal with more keys than queries: query i sees keys j <= i (PyTorch's alignment)."""
    q, k, v = RNG.standard_normal((1, 2, lq, 4)), RNG.standard_normal((1, 2, lk, 4)), RNG.standard_normal((1, 2, lk, 4))
    _close(*_both(lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True),
                  lambda a, b, c: gt.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v))


@pytest.mark.parametrize("name", ["logsigmoid", "hardswish"])
def test_activation_gradients_at_their_corners_as_torch(name):
    x = np.array([-30.0, -3.0, -1.0, 0.0, 1.0, 3.0, 25.0, 40.0])
    _close(*_both(getattr(torch.nn.functional, name), getattr(gt.nn.functional, name), x))


@pytest.mark.parametrize("make", [lambda L: L.nn.CrossEntropyLoss(weight=L.tensor([1.0, 2.0, 3.0])),
                                  lambda L: L.nn.CrossEntropyLoss(), lambda L: L.nn.NLLLoss(weight=L.ones(3)),
                                  lambda L: L.nn.BCEWithLogitsLoss(weight=L.ones(3), pos_weight=L.ones(3))])
def test_loss_weights_are_buffers_as_torch(make):
    """A loss module's weight / pos_weight is in its state_dict (and moves with the module), as PyTorch's."""
    assert sorted(make(gt).state_dict()) == sorted(make(torch).state_dict())
