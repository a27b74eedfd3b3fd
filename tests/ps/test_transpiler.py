"""fluid.DistributeTranspiler pserver mode: both programs printed and sliced by Paddle's rule (checked
against real Paddle's slice_variable), the trainer program's runs with a fake client (sync 2 trainers
= torch on the joined batch), the pserver program's run building its Server, and the seed example
with 2 pservers + 2 trainers as separate processes once the engine (globaltensor.ps) is there."""
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from static_fake import FakeServer  # noqa: E402
from test_static_ps import _layer_names_kept  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EPS = "127.0.0.1:6174,127.0.0.1:6175,127.0.0.1:6176"


@pytest.fixture
def fluid():
    import globaltensor.paddle as paddle
    import globaltensor.paddle.fluid as fluid
    with _layer_names_kept():
        paddle.enable_static()
        yield fluid
        paddle.disable_static()


def _model(fluid, program, startup, hidden=2000, lr=0.05, opt=None):
    """x[13] -> fc(hidden) -> fc(30) -> fc(1), mse: parameters (13, hidden), (hidden,), (hidden, 30),
    (30,), (30, 1), (1,)."""
    import globaltensor.paddle as paddle
    paddle.seed(3)
    with fluid.program_guard(program, startup):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.fc(input=x, size=hidden, act="tanh", param_attr=fluid.ParamAttr(name="w0"),
                            bias_attr=fluid.ParamAttr(name="b0"))
        h = fluid.layers.fc(input=h, size=30, act="tanh", param_attr=fluid.ParamAttr(name="w1"),
                            bias_attr=fluid.ParamAttr(name="b1"))
        pred = fluid.layers.fc(input=h, size=1, param_attr=fluid.ParamAttr(name="w2"),
                               bias_attr=fluid.ParamAttr(name="b2"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
        (opt or fluid.optimizer.SGD(learning_rate=lr)).minimize(loss)
    return loss


def _paddle_blocks(shapes, n, min_block_size):
    """Real Paddle's slice_variable: [(name, block index, rows)] (its sizes are element counts)."""
    slice_variable = pytest.importorskip("paddle.distributed.transpiler.distribute_transpiler",
                                         reason="the comparison needs real Paddle").slice_variable
    out = []
    for s in slice_variable([SimpleNamespace(name=k, shape=v) for k, v in shapes.items()], n, min_block_size):
        name, index, size = s.split(":")
        width = int(np.prod(shapes[name][1:]))
        out.append((name, int(index), int(size) // width))
    return out


def _our_blocks(trainer_text, shapes):
    """[(name, block index, rows)] read from the printed trainer program (split_byref sections, or one block)."""
    out = []
    for name, shape in shapes.items():
        split = [line for line in trainer_text.splitlines() if f"split_byref(inputs={{X=[{name}@GRAD]}}" in line]
        if split:
            sections = eval(split[0].split("sections = ")[1].rstrip(")"))  # noqa: S307 - our own printed list
            out += [(name, i, rows) for i, rows in enumerate(sections)]
        else:
            out.append((name, 0, shape[0]))
    return out


@pytest.mark.parametrize("n_servers,min_block_size", [(1, 8192), (2, 8192), (3, 8192), (3, 1000), (2, 100000)])
def test_slicing_is_paddles_rule(fluid, n_servers, min_block_size, monkeypatch):
    import globaltensor.paddle.fluid.transpiler as tr
    monkeypatch.setattr(tr, "make_client", lambda job, tid: SimpleNamespace(job=job))
    main, startup = fluid.Program(), fluid.Program()
    _model(fluid, main, startup)
    config = fluid.DistributeTranspilerConfig()
    config.min_block_size = min_block_size
    t = fluid.DistributeTranspiler(config)
    eps = EPS.split(",")[:n_servers]
    t.transpile(1, program=main, pservers=",".join(eps), trainers=2, startup_program=startup)
    text = str(t.get_trainer_program())
    shapes = {p.name: tuple(p.shape) for p in main.parameters}
    want = _paddle_blocks(shapes, n_servers, min_block_size)
    assert _our_blocks(text, shapes) == want
    # RoundRobin: the blocks of every parameter, in order, go to the servers in turn; each server's
    # program has one optimize block per block it owns
    owner = {}
    for k, (name, index, rows) in enumerate(want):
        owner[(name, index)] = eps[k % n_servers]
    for ep in eps:
        pserver = t.get_pserver_program(ep)
        mine = [key for key, e in owner.items() if e == ep]
        assert pserver.num_blocks == 1 + len(mine)
        serve, = pserver.global_block().ops
        assert serve.type == "listen_and_serv" and serve.attr("Fanin") == 2 and serve.attr("endpoint") == ep
        assert serve.attr("optimize_blocks") == list(range(1, len(mine) + 1))
        for b, (name, index) in enumerate(mine, start=1):
            ops = pserver.block(b).ops
            assert [op.type for op in ops] == ["sum", "scale", "sgd"]
            several = sum(1 for key in owner if key[0] == name) > 1
            grad = f"{name}@GRAD.block{index}" if several else f"{name}@GRAD"
            assert ops[0].input_arg_names == [f"{grad}.trainer_0", f"{grad}.trainer_1"]
            assert ops[2].output_arg_names == [f"{name}.block{index}" if several else name]
    types = [line.split(" = ")[1].split("(")[0] for line in text.splitlines() if " = " in line and "{Out" in line]
    assert "sgd" not in types and types.count("send_barrier") == 1 and types.count("fetch_barrier") == 1
    assert types.count("recv") == len(shapes) and types.count("send") == len(shapes)
    assert types.count("concat") == sum(1 for name in shapes if sum(1 for k in want if k[0] == name) > 1)
    assert types[-1] in ("fetch_barrier", "concat") and types.index("send_barrier") < types.index("recv")


def test_async_mode_has_no_barriers_and_hashname(fluid, monkeypatch):
    import globaltensor.paddle.fluid.transpiler as tr
    monkeypatch.setattr(tr, "make_client", lambda job, tid: SimpleNamespace(job=job))
    main, startup = fluid.Program(), fluid.Program()
    _model(fluid, main, startup)
    config = fluid.DistributeTranspilerConfig()
    config.split_method = fluid.transpiler.HashName
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, pservers=EPS, trainers=2, sync_mode=False, startup_program=startup)
    text = str(t.get_trainer_program())
    assert "send_barrier" not in text and "fetch_barrier" not in text and "@GRAD.trainer_" not in text
    job, blocks = t._job
    assert job.mode == "async" and job.split_method == "HashName"
    owned = sum(t.get_pserver_program(ep).num_blocks - 1 for ep in EPS.split(","))
    assert owned == len(blocks)
    serve, = t.get_pserver_program("127.0.0.1:6175").global_block().ops
    assert serve.attr("distributed_mode") == 1 and "sum" not in str(t.get_pserver_program("127.0.0.1:6175"))


def test_geo_mode_keeps_the_local_update(fluid, monkeypatch):
    import globaltensor.paddle.fluid.transpiler as tr
    monkeypatch.setattr(tr, "make_client", lambda job, tid: SimpleNamespace(job=job))
    main, startup = fluid.Program(), fluid.Program()
    _model(fluid, main, startup)
    config = fluid.DistributeTranspilerConfig()
    config.geo_sgd_mode, config.geo_sgd_need_push_nums = True, 4
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, pservers=EPS, trainers=2, startup_program=startup)
    job, _ = t._job
    assert job.mode == "geo" and job.k_steps == 4
    text = str(t.get_trainer_program())
    assert "sgd(" in text and "send_barrier" not in text  # trainers update locally, deltas every 4 steps
    serve, = t.get_pserver_program("127.0.0.1:6174").global_block().ops
    assert serve.attr("distributed_mode") == 3
    adam = fluid.DistributeTranspiler(config)
    main2, startup2 = fluid.Program(), fluid.Program()
    _model(fluid, main2, startup2, opt=fluid.optimizer.Adam(learning_rate=0.01))
    with pytest.raises(ValueError, match="GEO"):
        adam.transpile(0, program=main2, pservers=EPS, trainers=2, startup_program=startup2)


def test_bad_transpile_arguments_raise(fluid):
    main, startup = fluid.Program(), fluid.Program()
    _model(fluid, main, startup)
    t = fluid.DistributeTranspiler()
    with pytest.raises(ValueError, match="pservers"):
        t.transpile(0, program=main, pservers="127.0.0.1", trainers=2)
    with pytest.raises(ValueError, match=r"trainer_id 2 is not in \[0, 2\)"):
        t.transpile(2, program=main, pservers=EPS, trainers=2)
    with pytest.raises(RuntimeError, match="transpile"):
        t.get_pserver_program("127.0.0.1:6174")
    t.transpile(0, program=main, pservers=EPS, trainers=2)
    with pytest.raises(ValueError, match="not one of the pservers"):
        t.get_pserver_program("127.0.0.1:9")
    bare, bare_startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(bare, bare_startup):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        fluid.layers.mean(fluid.layers.fc(input=x, size=2))
    with pytest.raises(ValueError, match="minimize"):
        fluid.DistributeTranspiler().transpile(0, program=bare, pservers=EPS, trainers=1)


def _batch(step, n=8):
    rng = np.random.default_rng(step)
    x = rng.random((n, 13), dtype=np.float32)
    return {"x": x, "y": (x.sum(1, keepdims=True) * 0.1).astype(np.float32)}


def _torch_reference(init, batches, lr):
    p = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    for feed in batches:
        h = torch.tanh(torch.tensor(feed["x"]) @ p["w0"] + p["b0"])
        h = torch.tanh(h @ p["w1"] + p["b1"])
        loss = ((h @ p["w2"] + p["b2"] - torch.tensor(feed["y"])) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for t in p.values():
                t -= lr * t.grad
                t.grad = None
    return {k: v.detach().numpy() for k, v in p.items()}


@pytest.mark.timeout(60)
def test_trainer_programs_sync_equal_torch_on_the_joined_batch(fluid, monkeypatch):
    import globaltensor.paddle.fluid.transpiler as tr
    from globaltensor.paddle.static import ps
    made = {}

    def client(job, trainer_id):
        if "server" not in made:
            made["server"] = FakeServer(job, {k: v + 1.0 for k, v in made["init"].items()})  # not the trainers'
        return made["server"].client(trainer_id)
    monkeypatch.setattr(tr, "make_client", client)
    trainers = []
    for tid in range(2):
        main, startup = fluid.Program(), fluid.Program()
        loss = _model(fluid, main, startup, hidden=300, lr=0.1)
        made.setdefault("init", ps.initial_values(main))
        t = fluid.DistributeTranspiler()
        t.transpile(tid, program=main, pservers=EPS, trainers=2, startup_program=startup)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        trainers.append((t.get_trainer_program(), loss, exe))
    batches = [_batch(s) for s in range(5)]
    ref = _torch_reference({k: v + 1.0 for k, v in made["init"].items()}, batches, 0.1)
    errors = []

    def work(tid):
        program, loss, exe = trainers[tid]
        try:
            for b in batches:
                exe.run(program, feed={k: v[tid * 4:(tid + 1) * 4] for k, v in b.items()}, fetch_list=[loss])
            exe.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=50)
    assert not errors, errors
    server = made["server"]
    assert server.step == 5 and server.stopped == {0, 1}
    for program, _, _ in trainers:
        for p in program.parameters:
            np.testing.assert_allclose(np.asarray(p._local), ref[p.name], rtol=1e-5, atol=1e-6, err_msg=p.name)
            np.testing.assert_allclose(server.dense[p.name], ref[p.name], rtol=1e-5, atol=1e-6)


def test_pserver_program_run_builds_its_server_from_the_startup(fluid, monkeypatch):
    import globaltensor.paddle.fluid.transpiler as tr
    from globaltensor.paddle.static import ps
    served = []

    class Server:
        def __init__(self, job, index, initial):
            served.append((job, index, initial))

        def serve(self):
            served.append("served")

        def close(self):
            served.append("closed")
    monkeypatch.setattr(tr, "make_server", Server)
    main, startup = fluid.Program(), fluid.Program()
    _model(fluid, main, startup, opt=fluid.optimizer.Adam(learning_rate=0.01))
    want = ps.initial_values(main)
    for p in main.parameters:  # the pserver's startup run gives them their initializers' values again
        p._local = p._local * 0
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, pservers=EPS, trainers=3, startup_program=startup)
    pserver, pstartup = t.get_pserver_programs("127.0.0.1:6176")
    exe = fluid.Executor(fluid.CPUPlace())
    assert exe.run(pstartup) == [] and exe.run(pserver) == []
    job, index, initial = served[0]
    assert served[1:] == ["served", "closed"] and index == 2 and job.trainers == 3 and job.rule.kind == "adam"
    assert sorted(initial) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(initial[k], want[k])
    assert "adam" in str(pserver) and "listen_and_serv" in str(pserver)


@pytest.mark.timeout(120)
def test_seed_example_two_pservers_two_trainers_equal_one_process():
    script = str(ROOT / "examples" / "paddle" / "transpiler_pserver.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOBALTENSOR_SECRET="ab" * 16)
    env.pop("TRAINING_ROLE", None)
    one = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
    assert one.returncode == 0, one.stderr
    from ps_workers import free_ports
    ports = free_ports(2)
    common = dict(env, PADDLE_PSERVERS_IP_PORT_LIST=",".join(f"127.0.0.1:{p}" for p in ports),
                  PADDLE_TRAINERS_NUM="2", POD_IP="127.0.0.1")
    procs = []
    try:
        for p in ports:
            procs.append(subprocess.Popen([sys.executable, script], env=dict(common, TRAINING_ROLE="PSERVER",
                                                                              PADDLE_PORT=str(p)),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for tid in range(2):
            procs.append(subprocess.Popen([sys.executable, script], env=dict(common, TRAINING_ROLE="TRAINER",
                                                                              PADDLE_TRAINER_ID=str(tid)),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=90) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [o[1][-2000:] for o in outs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)

    def weights(text):
        return np.array([float(v) for v in text.split("w = ")[1].split()])
    np.testing.assert_allclose(weights(outs[2][0]), weights(one.stdout), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(weights(outs[3][0]), weights(one.stdout), rtol=1e-5, atol=1e-7)
