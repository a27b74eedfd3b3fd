"""paddle.nn.BatchNorm2D's running statistics against numpy written from Paddle's formula
(moving = momentum * moving + (1 - momentum) * the batch's, biased variance), in dygraph and in a
static program trained at two batch sizes; the numpy formula was checked against real Paddle 3.3.1
(dygraph, and static with FLAGS_enable_pir_api=0: the same moving statistics and for-test output
to 1e-7), and the dygraph case is run against real Paddle here too where it imports."""
import numpy as np
import pytest

MOMENTUM, EPS = 0.9, 1e-5


def _train_numpy(feeds, lr):
    """scale, shift, moving mean and variance after SGD(lr) steps on mean(square(BatchNorm2D(x)))."""
    g, b, moving_mean, moving_var = np.ones(3), np.zeros(3), np.zeros(3), np.ones(3)
    for xs in feeds:
        x = xs.astype(np.float64)
        mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
        xhat = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + EPS)
        y = g[:, None, None] * xhat + b[:, None, None]
        dg, db = 2 / y.size * (y * xhat).sum((0, 2, 3)), 2 / y.size * y.sum((0, 2, 3))
        moving_mean = MOMENTUM * moving_mean + (1 - MOMENTUM) * mean
        moving_var = MOMENTUM * moving_var + (1 - MOMENTUM) * var
        g, b = g - lr * dg, b - lr * db
    return g, b, moving_mean, moving_var


def _infer_numpy(x, g, b, moving_mean, moving_var):
    c = (slice(None), None, None)
    return g[c] * (x - moving_mean[c]) / np.sqrt(moving_var[c] + EPS) + b[c]


def _feeds():
    rng = np.random.default_rng(0)
    return [(rng.random((n, 3, 2, 2)) * 2 + 1).astype(np.float32) for n in (4, 6)], \
        rng.random((5, 3, 2, 2)).astype(np.float32)


def test_static_batchnorm2d_trained_at_two_batch_sizes_updates_moving_stats_as_paddle():
    import globaltensor.paddle as paddle
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [None, 3, 2, 2], "float32")
            bn = paddle.nn.BatchNorm2D(3, momentum=MOMENTUM)
            y = bn(x)
            loss = paddle.mean(paddle.square(y))
            test = main.clone(for_test=True)
            paddle.optimizer.SGD(0.1).minimize(loss)
        assert [op.type for op in main.global_block().ops][0] == "batch_norm"
        assert [op.type for op in test.global_block().ops][0] == "batch_norm"
        assert main.unexplained == []
        exe = paddle.static.Executor()
        exe.run(startup)
        feeds, x_test = _feeds()
        for xs in feeds:  # batch 4, then 6: nothing folded from the first batch size goes stale
            exe.run(main, feed={"x": xs}, fetch_list=[loss])
        (got,) = exe.run(test, feed={"x": x_test}, fetch_list=[y])
        g, b, moving_mean, moving_var = _train_numpy(feeds, 0.1)
        np.testing.assert_allclose(bn._mean.numpy(), moving_mean, rtol=1e-5)
        np.testing.assert_allclose(bn._variance.numpy(), moving_var, rtol=1e-5)
        np.testing.assert_allclose(got, _infer_numpy(x_test, g, b, moving_mean, moving_var), rtol=1e-5, atol=1e-6)
        # numbers printed by real Paddle 3.3.1 (static, FLAGS_enable_pir_api=0) for this very program
        np.testing.assert_allclose(bn._mean.numpy(), [0.3893766, 0.4105759, 0.383955], rtol=1e-6)
        np.testing.assert_allclose(bn._variance.numpy(), [0.8906294, 0.8638378, 0.8846979], rtol=1e-6)
    finally:
        paddle.disable_static()


def test_static_functional_batch_norm_in_eval_reads_the_running_stats():
    import globaltensor.paddle as paddle
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [None, 3, 2, 2], "float32")
            bn = paddle.nn.BatchNorm2D(3)
            bn.eval()
            y = bn(x)
        exe = paddle.static.Executor()
        exe.run(startup)
        xs = _feeds()[1]
        (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y])
        np.testing.assert_allclose(got, xs / np.sqrt(1 + EPS), rtol=1e-6)
        np.testing.assert_array_equal(bn._mean.numpy(), np.zeros(3))
    finally:
        paddle.disable_static()


def _dygraph(paddle, feeds):
    bn = paddle.nn.BatchNorm2D(3, momentum=MOMENTUM)
    for xs in feeds:
        bn(paddle.to_tensor(xs))
    return bn._mean.numpy(), bn._variance.numpy()


def test_dygraph_batchnorm2d_running_stats_follow_paddles_formula():
    import globaltensor.paddle as paddle
    feeds, _ = _feeds()
    mean, var = _dygraph(paddle, feeds)
    _, _, moving_mean, moving_var = _train_numpy(feeds, 0.0)
    np.testing.assert_allclose(mean, moving_mean, rtol=1e-5)
    np.testing.assert_allclose(var, moving_var, rtol=1e-5)  # the biased variance (PyTorch's would be 0.90 / 0.93)


def test_dygraph_batchnorm2d_running_stats_equal_real_paddle():
    real = pytest.importorskip("paddle")
    import globaltensor.paddle as paddle
    feeds, _ = _feeds()
    for got, want in zip(_dygraph(paddle, feeds), _dygraph(real, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_state_dict_keys_are_paddles_and_load_back():
    """Paddle's BatchNorm state_dict: weight, bias, _mean, _variance (real Paddle 3.3.1 prints these
    keys for paddle.nn.BatchNorm2D(3)); a state dict with them loads, and the layer normalizes by it."""
    import globaltensor.paddle as paddle
    bn = paddle.nn.BatchNorm2D(3)
    assert list(bn.state_dict()) == ["weight", "bias", "_mean", "_variance"]
    state = {"weight": np.array([1.0, 2.0, 3.0], "float32"), "bias": np.array([0.5, 0.0, -0.5], "float32"),
             "_mean": np.array([0.1, 0.2, 0.3], "float32"), "_variance": np.array([1.0, 4.0, 9.0], "float32")}
    bn.set_state_dict({k: paddle.to_tensor(v) for k, v in state.items()})
    bn.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 2)).astype("float32")
    shape = (1, 3, 1, 1)
    want = (x - state["_mean"].reshape(shape)) / np.sqrt(state["_variance"].reshape(shape) + 1e-5) \
        * state["weight"].reshape(shape) + state["bias"].reshape(shape)
    np.testing.assert_allclose(bn(paddle.to_tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    assert bn.running_mean is bn._mean
