"""Paddle's static mode on recorded registered ops (paddle.static, paddle.fluid, the nccl2 transpiler),
against dygraph runs, numpy, one-process runs and op types printed by real Paddle 3.3.1."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, run_ranks
from paddle_static_fixture import static  # noqa: F401 - the fixture

EXAMPLES = os.path.join(REPO, "examples", "paddle")
LAUNCH = [sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2"]

# Real Paddle 3.3.1 (FLAGS_enable_pir_api=0), the fc program below built with paddle.static.nn.fc:
# [op.type for op in main.global_block().ops] before minimize, and the startup program's.
PADDLE_FC_FORWARD = ["mul", "elementwise_add", "relu", "mul", "elementwise_add", "elementwise_sub", "square",
                     "reduce_mean"]
PADDLE_FC_STARTUP = ["uniform_random", "fill_constant", "uniform_random", "fill_constant"]


def _fc_program(paddle):
    import globaltensor.paddle.fluid as fluid
    x = fluid.layers.data(name="x", shape=[13], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    h = fluid.layers.fc(input=x, size=8, act="relu")
    pred = fluid.layers.fc(input=h, size=1)
    loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    return x, y, h, pred, loss


def test_fluid_fc_program_prints_paddles_op_types_and_shapes(static):
    paddle, main, startup = static
    x, y, h, pred, loss = _fc_program(paddle)
    assert (x.shape, h.shape, pred.shape, loss.shape) == ([-1, 13], [-1, 8], [-1, 1], [])  # as Paddle 3.3.1
    assert [op.type for op in main.global_block().ops] == PADDLE_FC_FORWARD
    first = main.global_block().ops[0]
    assert first.input_arg_names == ["x", "fc_0.w_0"] and first.type == "mul"  # Paddle: ['x', 'fc_0.w_0']
    paddle.optimizer.SGD(0.01).minimize(loss)
    types = [op.type for op in main.global_block().ops]
    assert types[:len(PADDLE_FC_FORWARD)] == PADDLE_FC_FORWARD
    assert types[-4:] == ["sgd"] * 4 and any(t.endswith("_grad") for t in types)
    assert [op.type for op in startup.global_block().ops] == PADDLE_FC_STARTUP
    text = str(main)
    assert "var x : DENSE_TENSOR.shape(-1, 13).dtype(float32)" in text
    assert "persist trainable param fc_0.w_0 : DENSE_TENSOR.shape(13, 8)" in text


def test_recorded_program_runs_any_batch_against_numpy(static):
    """Shapes come from the ops' metas (nothing runs while recording); a -1 dim takes the fed size,
    mean's count included."""
    paddle, main, startup = static
    x, y, h, pred, loss = _fc_program(paddle)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    w0, b0, w1, b1 = [p.numpy() for p in main.all_parameters()]
    for n in (1, 3, 7):
        rng = np.random.default_rng(n)
        xs, ys = rng.random((n, 13), np.float32), rng.random((n, 1), np.float32)
        got_pred, got_loss = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[pred, loss])
        want = np.maximum(xs @ w0 + b0, 0) @ w1 + b1
        np.testing.assert_allclose(got_pred, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_loss, np.mean((want - ys) ** 2), rtol=1e-5)
    with pytest.raises(ValueError, match="feed 'x' has shape"):
        exe.run(main, feed={"x": np.zeros((2, 12), np.float32), "y": ys}, fetch_list=[loss])


def _functions(paddle, x, lab):
    """Paddle functions and methods whose composites read a dynamic dim (counts, reshapes, slices)."""
    F = paddle.nn.functional
    return [paddle.flatten(x, 1), paddle.reshape(x, [-1, 12]), x.reshape([x.shape[0], 12]), x[:, 1:3, 0],
            paddle.transpose(x, [0, 2, 1]), paddle.concat([x, x * 2], axis=1), F.softmax(x, -1),
            paddle.argmax(x.sum(-1), axis=1), paddle.mean(x, axis=0), F.cross_entropy(paddle.flatten(x, 1), lab),
            paddle.zeros_like(x) + x, F.layer_norm(x, 3), paddle.std(x), paddle.var(x, axis=0), paddle.mean(x)]


def test_functions_with_dynamic_dims_equal_dygraph_at_any_batch(static):
    paddle, main, startup = static
    x = paddle.static.data("x", [None, 4, 3], "float32")
    lab = paddle.static.data("lab", [None, 1], "int64")
    outs = _functions(paddle, x, lab)
    exe = paddle.static.Executor()
    for n in (3, 5):
        rng = np.random.default_rng(n)
        xs, ls = rng.random((n, 4, 3), np.float32), rng.integers(0, 12, (n, 1))
        got = exe.run(main, feed={"x": xs, "lab": ls}, fetch_list=outs)
        paddle.disable_static()
        want = _functions(paddle, paddle.to_tensor(xs), paddle.to_tensor(ls))
        paddle.enable_static()
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.shape == tuple(w.shape), i
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"function {i}, batch {n}")


def test_dropout_draws_a_fresh_mask_at_the_fed_size_each_run(static):
    paddle, main, startup = static
    x = paddle.static.data("x", [None, 50], "float32")
    x.stop_gradient = False
    d = paddle.nn.functional.dropout(x, 0.3)
    (g,) = paddle.static.gradients([d.sum()], [x])
    exe = paddle.static.Executor()
    masks = []
    for n in (4, 9, 4):
        out, grad = exe.run(main, feed={"x": np.ones((n, 50), np.float32)}, fetch_list=[d, g])
        assert out.shape == (n, 50) and 0.15 < (out == 0).mean() < 0.45
        np.testing.assert_allclose(out[out != 0], 1 / 0.7, rtol=1e-6)
        np.testing.assert_array_equal(grad, out)  # d/dx of sum(x * mask / 0.7) = mask / 0.7
        masks.append(out)
    assert not np.array_equal(masks[0], masks[2])


def test_dropout_on_fixed_shapes_draws_again_and_initializers_stay_eager(static):
    """A draw is recorded only where the program uses it: dropout's mask (fresh at each run), not
    a layer's initial weights (drawn once, as the layer was made)."""
    paddle, main, startup = static
    x = paddle.static.data("x", [16, 50], "float32")
    layer = paddle.nn.Linear(50, 50)
    before = layer.weight.numpy().copy()
    d = paddle.nn.functional.dropout(layer(x), 0.5)
    exe = paddle.static.Executor()
    exe.run(startup)
    a, = exe.run(main, feed={"x": np.ones((16, 50), np.float32)}, fetch_list=[d])
    b, = exe.run(main, feed={"x": np.ones((16, 50), np.float32)}, fetch_list=[d])
    assert not np.array_equal(a == 0, b == 0)
    np.testing.assert_array_equal(layer.weight.numpy(), before)
    assert np.abs(before).max() > 0 and [op.type for op in main.global_block().ops] == [
        "matmul_v2", "elementwise_add", "dropout"]  # the draw is inside the dropout op (not the weights')


def test_startup_program_initializes_and_clone_for_test_drops_backward_and_update(static):
    paddle, main, startup = static
    x, y, h, pred, loss = _fc_program(paddle)
    test = main.clone(for_test=True)
    paddle.optimizer.SGD(0.1).minimize(loss)
    params = main.all_parameters()
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)  # the initializers run here (as Paddle's startup ops), not when fc is built
    initial = [p.numpy().copy() for p in params]
    for p in params:
        p._local = np.full(p._local.shape, 7.0, p._local.dtype)
    exe.run(startup)  # again: the same initial values
    for p, want in zip(params, initial):
        np.testing.assert_array_equal(p.numpy(), want)
    feed = {"x": np.ones((4, 13), np.float32), "y": np.zeros((4, 1), np.float32)}
    exe.run(test, feed=feed, fetch_list=[loss])  # forward only: the parameters stay
    assert all(np.array_equal(p.numpy(), w) for p, w in zip(params, initial))
    assert not any(op.type.endswith("_grad") or op.type == "sgd" for op in test.global_block().ops)
    exe.run(main, feed=feed, fetch_list=[loss])
    assert not np.array_equal(params[0].numpy(), initial[0])


def test_gradients_and_append_backward_against_numpy(static):
    paddle, main, startup = static
    x = paddle.static.data("x", [None, 3], "float32")
    x.stop_gradient = False
    out = paddle.sum(paddle.tanh(x) * x)
    (gx,) = paddle.static.gradients([out], [x])
    exe = paddle.static.Executor()
    xs = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    (got,) = exe.run(main, feed={"x": xs}, fetch_list=[gx])
    t = np.tanh(xs)
    np.testing.assert_allclose(got, (1 - t * t) * xs + t, rtol=1e-5)


def test_static_nn_layers_record_shapes(static):
    paddle, main, startup = static
    img = paddle.static.data("img", [None, 3, 8, 8], "float32")
    ids = paddle.static.data("ids", [None, 4], "int64")
    c = paddle.static.nn.conv2d(img, num_filters=6, filter_size=3, padding=1, act="relu")
    b = paddle.static.nn.batch_norm(c)
    e = paddle.static.nn.embedding(ids, size=[20, 5])
    assert c.shape == [-1, 6, 8, 8] and b.shape == [-1, 6, 8, 8] and e.shape == [-1, 4, 5]
    assert paddle.static.nn.sparse_embedding(ids, size=[20, 5]).shape == [-1, 4, 5]  # tests/ps/test_static_ps.py
    exe = paddle.static.Executor()
    exe.run(startup)
    rng = np.random.default_rng(1)
    got_b, got_e = exe.run(main, feed={"img": rng.random((2, 3, 8, 8), np.float32),
                                       "ids": rng.integers(0, 20, (2, 4))}, fetch_list=[b, e])
    assert got_b.shape == (2, 6, 8, 8) and got_e.shape == (2, 4, 5)
    np.testing.assert_allclose(got_b.mean(axis=(0, 2, 3)), 0, atol=1e-5)  # training: the batch's statistics


def _adam_mlp(nprocs_steps, dygraph):
    """The same MLP of paddle.nn layers with Adam: static program (collective when 2 ranks, each
    rank its share of the batch) or dygraph on one process (the whole batch)."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.nn.functional as F
    import globaltensor.paddle.distributed as dist
    from globaltensor.paddle.distributed import fleet
    steps = nprocs_steps
    paddle.seed(11)
    world, rank = dist.get_world_size(), dist.get_rank()
    if not dygraph:
        paddle.enable_static()
    net = paddle.nn.Sequential(paddle.nn.Linear(6, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 3))

    def batch(step):
        rng = np.random.default_rng(step)
        xs, ys = rng.random((8, 6), np.float32), rng.random((8, 3), np.float32)
        share = 8 // world
        return xs[rank * share:(rank + 1) * share], ys[rank * share:(rank + 1) * share]
    if dygraph:
        opt = paddle.optimizer.Adam(0.05, parameters=net.parameters())
        for step in range(steps):
            xs, ys = batch(step)
            loss = F.mse_loss(net(paddle.to_tensor(xs)), paddle.to_tensor(ys))
            loss.backward()
            opt.step()
            opt.clear_grad()
        return [p.numpy() for p in net.parameters()]
    try:
        x = paddle.static.data("x", [None, 6], "float32")
        y = paddle.static.data("y", [None, 3], "float32")
        loss = F.mse_loss(net(x), y)
        if world > 1:
            fleet.init(is_collective=True)
        fleet.distributed_optimizer(paddle.optimizer.Adam(0.05)).minimize(loss)
        exe = paddle.static.Executor()
        exe.run(paddle.static.default_startup_program())
        for step in range(steps):
            xs, ys = batch(step)
            exe.run(feed={"x": xs, "y": ys}, fetch_list=[loss])
        return [p.numpy() for p in net.parameters()]
    finally:
        paddle.disable_static()


@pytest.mark.parametrize("nprocs", [1, 2])
def test_static_adam_mlp_of_nn_layers_equals_dygraph_after_5_steps(nprocs):
    want = run_ranks(_adam_mlp, 1, 5, True)[0]
    for got in run_ranks(_adam_mlp, nprocs, 5, False):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _save_inference(path):
    import globaltensor.paddle as paddle
    paddle.seed(5)
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [None, 4], "float32")
            h = paddle.tanh(paddle.static.nn.fc(x, 8))
            out = paddle.nn.functional.softmax(paddle.static.nn.fc(h, 3))
            loss = paddle.mean(out[:, 0])
            paddle.optimizer.SGD(0.5).minimize(loss)
        exe = paddle.static.Executor()
        exe.run(startup)
        xs = np.random.default_rng(3).random((6, 4)).astype(np.float32)
        for _ in range(3):
            exe.run(main, feed={"x": xs}, fetch_list=[loss])
        paddle.static.save_inference_model(path, [x], [out], exe, program=main)
        paddle.static.save(main, path + "_params")
        return xs, exe.run(main.clone(for_test=True), feed={"x": xs}, fetch_list=[out])[0], \
            [p.numpy() for p in main.all_parameters()]
    finally:
        paddle.disable_static()


_LOAD = """
import sys, numpy as np
import globaltensor.paddle as paddle
paddle.enable_static()
exe = paddle.static.Executor(paddle.CPUPlace())
program, feeds, fetches = paddle.static.load_inference_model(sys.argv[1], exe)
xs = np.load(sys.argv[2])
np.save(sys.argv[3], exe.run(program, feed={feeds[0]: xs}, fetch_list=fetches)[0])
"""


def test_save_and_load_inference_model_in_a_fresh_process(tmp_path):
    path = str(tmp_path / "model" / "mlp")
    xs, want, params = run_ranks(_save_inference, 1, path)[0]
    np.save(tmp_path / "xs.npy", xs[:5])  # another batch size than any run before
    env = dict(os.environ, PYTHONPATH=REPO)
    res = subprocess.run([sys.executable, "-c", _LOAD, path, str(tmp_path / "xs.npy"), str(tmp_path / "out.npy")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), want[:5])
    import globaltensor.paddle.static as static_mod
    state = static_mod.load_program_state(path + "_params")
    assert sorted(state) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]  # Paddle's names of fc's parameters
    for p in params:  # every parameter saved with its value
        assert sum(np.array_equal(np.asarray(v), p) for v in state.values()) == 1


def _by_rank(out, pattern):
    found = {}
    for line in out.splitlines():
        m = re.search(pattern, line)
        if m:
            rank = int(line[6]) if line.startswith("[rank ") else 0
            found.setdefault(rank, []).append(m.group(1))
    return found


def test_transpiler_nccl2_example_on_two_ranks_equals_one_process(tmp_path):
    script = os.path.join(EXAMPLES, "transpiler_nccl2.py")
    env = dict(os.environ, PYTHONPATH=REPO)
    env = {k: v for k, v in env.items() if not k.startswith("PADDLE_")}
    two = subprocess.run(LAUNCH + [script], cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    ws, w1 = _by_rank(two.stdout, r"w = (.*)"), _by_rank(one.stdout, r"w = (.*)")
    assert ws[0] == ws[1]
    np.testing.assert_allclose(np.array(ws[0][0].split(), float), np.array(w1[0][0].split(), float), rtol=1e-5,
                               atol=1e-6)
    losses = _by_rank(two.stdout, r"loss = ([0-9.]+)")
    halves = (np.array(losses[0], float) + np.array(losses[1], float)) / 2  # equal shares: the batch's mean
    np.testing.assert_allclose(halves, np.array(_by_rank(one.stdout, r"loss = ([0-9.]+)")[0], float), rtol=1e-4)


def test_fluid_refuses_clearly(static):
    import globaltensor.paddle.fluid as fluid
    paddle, main, startup = static
    with pytest.raises(ValueError, match="minimize"):  # pserver mode (tests/ps/test_transpiler.py) needs an optimizer
        fluid.DistributeTranspiler().transpile(0, trainers="127.0.0.1:1", current_endpoint="127.0.0.1:1")
    config = fluid.DistributeTranspilerConfig()
    config.mode = "nccl2"
    with pytest.raises(ValueError, match="2 trainers, but the job has 1 ranks"):
        fluid.DistributeTranspiler(config).transpile(0, trainers="a:1,b:2", current_endpoint="a:1")
    from globaltensor.backends.cuda import is_available
    if not is_available():
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            fluid.ParallelExecutor(use_cuda=True, loss_name="loss")


def test_fluid_embedding_cross_entropy_and_adam_against_numpy(static):
    import globaltensor.paddle.fluid as fluid
    paddle, main, startup = static
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[10, 4])
    prob = fluid.layers.fc(input=emb, size=3, act="softmax")
    cost = fluid.layers.cross_entropy(input=prob, label=label)
    loss = fluid.layers.mean(cost)
    assert emb.shape == [-1, 4] and cost.shape == [-1, 1]
    fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    table, w, b = [p.numpy().copy() for p in main.all_parameters()]
    rng = np.random.default_rng(4)
    feed = {"ids": rng.integers(0, 10, (6, 1)), "label": rng.integers(0, 3, (6, 1))}
    got_cost, got_loss = exe.run(main, feed=feed, fetch_list=[cost, loss])
    logits = table[feed["ids"][:, 0]] @ w + b
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = -np.log(p[np.arange(6), feed["label"][:, 0]])[:, None]
    np.testing.assert_allclose(got_cost, want, rtol=1e-5)
    np.testing.assert_allclose(got_loss, want.mean(), rtol=1e-5)
    assert not np.array_equal(main.all_parameters()[1].numpy(), w)  # Adam updated the fc weight


def test_dropout_prints_as_one_op_and_clone_for_test_makes_it_the_identity(static):
    paddle, main, startup = static
    x = paddle.static.data("x", [None, 20], "float32")
    h = paddle.nn.Dropout(0.5)(paddle.static.nn.fc(x, 20))
    y = paddle.nn.functional.dropout(h, 0.5)
    loss = paddle.mean(y)
    test = main.clone(for_test=True)
    paddle.optimizer.SGD(0.1).minimize(loss)
    assert [op.type for op in main.global_block().ops][:4] == ["mul", "elementwise_add", "dropout", "dropout"]
    exe = paddle.static.Executor()
    exe.run(startup)
    xs = np.random.default_rng(0).random((3, 20)).astype(np.float32)
    w, b = [p.numpy() for p in main.all_parameters()]
    (got,) = exe.run(test, feed={"x": xs}, fetch_list=[y])
    np.testing.assert_allclose(got, xs @ w + b, rtol=1e-5, atol=1e-6)  # upscale_in_train: identity at inference
    (trained,) = exe.run(main, feed={"x": xs}, fetch_list=[y])
    assert 0.6 < (trained == 0).mean() < 0.9  # two dropouts of 0.5 in training
