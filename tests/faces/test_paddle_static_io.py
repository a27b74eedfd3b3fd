"""Paddle's static save/load on graph's saved format: JSON manifest + safetensors, no pickle, clear refusals."""
import json
import os

import numpy as np
import pytest
from paddle_static_fixture import static  # noqa: F401 - the fixture


def _mlp(paddle):
    x = paddle.static.data("x", [None, 4], "float32")
    h = paddle.nn.functional.dropout(paddle.tanh(paddle.static.nn.fc(x, 8)), 0.5)
    return x, paddle.static.nn.fc(h, 3)


def test_inference_model_is_graphs_format_with_paddles_names(static, tmp_path):
    paddle, main, startup = static
    x, out = _mlp(paddle)
    exe = paddle.static.Executor()
    exe.run(startup)
    prefix = str(tmp_path / "m" / "mlp")
    paddle.static.save_inference_model(prefix, [x], [out], exe, program=main)
    files = sorted(os.listdir(prefix + ".pdmodel"))
    assert files == ["program.json", "rank0.json", "rank0.safetensors"]
    with open(os.path.join(prefix + ".pdmodel", "rank0.json")) as f:
        manifest = json.load(f)
    assert manifest["format"] == "globaltensor.program" and manifest["paddle"]["feeds"] == ["x"]
    assert manifest["paddle"]["fetches"] == [out.name] and manifest["paddle"]["kind"] == "inference_model"
    program, feeds, fetches = paddle.static.load_inference_model(prefix, exe)
    xs = np.random.default_rng(0).random((7, 4)).astype(np.float32)
    w0, b0, w1, b1 = [p.numpy() for p in main.all_parameters()]
    want = np.tanh(xs @ w0 + b0) @ w1 + b1  # dropout at inference: the identity
    (got,) = exe.run(program, feed={feeds[0]: xs}, fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (same,) = exe.run(main.clone(for_test=True), feed={"x": xs}, fetch_list=[out])
    np.testing.assert_array_equal(got, same)


def test_save_load_parameters_round_trip_and_refuse_what_is_not_ours(static, tmp_path):
    paddle, main, startup = static
    x, out = _mlp(paddle)
    exe = paddle.static.Executor()
    exe.run(startup)
    saved = [p.numpy().copy() for p in main.all_parameters()]
    paddle.static.save(main, str(tmp_path / "ckpt"))
    for p in main.all_parameters():
        p._local = np.zeros_like(p._local)
    paddle.static.load(main, str(tmp_path / "ckpt"))
    for p, want in zip(main.all_parameters(), saved):
        np.testing.assert_array_equal(p.numpy(), want)
    state = paddle.static.load_program_state(str(tmp_path / "ckpt"))
    assert sorted(state) == sorted(p.name for p in main.all_parameters())
    with open(tmp_path / "bogus.pdmodel", "wb") as f:
        f.write(b"\x08\x01protobuf")
    with pytest.raises(ValueError, match="not a globaltensor saved program"):
        paddle.static.load_inference_model(str(tmp_path / "bogus"), exe)
    os.symlink(tmp_path / "ckpt.pdparams", tmp_path / "alias.pdmodel")  # ours, but parameters only
    with pytest.raises(ValueError, match="not a Paddle inference_model"):
        paddle.static.load_inference_model(str(tmp_path / "alias"), exe)
    os.makedirs(tmp_path / "empty.pdmodel")
    with pytest.raises(FileNotFoundError, match="no program.json"):
        paddle.static.load_inference_model(str(tmp_path / "empty"), exe)


def test_fluid_io_writes_the_same_format(static, tmp_path):
    paddle, main, startup = static
    import globaltensor.paddle.fluid as fluid
    x, out = _mlp(paddle)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_inference_model(str(tmp_path / "d"), ["x"], [out], exe, main_program=main)
    assert os.path.isfile(tmp_path / "d" / "__model__.pdmodel" / "program.json")
    program, feeds, fetches = fluid.io.load_inference_model(str(tmp_path / "d"), exe)
    xs = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(exe.run(program, feed={feeds[0]: xs}, fetch_list=fetches)[0],
                                  exe.run(main.clone(for_test=True), feed={"x": xs}, fetch_list=[out])[0])
