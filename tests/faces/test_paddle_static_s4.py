"""Issue 29 gaps: CompiledProgram runs as its program (against numpy), InputSpec behaves as Paddle 3.3.1's."""
import numpy as np
import pytest

from paddle_static_fixture import static  # noqa: F401 - the fixture


def test_compiled_program_with_data_parallel_runs_the_program_against_numpy(static):
    paddle, main, startup = static
    x = paddle.static.data(name="x", shape=[-1, 5], dtype="float32")
    h = paddle.static.nn.fc(x, size=3, activation="relu")
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    w, b = [p.numpy() for p in main.all_parameters()]
    compiled = paddle.static.CompiledProgram(main).with_data_parallel(loss_name=h.name)
    xs = np.random.default_rng(0).random((4, 5), np.float32)
    got, = exe.run(compiled, feed={"x": xs}, fetch_list=[h])
    np.testing.assert_allclose(got, np.maximum(xs @ w + b, 0), rtol=1e-5, atol=1e-6)
    plain, = exe.run(main, feed={"x": xs}, fetch_list=[h])
    assert np.array_equal(got, plain)


def test_input_spec_keeps_paddles_shape_tuple_batch_and_repr():
    import globaltensor.paddle as paddle
    spec = paddle.static.InputSpec(shape=[None, 13], dtype="float32", name="x")
    assert spec.shape == (-1, 13) and spec.name == "x" and spec.dtype == paddle.float32
    assert repr(spec).startswith("InputSpec(shape=(-1, 13), dtype=") and repr(spec).endswith(
        "name=x, stop_gradient=False)")
    assert paddle.static.InputSpec([3]).batch(4).shape == (4, 3)
    assert paddle.static.InputSpec([4, 3]).unbatch().shape == (3,)
    t = paddle.to_tensor(np.zeros((2, 3), np.float32))
    assert paddle.static.InputSpec.from_tensor(t, name="t") == paddle.static.InputSpec((2, 3), "float32", "t")
    assert paddle.static.InputSpec.from_numpy(np.zeros((2, 5), np.int64)).dtype == paddle.int64
    with pytest.raises(ValueError, match="unbatch"):
        paddle.static.InputSpec([]).unbatch()


def test_input_spec_matches_real_paddle():
    real = pytest.importorskip("paddle")
    import globaltensor.paddle as paddle
    want = real.static.InputSpec(shape=[None, 13], dtype="float32", name="x")
    got = paddle.static.InputSpec(shape=[None, 13], dtype="float32", name="x")
    assert got.shape == want.shape and got.name == want.name
