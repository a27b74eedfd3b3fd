"""Issue 30 (s7): static.nn's parameters are initialized when the startup program runs (as Paddle's startup
ops), with the values and random stream of an eager fill at build; a table made a sparse table of a PS job is
never filled on a trainer; a server's initial values (no startup run) are the initializers'."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from test_static_ps import paddle  # noqa: E402,F401  (the fixture: static mode, layer names kept)


def _inits(paddle):
    init = paddle.nn.initializer
    return [init.Uniform(-0.3, 0.2), init.Normal(0.5, 2.0), init.Constant(0.25), init.XavierUniform(),
            init.XavierNormal(), init.KaimingNormal(), init.KaimingUniform(), init.TruncatedNormal(0.0, 0.5), None]


def _build(paddle, main, startup):
    """fc layers of each initializer (weight [6, 5] then a zero bias), an embedding, a conv2d (Normal by
    default) and a batch_norm (Constant 1 scale): (parameter names in order of creation, the loss)."""
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data(name="x", shape=[None, 6], dtype="float32")
        ids = paddle.static.data(name="ids", shape=[None, 1], dtype="int64")
        img = paddle.static.data(name="img", shape=[None, 2, 4, 4], dtype="float32")
        outs = [paddle.static.nn.fc(x, 5, weight_attr=paddle.ParamAttr(initializer=i)) for i in _inits(paddle)]
        outs.append(paddle.static.nn.embedding(ids, size=[30, 5], is_sparse=True).reshape([-1, 5]))
        conv = paddle.static.nn.batch_norm(paddle.static.nn.conv2d(img, 3, 3))
        loss = paddle.mean(paddle.add_n(outs)) + paddle.mean(conv)
    return [p.name for p in main.all_parameters()], loss


def _eager_reference(paddle, seed):
    """The same parameters made in dygraph mode in the same order (each initializer fills at once)."""
    paddle.disable_static()
    try:
        init = paddle.nn.initializer
        paddle.seed(seed)
        made = []
        for i in _inits(paddle):
            made.append(paddle.create_parameter([6, 5], "float32", attr=paddle.ParamAttr(initializer=i)))
            made.append(paddle.create_parameter([5], "float32", is_bias=True))
        made.append(paddle.create_parameter([30, 5], "float32"))
        made.append(paddle.create_parameter([3, 2, 3, 3], "float32",
                                            default_initializer=init.Normal(0.0, (2.0 / 18) ** 0.5)))
        made.append(paddle.create_parameter([3], "float32", is_bias=True))
        made.append(paddle.create_parameter([3], "float32", default_initializer=init.Constant(1.0)))
        made.append(paddle.create_parameter([3], "float32", is_bias=True))
        from globaltensor import random as gt_random
        return [p.numpy().copy() for p in made], gt_random.get_rng_state()
    finally:
        paddle.enable_static()


def test_startup_program_gives_the_values_of_an_eager_fill(paddle):
    from globaltensor import random as gt_random
    from globaltensor.paddle.static.param_init import pending
    want, want_state = _eager_reference(paddle, 11)
    paddle.seed(11)
    main, startup = paddle.static.Program(), paddle.static.Program()
    names, _ = _build(paddle, main, startup)
    assert gt_random.get_rng_state() == want_state  # the stream advanced as the eager fills advance it
    params = main.all_parameters()
    assert len(params) == len(want)
    assert sum(pending(p) is not None for p in params) == len(params) - 1  # TruncatedNormal fills at build
    assert [op.type for op in startup.global_block().ops][:2] == ["uniform_random", "fill_constant"]
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    assert not any(pending(p) is not None for p in params)
    for p, w in zip(params, want):
        np.testing.assert_array_equal(p.numpy(), w, err_msg=p.name)
    for p in params:  # a second run starts again from the same values
        p._local = np.zeros(p._local.shape, p._local.dtype)
    exe.run(startup)
    for p, w in zip(params, want):
        np.testing.assert_array_equal(p.numpy(), w, err_msg=p.name)


def test_a_sparse_table_is_never_filled_and_a_server_reads_the_initializers(paddle):
    from globaltensor.paddle.static import ps
    from globaltensor.paddle.static.param_init import pending
    from globaltensor.paddle.static.sparse import to_sparse_tables
    want, _ = _eager_reference(paddle, 3)
    paddle.seed(3)
    main, startup = paddle.static.Program(), paddle.static.Program()
    names, _ = _build(paddle, main, startup)
    table = main.var(names[-5])
    assert pending(table) is not None and to_sparse_tables(main, startup) == [table.name]
    assert table._local.strides == (0, 0)  # a meta array: its 30 x 5 values were never written
    assert table.name not in {op.output_arg_names[0] for op in startup.global_block().ops}
    values = ps.initial_values(main)  # a server: no startup run, the initializers' values
    dense = [w for n, w in zip(names, want) if n != table.name]
    assert list(values) == [n for n in names if n != table.name]
    for (name, got), w in zip(values.items(), dense):
        np.testing.assert_array_equal(got, w, err_msg=name)
