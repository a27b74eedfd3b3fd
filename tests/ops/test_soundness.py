"""Every SBP row of every registered op, checked on simulated ranks (no processes).

For each op, sample inputs and each row its rules produce: cut the numpy inputs into the
pieces the row's input SBPs give k ranks (uneven; P as random summands), run the kernel on
each rank's pieces, reassemble the outputs by the row's output SBPs (S: concatenate, B: all
equal, P: add up) and compare with the kernel on the full values. DTensor's strategy
validator is the model. A wrong row must fail (see the last test).
"""
import numpy as np
import pytest

from globaltensor import layout
import globaltensor.ops  # noqa: F401 - loads every family into the registry
from globaltensor.registry import REGISTRY as _REGISTRY
from globaltensor.sbp import broadcast as B
from globaltensor.sbp import partial_sum as P
from globaltensor.sbp import split

RNG = np.random.default_rng(0)


def f(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float64)


def c(*shape):
    """Complex128 samples: real and imaginary parts in [-2, 2)."""
    return f(*shape) + 1j * f(*shape)


def ints(*shape, hi=5):
    return RNG.integers(0, hi, shape).astype(np.int64)


def _reshaped(in_shape, out_shape):
    """reshape's static as the front builds it, for pieces over 2 or 3 ranks (6 divides both)."""
    from globaltensor.ops.shape import _split_pairs
    return {"shape": out_shape, "pairs": _split_pairs(in_shape, out_shape, 6), "in_shape": in_shape}


def spd():
    a = f(2, 3, 3)
    return a @ np.swapaxes(a, 1, 2) + 3 * np.eye(3)


def _unary_domain(name):
    if name in ("acos", "asin"):
        return [f(5, 3, lo=-0.9, hi=0.9)]
    if name in ("log", "log10", "log2", "sqrt", "rsqrt", "reciprocal"):
        return [f(5, 3, lo=0.5, hi=3.0)]
    if name == "log1p":
        return [f(5, 3, lo=-0.5, hi=3.0)]
    if name == "logical_not":
        return [ints(5, 3, hi=2).astype(bool)]
    return [f(5, 3)]


def _softmax_rows(*shape):
    """Attention weights: positive rows that sum to 1."""
    e = np.exp(f(*shape))
    return e / e.sum(-1, keepdims=True)


def samples(name):
    """(inputs, static) cases for op `name`."""
    from globaltensor.ops.elementwise import BINARY, UNARY
    if name in UNARY:
        return [(_unary_domain(name), {})]
    if name in BINARY:
        pos = name in ("pow", "floor_divide", "mod", "divide")
        a = f(5, 3, lo=0.5, hi=2.0) if pos else f(5, 3)
        if name.startswith("logical"):
            return [([ints(5, 3, hi=2).astype(bool), ints(5, 3, hi=2).astype(bool)], {})]
        return [([a, f(5, 3, lo=0.5, hi=2.0) if pos else f(5, 3)], {}), ([a, f(3, lo=0.5, hi=2.0)], {}),
                ([f(5, 1, lo=0.5, hi=2.0), f(1, 3, lo=0.5, hi=2.0)], {})]
    bits = [([ints(5, 3, hi=16), ints(5, 3, hi=16)], {}), ([ints(5, 3, hi=2).astype(bool), ints(3, hi=2).astype(bool)], {})]
    table = {
        "bitwise_and": bits, "bitwise_or": bits, "bitwise_xor": bits, "bitwise_not": [([ints(5, 3, hi=16)], {})],
        "where": [([ints(5, 3, hi=2).astype(bool), f(5, 3), f(3)], {})],
        "clip": [([f(5, 3)], {"min": -0.5, "max": 0.7})],
        **{n: [([f(5, 3, lo=-0.9, hi=0.9)], {})] for n in ("expm1", "exp2", "asinh", "atanh", "trunc")},
        "acosh": [([f(5, 3, lo=1.5, hi=3.0)], {})],
        **{n: [([f(5, 3, lo=-2.0, hi=2.0), f(3, lo=0.5, hi=2.0)], {}), ([f(5, 1), f(1, 3, lo=0.5, hi=2.0)], {})]
           for n in ("fmod", "logaddexp")},
        "cast": [([f(5, 3)], {"dtype": np.dtype(np.float32)}), ([c(5, 3)], {"dtype": np.dtype(np.complex64)})],
        "complex": [([f(5, 3), f(5, 3)], {}), ([f(5, 1), f(1, 3)], {})],
        "view_as_real": [([c(5, 3)], {}), ([c(4, 3, 2)], {})],
        "view_as_complex": [([f(5, 3, 2)], {})],
        "angle": [([c(5, 3)], {}), ([f(5, 3)], {})],
        "scale": [([f(5, 3)], {"scale": 2.0, "bias": 1.0, "bias_after_scale": True})],
        "gelu": [([f(5, 3)], {})],
        "layer_norm": [([f(5, 4, 3), f(3), f(3)], {"ndims": 1, "eps": 1e-5, "has_weight": True, "has_bias": True}),
                       ([f(5, 4, 3)], {"ndims": 2, "eps": 1e-5, "has_weight": False, "has_bias": False})],
        "layer_norm_backward": [([f(5, 4, 3), f(5, 4, 3), f(5, 4, 1), f(5, 4, 1, lo=0.5, hi=2.0), f(3)], {"ndims": 1}),
                                ([f(5, 4, 3), f(5, 4, 3), f(5, 1, 1), f(5, 1, 1, lo=0.5, hi=2.0)], {"ndims": 2})],
        "gelu_backward": [([f(5, 3), f(5, 3)], {})],
        "relu_backward": [([f(5, 3), f(5, 3)], {})],
        "sum": [([f(5, 4)], {"dims": (0,), "keepdim": False}), ([f(5, 4)], {"dims": None, "keepdim": False}),
                ([f(5, 4, 2)], {"dims": (1, 2), "keepdim": True})],
        "cumsum": [([f(5, 4)], {"dim": 1})],
        "trace": [([f(4, 4)], {})],
        "matmul": [([f(5, 4), f(4, 3)], {}), ([f(2, 5, 4), f(2, 4, 3)], {}), ([f(4), f(4, 3)], {}),
                   ([f(5, 4), f(4)], {}), ([f(4), f(4)], {}), ([f(1, 5, 4), f(3, 4, 2)], {})],
        "kron": [([f(2, 3), f(3, 2)], {})],
        "cross": [([f(5, 3), f(5, 3)], {"dim": 1})],
        "cholesky": [([spd()], {"upper": False})],
        "inverse": [([spd()], {})],
        "det": [([spd()], {}), ([f(3, 3)], {})],
        "reshape": [([f(4, 6)], _reshaped((4, 6), (4, 2, 3))), ([f(4, 6)], _reshaped((4, 6), (24,))),
                    ([f(6, 2, 5)], _reshaped((6, 2, 5), (12, 5))),  # 6 rows part evenly
                    ([f(12, 5)], _reshaped((12, 5), (6, 2, 5))),  # over 2 or 3 ranks
                    ([f(3, 4, 5)], _reshaped((3, 4, 5), (3, 20))), ([f(4, 6, 2)], _reshaped((4, 6, 2), (4, 12))),
                    ([f(4, 12, 5)], _reshaped((4, 12, 5), (4, 6, 2, 5))),  # an inner group start: 12 and 6
                    ([f(2, 3, 1, 6)], _reshaped((2, 3, 1, 6), (6, 1, 6))), ([f(5, 3)], _reshaped((5, 3), (5, 1, 3)))],
        "squeeze": [([f(5, 1, 3)], {"dims": (1,)})],
        "unsqueeze": [([f(5, 3)], {"dim": 1})],
        "permute": [([f(5, 3, 2)], {"perm": (2, 0, 1)})],
        "expand": [([f(5, 1)], {"shape": (2, 5, 3), "grown": (0, 2)})],
        "tile": [([f(2, 3)], {"reps": (2, 2)})],
        "flip": [([f(5, 3)], {"dims": (1,)})],
        "roll": [([f(5, 3)], {"shifts": (1,), "dims": (0,)})],
        "concat": [([f(5, 3), f(2, 3)], {"dim": 0}), ([f(5, 3), f(5, 2)], {"dim": 1})],
        "stack": [([f(5, 3), f(5, 3)], {"dim": 1})],
        "split": [([f(5, 6)], {"sizes": (2, 4), "dim": 1})],
        "strided_slice": [([f(5, 6)], {"axes": (1,), "starts": (1,), "ends": (5,), "strides": (2,)})],
        "slice_scatter": [([f(5, 6), f(5, 2)], {"axes": (1,), "starts": (1,), "ends": (5,), "strides": (2,)})],
        "tril": [([f(2, 4, 4)], {"diagonal": 0})],
        "triu": [([f(2, 4, 4)], {"diagonal": 1})],
        "diag": [([f(4)], {"offset": 1}), ([f(4, 4)], {"offset": 0})],
        "diag_grad": [([f(3)], {"offset": 1, "shape": (3, 5)}), ([f(2)], {"offset": -1, "shape": (3, 2)})],
        "gather": [([f(5, 4), ints(5, 3, hi=4)], {"dim": 1, "size": 4})],
        "scatter_add": [([f(5, 4), ints(5, 3, hi=4), f(5, 3)], {"dim": 1, "size": 4})],
        "scatter": [([f(5, 4), np.argsort(f(5, 4), axis=1)[:, :3], f(5, 3)], {"dim": 1})],
        "index_select": [([f(5, 4), ints(3, hi=5)], {"dim": 0}), ([f(5, 4), ints(6, hi=4)], {"dim": 1})],
        "index_add": [([f(5, 4), ints(3, hi=5), f(3, 4)], {"dim": 0, "size": 5})],
        "adaptive_mean": [([f(4, 3, 6, 5)], {"dim": 2, "n_out": 3, "size": 6}), ([f(4, 6)], {"dim": 1, "n_out": 1, "size": 6})],
        "index_sample": [([f(5, 4), ints(5, 3, hi=4)], {}), ([f(5, 4), ints(1, 3, hi=4)], {})],
        "gather_nd": [([f(5, 4), np.stack([ints(6, hi=5), ints(6, hi=4)], 1)], {})],
        "scatter_nd_add": [([f(5, 4), np.stack([ints(6, hi=5), ints(6, hi=4)], 1), f(6)], {})],
        "masked_select": [([f(5, 3), ints(5, 3, hi=2).astype(bool)], {})],
        "nonzero": [([ints(5, 3, hi=2)], {})],
        "unique": [([ints(7, hi=4)], {})],
        "sort": [([f(5, 4)], {"dim": 1, "descending": True})],
        "topk": [([f(5, 4)], {"k": 2, "dim": 1, "largest": True})],
        "histogram": [([f(5, 4)], {"bins": 4, "min": -2.0, "max": 2.0})],
        "shard_index": [([ints(6, 1, hi=20)], {"index_num": 20, "nshards": 2, "shard_id": 1, "ignore_value": -1})],
        "multiplex": [([f(5, 3), f(5, 3), ints(5, 1, hi=2)], {}), ([f(5, 3), f(5, 3), ints(3, 1, hi=2)], {})],
        "getitem": [([f(5, 4, 3)], {"key": (("slice", 1, 4, None), None, 2), "kept": (), "n_index": 0}),
                    ([f(5, 4, 3)], {"key": (("slice", None, None, None), 1), "kept": ((0, 0), (2, 1)),
                                    "n_index": 0}),
                    ([f(5, 4), ints(3, hi=5)], {"key": ("tensor",), "kept": (), "n_index": 1}),
                    ([f(5, 4, 3), ints(4, 2, hi=4)], {"key": (("slice", None, None, None), "tensor"), "kept": (),
                                                      "n_index": 1}),  # joint dims start at 1
                    ([f(5, 4, 3), ints(4, 2, hi=3)], {"key": (1, ("slice", None, None, None), "tensor"), "kept": (),
                                                      "n_index": 1})],  # apart: joint dims first
        "setitem_add": [([f(5, 4), f(3, 4)], {"key": (("slice", 1, 4, None),)}),
                        ([f(5, 4), f(4, 3), np.array([0, 3, 3, 1])], {"key": ("tensor", ("slice", 1, None, None))}),
                        ([f(5, 4, 3), f(5, 4, 2, 3), ints(4, 2, hi=4)], {"key": (("slice", None, None, None), "tensor")}),
                        ([f(5, 4, 3), f(4, 2, 4), ints(4, 2, hi=3)], {"key": (1, ("slice", None, None, None),
                                                                              "tensor")})],
        "setitem": [([f(5, 4), f(3, 4)], {"key": (("slice", 1, 4, None),), "shape": (5, 4), "fill": 0}),
                    ([f(5, 4), f(2, 1)], {"key": (("slice", None, None, 3), None, 1), "shape": (5, 4), "fill": 0}),
                    ([f(5, 4)], {"key": ("ellipsis", ("slice", 1, None, 2)), "shape": (5, 4), "fill": 2.5})],
        "embedding": [([ints(5, 2, hi=6), f(6, 4)], {"num": 6})],
        "linear": [([f(5, 4), f(3, 4), f(3)], {}), ([f(2, 5, 4), f(3, 4)], {})],
        "linear_weight_grad": [([f(5, 3), f(5, 4)], {})],
        "linear_in_out": [([f(5, 4), f(4, 3), f(3)], {}), ([f(2, 5, 4), f(4, 3)], {})],
        "linear_in_out_grads": [([f(5, 4), f(5, 3)], {})],
        "mse_mean": [([f(5, 4), f(5, 4)], {"count": 20})],
        "split_heads": [([f(5, 4, 12)], {"head_dim": 2})],  # 6 heads: they divide over 2 and 3 ranks
        "softmax": [([f(5, 4, 3)], {"dim": 1}), ([f(5, 4)], {"dim": 0})],
        # q [batch, heads, Lq, E], k, v [batch, heads, Lk, .]; masks: bool padding [batch, 1, 1, Lk], float
        # [Lq, Lk], float per head [heads, Lq, Lk]; causal with Lq != Lk (diagonal: the global Lk - Lq)
        "attention": [([f(4, 3, 5, 2), f(4, 3, 6, 2), f(4, 3, 6, 3)], {"scale": 0.7, "is_causal": False}),
                      ([f(4, 3, 5, 2), f(4, 3, 6, 2), f(4, 3, 6, 3)], {"scale": 0.7, "is_causal": True,
                                                                          "diagonal": 1}),
                      ([f(4, 3, 6, 2), f(4, 3, 6, 2), f(4, 3, 6, 3), ints(4, 1, 1, 6, hi=4) > 0],
                       {"scale": 0.5, "is_causal": True, "diagonal": 0}),
                      ([f(4, 3, 5, 2), f(4, 3, 6, 2), f(4, 3, 6, 3), f(5, 6)], {"scale": 1.0, "is_causal": False}),
                      ([f(4, 3, 5, 2), f(4, 3, 6, 2), f(4, 3, 6, 3), f(3, 5, 6)],
                       {"scale": 1.0, "is_causal": True, "diagonal": 1})],
        "attention_backward": [([f(4, 3, 5, 3), f(4, 3, 5, 2), f(4, 3, 6, 2), f(4, 3, 6, 3),
                                 _softmax_rows(4, 3, 5, 6)], {"scale": 0.7}),
                               ([f(4, 3, 5, 3), f(4, 3, 5, 2), f(4, 3, 6, 2), f(4, 3, 6, 3),
                                 _softmax_rows(4, 3, 5, 6), ints(4, 1, 5, 6, hi=4) > 0],
                                {"scale": 0.7, "is_causal": True, "diagonal": 1})],
        "merge_heads": [([f(5, 6, 4, 2)], {})],
        "unfold2d": [([f(5, 3, 5, 6)], {"kernel": (3, 2), "stride": (2, 1), "padding": (1, 0), "dilation": (1, 2),
                                        "pad_value": 0.0})],
        "fold2d": [([f(5, 3, 6, 12)], {"size": (5, 6), "kernel": (3, 2), "stride": (2, 1), "padding": (1, 0),
                                      "dilation": (1, 2)})],
        "max_pool2d": [([f(4, 3, 6, 5)], {"kernel": (3, 2), "stride": (2, 1), "padding": (0, 0), "dilation": (1, 1)})],
        "max_pool2d_backward": [([f(4, 3, 2, 4), ints(4, 3, 2, 4, hi=6), f(4, 3, 6, 5)],
                                 {"kernel": (3, 2), "stride": (2, 1), "padding": (0, 0), "dilation": (1, 1)})],
        "channel_sums": [([f(4, 3, 5, 2)], {}), ([f(5, 3)], {})],
        "channel_affine": [([f(4, 3, 5, 2), f(3), f(3)], {}), ([f(5, 3), f(3), f(3)], {})],
        "channel_affine_backward": [([f(4, 3, 5, 2), f(4, 3, 5, 2), f(3)], {}), ([f(5, 3), f(5, 3), f(3)], {})],
        "batch_norm_stats": [([f(4, 3, 5, 2)], {"count": 40}), ([f(5, 3)], {"count": 5})],
        "batch_norm_apply": [([f(4, 3, 5, 2), _bn_stats(3), f(3), f(3)],
                              {"eps": 1e-5, "count": 40, "has_weight": True, "has_bias": True}),
                             ([f(5, 3), _bn_stats(3)], {"eps": 1e-5, "count": 5, "has_weight": False, "has_bias": False})],
        "batch_norm_backward": [([f(4, 3, 5, 2), f(4, 3, 5, 2), _bn_stats(3), f(3), f(3)],
                                 {"eps": 1e-5, "has_weight": True, "has_bias": True}),
                                ([f(5, 3), f(5, 3), _bn_stats(3)], {"eps": 1e-5, "has_weight": False, "has_bias": False})],
        "batch_norm_running": [([f(3), f(3), f(3), f(3)], {"keep": 0.9, "momentum": 0.1, "share": 0.125})],
        "batch_norm_backward_input": [([f(4, 3, 5, 2), f(4, 3, 5, 2), f(2, 3), _bn_stats(3)], {"count": 40})],
        "conv2d": [([f(5, 4, 5, 6), f(6, 4, 3, 2), f(6)], {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2),
                                                           "groups": 1}),
                   ([f(5, 4, 5, 6), f(6, 2, 3, 3)], {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 2})],
        # optimizer updates (globaltensor/optim/updates.py): parameter, gradient, states, then lr and step
        "sgd_update": [([f(5, 3), f(5, 3), np.array(0.1)], {"weight_decay": 0.0}),
                       ([f(5, 3), f(5, 3), np.array(0.1)], {"weight_decay": 0.01})],
        "momentum_update": [([f(5, 3), f(5, 3), f(5, 3), np.array(0.1), np.array(step)],
                             {"momentum": 0.9, "dampening": d, "weight_decay": 0.01, "nesterov": n})
                            for step, d, n in ((1, 0.0, False), (3, 0.1, False), (3, 0.0, True))],
        "adam_update": [([f(5, 3), f(5, 3), f(5, 3), f(5, 3, lo=0.0, hi=1.0), np.array(0.01), np.array(3)],
                         {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}),
                        ([f(5, 3), f(5, 3), f(5, 3), f(5, 3, lo=0.0, hi=1.0), f(5, 3, lo=0.5, hi=1.0),
                          np.array(0.01), np.array(2)], {"betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": True})],
        "adamw_update": [([f(5, 3), f(5, 3), f(5, 3), f(5, 3, lo=0.0, hi=1.0), np.array(0.01), np.array(1)],
                          {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "maximize": True})],
        "rmsprop_update": [([f(5, 3), f(5, 3), f(5, 3, lo=0.0, hi=1.0), f(5, 3), f(5, 3, lo=-0.1, hi=0.1),
                             np.array(0.01), np.array(2)], {"alpha": 0.9, "eps": 1e-8, "momentum": 0.5,
                                                            "centered": True, "weight_decay": 0.1})],
        "adagrad_update": [([f(5, 3), f(5, 3), f(5, 3, lo=0.0, hi=1.0), np.array(0.1), np.array(1)],
                            {"lr_decay": 0.1, "initial_accumulator_value": 0.2, "weight_decay": 0.1})],
        # row updates (optim/row_updates.py): parameter, the rows (repeats add up) and their values, states, scalars
        "sgd_rows_update": [([f(6, 4), ints(5, hi=6), f(5, 4), np.array(0.1)], {})],
        "adam_rows_update": [([f(6, 4), ints(5, hi=6), f(5, 4), f(6, 4), f(6, 4, lo=0.0, hi=1.0), np.array(0.01),
                               np.array(2)], {"betas": (0.9, 0.999), "eps": 1e-8})],
        "conv2d_backward": [([f(5, 6, 3, 4), f(5, 4, 5, 6), f(6, 4, 3, 2)], {"stride": (2, 1), "padding": (1, 0),
                                                                             "dilation": (1, 2), "groups": 1}),
                            ([f(5, 6, 5, 6), f(5, 4, 5, 6), f(6, 2, 3, 3)], {"stride": (1, 1), "padding": (1, 1),
                                                                             "dilation": (1, 1), "groups": 2})],
    }
    for name_ in ("max", "min", "prod", "median", "argmax", "argmin"):
        table[name_] = [([f(5, 4)], {"dims": (1,), "keepdim": False}), ([f(5, 4)], {"dims": None, "keepdim": False})]
    for name_ in ("all", "any"):
        table[name_] = [([ints(5, 4, hi=2).astype(bool)], {"dims": (0,), "keepdim": True})]
    table.update({  # drawn last: the draws above keep their values
        **{n: [([f(5, 3, lo=0.2, hi=4.0)], {})] for n in ("digamma", "lgamma", "trigamma", "erfc")},
        "atan2": [([f(5, 3), f(5, 3)], {}), ([f(5, 1), f(1, 3)], {})],
        "mode": [([ints(5, 6, hi=3)], {"dim": 1, "keepdim": False}), ([ints(5, 6, 2, hi=3)], {"dim": 0, "keepdim": True})],
        "searchsorted": [([np.sort(f(6)), f(5, 3)], {"right": False, "out_int32": False}),
                         ([np.sort(f(4, 6), 1), f(4, 3)], {"right": True, "out_int32": True})],
    })
    return table[name]


def pieces_of(x, sbp, k):
    """What each of k ranks holds of x under one SBP."""
    if sbp is B:
        return [x] * k
    if sbp is P:
        if x.dtype == bool:
            return [x] + [np.zeros_like(x)] * (k - 1)
        parts = [RNG.integers(-3, 4, x.shape).astype(x.dtype) if x.dtype.kind in "iu"
                 else (RNG.standard_normal(x.shape) + (1j * RNG.standard_normal(x.shape) if x.dtype.kind == "c" else 0))
                 .astype(x.dtype) for _ in range(k - 1)]
        return [x - sum(parts, np.zeros_like(x))] + parts
    return [x[layout.box_slices(layout.local_box(x.shape, (k,), (sbp,), (r,)))] for r in range(k)]


def wide(o):
    """o in float64, or complex128 when complex (compared without dropping an imaginary part)."""
    return np.asarray(o, np.complex128 if np.iscomplexobj(o) else np.float64)


def assemble(outs, sbp, full_shape):
    if sbp is B:
        for o in outs[1:]:
            np.testing.assert_allclose(wide(o), wide(outs[0]), rtol=1e-9,
                                       atol=1e-9, err_msg="a broadcast output differs between ranks")
        return outs[0]
    if sbp is P:
        return sum(wide(o) for o in outs[1:]) + wide(outs[0])
    return np.concatenate(outs, axis=sbp.dim)


def _bn_stats(c):
    """BatchNorm's [mean, mean of squares] per channel: the second at least the first squared."""
    mean = f(c)
    return np.stack([mean, mean * mean + f(c, lo=0.1, hi=1.0)])


def _fresh(arrays):
    """Copies for one kernel call: an optimizer's update writes its inputs in place."""
    return [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in arrays]


def check_row(opdef, inputs, static, row, k):
    """Raise AssertionError when `row` is not exact for these inputs on k ranks."""
    in_sbps, out_sbps = row
    full = opdef.kernel(*_fresh(inputs), **static)
    full = full if isinstance(full, tuple) else (full,)
    per_input = [pieces_of(x, s, k) for x, s in zip(inputs, in_sbps)]
    def where_pieces_start(r):  # an op taking offsets learns where each of its pieces starts
        if not opdef.takes_offsets:
            return {}
        return {"offsets": tuple(tuple(a for a, _ in layout.local_box(np.shape(x), (k,), (s,), (r,)))
                                 for x, s in zip(inputs, in_sbps))}
    try:
        per_rank = [opdef.kernel(*_fresh([p[r] for p in per_input]), **static, **where_pieces_start(r))
                    for r in range(k)]
    except (ValueError, IndexError) as exc:
        raise AssertionError(f"the kernel fails on the pieces: {exc}") from None
    per_rank = [o if isinstance(o, tuple) else (o,) for o in per_rank]
    for j, (want, sbp) in enumerate(zip(full, out_sbps)):
        got = assemble([np.asarray(o[j]) for o in per_rank], sbp, np.shape(want))
        assert np.shape(got) == np.shape(want), f"shape {np.shape(got)} != {np.shape(want)}"
        if isinstance(sbp, split):
            expect = [layout.local_shape(np.shape(want), (k,), (sbp,), (r,)) for r in range(k)]
            assert [np.shape(o[j]) for o in per_rank] == expect, "pieces do not follow the even layout"
        dt = np.asarray(want).dtype  # single precision (complex64 too): a sum rounds at 1e-7 relative
        tol = 1e-5 if (dt.kind == "f" and dt.itemsize <= 4) or dt == np.complex64 else 1e-7
        np.testing.assert_allclose(wide(got), wide(want), rtol=tol, atol=tol)


def _cases():
    for name in sorted(_REGISTRY):
        for i, (inputs, static) in enumerate(samples(name)):
            yield pytest.param(name, inputs, static, id=f"{name}-{i}")


@pytest.mark.parametrize("name, inputs, static", list(_cases()))
def test_every_row_is_exact(name, inputs, static):
    opdef = _REGISTRY[name]
    full = opdef.kernel(*_fresh(inputs), **static)
    outs = full if isinstance(full, tuple) else (full,)
    rows = opdef.rules([x.shape for x in inputs], [np.shape(o) for o in outs], static)
    assert rows, f"{name} has no SBP rows"
    for row in rows:
        for k in (2, 3):
            try:
                check_row(opdef, inputs, static, row, k)
            except AssertionError as exc:
                raise AssertionError(f"{name}: row {row} is wrong on {k} ranks: {exc}") from None


def _complex_cases():
    """The ops that take complex values (REGISTRY less REAL_ONLY) with their real samples made complex:
    each float input gains an imaginary part."""
    from globaltensor.registry import REAL_ONLY
    for name in sorted(set(_REGISTRY) - REAL_ONLY):
        for i, (inputs, static) in enumerate(samples(name)):
            floats = [x for x in inputs if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
            if not floats or name in ("complex", "view_as_complex", "cast"):
                continue
            made = [x + 1j * f(*x.shape, lo=-1.0, hi=1.0) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else x
                    for x in inputs]
            yield pytest.param(name, made, static, id=f"{name}-complex-{i}")


@pytest.mark.parametrize("name, inputs, static", list(_complex_cases()))
def test_every_row_is_exact_on_complex_values(name, inputs, static):
    test_every_row_is_exact(name, inputs, static)


def test_every_op_has_a_sample():
    missing = [name for name in _REGISTRY if not _has_sample(name)]
    assert not missing, f"ops without soundness samples: {missing}"


def _has_sample(name):
    try:
        return bool(samples(name))
    except KeyError:
        return False


def test_a_wrong_row_is_caught():
    exp, add = _REGISTRY["exp"], _REGISTRY["add"]
    x = f(5, 3)
    with pytest.raises(AssertionError):
        check_row(exp, [x], {}, ((P,), (P,)), 2)  # exp(a1 + a2) != exp(a1) + exp(a2)
    with pytest.raises(AssertionError):
        check_row(add, [x, f(5, 3)], {}, ((split(0), split(1)), (split(0),)), 2)
    with pytest.raises(AssertionError):
        check_row(_REGISTRY["matmul"], [f(5, 4), f(4, 3)], {}, ((split(1), B), (P,)), 2)
