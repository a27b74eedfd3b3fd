"""Dynamic batch dims in static programs: values folded from the batch size are equal to dygraph at any
fed size where the run's rules carry them, and refused clearly where they cannot (never silently stale)."""
import math

import numpy as np
import pytest
from paddle_static_fixture import static  # noqa: F401 - the fixture


def _run(paddle, main, y, xs):
    return paddle.static.Executor().run(main, feed={"x": xs}, fetch_list=[y])[0]


@pytest.mark.parametrize("fold", ["sum / n", "(n - 1) * x", "mean over n * 3", "reshape n * 2"])
def test_batch_size_folded_by_the_rules_equals_numpy_at_any_batch(static, fold):
    paddle, main, _ = static
    x = paddle.static.data("x", [None, 6], "float32")
    n = x.shape[0]
    y = {"sum / n": lambda: paddle.sum(x, axis=0) / n, "(n - 1) * x": lambda: x * (n - 1),
         "mean over n * 3": lambda: paddle.sum(x) * (1.0 / (n * 6)),
         "reshape n * 2": lambda: paddle.reshape(x, [n * 2, 3])}[fold]()
    assert main.unexplained == []
    for rows in (2, 5):
        xs = np.random.default_rng(rows).random((rows, 6)).astype(np.float32)
        want = {"sum / n": xs.sum(0) / rows, "(n - 1) * x": xs * (rows - 1), "mean over n * 3": xs.sum() / (rows * 6),
                "reshape n * 2": xs.reshape(rows * 2, 3)}[fold]
        np.testing.assert_allclose(_run(paddle, main, y, xs), want, rtol=1e-5)


@pytest.mark.parametrize("fold", ["n ** -0.5", "math.sqrt(n)", "n // 2 rows"])
def test_batch_size_folded_another_way_is_refused_not_stale(static, fold):
    paddle, main, _ = static
    x = paddle.static.data("x", [None, 6], "float32")
    n = x.shape[0]
    y = {"n ** -0.5": lambda: x * n ** -0.5, "math.sqrt(n)": lambda: x / math.sqrt(n),
         "n // 2 rows": lambda: x[: n // 2]}[fold]()
    assert main.unexplained
    xs = np.random.default_rng(0).random((4, 6)).astype(np.float32)
    with pytest.raises(ValueError, match="cannot recompute at the fed size"):
        _run(paddle, main, y, xs)
    big = np.random.default_rng(1).random((1019, 6)).astype(np.float32)  # the recorded size: exact
    want = {"n ** -0.5": big * 1019 ** -0.5, "math.sqrt(n)": big / math.sqrt(1019), "n // 2 rows": big[:509]}[fold]
    np.testing.assert_allclose(_run(paddle, main, y, big), want, rtol=1e-6)


def test_a_fixed_dim_folds_freely(static):
    paddle, main, _ = static
    x = paddle.static.data("x", [None, 16], "float32")
    y = x * x.shape[1] ** -0.5  # a fixed dim is a plain int: nothing to carry
    assert main.unexplained == []
    xs = np.ones((3, 16), np.float32)
    np.testing.assert_allclose(_run(paddle, main, y, xs), xs * 0.25)


def test_a_refused_program_stays_refused_after_save_and_load(static, tmp_path):
    paddle, main, _ = static
    x = paddle.static.data("x", [None, 6], "float32")
    y = x * x.shape[0] ** -0.5
    paddle.static.save_inference_model(str(tmp_path / "m"), [x], [y], None, program=main)
    program, feeds, fetches = paddle.static.load_inference_model(str(tmp_path / "m"))
    with pytest.raises(ValueError, match=r"N0 \*\* -0.5"):
        paddle.static.Executor().run(program, feed={"x": np.ones((2, 6), np.float32)}, fetch_list=fetches)


def test_batch_norm_updates_moving_stats_and_the_test_program_uses_them(static):
    """Paddle 3.3.1 (checked there): training normalizes by the batch's statistics and sets
    moving = 0.9 * moving + 0.1 * batch's (biased variance); clone(for_test=True) normalizes by the
    moving ones."""
    paddle, main, startup = static
    x = paddle.static.data("x", [None, 3, 2, 2], "float32")
    y = paddle.static.nn.batch_norm(x, momentum=0.9)
    loss = paddle.mean(y)
    test = main.clone(for_test=True)
    paddle.optimizer.SGD(0.0).minimize(loss)
    assert [op.type for op in main.global_block().ops][0] == "batch_norm"
    assert [op.type for op in test.global_block().ops][0] == "batch_norm"
    exe = paddle.static.Executor()
    exe.run(startup)
    rng = np.random.default_rng(0)
    moving_mean, moving_var = np.zeros(3), np.ones(3)
    for rows in (5, 3):
        xs = rng.random((rows, 3, 2, 2)).astype(np.float32)
        mean, var = xs.mean(axis=(0, 2, 3)), xs.var(axis=(0, 2, 3))
        (got,) = exe.run(main, feed={"x": xs}, fetch_list=[y])
        want = (xs - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        moving_mean, moving_var = 0.9 * moving_mean + 0.1 * mean, 0.9 * moving_var + 0.1 * var
    xs = rng.random((4, 3, 2, 2)).astype(np.float32)
    (got,) = exe.run(test, feed={"x": xs}, fetch_list=[y])
    want = (xs - moving_mean[:, None, None]) / np.sqrt(moving_var[:, None, None] + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
