"""Folds of a dynamic batch dim that no operator hook sees (a float on the left, numpy on a dim, int(n) then
math): each is refused by name at another fed size, or traced and equal to numpy at any size; never stale."""
import math

import numpy as np
import pytest
from paddle_static_fixture import static  # noqa: F401 - the fixture

REFUSED = {
    "0.1 * n": (lambda p, x, n: x * (0.1 * n), lambda xs, n: xs * (0.1 * n), r"0\.1 \* N"),
    "np.sqrt(n)": (lambda p, x, n: x / np.sqrt(n), lambda xs, n: xs / np.sqrt(n), r"np\.sqrt\(N0\)"),
    "np.log(n)": (lambda p, x, n: x * np.log(n), lambda xs, n: xs * np.log(n), r"np\.log\(N0\)"),
    "np.float32(0.5) * n": (lambda p, x, n: x + np.float32(0.5) * n, lambda xs, n: xs + 0.5 * n, r"np\.multiply"),
    "int(n) // 2 scalar": (lambda p, x, n: x * (int(n) // 2), lambda xs, n: xs * (n // 2), r"N // 2.*int\(N0\)"),
    "int(n) * 0.5": (lambda p, x, n: x * (int(n) * 0.5), lambda xs, n: xs * (n * 0.5), r"0\.5 \* N"),
    "int(n) // 2 rows": (lambda p, x, n: p.reshape(x[: int(n) // 2], [-1]), lambda xs, n: xs[: n // 2].reshape(-1),
                         r"509 .*int\(N0\)"),
    "np.asarray(n) - 1 attr": (lambda p, x, n: p.slice(x, [0], [0], [int(np.asarray(n) - 1)]),
                               lambda xs, n: xs[: n - 1], r"N - 1"),
    "1.5 * n fill": (lambda p, x, n: x + p.full([1], 1.5 * n, "float32"), lambda xs, n: xs + 1.5 * n, r"1\.5 \* N"),
    "n ** 0.5 via math.floor": (lambda p, x, n: x * (math.floor(n) ** 0.5), lambda xs, n: xs * n ** 0.5,
                                r"N0 \*\* 0\.5"),
}


def _run(paddle, main, y, xs):
    return paddle.static.Executor().run(main, feed={"x": xs}, fetch_list=[y])[0]


@pytest.mark.parametrize("fold", sorted(REFUSED))
def test_an_untraced_fold_is_refused_by_name_and_exact_at_the_recorded_size(static, fold):
    paddle, main, _ = static
    build, want, named = REFUSED[fold]
    x = paddle.static.data("x", [None, 6], "float32")
    y = build(paddle, x, x.shape[0])
    assert main.unexplained, fold
    xs = np.random.default_rng(0).random((4, 6)).astype(np.float32)
    with pytest.raises(ValueError, match="cannot recompute at the fed size") as info:
        _run(paddle, main, y, xs)
    assert __import__("re").search(named, str(info.value)), str(info.value)
    big = np.random.default_rng(1).random((1019, 6)).astype(np.float32)  # the recorded size: exact
    np.testing.assert_allclose(_run(paddle, main, y, big), want(big, 1019), rtol=1e-5)


CARRIED = {
    "1.0 / n": (lambda p, x, n: x * (1.0 / n), lambda xs, n: xs / n),
    "2.0 * n": (lambda p, x, n: x + 2.0 * n, lambda xs, n: xs + 2.0 * n),
    "int(n) * 3": (lambda p, x, n: x * (int(n) * 3), lambda xs, n: xs * (n * 3)),
    "math.floor(n) // 2 (traced)": (lambda p, x, n: x[: math.floor(n) * 1], lambda xs, n: xs),
    "np.float64(n) * 2 (traced)": (lambda p, x, n: x * np.multiply(n, 2), lambda xs, n: xs * (2 * n)),
    "user constants": (lambda p, x, n: x * 0.37 + 255 + math.pi, lambda xs, n: xs * 0.37 + 255 + math.pi),
}


@pytest.mark.parametrize("fold", sorted(CARRIED))
def test_a_fold_the_run_carries_or_a_plain_constant_runs_at_any_size(static, fold):
    paddle, main, _ = static
    build, want = CARRIED[fold]
    x = paddle.static.data("x", [None, 6], "float32")
    y = build(paddle, x, x.shape[0])
    assert main.unexplained == [], main.unexplained
    for rows in (3, 8):
        xs = np.random.default_rng(rows).random((rows, 6)).astype(np.float32)
        np.testing.assert_allclose(_run(paddle, main, y, xs), want(xs, rows), rtol=1e-5)


def test_int_of_a_dim_alone_keeps_user_ints_free(static):
    paddle, main, _ = static
    x = paddle.static.data("x", [None, 256], "float32")
    n = int(x.shape[0])  # escaped, but 256 below is no fold of 1019
    y = paddle.reshape(x, [n, 16, 16]).sum(axis=[1, 2]) + 255
    assert main.unexplained == []
    xs = np.ones((3, 256), np.float32)
    np.testing.assert_allclose(_run(paddle, main, y, xs), np.full(3, 511.0))
