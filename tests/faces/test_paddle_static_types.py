"""Paddle's composites print as Paddle 3.3.1 prints them: the op types of small static programs, each built the
same way here and in real Paddle (its old-IR Program, FLAGS_enable_pir_api=0), against a literal list in CI."""
import json
import os
import subprocess
import sys

import pytest

# name -> (the call on x [8, 4] float32 and l [8, 1] int64, the op types Paddle 3.3.1 records for it)
CASES = {
    "mean": ("paddle.mean(x)", ["reduce_mean"]),
    "mean_axis": ("paddle.mean(x, axis=1)", ["reduce_mean"]),
    "x.mean": ("x.mean()", ["reduce_mean"]),
    "log_softmax": ("F.log_softmax(x)", ["log_softmax"]),
    "cross_entropy": ("F.cross_entropy(x, l)", ["softmax_with_cross_entropy", "reduce_mean"]),
    "mse_loss": ("F.mse_loss(x, x * 2)", ["scale", "elementwise_sub", "square", "reduce_mean"]),
    "square_error_cost": ("F.square_error_cost(x, x * 2)", ["scale", "elementwise_sub", "square"]),
    "silu": ("F.silu(x)", ["silu"]),
    "swish": ("F.swish(x)", ["swish"]),
    "leaky_relu": ("F.leaky_relu(x)", ["leaky_relu"]),
    "elu": ("F.elu(x)", ["elu"]),
    "hardswish": ("F.hardswish(x)", ["hard_swish"]),
    "hardsigmoid": ("F.hardsigmoid(x)", ["hard_sigmoid"]),
    "relu6": ("F.relu6(x)", ["relu6"]),
    "mish": ("F.mish(x)", ["mish"]),
    "softsign": ("F.softsign(x)", ["softsign"]),
    "tanhshrink": ("F.tanhshrink(x)", ["tanh_shrink"]),
    "log_sigmoid": ("F.log_sigmoid(x)", ["logsigmoid"]),
    "prelu": ("paddle.nn.PReLU()(x)", ["prelu"]),
    "pow": ("paddle.pow(x, 2.0)", ["pow"]),
    "flatten": ("paddle.flatten(x)", ["flatten_contiguous_range"]),
    "gather": ("paddle.gather(x, l.squeeze(-1))", ["squeeze2", "gather"]),
    "one_hot": ("F.one_hot(l.squeeze(-1), 4)", ["squeeze2", "one_hot_v2"]),
    "sub": ("x - 1.0", ["scale"]),
    "rsub": ("1.0 - x", ["scale"]),
    "div": ("x / 2.0", ["scale"]),
    "nll_loss": ("F.nll_loss(F.log_softmax(x), l.squeeze(-1))", ["log_softmax", "squeeze2", "nll_loss"]),
    "smooth_l1": ("F.smooth_l1_loss(x, x * 2)", ["scale", "huber_loss", "reduce_mean"]),
    "kl_div": ("F.kl_div(x, x * 2)", ["scale", "kldiv_loss", "reduce_mean"]),
    "softmax_ce": ("F.softmax_with_cross_entropy(x, l)", ["softmax_with_cross_entropy"]),
    "label_smooth": ("F.label_smooth(x)", ["label_smooth"]),
    "diag": ("paddle.diag(x[0])", ["slice", "diag_v2"]),
    "avg_pool": ("F.avg_pool2d(paddle.reshape(x, [-1, 1, 2, 2]), 2)", ["reshape2", "pool2d"]),
    "adaptive_avg_pool": ("F.adaptive_avg_pool2d(paddle.reshape(x, [-1, 1, 2, 2]), 1)", ["reshape2", "pool2d"]),
    "linear": ("paddle.nn.Linear(4, 3)(x)", ["matmul_v2", "elementwise_add"]),
}

BUILD = '''
def op_types(paddle, calls):
    F = paddle.nn.functional
    paddle.enable_static()
    out = {}
    try:
        for name, call in calls.items():
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                x = paddle.static.data("x", [8, 4], "float32")
                l = paddle.static.data("l", [8, 1], "int64")
                eval(call, {"paddle": paddle, "F": F, "x": x, "l": l})
            out[name] = [op.type for op in main.global_block().ops]
    finally:
        paddle.disable_static()
    return out
'''


def _ours():
    import globaltensor.paddle as paddle
    scope = {}
    exec(BUILD, scope)
    return scope["op_types"](paddle, {k: call for k, (call, _) in CASES.items()})


def test_composites_print_paddles_op_types():
    got = _ours()
    wrong = {k: (got[k], want) for k, (_, want) in CASES.items() if got[k] != want}
    assert not wrong, wrong


def test_in_dygraph_the_wrapped_functions_compute_as_before():
    import numpy as np
    import globaltensor.paddle as paddle
    x = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    t = paddle.to_tensor(x)
    np.testing.assert_allclose(paddle.mean(t).numpy(), x.mean(), rtol=1e-6)
    np.testing.assert_allclose((1.0 - t).numpy(), 1.0 - x, rtol=1e-6)
    np.testing.assert_allclose(paddle.nn.functional.silu(t).numpy(), x / (1 + np.exp(-x)), rtol=1e-5)
    assert paddle.mean.__name__ == "mean"


def test_real_paddle_records_the_same_op_types():
    pytest.importorskip("paddle")
    script = BUILD + f"\nimport json, paddle\nprint(json.dumps(op_types(paddle, {json.dumps({k: c for k, (c, _) in CASES.items()})})))\n"
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    real = json.loads(done.stdout.strip().splitlines()[-1])
    ours = _ours()
    differ = {k: (ours[k], real[k]) for k in CASES if ours[k] != real[k]}
    assert not differ, differ
    assert all(real[k] == want for k, (_, want) in CASES.items())
