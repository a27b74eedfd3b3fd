"""Paddle's face (SPEC §10): the seed examples under the launcher (only imports changed) and the
names they use, against numpy and against one-process runs."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, run_ranks

ROOT = REPO
EXAMPLES = os.path.join(ROOT, "examples", "paddle")
LAUNCH = [sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2"]


def test_importing_paddle_changes_nothing_for_globaltensor_code():
    """Paddle's rule (a non-scalar backward seeds ones) follows the tensors Paddle's face made; a
    globaltensor tensor in the same process keeps PyTorch's rule (raise without a gradient)."""
    import globaltensor as gt
    import globaltensor.paddle as paddle
    x = gt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="needs a gradient argument"):
        (x * 2).backward()
    p = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    (p * 2).backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0])
    layer = paddle.nn.Linear(2, 3)
    layer(paddle.ones([4, 2])).backward()  # a layer's parameters follow Paddle's rule too
    np.testing.assert_array_equal(layer.bias.grad.numpy(), [4.0, 4.0, 4.0])
    y = paddle.ones([3])
    y.stop_gradient = False
    (y * y).backward()
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="needs a gradient argument"):
        (x * 3).backward()


def _run(cmd, cwd):
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=240)  # before pytest-timeout (300 s)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _by_rank(out, pattern):
    """{rank: [floats]} of the lines matching pattern (rank 0's lines have no prefix)."""
    found = {}
    for line in out.splitlines():
        m = re.search(pattern, line)
        if m:
            rank = int(line[6]) if line.startswith("[rank ") else 0
            found.setdefault(rank, []).append(float(m.group(1)))
    return found


# --- the seed examples ----------------------------------------------------------------------------

def test_dist_model_example_trains_evaluates_and_predicts(tmp_path):
    out = _run(LAUNCH + [os.path.join(EXAMPLES, "dist_model.py")], tmp_path)
    train = _by_rank(out, r"train batch \d+ loss ([0-9.]+)")
    evals = _by_rank(out, r"eval batch \d+ loss ([0-9.]+)")
    assert train[0] == train[1] and evals[0] == evals[1] and len(train[0]) == 1
    assert evals[0][0] < train[0][0]  # evaluated after the update
    assert out.count("out0 (4, 8)") == 2


def test_no_sync_example_equals_one_process(tmp_path):
    script = os.path.join(EXAMPLES, "data_parallel_no_sync.py")
    two = _by_rank(_run(LAUNCH + [script], tmp_path), r"weight grad sum ([-0-9.]+)")
    one = _by_rank(_run([sys.executable, script], tmp_path), r"weight grad sum ([-0-9.]+)")
    assert two[0] == two[1]
    np.testing.assert_allclose(two[0], one[0], rtol=1e-6)  # every rank drew the same inputs: the mean is theirs


def test_spawn_example_equals_one_process(tmp_path):
    script = os.path.join(EXAMPLES, "data_parallel_spawn.py")
    two = _run([sys.executable, script], tmp_path)
    one = _run([sys.executable, "-c", f"import runpy; runpy.run_path({script!r}, run_name='one')['train']()"], tmp_path)
    pattern = r"loss ([-0-9.]+) weight"
    assert _by_rank(two, pattern)[0] == _by_rank(two, pattern)[1] == _by_rank(one, pattern)[0]


def test_pylayer_no_sync_fused_allreduce_example_runs(tmp_path):
    losses = _by_rank(_run(LAUNCH + [os.path.join(EXAMPLES, "data_parallel_pylayer.py")], tmp_path),
                      r"step \d+ loss ([-0-9.]+)")
    assert len(losses[0]) == len(losses[1]) == 10  # each rank its own random batch, its own loss


def test_state_dict_example_round_trips(tmp_path):
    out = _run(LAUNCH + [os.path.join(EXAMPLES, "state_dict.py")], tmp_path)
    sums = _by_rank(out, r"weight sum ([-0-9.]+)")
    assert sums[0] == sums[1] and "reloaded 1 tensors" in out
    assert (tmp_path / "paddle_dy.pdparams").exists()


# --- DistModel against one process --------------------------------------------------------------

def _demo(graph_ranks):
    """DemoNet (Linear weights Shard(1) / Shard(0)) trained, evaluated and predicted through
    dist.to_static on 2 ranks, or the same model as plain dygraph on one process."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    from globaltensor.paddle import nn
    paddle.seed(3)
    rng = np.random.default_rng(0)
    data = [(rng.random((4, 16), np.float32), rng.random((4, 8), np.float32)) for _ in range(3)]

    class DemoNet(nn.Layer):
        def __init__(self, mesh):
            super().__init__()
            self.linear_0, self.linear_1, self.relu = nn.Linear(16, 16), nn.Linear(16, 8), nn.ReLU()
            if mesh is not None:
                self.linear_0.weight = dist.shard_tensor(self.linear_0.weight, mesh, [dist.Shard(1)],
                                                         stop_gradient=False)
                self.linear_1.weight = dist.shard_tensor(self.linear_1.weight, mesh, [dist.Shard(0)],
                                                         stop_gradient=False)

        def forward(self, x):
            return self.linear_1(self.relu(self.linear_0(x)))

    mesh = dist.ProcessMesh([0, 1], dim_names=["x"]) if graph_ranks else None
    layer = DemoNet(mesh)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    loss_fn = nn.MSELoss()
    train, evals = [], []
    if graph_ranks:
        model = dist.to_static(layer, None, loss_fn, opt)
        rep = [dist.Replicate()]
        batches = [(dist.shard_tensor(paddle.to_tensor(x), mesh, rep), dist.shard_tensor(paddle.to_tensor(y), mesh, rep))
                   for x, y in data]
        for x, y in batches:
            train.append(float(model(x, y).numpy()))
        model.eval()
        evals = [float(model(x, y).numpy()) for x, y in batches]
        model.predict()
        out = model(batches[0][0])["out0"].numpy()
        return train, evals, out, model.serial_main_program("train"), model.dist_main_program("train")
    for x, y in data:
        loss = loss_fn(layer(paddle.to_tensor(x)), paddle.to_tensor(y))
        loss.backward()
        opt.step()
        opt.clear_grad()
        train.append(float(loss.numpy()))
    with paddle.no_grad():
        evals = [float(loss_fn(layer(paddle.to_tensor(x)), paddle.to_tensor(y)).numpy()) for x, y in data]
        out = layer(paddle.to_tensor(data[0][0])).numpy()
    return train, evals, out, None, None


def test_dist_model_equals_one_process_and_prints_its_programs():
    want = _demo(False)
    for train, evals, out, serial, mine in run_ranks(_demo, 2, True):
        np.testing.assert_allclose(train, want[0], rtol=1e-5)
        np.testing.assert_allclose(evals, want[1], rtol=1e-5)
        np.testing.assert_allclose(out, want[2], rtol=1e-5, atol=1e-6)
        assert serial.startswith("program DistModel[train] #1") and "SGD.step()" in serial
        assert "rank" in mine.splitlines()[0] and "all_reduce" in mine  # the row-split matmul's partial sum


# --- the names the examples use --------------------------------------------------------------------

def test_paddle_positional_meanings():
    import globaltensor.paddle as paddle
    x = paddle.to_tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert [tuple(p.shape) for p in paddle.split(x, 2, axis=1)] == [(3, 2), (3, 2)]  # 2 sections
    np.testing.assert_array_equal(paddle.max(x, axis=1).numpy(), [3, 7, 11])  # values only
    assert tuple(paddle.transpose(x, [1, 0]).shape) == (4, 3)
    np.testing.assert_array_equal(paddle.sum(x, 0, "float64").numpy(), np.arange(12.).reshape(3, 4).sum(0))
    assert tuple(paddle.zeros([2, 3], "float64").shape) == (2, 3) and paddle.zeros([2], "int64").dtype.name == "int64"
    np.testing.assert_array_equal(paddle.matmul(x, x, transpose_y=True).numpy(), x.numpy() @ x.numpy().T)
    assert x.stop_gradient
    x.stop_gradient = False
    assert x.requires_grad


def test_paddle_meanings_of_values_stay_in_paddles_face():
    """Paddle's gelu takes a bool (True: the tanh approximation); gt's takes PyTorch's strings."""
    import globaltensor as gt
    import globaltensor.paddle as paddle
    x = paddle.to_tensor(np.linspace(-3, 3, 7, dtype=np.float32))
    for approximate, ours in ((True, "tanh"), (False, "none")):
        want = gt.gelu(x, ours).numpy()
        np.testing.assert_array_equal(paddle.gelu(x, approximate).numpy(), want)
        np.testing.assert_array_equal(paddle.nn.functional.gelu(x, approximate=approximate).numpy(), want)
        np.testing.assert_array_equal(paddle.nn.GELU(approximate)(x).numpy(), want)
        with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
            gt.gelu(x, approximate)


def test_linear_has_paddles_weight_layout_and_pylayer_its_backward():
    import globaltensor.paddle as paddle
    from globaltensor.paddle.autograd import PyLayer

    class Cube(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, dy):
            x, = ctx.saved_tensor()
            return dy * 3 * x * x

    lin = paddle.nn.Linear(3, 2)
    assert tuple(lin.weight.shape) == (3, 2) and tuple(lin.bias.shape) == (2,)
    xv = np.array([[0.5, -1.0, 2.0]], np.float32)
    x = paddle.to_tensor(xv, stop_gradient=False)
    y = lin(Cube.apply(x))
    np.testing.assert_allclose(y.numpy(), (xv ** 3) @ lin.weight.numpy() + lin.bias.numpy(), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * xv ** 2 * lin.weight.numpy().sum(1), rtol=1e-6)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=lin.parameters())
    opt.clear_grad()  # Paddle's default: zeroed in place
    assert float(lin.weight.grad.abs().sum()) == 0.0


def _fused(world_values):
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    from globaltensor.paddle.distributed.fleet.utils.hybrid_parallel_util import fused_allreduce_gradients
    dist.init_parallel_env()
    params = [paddle.nn.Linear(4, 3).weight, paddle.nn.Linear(2, 2).bias]
    rounds = []
    for step in range(2):  # the second call reuses the first one's buffer
        for i, p in enumerate(params):
            p.grad = paddle.full(p.shape, world_values[dist.get_rank()] + i + 10 * step, "float32")
        kept = [p.grad for p in params]
        fused_allreduce_gradients(params, None)
        assert all(p.grad is g for p, g in zip(params, kept))  # written back in place
        rounds.append([p.grad.numpy() for p in params])
    return rounds


def test_fused_allreduce_gradients_averages_over_ranks():
    for rounds in run_ranks(_fused, 2, [1.0, 4.0]):
        for step, grads in enumerate(rounds):
            np.testing.assert_array_equal(grads[0], np.full((4, 3), 2.5 + 10 * step, np.float32))
            np.testing.assert_array_equal(grads[1], np.full((2,), 3.5 + 10 * step, np.float32))


def _reduce_ops():
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    dist.init_parallel_env()
    mine = np.array([1.0, 5.0], np.float32) if dist.get_rank() == 0 else np.array([3.0, 2.0], np.float32)
    got = {}
    for op in ("SUM", "MAX", "MIN", "AVG"):
        t = paddle.to_tensor(mine)
        dist.all_reduce(t, getattr(dist.ReduceOp, op))
        got[op] = t.numpy().tolist()
    with pytest.raises(NotImplementedError, match="prod"):
        dist.all_reduce(paddle.to_tensor(mine), dist.ReduceOp.PROD)
    return got


def test_all_reduce_sum_max_min_avg():
    for got in run_ranks(_reduce_ops, 2):
        assert got == {"SUM": [4.0, 7.0], "MAX": [3.0, 5.0], "MIN": [1.0, 2.0], "AVG": [2.0, 3.5]}


def test_parallel_env_local_rank_is_the_rank_on_this_node(monkeypatch):
    import globaltensor.paddle.distributed as dist
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    env = dist.ParallelEnv()
    assert (env.rank, env.local_rank, env.world_size) == (3, 1, 4)


def test_paddle_grad_and_create_parameters_xavier():
    import globaltensor.paddle as paddle
    x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    for grad in (paddle.grad, paddle.autograd.grad):  # one function, Paddle's arguments
        (dx,) = grad([(x * x).sum()], [x], retain_graph=True, create_graph=False)
        np.testing.assert_array_equal(dx.numpy(), [2.0, 4.0])
    w = paddle.nn.Layer().create_parameter([8, 4, 3, 3])  # Paddle's fans: dims 0, 1 times the receptive field
    assert 0.5 * np.sqrt(6 / (12 * 9)) < float(w.abs().max()) <= np.sqrt(6 / (12 * 9))


def test_io_dataloader_and_distributed_batch_sampler():
    from globaltensor.paddle import io

    class Squares(io.Dataset):
        def __getitem__(self, i):
            return np.float32([i]), np.float32([i * i])

        def __len__(self):
            return 7

    batches = list(io.DataLoader(Squares(), batch_size=3))
    assert [tuple(b[0].shape) for b in batches] == [(3, 1), (3, 1), (1, 1)]
    np.testing.assert_array_equal(batches[1][1].numpy().ravel(), [9, 16, 25])
    shares = [list(io.DistributedBatchSampler(Squares(), 2, num_replicas=2, rank=r)) for r in (0, 1)]
    assert shares == [[[0, 2], [4, 6]], [[1, 3], [5, 0]]]  # padded with the first index, as Paddle


@pytest.mark.parametrize("placements,sbp", [("r", "B"), ("s0", "S(0)"), ("p", "P")])
def test_shard_tensor_from_the_full_value(placements, sbp):
    got = run_ranks(_shard, 2, placements)
    for value, text in got:
        np.testing.assert_array_equal(value, np.arange(6, dtype=np.float32).reshape(2, 3))
        assert text == f"({sbp},)"


def _shard(kind):
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    mesh = dist.ProcessMesh([0, 1], dim_names=["x"])
    placement = {"r": dist.Replicate(), "s0": dist.Shard(0), "p": dist.Partial()}[kind]
    t = dist.shard_tensor(paddle.to_tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), mesh, [placement])
    back = dist.reshard(t, mesh, [dist.Replicate()])
    return back.numpy(), "(" + ", ".join(str(s) for s in t.sbp) + ",)"


PADDLE_LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]


def test_fleet_example_under_paddles_launcher_equals_one_process(tmp_path):
    script = os.path.join(EXAMPLES, "fleet_collective.py")
    two = _by_rank(_run(PADDLE_LAUNCH + ["--nproc_per_node", "2", script], tmp_path), r"loss:([-0-9.]+)")
    one = _by_rank(_run([sys.executable, script], tmp_path), r"loss:([-0-9.]+)")
    assert len(two[0]) == 20 and two[0] == two[1] == one[0]


def test_paddle_launcher_flags_and_variables(tmp_path):
    from globaltensor.paddle.distributed.launch import translate
    assert translate(["--gpus", "0,1", "--log_dir", "logs", "train.py", "--lr", "1"]) == [
        "--nproc_per_node", "2", "--nnodes", "1", "--node_rank", "0", "--log_dir", "logs", "train.py", "--lr", "1"]
    script = tmp_path / "env.py"
    script.write_text("import os\nprint('env', os.environ['PADDLE_TRAINER_ID'], os.environ['PADDLE_TRAINERS_NUM'], "
                      "len(os.environ['PADDLE_TRAINER_ENDPOINTS'].split(',')), "
                      "os.environ['PADDLE_CURRENT_ENDPOINT'] in os.environ['PADDLE_TRAINER_ENDPOINTS'])\n")
    out = _run(PADDLE_LAUNCH + ["--devices", "0,1", str(script)], tmp_path)
    assert "env 0 2 2 True" in out and "env 1 2 2 True" in out


def test_paddle_launcher_starts_a_rank_per_visible_device(tmp_path, monkeypatch):
    """The seed's recipe `CUDA_VISIBLE_DEVICES=0,1 python -m paddle.distributed.launch x.py`: one
    rank per visible device, as Paddle (it used to start one rank)."""
    from globaltensor.paddle.distributed.launch import translate
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert translate(["train.py"])[:2] == ["--nproc_per_node", "2"]
    assert translate(["--nproc_per_node", "1", "train.py"])[:2] == ["--nproc_per_node", "1"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert translate(["train.py"])[:2] == ["--nproc_per_node", "1"]


def _fleet_names():
    from globaltensor.paddle.distributed import fleet
    fleet.init(is_collective=True)
    strategy = fleet.DistributedStrategy()
    strategy.fuse_grad_size_in_MB = 16
    with pytest.raises(NotImplementedError, match="lars"):
        strategy.lars = True
    role = fleet.PaddleCloudRoleMaker(is_collective=True)
    return fleet.worker_index(), fleet.worker_num(), fleet.is_first_worker(), strategy.fuse_grad_size_in_MB, \
        role._worker_num()


def test_fleet_names():
    assert run_ranks(_fleet_names, 2) == [(0, 2, True, 16, 2), (1, 2, False, 16, 2)]


def test_the_api_table_in_docs_is_true():
    """Every tensor function docs/paddle.md marks supported exists under that name; every name of
    ops-target.txt (the seed API index's tensor functions) has a row."""
    import importlib
    text = open(os.path.join(ROOT, "docs", "paddle.md")).read()
    rows = re.findall(r"^\| `(paddle(?:\.nn\.functional)?)\.(\w+)` \| [^|]+ \| (supported|absent)", text, re.M)
    assert len(rows) >= 150
    for module, name, status in rows:
        where = importlib.import_module("globaltensor." + module)
        assert hasattr(where, name) == (status == "supported"), f"{module}.{name} is marked {status}"


def test_paddle_selection_ops():
    import globaltensor.paddle as paddle
    xv = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    x = paddle.to_tensor(xv)
    np.testing.assert_array_equal(paddle.gather(x, paddle.to_tensor([2, 0])).numpy(), xv[[2, 0]])
    np.testing.assert_array_equal(paddle.index_select(x, paddle.to_tensor([1]), axis=1).numpy(), xv[:, [1]])
    upd = np.array([[9, 9], [1, 1]], np.float32)
    np.testing.assert_array_equal(paddle.scatter(x, paddle.to_tensor([2, 0]), paddle.to_tensor(upd)).numpy(),
                                  [[1, 1], [3, 4], [9, 9]])
    np.testing.assert_array_equal(
        paddle.scatter(x, paddle.to_tensor([1, 1]), paddle.to_tensor(upd), overwrite=False).numpy(),
        [[1, 2], [10, 10], [5, 6]])
    assert float(paddle.median(paddle.to_tensor(np.float32([1, 4, 2, 3]))).numpy()) == 2.5
    np.testing.assert_array_equal(paddle.sort(x, 0, descending=True).numpy(), xv[::-1])
    assert tuple(paddle.unsqueeze(x, [0, 3]).shape) == (1, 3, 2, 1)
    assert tuple(paddle.squeeze(paddle.ones([1, 3, 1]), [0, 2]).shape) == (3,)


# --- static mode ------------------------------------------------------------------------------

def _mlp_of(layers, x, y, hid_dim):
    """nets.mlp's classifier built of static.nn.fc ("fc"), of paddle.nn.Linear layers ("linear",
    as Paddle 2.x allows in static mode), or of both ("mix")."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.nn.functional as F
    from nets import mlp
    if layers == "fc":
        return mlp(x, y, hid_dim=hid_dim)
    kinds = {"linear": "LLL", "mix": "LFL"}[layers]
    h = x
    for kind, (n_in, n_out), act in zip(kinds, ((32, hid_dim), (hid_dim, hid_dim), (hid_dim, 2)),
                                        (paddle.tanh, paddle.tanh, lambda t: F.softmax(t, -1))):
        h = act(paddle.nn.Linear(n_in, n_out)(h) if kind == "L" else paddle.static.nn.fc(h, n_out))
    return paddle.mean(F.cross_entropy(h, y))


def _static_mlp(steps=3, layers="fc"):
    """The nets.mlp program in static mode on every rank of the job (collective when 2 ranks):
    each rank feeds its own batch. Returns the initial and final parameters and the losses."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    from globaltensor.paddle.distributed import fleet
    sys.path.insert(0, EXAMPLES)
    paddle.seed(7)
    paddle.enable_static()
    try:
        x = paddle.static.data(name="x", shape=[None, 32], dtype="float32")
        y = paddle.static.data(name="y", shape=[None, 1], dtype="int64")
        cost = _mlp_of(layers, x, y, hid_dim=16)
        assert x.shape == [-1, 32] and cost.shape == []
        if dist.get_world_size() > 1:
            fleet.init(fleet.PaddleCloudRoleMaker(is_collective=True))
        opt = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.5))
        opt.minimize(cost)
        program = paddle.static.default_main_program()
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(paddle.static.default_startup_program())  # static.nn's initializers run here, as Paddle's
        before = [p.numpy().copy() for p in program.all_parameters()]
        losses = []
        for step in range(steps):
            rng = np.random.default_rng([step, dist.get_rank()])
            feed = {"x": rng.random((8, 32), np.float32), "y": rng.integers(0, 2, (8, 1))}
            losses.append(float(exe.run(feed=feed, fetch_list=[cost.name])[0]))
        return before, [p.numpy() for p in program.all_parameters()], losses, repr(program)
    finally:
        paddle.disable_static()


def _dygraph_mlp(before, ranks, steps=3):
    """The same MLP in dygraph mode on one process, on the ranks' batches stacked."""
    import globaltensor.paddle as paddle
    import globaltensor.paddle.nn.functional as F
    params = [paddle.to_tensor(p, stop_gradient=False) for p in before]
    w1, b1, w2, b2, w3, b3 = params
    opt = paddle.optimizer.SGD(learning_rate=0.5, parameters=params)
    for step in range(steps):
        feeds = [np.random.default_rng([step, r]) for r in range(ranks)]
        feeds = [(g.random((8, 32), np.float32), g.integers(0, 2, (8, 1))) for g in feeds]
        x = paddle.to_tensor(np.concatenate([f[0] for f in feeds]))
        y = paddle.to_tensor(np.concatenate([f[1] for f in feeds]))
        h = paddle.tanh(paddle.tanh(x @ w1 + b1) @ w2 + b2)
        loss = paddle.mean(F.cross_entropy(F.softmax(h @ w3 + b3, -1), y))
        loss.backward()
        opt.step()
        opt.clear_grad()
    return [p.numpy() for p in params]


def test_static_program_trains_as_dygraph_on_one_process():
    before, after, losses, text = run_ranks(_static_mlp, 1)[0]
    assert "minimize" in text and "fc" in text and len(losses) == 3
    np.testing.assert_allclose(np.concatenate([a.ravel() for a in after]),
                               np.concatenate([a.ravel() for a in _dygraph_mlp(before, 1)]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layers", ["linear", "mix"])
@pytest.mark.parametrize("nprocs", [1, 2])
def test_static_programs_of_paddle_nn_layers_train_for_many_steps(layers, nprocs):
    """paddle.nn.Linear layers in a static program (alone or beside static.nn.fc): the program owns
    and trains their parameters; 50 steps give the dygraph run's parameters (the second step
    used to raise: a .grad was left from the first)."""
    results = run_ranks(_static_mlp, nprocs, 50, layers)
    before = results[0][0]
    assert len(before) == 6
    want = np.concatenate([a.ravel() for a in _dygraph_mlp(before, nprocs, 50)])
    for _, after, losses, _ in results:
        assert len(losses) == 50 and np.isfinite(losses).all()
        np.testing.assert_allclose(np.concatenate([a.ravel() for a in after]), want, rtol=1e-4, atol=1e-5)


def test_static_fleet_collective_on_two_ranks_averages_like_one_process():
    results = run_ranks(_static_mlp, 2)
    before = results[0][0]
    want = np.concatenate([a.ravel() for a in _dygraph_mlp(before, 2)])
    for _, after, losses, _ in results:
        np.testing.assert_allclose(np.concatenate([a.ravel() for a in after]), want, rtol=1e-5, atol=1e-6)
    assert results[0][2] != results[1][2]  # each rank its own batch and loss


def test_fleet_static_example_runs(tmp_path):
    out = _run(PADDLE_LAUNCH + ["--nproc_per_node", "2", os.path.join(EXAMPLES, "fleet_static.py")], tmp_path)
    costs = _by_rank(out, r"cost = ([0-9.]+)")
    assert len(costs[0]) == len(costs[1]) == 21
