"""paddle.nn.functional's losses and paddle.nn's loss layers with Paddle's signatures, label shapes and
reductions: values and gradients against torch (or numpy where Paddle's rule is its own)."""
import numpy as np
import pytest
import torch

import globaltensor.paddle as paddle

F = paddle.nn.functional
TF = torch.nn.functional
RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 4))
Y = RNG.standard_normal((6, 4))
P = RNG.uniform(0.05, 0.95, (6, 4))
BITS = (RNG.random((6, 4)) > 0.5).astype(np.float64)
SIGNS = np.where(RNG.random(6) > 0.5, 1.0, -1.0)
CLASSES = np.array([0, 3, 1, 2, 3, 0])


def _check(ours, theirs, arrays, grad_of=(0,), rtol=1e-6):
    """ours(*paddle tensors) against theirs(*torch tensors): the value, and the gradients of the
    inputs at grad_of (float arrays) of the loss's sum."""
    ts = [paddle.to_tensor(a, stop_gradient=i not in grad_of) for i, a in enumerate(arrays)]
    rs = [torch.tensor(a, requires_grad=i in grad_of) for i, a in enumerate(arrays)]
    out, want = ours(*ts), theirs(*rs)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=rtol, atol=1e-7)
    out.sum().backward()
    want.sum().backward()
    for i in grad_of:
        np.testing.assert_allclose(ts[i].grad.numpy(), rs[i].grad.numpy(), rtol=rtol, atol=1e-7)


@pytest.mark.filterwarnings("ignore:reduction")  # torch's note on kl_div's 'mean'
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_torch(reduction):
    r = reduction
    _check(lambda x, y: F.mse_loss(x, y, r), lambda x, y: TF.mse_loss(x, y, reduction=r), [X, Y], (0, 1))
    _check(lambda x, y: F.l1_loss(x, y, r), lambda x, y: TF.l1_loss(x, y, reduction=r), [X, Y], (0, 1))
    _check(lambda p, y: F.binary_cross_entropy(p, y, reduction=r),
           lambda p, y: TF.binary_cross_entropy(p, y, reduction=r), [P, BITS])
    _check(lambda x, y, w: F.binary_cross_entropy_with_logits(x, y, reduction=r, pos_weight=w),
           lambda x, y, w: TF.binary_cross_entropy_with_logits(x, y, reduction=r, pos_weight=w),
           [X, BITS, np.array([1.0, 2.0, 0.5, 3.0])])
    _check(lambda x, y: F.nll_loss(x, y, reduction=r), lambda x, y: TF.nll_loss(x, y, reduction=r), [X, CLASSES])
    _check(lambda x, y: F.kl_div(x, y, reduction=r), lambda x, y: TF.kl_div(x, y, reduction=r), [X, P])
    _check(lambda x, y: F.smooth_l1_loss(x, y, r, delta=0.5),  # Paddle's default is_huber: the Huber loss
           lambda x, y: TF.huber_loss(x, y, reduction=r, delta=0.5), [X, Y], (0, 1))
    _check(lambda x, y: F.smooth_l1_loss(x, y, r, delta=0.5, is_huber=False),
           lambda x, y: TF.smooth_l1_loss(x, y, reduction=r, beta=0.5), [X, Y], (0, 1))
    a, b = X[:, 0], Y[:, 0]
    _check(lambda a, b, s: F.margin_ranking_loss(a, b, s, margin=0.3, reduction=r),
           lambda a, b, s: TF.margin_ranking_loss(a, b, s, margin=0.3, reduction=r), [a, b, SIGNS], (0, 1))
    _check(lambda x, s: F.hinge_embedding_loss(x, s, margin=0.5, reduction=r),
           lambda x, s: TF.hinge_embedding_loss(x, s, margin=0.5, reduction=r), [a, SIGNS])
    _check(lambda x, y, s: F.cosine_embedding_loss(x, y, s, margin=0.2, reduction=r),
           lambda x, y, s: TF.cosine_embedding_loss(x, y, s, margin=0.2, reduction=r), [X, Y, SIGNS], (0, 1))
    _check(lambda x, y, z: F.triplet_margin_loss(x, y, z, margin=0.5, swap=True, reduction=r),
           lambda x, y, z: TF.triplet_margin_loss(x, y, z, margin=0.5, swap=True, reduction=r), [X, Y, P], (0, 1, 2))
    _check(lambda x, s: F.soft_margin_loss(x, s, r), lambda x, s: TF.soft_margin_loss(x, s, reduction=r),
           [X, np.sign(Y)])
    _check(lambda x, y: F.multi_label_soft_margin_loss(x, y, reduction=r),
           lambda x, y: TF.multilabel_soft_margin_loss(x, y, reduction=r), [X, BITS])
    _check(lambda x, y: F.multi_margin_loss(x, y, margin=0.8, reduction=r),
           lambda x, y: TF.multi_margin_loss(x, y, margin=0.8, reduction=r), [X, CLASSES])
    _check(lambda x, y: F.poisson_nll_loss(x, y, reduction=r), lambda x, y: TF.poisson_nll_loss(x, y, reduction=r),
           [X, P])
    _check(lambda x, y, v: F.gaussian_nll_loss(x, y, v, reduction=r),
           lambda x, y, v: TF.gaussian_nll_loss(x, y, v, reduction=r), [X, Y, P], (0, 1, 2))


def _log_softmax(x, axis=-1):
    return x - np.log(np.exp(x).sum(axis, keepdims=True))


def test_cross_entropy_paddles_label_shapes_weight_smoothing_and_soft_labels():
    label = CLASSES[:, None]  # Paddle's hard label [N, 1]: the unreduced loss keeps that dim
    out = F.cross_entropy(paddle.to_tensor(X), paddle.to_tensor(label), reduction="none")
    assert list(out.shape) == [6, 1]
    np.testing.assert_allclose(out.numpy()[:, 0], -_log_softmax(X)[np.arange(6), CLASSES])
    w = np.array([1.0, 2.0, 0.5, 3.0])
    _check(lambda x, y, w: F.cross_entropy(x, y, weight=w), lambda x, y, w: TF.cross_entropy(x, y[:, 0], weight=w),
           [X, label, w])
    _check(lambda x, y: F.cross_entropy(x, y, label_smoothing=0.2),
           lambda x, y: TF.cross_entropy(x, y, label_smoothing=0.2), [X, CLASSES])
    soft = P / P.sum(1, keepdims=True)
    _check(lambda x, y: F.cross_entropy(x, y, soft_label=True), lambda x, y: TF.cross_entropy(x, y), [X, soft])
    rows = -(soft * _log_softmax(X)).sum(1) * (soft @ w)  # Paddle's soft-label weight: sum(label * weight)
    got = F.cross_entropy(paddle.to_tensor(X), paddle.to_tensor(soft), weight=paddle.to_tensor(w), soft_label=True)
    np.testing.assert_allclose(float(got), rows.sum() / (soft @ w).sum())
    x3 = RNG.standard_normal((2, 4, 3))  # classes on axis 1
    _check(lambda x, y: F.cross_entropy(x, y, axis=1, reduction="sum"),
           lambda x, y: TF.cross_entropy(x, y, reduction="sum"), [x3, np.array([[0, 3, 1], [2, 2, 0]])])
    _check(lambda p, y: F.cross_entropy(p, y, use_softmax=False), lambda p, y: TF.nll_loss(torch.log(p), y),
           [P, CLASSES])
    layer = paddle.nn.CrossEntropyLoss(weight=paddle.to_tensor(w), label_smoothing=0.1)
    smooth = np.eye(4)[CLASSES] * 0.9 + 0.1 / 4  # smoothing makes soft labels, weighted as soft labels are
    rows = -(smooth * _log_softmax(X)).sum(1) * (smooth @ w)
    np.testing.assert_allclose(float(layer(paddle.to_tensor(X), paddle.to_tensor(CLASSES))),
                               rows.sum() / (smooth @ w).sum())


def test_cross_entropy_mean_with_ignored_labels_is_paddles():
    """Paddle's mean: a negative ignore_index (the default -100) divides by every label, an ignored
    one counting as 0; ignore_index >= 0 or a weight divides by the labels (weights) kept."""
    label = np.array([0, -100, 1, 2, 3, -100])
    picked = np.where(label >= 0, -_log_softmax(X)[np.arange(6), np.maximum(label, 0)], 0.0)
    x = paddle.to_tensor(X, stop_gradient=False)
    loss = F.cross_entropy(x, paddle.to_tensor(label))
    np.testing.assert_allclose(float(loss), picked.sum() / 6)
    loss.backward()
    tx = torch.tensor(X, requires_grad=True)
    (TF.cross_entropy(tx, torch.tensor(label), reduction="sum") / 6).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    label = np.array([0, 1, 1, 2, 3, 1])
    _check(lambda x, y: F.cross_entropy(x, y, ignore_index=1), lambda x, y: TF.cross_entropy(x, y, ignore_index=1),
           [X, label])
    w = np.array([1.0, 2.0, 0.5, 3.0])
    _check(lambda x, y, w: F.cross_entropy(x, y, weight=w, ignore_index=1),
           lambda x, y, w: TF.cross_entropy(x, y, weight=w, ignore_index=1), [X, label, w])


def test_softmax_with_cross_entropy_square_error_log_focal_dice():
    loss, soft = F.softmax_with_cross_entropy(paddle.to_tensor(X), paddle.to_tensor(CLASSES[:, None]),
                                              return_softmax=True)
    assert list(loss.shape) == [6, 1]
    np.testing.assert_allclose(loss.numpy()[:, 0], -_log_softmax(X)[np.arange(6), CLASSES])
    np.testing.assert_allclose(soft.numpy(), np.exp(_log_softmax(X)))
    _check(F.square_error_cost, lambda x, y: (x - y) ** 2, [X, Y], (0, 1))
    _check(F.log_loss, lambda p, y: -(y * torch.log(p + 1e-4) + (1 - y) * torch.log(1 - p + 1e-4)), [P, BITS])

    def focal(x, y, alpha=0.25, gamma=2.0):
        p = torch.sigmoid(x)
        p_t = p * y + (1 - p) * (1 - y)
        a_t = alpha * y + (1 - alpha) * (1 - y)
        return (a_t * (1 - p_t) ** gamma * TF.binary_cross_entropy_with_logits(x, y, reduction="none")).sum()

    _check(F.sigmoid_focal_loss, focal, [X, BITS])  # Paddle's default reduction is 'sum'
    _check(lambda x, y, n: F.sigmoid_focal_loss(x, y, n, alpha=0.5, gamma=1.0, reduction="mean"),
           lambda x, y, n: (focal(x, y, 0.5, 1.0) / 24) / n, [X, BITS, np.array([3.0])])
    probs = np.exp(_log_softmax(X))
    one_hot = np.eye(4)[CLASSES]
    dice = 1 - 2 * (probs * one_hot).sum(1) / (probs.sum(1) + one_hot.sum(1) + 1e-5)
    np.testing.assert_allclose(float(F.dice_loss(paddle.to_tensor(probs), paddle.to_tensor(CLASSES[:, None]))),
                               dice.mean())


def test_ctc_loss_takes_paddles_unscaled_logits():
    logits = RNG.standard_normal((7, 2, 5))  # [T, N, C]
    labels = np.array([[1, 2, 2], [3, 4, 0]])
    lengths, label_lengths = np.array([7, 6]), np.array([3, 2])
    for r in ("mean", "sum", "none"):
        _check(lambda x, y, n, m: F.ctc_loss(x, y, n, m, reduction=r),
               lambda x, y, n, m: TF.ctc_loss(torch.log_softmax(x, -1), y, n, m, reduction=r),
               [logits, labels, lengths, label_lengths], rtol=1e-5)
    layer = paddle.nn.CTCLoss(blank=0, reduction="sum")
    got = layer(*[paddle.to_tensor(a) for a in (logits, labels, lengths, label_lengths)])
    assert float(got) == pytest.approx(float(F.ctc_loss(*[paddle.to_tensor(a) for a in (logits, labels, lengths,
                                                                                            label_lengths)],
                                                        reduction="sum")))


def test_loss_layers_take_paddles_signatures():
    x, y, p, bits = (paddle.to_tensor(a) for a in (X, Y, P, BITS))
    w = paddle.to_tensor(np.array([1.0, 2.0, 0.5, 3.0]))
    classes = paddle.to_tensor(CLASSES)
    a, b, s = paddle.to_tensor(X[:, 0]), paddle.to_tensor(Y[:, 0]), paddle.to_tensor(SIGNS)
    pairs = [
        (paddle.nn.MSELoss("sum")(x, y), F.mse_loss(x, y, "sum")),
        (paddle.nn.L1Loss()(x, y), F.l1_loss(x, y)),
        (paddle.nn.BCELoss(w, "sum")(p, bits), F.binary_cross_entropy(p, bits, w, "sum")),
        (paddle.nn.BCEWithLogitsLoss(None, "mean", w)(x, bits), F.binary_cross_entropy_with_logits(x, bits, None,
                                                                                                   "mean", w)),
        (paddle.nn.NLLLoss(w, -100, "sum")(x, classes), F.nll_loss(x, classes, w, reduction="sum")),
        (paddle.nn.KLDivLoss("batchmean")(x, p), F.kl_div(x, p, "batchmean")),
        (paddle.nn.SmoothL1Loss("sum", 0.5)(x, y), F.smooth_l1_loss(x, y, "sum", 0.5)),
        (paddle.nn.MarginRankingLoss(0.1)(a, b, s), F.margin_ranking_loss(a, b, s, 0.1)),
        (paddle.nn.HingeEmbeddingLoss(0.5)(a, s), F.hinge_embedding_loss(a, s, 0.5)),
        (paddle.nn.CosineEmbeddingLoss(0.2)(x, y, s), F.cosine_embedding_loss(x, y, s, 0.2)),
        (paddle.nn.TripletMarginLoss(0.5, 1.0)(x, y, p), F.triplet_margin_loss(x, y, p, 0.5, 1.0)),
        (paddle.nn.SoftMarginLoss()(x, bits * 2 - 1), F.soft_margin_loss(x, bits * 2 - 1)),
        (paddle.nn.MultiLabelSoftMarginLoss(w)(x, bits), F.multi_label_soft_margin_loss(x, bits, w)),
        (paddle.nn.PoissonNLLLoss(False, True)(p, bits), F.poisson_nll_loss(p, bits, False, True)),
        (paddle.nn.GaussianNLLLoss(True)(x, y, p), F.gaussian_nll_loss(x, y, p, True)),
        (paddle.nn.CrossEntropyLoss(reduction="sum", soft_label=True)(x, p), F.cross_entropy(x, p, reduction="sum",
                                                                                            soft_label=True)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy())
    assert paddle.nn.loss.MSELoss is paddle.nn.MSELoss and paddle.nn.functional.loss.mse_loss is not None
    with pytest.raises(ValueError, match="reduction"):
        paddle.nn.L1Loss("avg")
